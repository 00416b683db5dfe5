/* test_dealer.c -- global epochs: batches dealt from round records (trainer/dealer.c).
 * Simulates P ranks, each holding one pending deposit while it has a batch, and rounds whose
 * fresh sets are random subsets of the pending ranks (or all of them: sync); every rank's dealer
 * sees the same records. Checks: every batch of the epoch is taken exactly once, by one rank; all
 * dealers agree on the cursor; sync deals batch r*P+p to rank p; a rank that is fresh more often
 * takes more batches; from a cursor (dealer_init_at), sync deals the rest as an epoch from 0
 * does; bad arguments and a deposit without a batch are refused. */
#include "trainer/dealer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#include "tests/trainer/check.h"

static uint64_t rng = 88172645463325252ull;
static double u01(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (rng >> 11) * 0x1.0p-53;
}

/* One epoch: p_fresh[p] = chance that a pending rank p is fresh in a round (1 for all: sync).
 * Returns batches taken per rank in taken[]. */
static void epoch(int P, int64_t nb, int ahead, const double *p_fresh, int sync, int64_t *taken) {
    dealer_t *d = calloc((size_t)P, sizeof *d);
    int64_t *owner = malloc((size_t)(nb ? nb : 1) * sizeof *owner), *cur = calloc((size_t)P, sizeof *cur);
    int *pending = calloc((size_t)P, sizeof *pending);
    uint8_t *fresh = calloc((size_t)P, 1);
    for (int64_t b = 0; b < nb; b++) owner[b] = -1;
    for (int p = 0; p < P; p++) {
        CHECK(dealer_init(&d[p], nb, P, p, ahead) == 0, "init P=%d", P);
        taken[p] = 0;
        int64_t b;
        while (dealer_unsubmitted(&d[p], &b)) {}
        if (dealer_take(&d[p], &b)) {
            pending[p] = 1;
            cur[p] = b;
        }
    }
    for (int p = 0; p < P; p++)
        if (pending[p]) {
            CHECK(owner[cur[p]] < 0, "batch %lld twice", (long long)cur[p]);
            owner[cur[p]] = p;
            taken[p]++;
        }
    for (long r = 0;; r++) {
        int any = 0, nf = 0;
        for (int p = 0; p < P; p++) any |= pending[p];
        if (!any) break;
        for (int p = 0; p < P; p++) {
            fresh[p] = pending[p] && (sync || u01() < p_fresh[p]);
            nf += fresh[p];
        }
        if (!nf) continue; /* a round with no fresh gradient (joins only): the dealer never sees it */
        if (sync)
            for (int p = 0; p < P; p++)
                if (pending[p])
                    CHECK(cur[p] % P == p, "sync dealt batch %lld to rank %d", (long long)cur[p], p);
        for (int p = 0; p < P; p++) CHECK(dealer_round(&d[p], fresh) == 0, "round %ld rank %d", r, p);
        for (int p = 1; p < P; p++) CHECK(d[p].cursor == d[0].cursor, "cursor differs: rank %d", p);
        for (int p = 0; p < P; p++) {
            if (!fresh[p]) continue;
            int64_t b;
            pending[p] = dealer_take(&d[p], &b);
            if (!pending[p]) continue;
            CHECK(b >= 0 && b < nb && owner[b] < 0, "rank %d took batch %lld (owner %lld)", p, (long long)b,
                  (long long)(b >= 0 && b < nb ? owner[b] : -2));
            if (b >= 0 && b < nb) owner[b] = p;
            cur[p] = b;
            taken[p]++;
        }
    }
    for (int64_t b = 0; b < nb; b++)
        CHECK(owner[b] >= 0, "P=%d nb=%lld: batch %lld never dealt", P, (long long)nb, (long long)b);
    int64_t sum = 0;
    for (int p = 0; p < P; p++) sum += taken[p];
    CHECK(sum == nb, "P=%d: %lld batches taken of %lld", P, (long long)sum, (long long)nb);
    free(d);
    free(owner);
    free(cur);
    free(pending);
    free(fresh);
}

/* Sync from a cursor (a mid-epoch checkpoint's): every rank fresh in every round; rank p takes
 * c+p, c+P+p, ... in order, each of batches c..nb-1 exactly once, as an epoch dealt from 0 on
 * deals them after batch c (sync: batch r*P+p to rank p). */
static void sync_from(int P, int64_t nb, int64_t c) {
    dealer_t *d = calloc((size_t)P, sizeof *d);
    uint8_t *fresh = calloc((size_t)P, 1);
    int64_t *next = calloc((size_t)P, sizeof *next), b, seen = 0;
    for (int p = 0; p < P; p++) {
        CHECK(dealer_init_at(&d[p], nb, c, P, p, 2) == 0, "init_at P=%d c=%lld", P, (long long)c);
        next[p] = c + p;
    }
    for (int any = 1; any;) {
        any = 0;
        for (int p = 0; p < P; p++) {
            fresh[p] = (uint8_t)dealer_take(&d[p], &b);
            if (!fresh[p]) continue;
            any = 1, seen++;
            CHECK(b == next[p], "P=%d from %lld: rank %d took %lld, not %lld", P, (long long)c, p,
                  (long long)b, (long long)next[p]);
            next[p] += P;
        }
        for (int p = 0; p < P; p++) CHECK(dealer_round(&d[p], fresh) == 0, "round");
    }
    CHECK(seen == nb - c, "P=%d from %lld: %lld batches taken, not %lld", P, (long long)c, (long long)seen,
          (long long)(nb - c));
    free(d), free(fresh), free(next);
}

int main(void) {
    int64_t taken[16];
    double pf[16];
    int Ps[] = {1, 2, 3, 4, 5, 8, 16};
    for (size_t i = 0; i < sizeof Ps / sizeof *Ps; i++) {
        int P = Ps[i];
        for (int p = 0; p < P; p++) pf[p] = 1.0 / (1 + p); /* linear skew: rank p (p+1)x slower */
        int64_t nbs[] = {0, 1, (int64_t)P - 1, (int64_t)P, 2 * (int64_t)P + 1, 468, 1000};
        for (size_t k = 0; k < sizeof nbs / sizeof *nbs; k++) {
            if (nbs[k] < 0) continue;
            for (int ahead = 1; ahead <= 3; ahead++) {
                epoch(P, nbs[k], ahead, pf, 0, taken);
                epoch(P, nbs[k], ahead, pf, 1, taken);
            }
        }
        epoch(P, 1000, 2, pf, 0, taken);
        if (P > 1)
            CHECK(taken[0] > 2 * taken[P - 1], "P=%d: fast rank took %lld, slow rank %lld", P,
                  (long long)taken[0], (long long)taken[P - 1]);
        epoch(P, 1000, 2, pf, 1, taken);
        for (int p = 0; p < P; p++)
            CHECK(taken[p] == 1000 / P + (p < 1000 % P), "sync P=%d rank %d took %lld", P, p,
                  (long long)taken[p]);
    }
    epoch(4, 1000, 2, (double[]){1, 0.5, 0.33, 0.25}, 0, taken);
    printf("linear skew, P=4, 1000 batches: ranks took %lld %lld %lld %lld\n", (long long)taken[0],
           (long long)taken[1], (long long)taken[2], (long long)taken[3]);
    for (int P = 1; P <= 5; P++)
        for (int64_t c = 0; c <= 23; c += 7) sync_from(P, 23, c);
    dealer_t d;
    CHECK(dealer_init_at(&d, 10, 11, 2, 0, 2) < 0, "cursor beyond the batches accepted");
    CHECK(dealer_init_at(&d, 10, -1, 2, 0, 2) < 0, "negative cursor accepted");
    CHECK(dealer_init(&d, 10, 0, 0, 2) < 0, "P=0 accepted");
    CHECK(dealer_init(&d, 10, 2, 2, 2) < 0, "rank 2 of 2 accepted");
    CHECK(dealer_init(&d, 10, 2, 0, 0) < 0, "ahead 0 accepted");
    CHECK(dealer_init(&d, -1, 2, 0, 1) < 0, "negative batch count accepted");
    /* deposits that never took a batch: the queue overflows -> refused, not overwritten */
    CHECK(dealer_init(&d, 1000, 1, 0, 1) == 0, "init");
    uint8_t one = 1;
    int rc = 0;
    for (int i = 0; i < DEALER_QMAX + 2 && !rc; i++) rc = dealer_round(&d, &one);
    CHECK(rc < 0, "overflow not reported");
    if (fails) {
        printf("FAIL: %d checks\n", fails);
        return 1;
    }
    printf("dealer: all checks passed\n");
    return 0;
}
