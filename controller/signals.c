/* signals.c -- the window signals (F, L, A, T and the step-time gain, controller.h section 2) that
 * decisions and statistics report. Pure: no MPI calls, no threads, no clocks, no globals. */
#include "controller/policy_impl.h"

#include <math.h>

void window_push(struct ctl_state *s, const wrow_t *x) {
    int W = s->window, k = s->w_pos;
    if (s->w_len == W) {
        s->s_max -= s->w_max[k];
        s->s_fresh -= s->w_fresh[k];
        s->s_active -= s->w_active[k];
        s->s_nmax -= s->w_nmax[k];
        s->s_nfresh -= s->w_nfresh[k];
        s->s_nfree -= s->w_nfree[k];
        s->s_tau -= s->w_tau[k];
    } else {
        s->w_len++;
    }
    s->w_max[k] = x->max;
    s->w_fresh[k] = x->fresh;
    s->w_active[k] = x->active;
    s->w_nmax[k] = x->nmax;
    s->w_nfresh[k] = x->nfresh;
    s->w_nfree[k] = x->nfree;
    s->w_tau[k] = x->tau;
    s->s_max += x->max;
    s->s_fresh += x->fresh;
    s->s_active += x->active;
    s->s_nmax += x->nmax;
    s->s_nfresh += x->nfresh;
    s->s_nfree += x->nfree;
    s->s_tau += x->tau;
    s->w_pos = (k + 1) % W;
}

/* The gain of partial rounds over sync, from the agreed step times of the last cost_n deposits of
 * each active rank (c_p[i]: p's i-th latest):
 *     gain = S * sum_p (1 / mean_p c_p) / n_active,    S = mean_i max_p c_p[i]
 * sum_p 1/mean_p is the rate at which partial rounds take gradients (every rank at its own speed);
 * n_active / S is sync's (every step waits for the slowest of a draw of step times; pairing the
 * ranks' i-th latest times keeps the tail of random delays in S). 1: equal ranks, nothing to gain;
 * a rank k times slower than the others: about k (P-1)/P + 1/P. Communication is not in it:
 * NAN until every rank has cost_n/2
 * step times (or none reports any), and once a rank has joined: the tail of an epoch, when the
 * ranks run out of data one by one, is not what the next epoch will look like. */
static double gain(const struct ctl_state *s) {
    const int P = s->P, N = s->cost_n;
    int m = N;
    for (int i = 0; i < P; i++) {
        if (!s->act[i]) return NAN;
        if (s->cost_cnt[i] < m) m = s->cost_cnt[i];
    }
    if (m < N / 2) return NAN;
    double rate = 0, S = 0;
    for (int i = 0; i < P; i++) {
        double sum = 0;
        for (int k = 0; k < s->cost_cnt[i]; k++) sum += s->cost[(size_t)i * N + k];
        if (!(sum > 0)) return NAN; /* kept times are > 0, but may underflow when divided */
        rate += s->cost_cnt[i] / sum;
    }
    for (int j = 1; j <= m; j++) {
        double mx = 0;
        for (int i = 0; i < P; i++) {
            double v = s->cost[(size_t)i * N + (s->cost_pos[i] - j + N) % N];
            if (v > mx) mx = v;
        }
        S += mx;
    }
    return S / m * rate / P;
}

sig_t signals(const struct ctl_state *s) {
    sig_t g = {NAN, NAN, NAN, NAN, gain(s)};
    if (s->w_len == 0 || s->s_active == 0) return g;
    double n = (double)s->w_len;
    g.F = (double)s->s_fresh / (double)s->s_active;
    g.A = (double)s->s_max / n * g.F;
    g.T = (double)s->s_tau / n;
    if (s->s_nfree > 0) g.L = (double)s->s_nmax / n * ((double)s->s_nfresh / (double)s->s_nfree);
    return g;
}
