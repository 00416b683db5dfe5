/* rate.c -- the adaptive policy's rate rule (controller.h section 3a): it measures the gradients
 * per second each level delivers, in short probes of each level, and keeps the one that delivers
 * most after a discount for staleness. Pure: no MPI calls, no threads, no clocks, no globals.
 *
 * The only constants are the two confidence levels below, both dimensionless:
 *   Z_SWITCH = 2: a more partial level is chosen over a less partial one only if its score is
 *     higher by 2 standard errors (one-sided, about 98% confidence that it really is faster after
 *     the discount). Staler gradients are never taken on a difference the noise could explain.
 *   Z_CHANGE = 3: a settled choice is re-probed at once when a new measurement of it lies more than
 *     3 standard errors from the one it was chosen on (the usual control-chart limit: about one
 *     false alarm in 370 measurements), e.g. when a rank becomes slow in the middle of a run.
 * The other numbers are counts of the run's own events, not thresholds on what it measures:
 * `window` (deposits, and rounds in partial levels, per measurement), `probe` and `probe_max`
 * (sync rounds' worth of gradients between probes), and 2 deposits of every rank (the fewest a
 * spread can be estimated from). The worth of a stale gradient (key staleness) is a modelling
 * choice without a constant (worth() below). */
#include "controller/policy_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define Z_SWITCH 2.0
#define Z_CHANGE 3.0

/* Restarts the measurement: nothing counted, and every rank's next deposit is skipped (its cycle
 * began under another rule, or before this handle). */
static void meas_reset(struct ctl_state *s) {
    for (int i = 0; i < s->P; i++) {
        s->m.n[i] = 0;
        s->m.d[i] = s->m.d2[i] = s->m.l[i] = s->m.e[i] = s->m.e2[i] = 0;
        s->m.skip[i] = 1;
    }
    s->m.rounds = 0;
}

/* Queues a probe of every level other than the current one, least partial first. */
static void probe_queue(struct ctl_state *s) {
    const int order[NLV] = {LV_SYNC, LV_MAJ, LV_LIGHT};
    s->nqueue = 0;
    for (int k = 0; k < NLV; k++)
        if (order[k] != s->level) s->queue[s->nqueue++] = order[k];
    s->incumbent = s->phase ? -1 : s->level;
    s->phase = 1;
}

void rate_init(struct ctl_state *s, const ctl_policy_cfg_t *c) {
    (void)c;
    for (int l = 0; l < NLV; l++) {
        s->score[l] = s->se[l] = s->rate[l] = s->lag[l] = s->pool_w[l] = 0;
        s->pool_n[l] = 0;
        s->scored_at[l] = NONE;
    }
    for (int i = 0; i < s->P; i++) s->gsince[i] = 0;
    s->phase = 1; /* a run starts with a probe of every level */
    probe_queue(s);
    s->next_probe = 0;
    s->grads = 0;
    meas_reset(s);
}

void rate_start(struct ctl_state *s) {
    for (int i = 0; i < s->P; i++)
        s->gsince[i] = 0; /* every rank applied every round before the handle ended */
    meas_reset(s);
}

/* What a gradient lag sync steps old is worth, relative to a fresh one (staleness key):
 *   quadratic [default] 1 / (1 + lag^2): the drift of the weights a stale gradient misses grows
 *     with the square of its delay (the perturbed-iterate analyses of delayed SGD bound it by
 *     eta^2 tau^2 G^2), so a lag well under a sync step costs little and several cost much;
 *   linear 1 / (1 + lag): staleness-aware SGD's step scaling, a harsher view of small lags;
 *   bound 1: within the bound tau every gradient counts (what the convergence theorem needs).
 * The lag is in sync steps: dimensionless, 0 in sync, about (P-1)/P in solo with alike ranks. */
static double worth(ctl_staleness_t k, double lag) {
    return k == CTL_STALE_QUADRATIC ? 1 / (1 + lag * lag) : k == CTL_STALE_LINEAR ? 1 / (1 + lag) : 1;
}

/* Counts round rec into the measurement of the level in force. The cycle time a rank reports with
 * a deposit (pcoll_set_cost: the wall time since its previous deposit) is what the rule pays per
 * gradient in this level: compute, injected delay, waiting for the round, applying rounds. The
 * lag of a gradient is the number of gradients applied between the round its rank last took
 * part in and the round that takes it, in sync steps (units of the active ranks): 0 in sync. A
 * round in which a rank is not active (an epoch's tail) restarts the measurement. */
void rate_observe(ctl_policy_t *p, const pcoll_record_t *rec, int nactive) {
    struct ctl_state *s = &p->s;
    const int P = p->P;
    if (nactive < P) {
        meas_reset(s);
        for (int i = 0; i < P; i++) s->grads += rec->fresh[i];
        return;
    }
    uint32_t nf = 0;
    for (int i = 0; i < P; i++) nf += rec->fresh[i];
    s->grads += nf;
    if (s->base + rec->round >= s->mode_from) {
        s->m.rounds++;
        for (int i = 0; i < P; i++) {
            if (!rec->fresh[i]) continue;
            if (s->m.skip[i]) {
                s->m.skip[i] = 0;
                continue;
            }
            float v = rec->cost ? rec->cost[i] : 0.0f;
            if (!(v > 0) || !isfinite(v)) continue;
            double x = (double)v / rec->fresh[i], lag = (double)s->gsince[i] / P,
                   w = worth(p->c.staleness, lag);
            s->m.n[i] += rec->fresh[i];
            s->m.d[i] += v;
            s->m.d2[i] += rec->fresh[i] * x * x;
            s->m.l[i] += rec->fresh[i] * lag;
            s->m.e[i] += rec->fresh[i] * w;
            s->m.e2[i] += rec->fresh[i] * w * w;
        }
    }
    for (int i = 0; i < P; i++) s->gsince[i] = rec->fresh[i] ? 0 : s->gsince[i] + nf;
}

/* Score of the measurement so far (0 until every rank has 2 deposits in it). With r_p = n_p / d_p
 * (rank p's deposits per second of its own wall time) and w_p the mean worth of its gradients:
 *   rate  R = sum_p r_p                gradients per second
 *   score S = sum_p r_p w_p            fresh-gradient equivalents per second
 * Each rank's worth is weighted by its measured rate, not by how many of its deposits the sample
 * happened to catch (a slow rank's one or two deposits would otherwise swing it). Standard error:
 * the sum of the ranks' errors of r_p w_p (the bound for any correlation between them: in sync
 * every rank's cycle is the same round), from the spread of their cycle times and worths. */
static int meas_score(const ctl_policy_t *p, double *score, double *se) {
    const meas_t *m = &p->s.m;
    for (int i = 0; i < p->P; i++)
        if (m->n[i] < 2) return 0;
    double S = 0, err = 0;
    for (int i = 0; i < p->P; i++) {
        double n = m->n[i], mean = m->d[i] / n, r = 1.0 / mean, w = m->e[i] / n;
        double var_d = (m->d2[i] - n * mean * mean) / (n - 1), var_w = (m->e2[i] - n * w * w) / (n - 1);
        double se_r = var_d > 0 ? r * sqrt(var_d / n) / mean : 0, se_w = var_w > 0 ? sqrt(var_w / n) : 0;
        S += r * w;
        err += sqrt(se_r * w * se_r * w + r * se_w * r * se_w);
    }
    *score = S;
    *se = err;
    return 1;
}

/* The measurement is complete once it holds `window` deposits (and, in partial levels, `window`
 * rounds: they take a random set of ranks, e.g. a drawn initiator, and the draws must average
 * out; a sync round takes every rank). A probe of a level whose score is already below the best
 * level measured in this probe by Z_SWITCH standard errors of both ends early: it cannot be
 * chosen, and a bad level is the one whose probe is dear (a sync round waits for a straggler).
 * Closing records the rate and lag and restarts the counts (no skip: the next deposits belong to
 * the same level). Returns 1 with the score, its standard error and the gradients counted (*ng),
 * 0 while still measuring. */
static int meas_close(ctl_policy_t *p, uint64_t rg, double *score, double *se, uint64_t *ng) {
    struct ctl_state *s = &p->s;
    const meas_t *m = &s->m;
    if (!meas_score(p, score, se)) return 0;
    uint64_t total = 0;
    for (int i = 0; i < p->P; i++) total += m->n[i];
    int full = total >= (uint64_t)p->c.window && (s->level == LV_SYNC || m->rounds >= (uint32_t)p->c.window);
    if (!full && s->phase) {
        for (int l = 0; l < NLV && !full; l++) {
            if (l == s->level || s->scored_at[l] == NONE || s->pool_w[l] <= 0) continue;
            full = *score + Z_SWITCH * *se < s->score[l] - Z_SWITCH * s->se[l];
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
    for (int i = 0; i < p->P; i++)
        s->m.n[i] = 0, s->m.d[i] = s->m.d2[i] = s->m.l[i] = s->m.e[i] = s->m.e2[i] = 0;
    s->m.rounds = 0;
    return 1;
}

/* The least partial level whose score no more partial level beats by Z_SWITCH standard errors. */
static int choose(const struct ctl_state *s) {
    const int order[NLV] = {LV_SYNC, LV_MAJ, LV_LIGHT};
    int best = -1;
    for (int k = 0; k < NLV; k++) {
        int l = order[k];
        if (s->scored_at[l] == NONE) continue;
        if (best < 0 ||
            s->score[l] - s->score[best] > Z_SWITCH * sqrt(s->se[l] * s->se[l] + s->se[best] * s->se[best]))
            best = l;
    }
    return best;
}

static void scores_str(const ctl_policy_t *p, char *b, size_t n) {
    const int order[NLV] = {LV_SYNC, LV_MAJ, LV_LIGHT};
    size_t k = 0;
    b[0] = 0;
    for (int j = 0; j < NLV && k < n; j++) {
        int l = order[j];
        if (p->s.scored_at[l] == NONE) continue;
        char nm[24];
        k += (size_t)snprintf(b + k, n - k, "%s%s %.3g/s lag %.2f score %.3g+-%.2g", k ? ", " : "",
                              level_name(p, l, nm, sizeof nm), p->s.rate[l], p->s.lag[l], p->s.score[l],
                              p->s.se[l]);
    }
}

/* Adds a measurement (x +- se, of ng gradients) of level l to its pool (inverse-variance weights;
 * a measurement with no spread at all weighs as one a millionth of its value wide). */
static void pool_add(struct ctl_state *s, int l, double x, double se, uint64_t ng) {
    double e = se > 1e-6 * x ? se : 1e-6 * x, w = e > 0 ? 1 / (e * e) : 0;
    if (!(w > 0)) {
        s->score[l] = x;
        s->se[l] = se;
        s->pool_w[l] = 0;
        s->pool_n[l] = ng;
        return;
    }
    s->pool_n[l] = (s->pool_w[l] > 0 ? s->pool_n[l] : 0) + ng;
    double sum = s->score[l] * s->pool_w[l] + x * w;
    s->pool_w[l] += w;
    s->score[l] = sum / s->pool_w[l];
    s->se[l] = 1 / sqrt(s->pool_w[l]);
}

void rate_evaluate(ctl_policy_t *p, uint64_t rg, verdict_t *v) {
    struct ctl_state *s = &p->s;
    const ctl_policy_cfg_t *c = &p->c;
    double x, xse;
    uint64_t ng;
    if (!meas_close(p, rg, &x, &xse, &ng)) return;
    char a[24], b[24], sc[160];
    const int l = s->level;
    if (!s->phase) {
        /* settled: a measurement the pool of the chosen level cannot explain means the run's
         * conditions changed: everything measured before is forgotten and every level probed */
        const double before = s->score[l], d = x - before,
                     lim = Z_CHANGE * sqrt(xse * xse + s->se[l] * s->se[l]);
        if (fabs(d) > lim)
            for (int k = 0; k < NLV; k++) s->pool_w[k] = 0, s->pool_n[k] = 0;
        pool_add(s, l, x, xse, ng);
        if (fabs(d) <= lim && s->grads < s->next_probe) return;
        probe_queue(s);
        snprintf(v->why, sizeof v->why, "%s: %s score %.3g+-%.2g, pooled before %.3g; probe: %s -> %s",
                 fabs(d) > lim ? "rate changed" : "probe due", level_name(p, l, a, sizeof a), x, xse, before,
                 level_name(p, l, a, sizeof a), level_name(p, s->queue[0], b, sizeof b));
    } else {
        pool_add(s, l, x, xse, ng);
    }
    if (s->nqueue > 0) { /* probing: measure the next level */
        v->to = s->queue[0];
        v->probe = 1;
        memmove(s->queue, s->queue + 1, (size_t)(--s->nqueue) * sizeof s->queue[0]);
        if (!v->why[0])
            snprintf(v->why, sizeof v->why, "probe: %s score %.3g+-%.2g (%.3g/s, lag %.2f): %s -> %s",
                     level_name(p, l, a, sizeof a), s->score[l], s->se[l], s->rate[l], s->lag[l],
                     level_name(p, l, a, sizeof a), level_name(p, v->to, b, sizeof b));
        return;
    }
    /* every level measured: keep the best; confirming the incumbent doubles the probe interval */
    int best = choose(s);
    p->st.choices++;
    if (best != s->incumbent) p->st.choice_changes++;
    s->phase = 0;
    s->probe = best == s->incumbent ? backoff(s->probe, c->probe_max) : c->sync_probe;
    s->next_probe = s->grads + (uint64_t)s->probe * (uint64_t)p->P; /* probe sync rounds' worth */
    if (best == l) return;
    scores_str(p, sc, sizeof sc);
    snprintf(v->why, sizeof v->why, "%s: %s -> %s", sc, level_name(p, l, a, sizeof a),
             level_name(p, best, b, sizeof b));
    v->to = best;
}

void rate_switched(ctl_policy_t *p, int from, int to, int probe) {
    (void)from;
    (void)to;
    (void)probe;
    meas_reset(&p->s);
}
