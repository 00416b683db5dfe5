/* apply.h -- completed rounds applied (apply.c): every rank applies every round, in round order,
 * with the same learning rate and weight decay, so the replicas stay bitwise equal. */
#ifndef TRAINER_APPLY_H
#define TRAINER_APPLY_H

#include "trainer/dealer.h"
#include "trainer/run.h"

/* Applies every completed round in order (SGD with the round's lr and weight decay); dl: the
 * dealer of a global epoch (NULL: shard). Returns the rounds applied. */
int apply_rounds(run_t *r, pcoll_t *h, int epoch, epoch_t *e, dealer_t *dl);
/* The gradients a round carries (its deposits: more than |F_r| where a rank merged deposits). */
int round_grads(const pcoll_record_t *rec);

#endif
