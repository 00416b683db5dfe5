/* round_check.h -- what the host (tests/collectives/test_pcoll.c) and device
 * (tests/cuda/test_pcoll_device.c) libpcoll tests share: the rank globals and CHECK, the seeded
 * delays, the integer gradient of (rank, step), the controller-like rule thread of --mode dynamic,
 * and the per-round invariant checks: rounds handed out in
 * order, replica and conservation sums, the agreement hash, each deposit's step tag seen once,
 * the trigger rule of the round, the staleness bound, and the slow rank's streak profile.
 * Gradients follow make_grad() of the tests: g[p] = step + 1 (one-hot by rank), g[P] = 1. */
#ifndef TESTS_ROUND_CHECK_H
#define TESTS_ROUND_CHECK_H
#include "collectives/pcoll.h"
#include "common/hash.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int P, me;
static int fails;
#define CHECK(c, ...)                                \
    do {                                             \
        if (!(c)) {                                  \
            fails++;                                 \
            if (fails < 10) {                        \
                fprintf(stderr,                      \
                        "rank %d: CHECK "            \
                        "failed %s:%d: %s: ",        \
                        me, __FILE__, __LINE__, #c); \
                fprintf(stderr, __VA_ARGS__);        \
                fputc('\n', stderr);                 \
            }                                        \
        }                                            \
    } while (0)

static double u01(uint64_t seed, uint64_t a, uint64_t b) {
    return (double)(hash_splitmix64(seed ^ hash_splitmix64(a * 1000003ull + b)) >> 11) * 0x1.0p-53;
}
static void sleep_us(double us) {
    if (us <= 0) return;
    struct timespec ts = {(time_t)(us / 1e6), (long)(fmod(us, 1e6) * 1000)};
    nanosleep(&ts, NULL);
}

/* gradient of (rank p, step s): g[0..P-1] one-hot step tag, g[P] = 1, then a pattern */
static void make_grad(float *g, size_t n, int p, int s) {
    memset(g, 0, n * sizeof *g);
    g[p] = (float)(s + 1);
    g[P] = 1.0f;
    for (size_t k = (size_t)P + 1; k < n; k++) g[k] = (float)((p * 31 + s * 7 + (int)k) % 17);
}

/* step time reported with the deposit of (rank p, step s): a float that is exact, and so are
 * sums of a few of them (merged deposits): (4096 (p+1) + s + 1) / 1024 */
static float cost_of(int p, int s) { return (float)(4096 * (p + 1) + s + 1) / 1024.0f; }
static float step_of(int p, int s) { return cost_of(p, s) / 2.0f; } /* exact: another power of 2 */
/* training loss and samples reported with that deposit (pcoll_set_loss): odd ranks report none;
 * an even rank p reports (s + 1) / 8 + p over p + 1 samples, so a merged deposit's record reads
 * (p + 1) (tags / 8 + k p) / (k (p + 1)) for k deposits whose tags s + 1 sum to `tags` */
static int loss_reported(int p) { return p % 2 == 0; }
static float loss_of(int p, int s) { return (float)(s + 1) / 8.0f + (float)p; }
static float samples_of(int p) { return (float)(p + 1); }

typedef struct {
    pcoll_t *h;
    int P;
    volatile int stop;
    int lag;
} ctl_t;

/* --mode dynamic: a controller-like thread that picks the rule of round r+lag from the record of
 * round r (a pure function of agreed data), like controller/ does. */
static void *dyn_ctl(void *arg) {
    ctl_t *c = arg;
    pcoll_record_t rec;
    pcoll_record_init(&rec, c->P);
    for (int r = 0; r < c->lag; r++) pcoll_set_horizon(c->h, (uint64_t)r);
    for (uint64_t r = 0;; r++) {
        int rc = pcoll_record_get(c->h, r, &rec, 1.0);
        if (rc == PCOLL_ERR_TIMEOUT) {
            if (c->stop) break;
            r--;
            continue;
        }
        if (rc) break;
        pcoll_rule_t ru = {0};
        int w[1];
        switch ((rec.nfresh + (int)(r % 5)) % 5) {
        case 0: ru.mode = PCOLL_SOLO; break;
        case 1: ru.mode = PCOLL_MAJORITY; break;
        case 2:
            ru.mode = PCOLL_QUORUM;
            ru.quorum = (c->P + 1) / 2;
            break;
        case 3: ru.mode = PCOLL_SYNC; break;
        default:
            ru.mode = PCOLL_SOLO;
            w[0] = (int)(r % (uint64_t)c->P);
            ru.wait = w;
            ru.nwait = 1;
        }
        if (pcoll_set_rule(c->h, r + (uint64_t)c->lag, &ru)) {
            fprintf(stderr, "rank %d: set_rule failed: %s\n", me, pcoll_last_error(c->h));
            fails++;
        }
        pcoll_set_horizon(c->h, r + (uint64_t)c->lag);
    }
    pcoll_record_free(&rec);
    return NULL;
}

typedef struct {
    int P, me, steps, tau, slow, div;
    size_t n;
    uint64_t applied, hash;
    double *w, *all_sum; /* [n] replica and sum of all results */
    int *seen;           /* [steps] rounds that held my step s */
    uint32_t *streak_at; /* [8] slow rank's longest streak per eighth of its steps */
    int fails;
} rcheck_t;

#define RCHECK(c, cond, ...)                                                                              \
    do {                                                                                                  \
        if (!(cond)) {                                                                                    \
            (c)->fails++;                                                                                 \
            if ((c)->fails < 10) {                                                                        \
                fprintf(stderr, "rank %d: CHECK failed %s:%d: %s: ", (c)->me, __FILE__, __LINE__, #cond); \
                fprintf(stderr, __VA_ARGS__);                                                             \
                fputc('\n', stderr);                                                                      \
            }                                                                                             \
        }                                                                                                 \
    } while (0)

/* One handed-out round r (res: host copy of its n floats) while at step s of this rank. */
static inline void rcheck_round(rcheck_t *c, uint64_t r, const float *res, const pcoll_record_t *rec, int s) {
    const int P = c->P, me = c->me;
    RCHECK(c, r == c->applied, "round %llu handed out, expected %llu", (unsigned long long)r,
           (unsigned long long)c->applied);
    c->applied++;
    for (size_t k = 0; k < c->n; k++) {
        c->w[k] += res[k];
        c->all_sum[k] += res[k];
    }
    /* agreement hash over the agreed fields and the result bits */
    c->hash = hash_fnv1a64_word(c->hash, r);
    c->hash = hash_fnv1a64_word(c->hash, (uint64_t)rec->mode);
    for (int p = 0; p < P; p++)
        c->hash = hash_fnv1a64_word(c->hash, (uint64_t)rec->fresh[p] << 8 | rec->flags[p] |
                                                 (uint64_t)rec->staleness[p] << 16);
    for (int p = 0; p < P; p++) {
        uint32_t b;
        memcpy(&b, &rec->cost[p], 4);
        c->hash = hash_fnv1a64_word(c->hash, b);
        memcpy(&b, &rec->step[p], 4);
        c->hash = hash_fnv1a64_word(c->hash, b);
        memcpy(&b, &rec->loss[p], 4);
        c->hash = hash_fnv1a64_word(c->hash, b);
        memcpy(&b, &rec->samples[p], 4);
        c->hash = hash_fnv1a64_word(c->hash, b);
    }
    for (size_t k = 0; k < c->n; k++) {
        uint32_t b;
        memcpy(&b, &res[k], 4);
        c->hash = hash_fnv1a64_word(c->hash, b);
    }
    if (!c->div) {
        if (rec->fresh[me] == 1) { /* my own deposit: its step tag, seen exactly once */
            int st = (int)res[me] - 1;
            RCHECK(c, st >= 0 && st < c->steps, "round %llu: bad step tag %g", (unsigned long long)r,
                   res[me]);
            if (st >= 0 && st < c->steps) {
                RCHECK(c, !c->seen[st], "step %d in two rounds", st);
                c->seen[st]++;
            }
        } else if (rec->fresh[me] == 0) {
            RCHECK(c, res[me] == 0.0f, "round %llu: not fresh but slot = %g", (unsigned long long)r, res[me]);
        }
        int nd = 0;
        for (int p = 0; p < P; p++) nd += rec->fresh[p];
        /* every rank's reported cost and step time arrive with its deposit, bit for bit (merged:
         * summed) */
        for (int p = 0; p < P; p++) {
            float want =
                rec->fresh[p] ? ((float)rec->fresh[p] * (float)(4096 * (p + 1)) + res[p]) / 1024.0f : 0.0f;
            RCHECK(c, rec->cost[p] == want, "round %llu: rank %d's cost %.9g, deposited %.9g",
                   (unsigned long long)r, p, rec->cost[p], want);
            RCHECK(c, rec->step[p] == want / 2, "round %llu: rank %d's step time %.9g, deposited %.9g",
                   (unsigned long long)r, p, rec->step[p], want / 2);
            /* and its loss, the merged deposits' mean weighted by their samples */
            const float k = rec->fresh[p], ns = loss_reported(p) ? k * samples_of(p) : 0.0f,
                        lw = ns > 0 ? samples_of(p) * (res[p] / 8.0f + k * (float)p) / ns : 0.0f;
            RCHECK(c, rec->samples[p] == ns && rec->loss[p] == lw,
                   "round %llu: rank %d's loss %.9g over %g samples, deposited %.9g over %g",
                   (unsigned long long)r, p, rec->loss[p], rec->samples[p], lw, ns);
        }
        RCHECK(c, res[P] == (float)nd, "round %llu: count %g != deposits %d", (unsigned long long)r, res[P],
               nd);
    } else if (c->div == PCOLL_DIV_FRESH) { /* divided by the deposits it holds (merged count) */
        int nd = 0;
        for (int p = 0; p < P; p++) nd += rec->fresh[p];
        RCHECK(c, nd == 0 || res[P] == 1.0f,
               "round %llu: div fresh: count slot %g (deposits %d, "
               "fresh ranks %d), want 1",
               (unsigned long long)r, res[P], nd, rec->nfresh);
    }
    /* trigger rule (ranks that joined in this round are exempt) */
    int ok_cnt = 0, all_act = 1;
    for (int p = 0; p < P; p++) {
        int ex = rec->fresh[p] || (rec->flags[p] & PCOLL_F_JOINED);
        ok_cnt += ex;
        if (rec->waited[p])
            RCHECK(c, ex, "round %llu: rank %d in wait set but not fresh", (unsigned long long)r, p);
        all_act &= ex;
    }
    if (rec->mode == PCOLL_SYNC)
        RCHECK(c, all_act, "round %llu: sync round missing a rank", (unsigned long long)r);
    if (rec->mode == PCOLL_SOLO || rec->mode == PCOLL_QUORUM)
        RCHECK(c, ok_cnt >= rec->quorum, "round %llu: %d fresh < quorum %d", (unsigned long long)r, ok_cnt,
               rec->quorum);
    if (rec->mode == PCOLL_MAJORITY)
        RCHECK(c,
               rec->initiator >= 0 &&
                   (rec->fresh[rec->initiator] || (rec->flags[rec->initiator] & PCOLL_F_JOINED)),
               "round %llu: initiator %d not fresh", (unsigned long long)r, rec->initiator);
    if (c->tau)
        for (int p = 0; p < P; p++)
            RCHECK(c, rec->streak[p] <= (uint32_t)c->tau, "round %llu: rank %d streak %u > tau %d",
                   (unsigned long long)r, p, rec->streak[p], c->tau);
    if (c->slow >= 0 && me == c->slow) {
        int o = (int)((uint64_t)(s < c->steps ? s : c->steps - 1) * 8 / (uint64_t)c->steps);
        if (rec->streak[c->slow] > c->streak_at[o]) c->streak_at[o] = rec->streak[c->slow];
    }
}
#endif
