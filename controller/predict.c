/* predict.c -- what a level would score, replayed from the step times the ranks reported (the rate
 * rule's screen, docs/DESIGN.md#the-rate-rule). Pure: no MPI calls, no threads, no clocks, no globals.
 *
 * Accepts: the carried state's ring of each rank's last step times (pcoll_set_cost's step: data,
 * compute, injected delay; no waiting), the mean round overhead measured in sync rounds (a sync
 * rank's cycle minus the round's largest step: the reduction, applying the round, waking), the
 * policy's tau and staleness key. Returns the score the rule would measure for a partial level
 * (gradients per second, each at its worth), the same quantity as a probe's, or 0 when there is
 * too little to replay (a rank with fewer than 2 step times, no sync round measured).
 * Assumes: a rank's step times do not depend on the level (true where each rank has its own core or
 * GPU; on shared cores a rank computes faster while others wait, so the replay reads partial levels
 * low -- the screen only ever skips partial levels, so that error costs time, not accuracy).
 *
 * The replay, event time (every rank computes its steps in turn, from its ring, oldest first,
 * cyclically):
 *
 *     rank 0  |--s--|         |---s---|        ready: when its step ends
 *     rank 1  |----s----|   |--s--|
 *     round k       [t, t + o)           t = the rule's trigger: solo the first ready rank, quorum
 *                   fresh: ready by t          the Q-th, majority its initiator (drawn as the
 *                                              engine does: uniformly, here from a fixed hash),
 *                                              and every rank whose streak reached tau
 * A fresh rank starts its next step when the round ends. Each gradient's lag is what rate_observe
 * counts (gradients applied between its rank's rounds, in units of P), its worth that of the
 * staleness key; the score is sum_p r_p w_p over the rounds after a warm-up. A replay is
 * O(P) per round and runs until every rank has stepped through its ring 8 times (a quarter of it
 * warm-up), at most 2^26 rank-rounds: up to 1,024 ranks every rank replays its ring at least
 * twice; beyond that it returns 0 and the rule probes as it would without a screen. */
#include "common/hash.h"
#include "controller/policy_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The k-th smallest (0-based) of a[0..n), reordering a (Hoare's selection). */
static double kth(double *a, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        double piv = a[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] < piv) i++;
            while (a[j] > piv) j--;
            if (i <= j) {
                double x = a[i];
                a[i++] = a[j], a[j--] = x;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return a[k];
    }
    return a[k];
}

/* Rank i's k-th replayed step: its ring, oldest first, cyclically. */
static double step_at(const struct ctl_state *s, int i, uint64_t k) {
    const int N = s->cost_n, cnt = s->cost_cnt[i];
    int oldest = cnt < N ? 0 : s->cost_pos[i];
    return s->cost[(size_t)i * (size_t)N + (size_t)((oldest + (int)(k % (uint64_t)cnt)) % N)];
}

double rate_predict(const ctl_policy_t *p, int level, double overhead) {
    const struct ctl_state *s = &p->s;
    const int P = p->P, tau = p->c.tau;
    uint64_t R = 8 * (uint64_t)s->cost_n * (uint64_t)P;
    const uint64_t cap = ((uint64_t)1 << 26) / (uint64_t)P;
    if (R > cap) R = cap;
    if (R < 2 * (uint64_t)s->cost_n * (uint64_t)P || !(overhead >= 0)) return 0;
    for (int i = 0; i < P; i++)
        if (s->cost_cnt[i] < 2) return 0;
    const int Q = level == CTL_LV_LIGHT ? (p->light.mode == PCOLL_QUORUM ? p->light.quorum : 1) : 0;
    double *ready = calloc((size_t)P, sizeof *ready), *n = calloc((size_t)P, sizeof *n),
           *wsum = calloc((size_t)P, sizeof *wsum), *srt = calloc((size_t)P, sizeof *srt);
    uint64_t *k = calloc((size_t)P, sizeof *k), *gsince = calloc((size_t)P, sizeof *gsince);
    uint32_t *streak = calloc((size_t)P, sizeof *streak);
    double score = 0;
    if (!ready || !n || !wsum || !srt || !k || !gsince || !streak) goto out;
    for (int i = 0; i < P; i++) k[i] = 1, ready[i] = step_at(s, i, 0);
    const uint64_t warm = R / 4;
    double t_free = 0, t0 = 0;
    for (uint64_t r = 0; r < R; r++) {
        double need;
        if (level == CTL_LV_MAJORITY)
            need = ready[hash_murmur3_fmix64(r + 1) % (uint64_t)P];
        else if (Q <= 1) {
            need = ready[0];
            for (int i = 1; i < P; i++)
                if (ready[i] < need) need = ready[i];
        } else {
            memcpy(srt, ready, (size_t)P * sizeof *srt);
            need = kth(srt, P, (Q < P ? Q : P) - 1);
        }
        for (int i = 0; i < P; i++)
            if (pcoll_must_wait(streak[i], tau) && ready[i] > need) need = ready[i];
        const double t = need > t_free ? need : t_free, end = t + overhead;
        if (r == warm) t0 = t;
        uint64_t nf = 0;
        for (int i = 0; i < P; i++) nf += ready[i] <= t;
        for (int i = 0; i < P; i++) {
            if (ready[i] > t) {
                streak[i]++, gsince[i] += nf;
                continue;
            }
            if (r >= warm) n[i]++, wsum[i] += gradient_worth(p->c.staleness, (double)gsince[i] / P);
            streak[i] = 0, gsince[i] = 0;
            ready[i] = end + step_at(s, i, k[i]++);
        }
        t_free = end;
    }
    const double span = t_free - t0;
    for (int i = 0; span > 0 && i < P; i++)
        if (n[i] > 0) score += n[i] / span * (wsum[i] / n[i]);
out:
    free(ready), free(n), free(wsum), free(srt), free(k), free(gsince), free(streak);
    return score;
}
