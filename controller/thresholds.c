/* thresholds.c -- the window signals (F, L, A, T and the step-time gain G, controller.h) and
 * the previous adaptive rule, rule=thresholds, that decides on them. Pure: no MPI calls, no
 * threads, no clocks, no globals. */
#include "controller/policy_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- signals */

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
 * partial rounds have to beat sync by a margin (pay_enter). NAN until every rank has cost_n/2
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

/* ---------------------------------------------------------------- rule=thresholds */

/* Level decision of the threshold rule (controller.h section 3b) at global round rg. */
void thresholds_evaluate(ctl_policy_t *p, uint64_t rg, sig_t g, verdict_t *v) {
    const ctl_policy_cfg_t *c = &p->c;
    const struct ctl_state *s = &p->s;
    char *why = v->why;
    const size_t n = sizeof v->why;
    uint64_t in_mode = rg + 1 - s->mode_from;
    int tau = c->tau > 0, pay = c->pay_enter > 0 && s->cost_seen;
    char a[24], b[24];
    if (s->level == LV_SYNC) {
        /* with step times, a due probe waits until they say that partial rounds would pay */
        if (in_mode >= (uint64_t)s->probe && (!pay || g.gain >= c->pay_exit)) {
            v->probe = 1;
            char gs[48] = "";
            if (pay) snprintf(gs, sizeof gs, ", gain=%.2f >= pay_exit %.2f", g.gain, c->pay_exit);
            snprintf(why, n, "probe after %llu rounds in sync (probe interval %d%s): %s -> %s",
                     (unsigned long long)in_mode, s->probe, gs, level_name(p, LV_SYNC, a, sizeof a),
                     level_name(p, LV_MAJ, b, sizeof b));
            v->to = LV_MAJ;
        }
        return;
    }
    uint64_t need = (uint64_t)(c->window > s->dwell ? c->window : s->dwell);
    if (s->w_len < c->window || in_mode < need) return;
    int W = c->window, to = -1;
    if (pay && g.gain < c->pay_enter) { /* false while the gain is NAN */
        snprintf(why, n,
                 "gain=%.2f < pay_enter %.2f: sync would cost about as much as partial rounds "
                 "(L=%.2f F=%.2f T=%.2f)",
                 g.gain, c->pay_enter, g.L, g.F, g.T);
        to = LV_SYNC;
    } else if (s->level == LV_LIGHT) {
        if (g.L >= c->maj_enter)
            snprintf(why, n, "L=%.2f >= maj_enter %.2f over %d rounds (A=%.2f F=%.2f T=%.2f)", g.L,
                     c->maj_enter, W, g.A, g.F, g.T),
                to = LV_MAJ;
        else if (tau && g.T >= c->wait_enter)
            snprintf(why, n, "T=%.2f >= wait_enter %.2f over %d rounds (L=%.2f F=%.2f)", g.T, c->wait_enter,
                     W, g.L, g.F),
                to = LV_MAJ;
        else if (c->light_fresh > 0 && g.F < c->light_fresh)
            snprintf(why, n, "F=%.2f < light_fresh %.2f over %d rounds (L=%.2f T=%.2f): stale rounds", g.F,
                     c->light_fresh, W, g.L, g.T),
                to = LV_MAJ;
        /* leaving LIGHT (for any reason) while its rounds carry too few gradients blocks it */
        if (to == LV_MAJ && c->light_fresh > 0 && g.F < c->light_fresh) {
            size_t k = strlen(why);
            if (!strstr(why, "light_fresh"))
                snprintf(why + k, n - k, ", F < light_fresh %.2f", c->light_fresh);
            v->fresh_exit = 1;
        }
    } else {
        if (g.F <= c->sync_fresh)
            snprintf(why, n, "F=%.2f <= sync_fresh %.2f over %d rounds (L=%.2f A=%.2f T=%.2f)", g.F,
                     c->sync_fresh, W, g.L, g.A, g.T),
                to = LV_SYNC;
        else if (!tau && g.A >= c->sync_streak)
            snprintf(why, n, "A=%.2f >= sync_streak %.2f over %d rounds (L=%.2f F=%.2f)", g.A, c->sync_streak,
                     W, g.L, g.F),
                to = LV_SYNC;
        else if (tau && g.T >= c->sync_wait)
            snprintf(why, n, "T=%.2f >= sync_wait %.2f over %d rounds (L=%.2f F=%.2f)", g.T, c->sync_wait, W,
                     g.L, g.F),
                to = LV_SYNC;
        else if (g.L <= c->maj_exit && (!tau || g.T <= c->wait_exit) && rg + (uint64_t)c->lag >= s->lblock) {
            if (tau)
                snprintf(why, n,
                         "L=%.2f <= maj_exit %.2f and T=%.2f <= wait_exit %.2f over %d rounds (F=%.2f)", g.L,
                         c->maj_exit, g.T, c->wait_exit, W, g.F);
            else
                snprintf(why, n, "L=%.2f <= maj_exit %.2f over %d rounds (F=%.2f)", g.L, c->maj_exit, W, g.F);
            to = LV_LIGHT;
        }
    }
    if (to < 0) return;
    size_t k = strlen(why);
    snprintf(why + k, n - k, ": %s -> %s", level_name(p, s->level, a, sizeof a),
             level_name(p, to, b, sizeof b));
    v->to = to;
}

/* Switch bookkeeping of the threshold rule: LIGHT block, sync probe and dwell back-offs. eg is the
 * global effective round of the switch from s->level to `to`. */
void thresholds_switched(ctl_policy_t *p, int to, const verdict_t *v, uint64_t eg) {
    const ctl_policy_cfg_t *c = &p->c;
    struct ctl_state *s = &p->s;
    /* a probe (or return to LIGHT) that ends within 4*max(window, dwell) rounds failed */
    const uint64_t span = 4 * (uint64_t)(c->window > s->dwell ? c->window : s->dwell);
    if (v->fresh_exit) {
        /* LIGHT left for stale rounds: block it for a probe interval, doubled if the return to
         * LIGHT that ends this way failed */
        if (s->lprobe_at != NONE && eg - s->lprobe_at <= span)
            s->lprobe = backoff(s->lprobe, c->probe_max);
        else if (s->lprobe_at != NONE)
            s->lprobe = c->sync_probe;
        s->lblock = eg + (uint64_t)s->lprobe;
        s->lprobe_at = NONE;
        p->st.light_exits++;
    } else if (to == LV_LIGHT) {
        s->lprobe_at = eg;
    }
    if (v->probe) {
        s->probe_at = eg;
    } else if (to == LV_SYNC) {
        if (s->probe_at != NONE && eg - s->probe_at <= span) {
            p->st.probe_failures++;
            s->probe = backoff(s->probe, c->probe_max);
        } else {
            s->probe = c->sync_probe;
        }
        s->probe_at = NONE;
    } else {
        if (s->probe_at != NONE) {
            s->probe = c->sync_probe;
            s->probe_at = NONE;
        } /* probe held */
        /* a quick reversal A -> B -> A doubles the dwell */
        if (to == s->prev_level && eg - s->mode_from < 2 * (uint64_t)s->dwell)
            s->dwell = backoff(s->dwell, c->max_dwell);
        else
            s->dwell = c->min_dwell;
    }
}
