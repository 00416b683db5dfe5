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
 *     false alarm in 370 measurements), e.g. when a rank becomes slow in the middle of a run. */
#include "controller/policy_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define Z_SWITCH 2.0
#define Z_CHANGE 3.0

/* Restarts the measurement: nothing counted, and every rank's next deposit is skipped (its cycle
 * began under another rule, or before this handle). */
static void meas_reset(struct ctl_state *s)
{
    for (int i = 0; i < s->P; i++) {
        s->m.n[i] = 0;
        s->m.d[i] = s->m.d2[i] = 0;
        s->m.skip[i] = 1;
    }
    s->m.lag_sum = 0;
    s->m.lag_n = 0;
}

/* Queues a probe of every level other than the current one, least partial first. */
static void probe_queue(struct ctl_state *s)
{
    const int order[NLV] = { LV_SYNC, LV_MAJ, LV_LIGHT };
    s->nqueue = 0;
    for (int k = 0; k < NLV; k++)
        if (order[k] != s->level) s->queue[s->nqueue++] = order[k];
    s->incumbent = s->phase ? -1 : s->level;
    s->phase = 1;
}

void rate_init(struct ctl_state *s, const ctl_policy_cfg_t *c)
{
    (void)c;
    for (int l = 0; l < NLV; l++) {
        s->score[l] = s->se[l] = s->rate[l] = s->lag[l] = 0;
        s->scored_at[l] = NONE;
    }
    for (int i = 0; i < s->P; i++) s->gsince[i] = 0;
    s->phase = 1;              /* a run starts with a probe of every level */
    probe_queue(s);
    s->ref = s->ref_se = 0;
    s->next_probe = 0;
    meas_reset(s);
}

void rate_start(struct ctl_state *s)
{
    for (int i = 0; i < s->P; i++) s->gsince[i] = 0;   /* every rank applied every round before the handle ended */
    meas_reset(s);
}

/* Counts round rec into the measurement of the level in force. The cycle time a rank reports with
 * a deposit (pcoll_set_cost: the wall time since its previous deposit) is what the rule pays per
 * gradient in this level: compute, injected delay, waiting for the round, applying rounds. The
 * lag of a gradient is the number of gradients applied between the round its rank last took
 * part in and the round that takes it, in sync steps (units of the active ranks): 0 in sync. A
 * round in which a rank is not active (an epoch's tail) restarts the measurement. */
void rate_observe(ctl_policy_t *p, const pcoll_record_t *rec, int nactive)
{
    struct ctl_state *s = &p->s;
    const int P = p->P;
    if (nactive < P) { meas_reset(s); return; }
    uint32_t nf = 0;
    for (int i = 0; i < P; i++) nf += rec->fresh[i];
    if (s->base + rec->round >= s->mode_from) {
        for (int i = 0; i < P; i++) {
            if (!rec->fresh[i]) continue;
            if (s->m.skip[i]) { s->m.skip[i] = 0; continue; }
            float v = rec->cost ? rec->cost[i] : 0.0f;
            if (!(v > 0) || !isfinite(v)) continue;
            double x = (double)v / rec->fresh[i];
            s->m.n[i] += rec->fresh[i];
            s->m.d[i] += v;
            s->m.d2[i] += rec->fresh[i] * x * x;
            s->m.lag_sum += rec->fresh[i] * (double)s->gsince[i] / P;
            s->m.lag_n += rec->fresh[i];
        }
    }
    for (int i = 0; i < P; i++) s->gsince[i] = rec->fresh[i] ? 0 : s->gsince[i] + nf;
}

/* Closes the measurement once it holds `window` deposits and at least 2 of every rank: scores the
 * level in force. Returns 0 if it is not complete yet.
 *   rate  R = sum_p n_p / d_p        (every rank's deposits per second of its own wall time)
 *   score S = R / (1 + lag)          (staleness=weight: a gradient lag sync steps old counts as
 *                                     1/(1+lag) of a fresh one, as staleness-aware SGD scales its
 *                                     step; staleness=bound: S = R, the bound tau is trusted)
 *   se      = sum_p SE(n_p / d_p) / (1 + lag): the sum of the ranks' standard errors, the bound
 *             for any correlation between them (in sync every rank's cycle is the same round). */
static int meas_close(ctl_policy_t *p, uint64_t rg)
{
    struct ctl_state *s = &p->s;
    uint64_t total = 0;
    for (int i = 0; i < p->P; i++) {
        if (s->m.n[i] < 2) return 0;
        total += s->m.n[i];
    }
    if (total < (uint64_t)p->c.window) return 0;
    double R = 0, se = 0;
    for (int i = 0; i < p->P; i++) {
        double n = s->m.n[i], mean = s->m.d[i] / n;
        double var = (s->m.d2[i] - n * mean * mean) / (n - 1);
        double r = 1.0 / mean;
        R += r;
        se += var > 0 ? r * sqrt(var) / mean / sqrt(n) : 0;
    }
    double lag = s->m.lag_n ? s->m.lag_sum / (double)s->m.lag_n : 0;
    double w = p->c.staleness == CTL_STALE_WEIGHT ? 1.0 / (1.0 + lag) : 1.0;
    const int l = s->level;
    s->rate[l] = R;
    s->lag[l] = lag;
    s->score[l] = R * w;
    s->se[l] = se * w;
    s->scored_at[l] = rg;
    for (int i = 0; i < p->P; i++) {   /* the next measurement of the same level: no skip needed */
        s->m.n[i] = 0;
        s->m.d[i] = s->m.d2[i] = 0;
    }
    s->m.lag_sum = 0;
    s->m.lag_n = 0;
    return 1;
}

/* The least partial level whose score no more partial level beats by Z_SWITCH standard errors. */
static int choose(const struct ctl_state *s)
{
    const int order[NLV] = { LV_SYNC, LV_MAJ, LV_LIGHT };
    int best = -1;
    for (int k = 0; k < NLV; k++) {
        int l = order[k];
        if (s->scored_at[l] == NONE) continue;
        if (best < 0 || s->score[l] - s->score[best] > Z_SWITCH * sqrt(s->se[l] * s->se[l] + s->se[best] * s->se[best]))
            best = l;
    }
    return best;
}

static void scores_str(const ctl_policy_t *p, char *b, size_t n)
{
    const int order[NLV] = { LV_SYNC, LV_MAJ, LV_LIGHT };
    size_t k = 0;
    b[0] = 0;
    for (int j = 0; j < NLV && k < n; j++) {
        int l = order[j];
        if (p->s.scored_at[l] == NONE) continue;
        char nm[24];
        k += (size_t)snprintf(b + k, n - k, "%s%s %.3g/s lag %.2f score %.3g+-%.2g", k ? ", " : "",
                              level_name(p, l, nm, sizeof nm), p->s.rate[l], p->s.lag[l], p->s.score[l], p->s.se[l]);
    }
}

void rate_evaluate(ctl_policy_t *p, uint64_t rg, verdict_t *v)
{
    struct ctl_state *s = &p->s;
    const ctl_policy_cfg_t *c = &p->c;
    if (!meas_close(p, rg)) return;
    char a[24], b[24], sc[160];
    const int l = s->level;
    if (!s->phase) {
        double d = s->score[l] - s->ref, lim = Z_CHANGE * sqrt(s->se[l] * s->se[l] + s->ref_se * s->ref_se);
        if (fabs(d) <= lim && rg < s->next_probe) return;
        probe_queue(s);
        snprintf(v->why, sizeof v->why, "%s: %s score %.3g, chosen at %.3g+-%.2g; probe: %s -> %s",
                 fabs(d) > lim ? "rate changed" : "probe due", level_name(p, l, a, sizeof a), s->score[l], s->ref,
                 s->ref_se, level_name(p, l, a, sizeof a), level_name(p, s->queue[0], b, sizeof b));
    }
    if (s->nqueue > 0) {   /* probing: measure the next level */
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
    s->phase = 0;
    s->ref = s->score[best];
    s->ref_se = s->se[best];
    s->probe = best == s->incumbent ? backoff(s->probe, c->probe_max) : c->sync_probe;
    s->next_probe = rg + (uint64_t)s->probe;
    if (best == l) return;
    scores_str(p, sc, sizeof sc);
    snprintf(v->why, sizeof v->why, "%s: %s -> %s", sc, level_name(p, l, a, sizeof a), level_name(p, best, b, sizeof b));
    v->to = best;
}

void rate_switched(ctl_policy_t *p, int from, int to, int probe)
{
    (void)from; (void)to; (void)probe;
    meas_reset(&p->s);
}
