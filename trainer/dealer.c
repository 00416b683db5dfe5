/* dealer.c -- global epoch semantics (docs/DESIGN.md, epochs): batches of one epoch-wide permutation
 * are dealt from the round history, with no message of their own.
 *
 *   before round 0   rank p holds batches p, P+p, ..., (ahead-1)P+p      cursor = ahead x P
 *                    (from a cursor c: c+p, c+P+p, ...: a mid-epoch checkpoint's position)
 *   after round r    every rank fresh in r (in rank order; one batch per fresh deposit) takes
 *                    the next batch:  cursor(r+1) = cursor(r) + |F_r|, until cursor = nbatches
 *
 * Every rank sees the same records, so every rank computes the same assignment: batches never
 * overlap and, once every rank has run out, every batch 0..nbatches-1 was taken exactly once. A
 * rank that has just deposited holds ahead-1 more batches, so its next batch is always known
 * (and can be prefetched) while it waits; fast ranks are fresh more often and take more batches,
 * so a permanently slow rank does not set the epoch time (it does with shard epochs). In sync
 * every rank is fresh in every round, which deals batch r x P + p to rank p: interleaved sharding.
 */
#include "trainer/dealer.h"

int dealer_init(dealer_t *d, int64_t nbatches, int P, int me, int ahead) {
    return dealer_init_at(d, nbatches, 0, P, me, ahead);
}

int dealer_init_at(dealer_t *d, int64_t nbatches, int64_t cursor, int P, int me, int ahead) {
    if (nbatches < 0 || cursor < 0 || cursor > nbatches || P < 1 || me < 0 || me >= P || ahead < 1 ||
        ahead > DEALER_QMAX)
        return -1;
    *d = (dealer_t){.nb = nbatches, .cursor = cursor, .P = P, .me = me};
    for (int a = 0; a < ahead; a++)
        for (int p = 0; p < P && d->cursor < nbatches; p++, d->cursor++)
            if (p == me) d->q[d->tail++ % DEALER_QMAX] = d->cursor;
    return 0;
}

int dealer_round(dealer_t *d, const uint8_t *fresh) {
    for (int p = 0; p < d->P; p++)
        for (int k = 0; k < fresh[p] && d->cursor < d->nb; k++, d->cursor++)
            if (p == d->me) {
                if (d->tail - d->head >= DEALER_QMAX) return -1; /* more deposits than batches */
                d->q[d->tail++ % DEALER_QMAX] = d->cursor;
            }
    return 0;
}

int dealer_unsubmitted(dealer_t *d, int64_t *b) {
    if (d->sub == d->tail) return 0;
    *b = d->q[d->sub++ % DEALER_QMAX];
    return 1;
}

int dealer_take(dealer_t *d, int64_t *b) {
    if (d->head == d->tail) return 0;
    *b = d->q[d->head++ % DEALER_QMAX];
    return 1;
}
