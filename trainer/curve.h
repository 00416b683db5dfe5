/* curve.h -- the accuracy curve (--curve-every; curve.c; docs/DESIGN.md): model snapshots taken
 * as rounds are applied, evaluated at the epoch end. */
#ifndef TRAINER_CURVE_H
#define TRAINER_CURVE_H

#include "trainer/run.h"

/* Collective, after the data and the model: with --curve-every, checks --curve-test against the
 * test set and the snapshots' memory against its bound (every rank exits naming the option),
 * opens the curve's test subset and allocates the snapshots. Does nothing when off.
 * Its snapshots and test subset are freed at the run's finish (a close hook, run.h). */
void curve_open(run_t *r);
/* After a round of nfresh gradients is applied and counted in e: a snapshot when the run's
 * applied batches passed a multiple of --curve-every. The same on every rank (the records are). */
void curve_round(run_t *r, int epoch, const epoch_t *e, int ngrads);
/* Collective, at the epoch end before anything else: evaluates the epoch's snapshots (their BN
 * statistics averaged over the ranks), logs them, restores the current model bitwise, and moves
 * r->t_start and e->t0 by the time that took (the same on every rank). */
void curve_end_epoch(run_t *r, int epoch, epoch_t *e);

#endif
