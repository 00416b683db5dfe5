/* epoch_end.h -- the epoch end (epoch_end.c): the curve's snapshots evaluated, replicas checked
 * equal, BN averaged, evaluation, totals, log, checkpoint. */
#ifndef TRAINER_EPOCH_END_H
#define TRAINER_EPOCH_END_H

#include "trainer/run.h"

/* The epoch end: the curve's snapshots evaluated, replicas checked equal, BN averaged,
 * evaluation, totals, log, checkpoint. */
void end_epoch(run_t *r, int epoch, epoch_t *e);
/* Collective: averages BN statistics, then compares the ranks' model hashes; returns the hash. A
 * mismatch names the differing ranks, closes the run's JSON with the reason and aborts every rank. */
uint64_t check_replicas(run_t *r, int epoch);
/* Collective: rank 0 writes the model, the run's totals, its restarts, the adaptive controller's
 * state and, mid-epoch (part, else NULL), the epoch in progress: what a resumed run continues.
 * epochs_done: epochs completed. Failure: every rank exits naming the file. */
void checkpoint(run_t *r, int epochs_done, const ckpt_epoch_t *part, double wall);

#endif
