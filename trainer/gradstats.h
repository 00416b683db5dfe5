/* gradstats.h -- --grad-stats (gradstats.c): diagnostics of the results the rounds apply. */
#ifndef TRAINER_GRADSTATS_H
#define TRAINER_GRADSTATS_H

#include "trainer/run.h"

/* Collective, after the backend: with --grad-stats, rank 0 opens the CSV (an error names the file;
 * the CUDA backend is refused: its results live on the device). Does nothing when off.
 * The CSV is closed at the run's finish (a close hook, run.h). */
void gstats_open(run_t *r);
/* A round applied (res: its n host floats; round: its index in the epoch's handle): one CSV line on rank 0. */
void gstats_round(run_t *r, uint64_t round, int epoch, const pcoll_record_t *rec, const float *res);

#endif
