/* rate.c -- the adaptive policy's rate rule: it measures the fresh-gradient equivalents per second
 * each level delivers, in probes of each level, and keeps the level that delivers most; while
 * settled, it re-probes when the chosen level's measurements shift (the change test). Pure: no MPI
 * calls, no threads, no clocks, no globals. The rule and why: docs/DESIGN.md#the-rate-rule; its
 * constants: docs/DESIGN.md#constants-of-the-rate-rule. */
#include "controller/policy_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define Z           2.0 /* confidence level: standard errors of a difference that decide */
#define CONTEST_MAX 2   /* times an unresolved choice's rival is measured again */

/* Clears what the measurement has counted; each rank's previous cycle (x1, w1) and skip flag stay. */
static void meas_clear(struct ctl_state *s) {
    for (int i = 0; i < s->P; i++) {
        s->m.n[i] = s->m.np[i] = 0;
        s->m.d[i] = s->m.d2[i] = s->m.l[i] = s->m.e[i] = s->m.e2[i] = s->m.dd[i] = s->m.ee[i] = 0;
        s->m.yn[i] = 0, s->m.y1[i] = s->m.y2[i] = s->m.y3[i] = s->m.y4[i] = 0;
    }
    s->m.rounds = 0;
    s->m.ln = 0, s->m.lx0 = s->m.lx = s->m.ly = s->m.lxx = s->m.lxy = s->m.lyy = 0;
}

/* Restarts the measurement: nothing counted, and every rank's next deposit is skipped (its cycle
 * began under another rule, or before this handle). */
static void meas_reset(struct ctl_state *s) {
    meas_clear(s);
    for (int i = 0; i < s->P; i++) s->m.x1[i] = s->m.w1[i] = 0, s->m.skip[i] = 1;
}

/* Skips every rank's next deposit and keeps what is counted: a round without every rank (an
 * epoch's tail) or the start of a handle (the next epoch) interrupts the ranks' cycles, which then
 * include evaluation or waiting for the epoch's last batches, but not the level's measurement. */
static void meas_skip(struct ctl_state *s) {
    for (int i = 0; i < s->P; i++) s->m.skip[i] = 1, s->m.x1[i] = s->m.w1[i] = 0;
}

/* Queues a probe of every level other than the current one, least partial first (CTL_LV_* order;
 * from a settled choice: that choice is the incumbent; while probing already: none). */
void rate_probe_all(struct ctl_state *s) {
    s->nqueue = 0;
    for (int l = 0; l < CTL_NLV; l++)
        if (l != s->level) s->queue[s->nqueue++] = l;
    s->incumbent = s->phase ? -1 : s->level;
    s->phase = 1;
    s->screened = 0;
    s->contest = 0;
    s->rival = -1;
    s->probe_from = s->grads;
}

void rate_forget_levels(struct ctl_state *s) {
    for (int l = 0; l < CTL_NLV; l++) {
        s->score[l] = s->se_in[l] = s->rate[l] = s->lag[l] = s->pool_w[l] = s->last_x[l] = 0;
        s->pool_sx[l] = s->pool_sxx[l] = 0;
        s->pool_n[l] = 0;
        s->pool_k[l] = 0;
        s->scored_at[l] = NONE;
        s->pred[l] = 0;
    }
    s->ovh_sum = 0, s->ovh_n = 0;
}

void rate_init(struct ctl_state *s, const ctl_policy_cfg_t *c) {
    (void)c;
    rate_forget_levels(s);
    s->cv2_sum = 0;
    s->cv2_n = 0;
    s->beyond = 0;
    memset(s->st.bss, 0, sizeof s->st.bss), memset(s->st.bdf, 0, sizeof s->st.bdf);
    s->st.k = 0, s->st.beyond = 0;
    for (int i = 0; i < s->P; i++) s->gsince[i] = 0;
    s->grads = 0;
    s->phase = 1; /* a run starts with a probe of every level */
    rate_probe_all(s);
    s->next_probe = 0;
    meas_reset(s);
}

void rate_start(struct ctl_state *s) {
    for (int i = 0; i < s->P; i++)
        s->gsince[i] = 0; /* every rank applied every round before the handle ended */
    meas_skip(s);
}

/* Adds a sync round's overhead (predict.c): the ranks' mean cycle minus the round's largest step
 * time -- the reduction, applying the round, waking. A rank's cycle spans its wait for the previous
 * round and its step for this one, so a round's difference may be negative; their mean is the
 * overhead (the mean of the largest steps cancels). Only rounds in which every rank's cycle lies
 * in sync (none skipped) and that carry both times. */
static void sync_overhead(struct ctl_state *s, const pcoll_record_t *rec) {
    if (rec->mode != PCOLL_SYNC || !rec->cost || !rec->step) return;
    double cyc = 0, mx = 0;
    for (int i = 0; i < s->P; i++) {
        if (rec->fresh[i] != 1 || s->m.skip[i] || !(rec->cost[i] > 0) || !(rec->step[i] > 0)) return;
        cyc += rec->cost[i];
        if (rec->step[i] > mx) mx = rec->step[i];
    }
    s->ovh_sum += cyc / s->P - mx; /* signed: a rank's cycle also holds the previous round's wait */
    s->ovh_n++;
}

/* The overhead of a sync round the replay charges: the mean of sync_overhead's (0 unless positive). */
static double sync_round_overhead(const struct ctl_state *s) {
    return s->ovh_sum > 0 ? s->ovh_sum / s->ovh_n : 0;
}

/* worth=measured: counts the losses the fresh ranks of round rec reported (pcoll_set_loss: a
 * positive, finite loss over some samples) into the measurement's regression of log loss on x, the
 * sync steps' worth of gradients applied before the round (every rank's weights then hold them,
 * give or take the lag of its gradient: a shift about constant within a measurement, which moves
 * the intercept, not the slope). The log: the loss falls by a factor per step more nearly alike
 * over a run than by an amount (docs/DESIGN.md#the-worth-of-a-gradient). */
static void loss_observe(ctl_policy_t *p, const pcoll_record_t *rec, double x) {
    meas_t *m = &p->s.m;
    if (!p->c.worth || !rec->loss || !rec->samples) return;
    for (int i = 0; i < p->P; i++) {
        const double l = rec->loss[i];
        if (!rec->fresh[i] || !(rec->samples[i] > 0) || !(l > 0) || !isfinite(l)) continue;
        if (m->ln == 0) m->lx0 = x;
        const double u = x - m->lx0, y = log(l);
        m->ln++;
        m->lx += u, m->ly += y, m->lxx += u * u, m->lxy += u * y, m->lyy += y * y;
    }
}

/* Counts round rec into the measurement of the level in force. The cycle time a rank reports with
 * a deposit (pcoll_set_cost: the wall time since its previous deposit) is what the rule pays per
 * gradient in this level: compute, injected delay, waiting for the round, applying rounds. The
 * lag of a gradient is the number of gradients applied between the round its rank last took
 * part in and the round that takes it, in sync steps (units of the active ranks): 0 in sync. A
 * round in which a rank is not active (an epoch's tail) is not counted, and every rank's next
 * deposit is skipped (meas_skip). */
void rate_observe(ctl_policy_t *p, const pcoll_record_t *rec, int nactive) {
    struct ctl_state *s = &p->s;
    const int P = p->P;
    if (nactive < P) {
        meas_skip(s);
        for (int i = 0; i < P; i++) s->grads += rec->fresh[i];
        return;
    }
    uint32_t nf = 0;
    for (int i = 0; i < P; i++) nf += rec->fresh[i];
    s->grads += nf;
    if (s->base + rec->round >= s->mode_from) {
        loss_observe(p, rec, (double)(s->grads - nf) / P);
        sync_overhead(s, rec);
        s->m.rounds++;
        for (int i = 0; i < P; i++) {
            if (!rec->fresh[i]) continue;
            /* change=steps: its log step time, also where the cycle is skipped: the step in progress
             * at a switch is more likely a long one (a long step spans more instants), and leaving
             * it out made the first measurement after a switch read the spread low (under the random
             * straggler at P = 8, log variance -3.0 against -2.2 later, a reference too low) */
            const float st = rec->step ? rec->step[i] : 0.0f;
            if (p->c.change && st > 0 && isfinite(st)) {
                const double y = log((double)st / rec->fresh[i]), y2 = y * y;
                s->m.yn[i]++;
                s->m.y1[i] += y, s->m.y2[i] += y2, s->m.y3[i] += y2 * y, s->m.y4[i] += y2 * y2;
            }
            if (s->m.skip[i]) {
                s->m.skip[i] = 0;
                continue;
            }
            float v = rec->cost ? rec->cost[i] : 0.0f;
            if (!(v > 0) || !isfinite(v)) continue;
            double x = (double)v / rec->fresh[i], lag = (double)s->gsince[i] / P,
                   w = gradient_worth(p->c.worth ? CTL_STALE_BOUND : p->c.staleness, lag);
            s->m.n[i] += rec->fresh[i];
            s->m.d[i] += v;
            s->m.d2[i] += rec->fresh[i] * x * x;
            s->m.l[i] += rec->fresh[i] * lag;
            s->m.e[i] += rec->fresh[i] * w;
            s->m.e2[i] += rec->fresh[i] * w * w;
            if (s->m.x1[i] > 0) { /* the previous deposit of p was counted too: a consecutive pair */
                s->m.dd[i] += rec->fresh[i] * x * s->m.x1[i];
                s->m.ee[i] += rec->fresh[i] * w * s->m.w1[i];
                s->m.np[i] += rec->fresh[i];
            }
            s->m.x1[i] = x, s->m.w1[i] = w;
        }
    }
    for (int i = 0; i < P; i++) s->gsince[i] = rec->fresh[i] ? 0 : s->gsince[i] + nf;
}

/* Variance of the mean of n consecutive values of one rank (mean mu; g0 = their mean square minus
 * mu^2), from their spread and their lag-1 autocovariance g1 (np consecutive pairs whose products
 * sum to xx): (g0 + 2 g1) / n. A rank's cycles are negatively correlated (a long wait for a round
 * is followed by a short one: in sync a rank's cycle is the round's duration plus the difference
 * of two of its computes, and the mean of its cycles is the span of its deposits over n), which
 * the spread alone, g0 / n, does not know; the lags of its gradients likewise (they sum to what
 * the others applied). g1 about the sample mean reads -g0 / n for independent values, which is
 * added back. Bounded below by g0 / n^2 (the span's ends are uncertain by one value's spread) and
 * above by 3 g0 / n (|g1| <= g0). */
static double mean_var(double n, double g0, uint32_t np, double xx, double mu) {
    g0 = g0 > 0 ? g0 * n / (n - 1) : 0;
    double g1 = np ? xx / np - mu * mu + g0 / n : 0;
    if (g1 > g0) g1 = g0;
    double v = g0 + 2 * g1;
    return (v > g0 / n ? v : g0 / n) / n;
}

/* worth=measured: turns the measurement's gradient rate R +- se (worth 1 each) into the fall of
 * the training loss per second it delivers: with b +- se_b the least-squares slope of the log
 * losses counted against the sync steps' worth of gradients applied (its error from the residual
 * spread about the line), the score is -b R / P (log-loss units per second), its error the two
 * relative ones combined. 0 while fewer than 3 losses or no spread of x (no score: the measurement
 * goes on, so a run whose ranks report no losses keeps its start level). */
static int loss_score(const meas_t *m, int P, double *score, double *se) {
    const double n = m->ln;
    if (m->ln < 3) return 0;
    const double sxx = m->lxx - m->lx * m->lx / n, sxy = m->lxy - m->lx * m->ly / n,
                 syy = m->lyy - m->ly * m->ly / n;
    if (!(sxx > 1e-12 * (m->lxx > 0 ? m->lxx : 1))) return 0;
    const double b = sxy / sxx, res = (syy - b * sxy) / (n - 2), se_b = sqrt((res > 0 ? res : 0) / sxx);
    const double R = *score / P, eR = *se / P;
    *score = -b * R;
    *se = sqrt(se_b * R * se_b * R + b * eR * b * eR);
    return 1;
}

/* Score of the measurement so far (0 until every rank has 2 deposits in it). With r_p = n_p / d_p
 * (rank p's deposits per second of its own wall time) and w_p the mean worth of its gradients:
 *   rate  R = sum_p r_p                gradients per second
 *   score S = sum_p r_p w_p            fresh-gradient equivalents per second
 * Standard error, from each rank's error of r_p w_p (the spread of its cycle times and worths,
 * mean_var): in sync their sum, in a partial level their root sum of squares (why:
 * docs/DESIGN.md#the-rate-rule, "Standard errors"); the spread between measurements is rate_se's. */
static int meas_score(const ctl_policy_t *p, double *score, double *se) {
    const meas_t *m = &p->s.m;
    const int sync = p->s.level == CTL_LV_SYNC;
    for (int i = 0; i < p->P; i++)
        if (m->n[i] < 2) return 0;
    double S = 0, err = 0;
    for (int i = 0; i < p->P; i++) {
        double n = m->n[i], mean = m->d[i] / n, r = 1.0 / mean, w = m->e[i] / n;
        double var_d = mean_var(n, m->d2[i] / n - mean * mean, m->np[i], m->dd[i], mean),
               var_w = mean_var(n, m->e2[i] / n - w * w, m->np[i], m->ee[i], w);
        double se_r = r * sqrt(var_d) / mean, se_w = sqrt(var_w);
        S += r * w;
        double e2 = se_r * w * se_r * w + r * se_w * r * se_w;
        err += sync ? sqrt(e2) : e2;
    }
    *score = S;
    *se = sync ? err : sqrt(err);
    return p->c.worth ? loss_score(m, p->P, score, se) : 1;
}

/* Relative sum of squares about their mean of k measurements summing to sx, their squares to sxx. */
static double rel_ss(double k, double sx, double sxx) {
    const double mean = k > 0 ? sx / k : 0;
    if (k < 2 || !(mean > 0)) return 0;
    double ss = (sxx - k * mean * mean) / (mean * mean);
    return ss > 0 ? ss : 0;
}

/* Relative sum of squares of the measurements in level l's pool, about their mean. */
static double pool_ss(const struct ctl_state *s, int l) {
    return rel_ss(s->pool_k[l], s->pool_sx[l], s->pool_sxx[l]);
}

/* Relative variance between measurements of one level, pooled over the levels and the pools
 * dropped before (0 before the first repeat), and its degrees of freedom (*df, may be NULL). */
static double cv2_df(const struct ctl_state *s, uint32_t *df) {
    double ss = s->cv2_sum;
    uint32_t n = s->cv2_n;
    for (int l = 0; l < CTL_NLV; l++)
        if (s->pool_k[l] >= 2) ss += pool_ss(s, l), n += s->pool_k[l] - 1;
    if (df) *df = n;
    return n ? ss / n : 0;
}
static double cv2(const struct ctl_state *s) { return cv2_df(s, NULL); }

/* Standard error of level l's pooled score: the larger of the within-measurement one and the
 * spread between measurements over the measurements pooled (a level whose pool was dropped keeps
 * its last score and within error until it is measured again). */
double rate_se(const struct ctl_state *s, int l) {
    if (s->pool_k[l] == 0) return s->se_in[l];
    double b = sqrt(cv2(s) / s->pool_k[l]) * s->score[l];
    return s->se_in[l] > b ? s->se_in[l] : b;
}

/* The confidence level Z for a spread estimated with df degrees of freedom: Student's t quantile
 * of the same one-sided confidence (Cornish-Fisher expansion to 1/df^2; within 3% of the exact
 * quantile from df = 3 on, and about 7 at df = 1, where the exact one is 14). No estimate yet
 * (df = 0): Z itself, with the within-measurement spread. */
static double zq(uint32_t df) {
    if (df == 0) return Z;
    const double z = Z, v = df, z3 = z * z * z, z5 = z3 * z * z;
    return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v);
}

/* Standard error of one measurement x whose cycle times spread by xse: at least the spread
 * between measurements, c2 (their relative variance). */
static double se_at(double c2, double x, double xse) {
    double b = sqrt(c2 > 0 ? c2 : 0) * x;
    return xse > b ? xse : b;
}
static double meas_se(const struct ctl_state *s, double x, double xse) { return se_at(cv2(s), x, xse); }

/* ---------------------------------------------------------------- change=steps */

/* Folds the reference of the step-time statistics (steps_t) into their spread between
 * measurements (bss, bdf: the machine's, kept like cv2's) and empties it. */
static void steps_drop(struct ctl_state *s) {
    steps_t *t = &s->st;
    if (t->k >= 2) {
        for (int j = 0; j < 2; j++) t->bss[j] += t->xx[j] - t->x[j] * t->x[j] / t->k, t->bdf[j] += t->k - 1;
        for (int i = 0; i < s->P; i++) t->bss[2] += t->rxx[i] - t->rx[i] * t->rx[i] / t->k;
        t->bdf[2] += (t->k - 1) * (uint32_t)(s->P - 1);
    }
    t->k = 0, t->beyond = 0;
}

/* Variance between measurements of statistic j: the references dropped and the current one pooled
 * (0: none yet), and its degrees of freedom in *df. */
static double steps_between(const struct ctl_state *s, int j, uint32_t *df) {
    const steps_t *t = &s->st;
    double ss = t->bss[j];
    uint32_t n = t->bdf[j];
    if (t->k >= 2) {
        if (j < 2)
            ss += t->xx[j] - t->x[j] * t->x[j] / t->k, n += t->k - 1;
        else {
            for (int i = 0; i < s->P; i++) ss += t->rxx[i] - t->rx[i] * t->rx[i] / t->k;
            n += (t->k - 1) * (uint32_t)(s->P - 1);
        }
    }
    *df = n;
    return n && ss > 0 ? ss / n : 0;
}

/* A variance below float32's resolution of a log step time (2^-24 relative: about 4e-15) is none:
 * equal step times, read through rounding. */
#define NOSPREAD 1e-12

/* z of the difference d between a measurement (within variance wn) and the reference (mean within
 * variance wr of its measurements), each at least the spread between measurements b: the limits of
 * one measurement, not of the mean of the reference's k (as `outside` for the scores). */
static double steps_z(double d, double wn, double wr, double b) {
    const double v = (wn > b ? wn : b) + (wr > b ? wr : b);
    return v > 0 ? d / sqrt(v) : d == 0 ? 0 : d > 0 ? INFINITY : -INFINITY;
}

/* The change test on the step times (change=steps), at the close of a measurement: every rank
 * needs 2 step times in it. Tested (steps_t): the spread, the log of the pooled variance V of a
 * rank's log steps (within variance (m4 / V^2 - 1) / N from their pooled 4th central moment),
 * compared in cube-root units; and each rank's mean log step less the common one (within
 * v_p / n_p), tested together as a chi-square of P - 1 degrees of freedom (Wilson-Hilferty's
 * normal z). Not tested: the common location (the ranks' mean log step, statistic 0, still summed):
 * a factor on every rank's steps scales every level's score alike and cannot change the choice,
 * and it is what the machine's drift moves. Each is beyond the limits when its z exceeds Z
 * (Student's at the spread's degrees of freedom); two measurements in a row beyond on the same
 * side of one statistic are a change (returns 1, the reference restarts with this measurement). A
 * measurement beyond is kept out of the reference; one within is added. Only settled measurements
 * count: a probe empties the reference (on shared cores the step times depend on the level). */
static int steps_test(ctl_policy_t *p) {
    struct ctl_state *s = &p->s;
    steps_t *t = &s->st;
    const meas_t *m = &s->m;
    const int P = p->P;
    if (!p->c.change) return 0;
    if (s->phase) return steps_drop(s), 0;
    for (int i = 0; i < P; i++)
        if (m->yn[i] < 2) return steps_drop(s), 0; /* no step times to test (reported by no rank) */
    double u = 0, wu = 0, ss = 0, m4 = 0, N = 0, df = 0;
    for (int i = 0; i < P; i++) {
        const double n = m->yn[i], mu = m->y1[i] / n, mu2 = mu * mu;
        const double c2 = m->y2[i] / n - mu2,
                     c4 = m->y4[i] / n - 4 * mu * m->y3[i] / n + 6 * mu2 * m->y2[i] / n - 3 * mu2 * mu2;
        u += mu / P;
        wu += (c2 > 0 ? c2 * n / (n - 1) : 0) / n / ((double)P * P);
        ss += c2 > 0 ? c2 * n : 0, m4 += c4 > 0 ? c4 * n : 0, N += n, df += n - 1;
    }
    const double V = ss / df, L = V > NOSPREAD ? log(V) : log(NOSPREAD),
                 wl = V > NOSPREAD ? (m4 / N / (V * V) - 1) / N : 0;
    const double x[2] = {u, L}, w[2] = {wu, wl > 0 ? wl : 0};
    int beyond = 0;
    if (t->k >= 2) { /* a reference of one measurement could be the outlier */
        uint32_t bdf;
        { /* the spread, in cube-root units (Wilson-Hilferty): V^(1/3) is nearly normal where log V
           * has a long low tail, which made two low measurements in a row 3x likelier than the
           * limits say; z = 3 (e^(d/3) - 1) / sd, d the log ratio to the reference */
            const double b = steps_between(s, 1, &bdf), d = x[1] - t->x[1] / t->k,
                         z = d != 0 ? steps_z(d, w[1], t->w[1] / t->k, b) * 3 * expm1(d / 3) / d : 0;
            if (fabs(z) > zq(bdf)) beyond |= 1 << (2 + (z < 0));
        }
        if (P >= 2) {
            const double b = steps_between(s, 2, &bdf);
            double X = 0;
            for (int i = 0; i < P; i++) {
                const double n = m->yn[i], mu = m->y1[i] / n, c2 = m->y2[i] / n - mu * mu,
                             z = steps_z(mu - u - t->rx[i] / t->k, c2 > 0 ? c2 / (n - 1) : 0, t->rw[i] / t->k,
                                         b);
                X += z * z;
            }
            const double k = P - 1, a = 2 / (9 * k), zc = (cbrt(X / k) - (1 - a)) / sqrt(a);
            if (zc > zq(bdf)) beyond |= 1 << 4;
        }
    }
    const int changed = (beyond & t->beyond) != 0;
    if (changed) steps_drop(s);
    if (beyond && !changed) return t->beyond = beyond, 0;
    if (t->k == 0) /* a new reference */
        memset(t->x, 0, sizeof t->x), memset(t->xx, 0, sizeof t->xx), memset(t->w, 0, sizeof t->w),
            memset(t->rx, 0, (size_t)P * sizeof *t->rx), memset(t->rxx, 0, (size_t)P * sizeof *t->rxx),
            memset(t->rw, 0, (size_t)P * sizeof *t->rw);
    t->k++, t->beyond = 0;
    for (int j = 0; j < 2; j++) t->x[j] += x[j], t->xx[j] += x[j] * x[j], t->w[j] += w[j];
    for (int i = 0; i < P; i++) {
        const double n = m->yn[i], mu = m->y1[i] / n, c2 = m->y2[i] / n - mu * mu, d = mu - u;
        t->rx[i] += d, t->rxx[i] += d * d, t->rw[i] += c2 > 0 ? c2 / (n - 1) : 0;
    }
    return changed;
}

/* The measurement is complete once it holds `window` deposits (and, in partial levels, `window`
 * rounds: they take a random set of ranks, e.g. a drawn initiator, and the draws must average
 * out; a sync round takes every rank). A probe of a level whose score is already below the best
 * level measured in this probe by Z standard errors of both ends early: it cannot be
 * chosen, and a bad level is the one whose probe is dear (a sync round waits for a straggler).
 * Closing records the rate and lag and restarts the counts (no skip: the next deposits belong to
 * the same level). Returns 1 with the score, its standard error and the gradients counted (*ng),
 * 0 while still measuring. */
static int meas_close(ctl_policy_t *p, uint64_t rg, double *score, double *se, uint64_t *ng, int *steps) {
    struct ctl_state *s = &p->s;
    const meas_t *m = &s->m;
    if (!meas_score(p, score, se)) return 0;
    uint64_t total = 0;
    for (int i = 0; i < p->P; i++) total += m->n[i];
    int full =
        total >= (uint64_t)p->c.window && (s->level == CTL_LV_SYNC || m->rounds >= (uint32_t)p->c.window);
    if (!full && s->phase) {
        uint32_t df;
        cv2_df(s, &df);
        const double hi = *score + zq(df) * meas_se(s, *score, *se);
        for (int l = 0; l < CTL_NLV && !full; l++) {
            if (l == s->level || s->scored_at[l] == NONE || s->pool_k[l] == 0) continue;
            full = hi < s->score[l] - zq(df) * rate_se(s, l);
        }
        /* sync also against the partial levels' replays (the screen's), with this measurement's
         * relative error: at the run's start no partial level is measured yet to end against. The
         * replay reads partial levels low on shared cores, so this errs toward measuring sync
         * longer. */
        if (s->level == CTL_LV_SYNC && p->c.screen && !p->c.worth && s->ovh_n >= 2) {
            const double rel = meas_se(s, *score, *se) / *score, o = sync_round_overhead(s);
            for (int l = 0; l < CTL_NLV && !full; l++) {
                if (l == CTL_LV_SYNC) continue;
                const double x = rate_predict(p, l, o);
                full = x > 0 && hi < x - zq(df) * meas_se(s, x, rel * x);
            }
        }
    }
    if (!full) return 0;
    *ng = total;
    double R = 0, lw = 0;
    for (int i = 0; i < p->P; i++) {
        double r = m->n[i] / m->d[i];
        R += r;
        lw += r * m->l[i] / m->n[i];
    }
    s->rate[s->level] = R;
    s->lag[s->level] = lw / R;
    s->scored_at[s->level] = rg;
    *steps = steps_test(p);
    meas_clear(s); /* x1, w1 stay: the next deposit follows them */
    return 1;
}

/* Whether level a's score is above level b's by more than the noise explains (Z standard errors
 * of the difference, at the spread's degrees of freedom). */
static int beats(const struct ctl_state *s, int a, int b) {
    uint32_t df;
    cv2_df(s, &df);
    const double ea = rate_se(s, a), eb = rate_se(s, b);
    return s->score[a] - s->score[b] > zq(df) * sqrt(ea * ea + eb * eb);
}

/* Whether level l can be chosen: measured, and not screened out in the current probe. */
static int avail(const struct ctl_state *s, int l) {
    return s->scored_at[l] != NONE && !(s->screened >> l & 1);
}

/* The best-scoring level other than top and those in mask `skip` that top does not beat, or -1
 * (skip 0: the choice is resolved). */
static int runner_up(const struct ctl_state *s, int top, unsigned skip) {
    int r = -1;
    for (int l = 0; l < CTL_NLV; l++)
        if (l != top && !(skip >> l & 1) && avail(s, l) && !beats(s, top, l) &&
            (r < 0 || s->score[l] > s->score[r]))
            r = l;
    return r;
}

/* Queues the contest of an unresolved choice: a measurement of its rival (the best-scoring level
 * it does not beat), then of any other level it does not beat, highest score first. The incumbent
 * (the level in force) has been measured all along while it ran. Every level the noise cannot
 * rank below the choice is measured again, not only the closest (docs/DESIGN.md#the-rate-rule). */
static void rival_queue(struct ctl_state *s) {
    unsigned done = 1u << s->rival;
    s->queue[0] = s->rival;
    s->nqueue = 1;
    for (int l; (l = runner_up(s, s->level, done)) >= 0; done |= 1u << l) s->queue[s->nqueue++] = l;
    s->incumbent = s->level;
    s->phase = 1;
    s->screened = 0;
    s->rival = -1;
}

static void scores_str(const ctl_policy_t *p, char *b, size_t n) {
    size_t k = 0;
    b[0] = 0;
    for (int l = 0; l < CTL_NLV && k < n; l++) {
        if (p->s.scored_at[l] == NONE) continue;
        char nm[24];
        k += (size_t)snprintf(b + k, n - k, "%s%s %.3g/s lag %.2f score %.3g+-%.2g", k ? ", " : "",
                              level_name(p, l, nm, sizeof nm), p->s.rate[l], p->s.lag[l], p->s.score[l],
                              rate_se(&p->s, l));
    }
}

/* Adds a measurement (x +- se within it, of ng gradients) of level l to its pool (inverse-variance
 * weights; a measurement with no spread at all weighs as one a millionth of its value wide). The
 * pool's standard error is the larger of the within one and the between one, the relative
 * variance between measurements over the measurements pooled. */
static void pool_add(struct ctl_state *s, int l, double x, double se, uint64_t ng) {
    double e = se > 1e-6 * x ? se : 1e-6 * x, w = e > 0 ? 1 / (e * e) : 0;
    int fresh = s->pool_k[l] == 0;
    s->pool_n[l] = (fresh ? 0 : s->pool_n[l]) + ng;
    s->pool_k[l] = (fresh ? 0 : s->pool_k[l]) + 1;
    s->pool_sx[l] = (fresh ? 0 : s->pool_sx[l]) + x;
    s->pool_sxx[l] = (fresh ? 0 : s->pool_sxx[l]) + x * x;
    s->last_x[l] = x;
    if (!(w > 0)) {
        s->score[l] = x;
        s->se_in[l] = se;
        s->pool_w[l] = 0;
    } else {
        double sum = fresh ? 0 : s->score[l] * s->pool_w[l];
        s->pool_w[l] = (fresh ? 0 : s->pool_w[l]) + w;
        s->score[l] = (sum + x * w) / s->pool_w[l];
        s->se_in[l] = 1 / sqrt(s->pool_w[l]);
    }
}

/* Forgets what was measured of level l (its conditions changed). The spread between measurements
 * is the machine's, not the level's: it is kept, without the `skip` latest measurements of l (the
 * ones that showed the change). */
static void level_drop(struct ctl_state *s, int l, int skip) {
    if (skip && s->pool_k[l] >= 1) {
        s->pool_k[l]--;
        s->pool_sx[l] -= s->last_x[l];
        s->pool_sxx[l] -= s->last_x[l] * s->last_x[l];
    }
    if (s->pool_k[l] >= 2) s->cv2_sum += pool_ss(s, l), s->cv2_n += s->pool_k[l] - 1;
    s->pool_w[l] = 0, s->pool_n[l] = 0, s->pool_k[l] = 0, s->pool_sx[l] = s->pool_sxx[l] = 0;
    s->last_x[l] = 0;
}

/* Whether measurement x (+- xse within it) of level l lies outside its pool's limits: Z standard
 * errors of the difference, the pool's taken as that of one measurement (the larger of its within
 * error and the spread between measurements), not of their mean over the k pooled: a machine's
 * drift makes consecutive measurements alike, so k of them are not k independent ones, and a
 * limit that narrows with k would read a slow drift as a change of conditions (test_rate's
 * `drift`). Returns the side (+1 above, -1 below, 0 inside or no pool). */
static int outside(const struct ctl_state *s, int l, double x, double xse) {
    uint32_t df;
    double c2 = cv2_df(s, &df);
    if (s->beyond && s->pool_k[l] >= 2) { /* the previous measurement, beyond, left out of the spread */
        const double y = s->last_x[l],
                     ss1 = rel_ss(s->pool_k[l] - 1, s->pool_sx[l] - y, s->pool_sxx[l] - y * y);
        df--;
        c2 = df ? (c2 * (df + 1) - pool_ss(s, l) + ss1) / df : 0;
    }
    const double xe = se_at(c2, x, xse), d = x - s->score[l], e = se_at(c2, s->score[l], s->se_in[l]);
    return s->pool_k[l] == 0 || fabs(d) <= zq(df) * sqrt(xe * xe + e * e) ? 0 : d > 0 ? 1 : -1;
}

/* The level with the highest score (point estimate) of those that can be chosen, or -1. */
static int top_score(const struct ctl_state *s) {
    int top = -1;
    for (int l = 0; l < CTL_NLV; l++)
        if (avail(s, l) && (top < 0 || s->score[l] > s->score[top])) top = l;
    return top;
}

/* The screen: whether the probe of level `to` can be skipped because the ranks' step times,
 * replayed under its rule (predict.c), score it below sync by Z standard errors of both -- the
 * test that ends a probe early, applied before the probe. The replay's error is taken as the
 * relative one of sync's pooled score (the same step times) or the spread between measurements,
 * whichever is larger. Only partial levels are screened, and only while sync scores best of the
 * levels measured: it never chooses between partial levels (why: docs/DESIGN.md#the-rate-rule). Needs
 * sync rounds measured (their overhead) and every rank's step times. xr: to's replayed score if
 * order_queue has just replayed it (< 0: not yet). Returns 1 (reason in why) if skipped. */
static int screen(ctl_policy_t *p, int to, double xr, char *why, size_t n) {
    struct ctl_state *s = &p->s;
    if (to == CTL_LV_SYNC || s->ovh_n < 2 || s->pool_k[CTL_LV_SYNC] == 0 || !(s->score[CTL_LV_SYNC] > 0) ||
        p->c.worth) /* worth=measured: the replay knows the step times, not the losses */
        return 0;
    const double x = xr >= 0 ? xr : rate_predict(p, to, sync_round_overhead(s));
    s->pred[to] = x;               /* reported also with screen=off */
    const int best = top_score(s); /* it acts only where sync scores best */
    if (!p->c.screen || !(x > 0) || best != CTL_LV_SYNC) return 0;
    uint32_t df;
    cv2_df(s, &df);
    const double rel = rate_se(s, CTL_LV_SYNC) / s->score[CTL_LV_SYNC], xe = meas_se(s, x, rel * x);
    if (!(x + zq(df) * xe < s->score[best] - zq(df) * rate_se(s, best))) return 0;
    s->screened |= 1 << to;
    p->st.screens++;
    char a[24], b[24];
    snprintf(why, n, "screen: %s replayed from the step times %.3g+-%.2g, below %s %.3g+-%.2g: not probed",
             level_name(p, to, a, sizeof a), x, xe, level_name(p, best, b, sizeof b), s->score[best],
             rate_se(s, best));
    return 1;
}

/* Orders the partial levels still to probe by their replayed scores, highest first (sync, never
 * replayed, keeps its place): the level likeliest to win is measured first, so that the probes of
 * the others can end early against it. Without replays the order stays least partial first.
 * x[l]: level l's replayed score, for the screen (< 0: not replayed here). */
static void order_queue(ctl_policy_t *p, double x[CTL_NLV]) {
    struct ctl_state *s = &p->s;
    for (int l = 0; l < CTL_NLV; l++) x[l] = -1;
    if (!p->c.screen || p->c.worth || s->ovh_n < 2) return;
    const double o = sync_round_overhead(s);
    for (int k = 0; k < s->nqueue; k++)
        if (s->queue[k] != CTL_LV_SYNC) x[s->queue[k]] = rate_predict(p, s->queue[k], o);
    for (int a = 1; a < s->nqueue; a++) /* insertion sort of the partial levels, stable */
        for (int b = a; b > 0 && s->queue[b - 1] != CTL_LV_SYNC && x[s->queue[b]] > x[s->queue[b - 1]]; b--) {
            int t = s->queue[b];
            s->queue[b] = s->queue[b - 1], s->queue[b - 1] = t;
        }
}

void rate_evaluate(ctl_policy_t *p, uint64_t rg, verdict_t *v) {
    struct ctl_state *s = &p->s;
    const ctl_policy_cfg_t *c = &p->c;
    double x, xse;
    uint64_t ng;
    int steps;
    if (!meas_close(p, rg, &x, &xse, &ng, &steps)) return;
    char a[24], b[24], sc[160];
    const int l = s->level;
    if (!s->phase) {
        /* settled: two measurements in a row on one side beyond the pool's limits mean the run's
         * conditions changed: everything measured before is forgotten and every level probed */
        const double before = s->score[l], bse = rate_se(s, l);
        const int side = outside(s, l, x, xse), scored = side && side == s->beyond, changed = scored || steps;
        s->beyond = changed ? 0 : side;
        if (changed) /* the previous measurement, beyond on this side too, goes with the pool */
            for (int k = 0; k < CTL_NLV; k++) level_drop(s, k, scored && k == l);
        pool_add(s, l, x, xse, ng);
        /* an unresolved choice kept for its higher point estimate: once its own measurements put
         * it below its rival's, that reason is gone and the contest is held now (an incumbent kept
         * below a rival that does not beat it waits for the contest's time) */
        const int behind =
            !changed && s->rival >= 0 && before >= s->score[s->rival] && s->score[l] < s->score[s->rival];
        if (!changed && !behind && s->grads < s->next_probe) return;
        const int contest = !changed && s->rival >= 0;
        if (contest)
            rival_queue(s);
        else
            rate_probe_all(s);
        if (changed) s->incumbent = -1; /* what it was chosen on no longer holds */
        snprintf(v->why, sizeof v->why, "%s: %s score %.3g+-%.2g, pooled before %.3g+-%.2g; probe: %s -> %s",
                 scored    ? "rate changed twice"
                 : steps   ? "step times changed twice"
                 : behind  ? "contest now, pooled below the rival"
                 : contest ? "contest due"
                           : "probe due",
                 level_name(p, l, a, sizeof a), x, meas_se(s, x, xse), before, bse,
                 level_name(p, l, a, sizeof a), level_name(p, s->queue[0], b, sizeof b));
    } else {
        /* probing: a level whose new measurement lies outside its pool's limits is measured under
         * other conditions than its pool was: the new one replaces it */
        if (outside(s, l, x, xse)) level_drop(s, l, 0);
        pool_add(s, l, x, xse, ng);
    }
    char scr[200] = "";
    double xr[CTL_NLV];
    order_queue(p, xr);
    while (s->nqueue > 0) { /* probing: measure the next level the screen does not skip */
        int to = s->queue[0];
        memmove(s->queue, s->queue + 1, (size_t)(--s->nqueue) * sizeof s->queue[0]);
        if (to == l) return; /* go on measuring the level in force */
        if (screen(p, to, xr[to], scr, sizeof scr)) continue;
        v->to = to;
        v->probe = 1;
        if (!v->why[0])
            snprintf(v->why, sizeof v->why, "%s%sprobe: %s score %.3g+-%.2g (%.3g/s, lag %.2f): %s -> %s",
                     scr, scr[0] ? "; " : "", level_name(p, l, a, sizeof a), s->score[l], rate_se(s, l),
                     s->rate[l], s->lag[l], level_name(p, l, a, sizeof a), level_name(p, v->to, b, sizeof b));
        return;
    }
    /* every level measured: keep the highest score (two levels the noise cannot tell apart cost
     * about the same), unless, after a later probe of every level, it does not beat the incumbent
     * (a settled choice changes only on a difference the noise cannot explain; a contest goes on
     * deciding the probe before it); confirming the incumbent doubles the probe interval */
    const int contest = s->contest > 0;
    int best = top_score(s), inc = s->incumbent;
    if (!contest && inc >= 0 && best != inc && avail(s, inc) && !beats(s, best, inc)) {
        best = inc; /* the best of the levels that beat the incumbent, else the incumbent */
        for (int k = 0; k < CTL_NLV; k++)
            if (k != inc && avail(s, k) && beats(s, k, inc) && (best == inc || s->score[k] > s->score[best]))
                best = k;
    }
    if (!contest) p->st.choices++;
    if (best != s->incumbent) p->st.choice_changes++;
    s->phase = 0;
    s->beyond = 0;
    const int runner = runner_up(s, best, 0);
    if (runner >= 0 && s->contest < CONTEST_MAX) {
        /* unresolved: the choice runs (its measurements keep adding to its pool) and the rival is
         * measured again once the choice has run for as long as the probing since the probe of
         * every level began (the contests take at most about half of the time, then a quarter),
         * or as soon as the choice's pooled score falls below the rival's */
        s->contest++;
        s->rival = runner;
        s->next_probe = s->grads + (s->grads - s->probe_from);
    } else {
        s->rival = -1;
        s->probe = best == s->incumbent ? backoff(s->probe, c->probe_max) : c->sync_probe;
        s->next_probe = s->grads + (uint64_t)s->probe * (uint64_t)p->P; /* probe sync rounds' worth */
    }
    if (best == l) return;
    scores_str(p, sc, sizeof sc);
    snprintf(v->why, sizeof v->why, "%s: %s -> %s%s", sc, level_name(p, l, a, sizeof a),
             level_name(p, best, b, sizeof b), s->rival >= 0 ? " (unresolved: contest due later)" : "");
    v->to = best;
}

void rate_switched(ctl_policy_t *p) { meas_reset(&p->s); }
