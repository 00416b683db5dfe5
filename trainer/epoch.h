/* epoch.h -- one epoch (epoch.c): the step loop on libpcoll, the join, the controller's end of
 * epoch; with --ckpt-every-steps, in parts, each ended like an epoch and checkpointed. */
#ifndef TRAINER_EPOCH_H
#define TRAINER_EPOCH_H

#include "trainer/run.h"

/* Trains one epoch: every step, every round applied, the join, the controller's end of epoch. */
void train_epoch(run_t *r, int epoch, epoch_t *e);

#endif
