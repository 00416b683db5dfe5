/* dealer.h -- --epoch-mode global (dealer.c): batches dealt to the ranks from the round history. */
#ifndef TRAINER_DEALER_H
#define TRAINER_DEALER_H

#include <stdint.h>

#define DEALER_QMAX 8
typedef struct {
    int64_t nb, cursor; /* batches of the epoch; next batch not yet dealt */
    int P, me;
    int64_t q[DEALER_QMAX]; /* my batches: taken [head, tail), submitted [head.., sub) */
    unsigned head, sub, tail;
} dealer_t;
/* Rank p starts with `ahead` batches (p, P+p, ...). -1 on a bad argument. */
int dealer_init(dealer_t *d, int64_t nbatches, int P, int me, int ahead);
/* The same from batch `cursor` on (batches 0..cursor-1 were dealt before: a mid-epoch checkpoint,
 * or the part of the epoch before it): rank p starts with cursor+p, cursor+P+p, ..., and dealing
 * stops at nbatches. dealer_init is dealer_init_at with cursor 0. -1 on a bad argument. */
int dealer_init_at(dealer_t *d, int64_t nbatches, int64_t cursor, int P, int me, int ahead);
/* After round r: fresh[p] = deposits of rank p in r (the record's fresh[]); each takes a batch.
 * -1 if this rank would hold more than DEALER_QMAX batches (it deposited without taking). */
int dealer_round(dealer_t *d, const uint8_t *fresh);
/* Next of my batches not yet handed to the loader (1), or none (0). */
int dealer_unsubmitted(dealer_t *d, int64_t *b);
/* My next batch to train on (1), or none left this epoch (0: join). */
int dealer_take(dealer_t *d, int64_t *b);

#endif
