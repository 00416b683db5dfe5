/* round_check.h -- the per-round invariant checks shared by the host (tests/collectives/
 * test_pcoll.c) and device (tests/cuda/test_pcoll_device.c) libpcoll tests: rounds handed out in
 * order, replica and conservation sums, the agreement hash, each deposit's step tag seen once,
 * the trigger rule of the round, the staleness bound, and the slow rank's streak profile.
 * Gradients follow make_grad() of the tests: g[p] = step + 1 (one-hot by rank), g[P] = 1. */
#ifndef TESTS_ROUND_CHECK_H
#define TESTS_ROUND_CHECK_H
#include "collectives/pcoll.h"
#include <stdio.h>
#include <string.h>

typedef struct {
    int P, me, steps, tau, slow, div;
    size_t n;
    uint64_t applied, hash;
    double *w, *all_sum;   /* [n] replica and sum of all results */
    int *seen;             /* [steps] rounds that held my step s */
    uint32_t *streak_at;   /* [8] slow rank's longest streak per eighth of its steps */
    int fails;
} rcheck_t;

#define RCHECK(c, cond, ...) do { if (!(cond)) { (c)->fails++; if ((c)->fails < 10) { \
    fprintf(stderr, "rank %d: CHECK failed %s:%d: %s: ", (c)->me, __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } } while (0)

/* One handed-out round r (res: host copy of its n floats) while at step s of this rank. */
static inline void rcheck_round(rcheck_t *c, uint64_t r, const float *res, const pcoll_record_t *rec, int s) {
    const int P = c->P, me = c->me;
    RCHECK(c, r == c->applied, "round %llu handed out, expected %llu", (unsigned long long)r,
           (unsigned long long)c->applied);
    c->applied++;
    for (size_t k = 0; k < c->n; k++) { c->w[k] += res[k]; c->all_sum[k] += res[k]; }
    /* agreement hash over the agreed fields and the result bits */
    c->hash = (c->hash ^ r) * 1099511628211ull;
    c->hash = (c->hash ^ (uint64_t)rec->mode) * 1099511628211ull;
    for (int p = 0; p < P; p++)
        c->hash = (c->hash ^ ((uint64_t)rec->fresh[p] << 8 | rec->flags[p] | (uint64_t)rec->staleness[p] << 16)) * 1099511628211ull;
    for (size_t k = 0; k < c->n; k++) { uint32_t b; memcpy(&b, &res[k], 4); c->hash = (c->hash ^ b) * 1099511628211ull; }
    if (!c->div) {
        if (rec->fresh[me] == 1) {  /* my own deposit: its step tag, seen exactly once */
            int st = (int)res[me] - 1;
            RCHECK(c, st >= 0 && st < c->steps, "round %llu: bad step tag %g", (unsigned long long)r, res[me]);
            if (st >= 0 && st < c->steps) { RCHECK(c, !c->seen[st], "step %d in two rounds", st); c->seen[st]++; }
        } else if (rec->fresh[me] == 0) {
            RCHECK(c, res[me] == 0.0f, "round %llu: not fresh but slot = %g", (unsigned long long)r, res[me]);
        }
        int nd = 0;
        for (int p = 0; p < P; p++) nd += rec->fresh[p];
        RCHECK(c, res[P] == (float)nd, "round %llu: count %g != deposits %d", (unsigned long long)r, res[P], nd);
    }
    /* trigger rule (ranks that joined in this round are exempt) */
    int ok_cnt = 0, all_act = 1;
    for (int p = 0; p < P; p++) {
        int ex = rec->fresh[p] || (rec->flags[p] & PCOLL_F_JOINED);
        ok_cnt += ex;
        if (rec->waited[p]) RCHECK(c, ex, "round %llu: rank %d in wait set but not fresh", (unsigned long long)r, p);
        all_act &= ex;
    }
    if (rec->mode == PCOLL_SYNC) RCHECK(c, all_act, "round %llu: sync round missing a rank", (unsigned long long)r);
    if (rec->mode == PCOLL_SOLO || rec->mode == PCOLL_QUORUM)
        RCHECK(c, ok_cnt >= rec->quorum, "round %llu: %d fresh < quorum %d", (unsigned long long)r, ok_cnt, rec->quorum);
    if (rec->mode == PCOLL_MAJORITY)
        RCHECK(c, rec->initiator >= 0 && (rec->fresh[rec->initiator] || (rec->flags[rec->initiator] & PCOLL_F_JOINED)),
               "round %llu: initiator %d not fresh", (unsigned long long)r, rec->initiator);
    if (c->tau) for (int p = 0; p < P; p++)
        RCHECK(c, rec->streak[p] <= (uint32_t)c->tau, "round %llu: rank %d streak %u > tau %d",
               (unsigned long long)r, p, rec->streak[p], c->tau);
    if (c->slow >= 0 && me == c->slow) {
        int o = (int)((uint64_t)(s < c->steps ? s : c->steps - 1) * 8 / (uint64_t)c->steps);
        if (rec->streak[c->slow] > c->streak_at[o]) c->streak_at[o] = rec->streak[c->slow];
    }
}
#endif
