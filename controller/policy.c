/* policy.c -- the controller's deterministic policy (see controller.h for the rules).
 * Pure: no MPI calls, no threads, no clocks, no globals. */
#include "common/hash.h"
#include "controller/policy_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- lifecycle */

/* A policy for one handle, with its carried state taken from `from` (NULL: a fresh state). */
static ctl_policy_t *policy_new(const ctl_policy_cfg_t *c, int P, const struct ctl_state *from) {
    if (ctl_policy_check(c, NULL, 0) || P < 1 || P > PCOLL_MAX_RANKS) return NULL;
    ctl_policy_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->c = *c;
    p->c.base.wait = NULL;
    p->P = P;
    p->wait = calloc(P, sizeof(int));
    p->old_wait = calloc(P, sizeof(int));
    p->tmp = calloc(P, sizeof(int));
    p->tau_next = calloc(P, sizeof(int));
    p->last_wait = malloc(P * sizeof(uint64_t));
    int bad = !p->wait || !p->old_wait || !p->tmp || !p->tau_next || !p->last_wait;
    if (!bad) bad = from ? state_copy(&p->s, from) : state_alloc(&p->s, P, c->window, c->cost_n);
    if (bad) {
        ctl_policy_free(p);
        return NULL;
    }
    for (int i = 0; i < P; i++) p->last_wait[i] = NONE;
    if (c->base.mode == PCOLL_SOLO || c->base.mode == PCOLL_QUORUM) {
        p->light = c->base;
        if (p->light.mode == PCOLL_SOLO) p->light.quorum = 1;
    } else {
        p->light.mode = PCOLL_SOLO;
        p->light.quorum = 1;
    }
    p->light.nwait = 0;
    p->light.wait = NULL;
    if (!from) state_init(&p->s, c);
    p->hash = HASH_FNV1A64_INIT;
    p->st.gain_min = p->st.gain_max = NAN;
    return p;
}

ctl_policy_t *ctl_policy_new(const ctl_policy_cfg_t *c, int P) { return policy_new(c, P, NULL); }

ctl_policy_t *ctl_policy_resume(const ctl_policy_cfg_t *c, int P, const ctl_state_t *st, char *err,
                                size_t n) {
    if (err && n) err[0] = 0;
    if (!st) return (void)policy_fail(err, n, "controller state is NULL"), NULL;
    if (ctl_policy_check(c, err, n)) return NULL;
    if (c->kind != CTL_ADAPTIVE)
        return (void)policy_fail(err, n, "a controller state resumes only an adaptive policy"), NULL;
    if (st->P != P || st->window != c->window || st->cost_n != c->cost_n)
        return (void)policy_fail(err, n,
                                 "controller state is for P=%d, window=%d, cost_n=%d; this run has P=%d, "
                                 "window=%d, cost_n=%d",
                                 st->P, st->window, st->cost_n, P, c->window, c->cost_n),
               NULL;
    ctl_policy_t *p = policy_new(c, P, st);
    if (!p) return (void)policy_fail(err, n, "out of memory"), NULL;
    /* the new handle's rounds 0 .. lag-1 run the latest decided rule: a change decided in the
     * old handle's last rounds is in effect from the new handle's first round */
    struct ctl_state *s = &p->s;
    if (s->mode_from > s->base) s->mode_from = s->base;
    rate_start(s);
    return p;
}

int ctl_state_continue(const void *buf, size_t len, int saved_P, const ctl_policy_cfg_t *c, int P,
                       ctl_state_t **out, int *resized, char *err, size_t n) {
    ctl_state_t *st = NULL;
    *out = NULL, *resized = 0;
    if (ctl_state_load(buf, len, &st, err, n) != CTL_OK) return CTL_ERR_ARG;
    if (saved_P != P) {
        ctl_state_t *to = ctl_state_resize(st, P);
        ctl_state_free(st);
        if (!to) return (void)policy_fail(err, n, "out of memory (controller state)"), CTL_ERR_NOMEM;
        st = to, *resized = 1;
    }
    ctl_policy_t *p = ctl_policy_resume(c, P, st, err, n);
    if (!p) return ctl_state_free(st), CTL_ERR_STATE;
    ctl_policy_free(p);
    *out = st;
    return CTL_OK;
}

void ctl_policy_free(ctl_policy_t *p) {
    if (!p) return;
    free(p->wait);
    free(p->old_wait);
    free(p->tmp);
    free(p->tau_next);
    free(p->last_wait);
    state_free(&p->s);
    free(p);
}

const ctl_policy_cfg_t *ctl_policy_cfg(const ctl_policy_t *p) { return &p->c; }

void ctl_policy_initial(const ctl_policy_t *p, pcoll_rule_t *rule) { level_rule(p, p->s.level, rule); }

uint64_t ctl_policy_rule(const ctl_policy_t *p, pcoll_rule_t *rule) {
    level_rule(p, p->s.level, rule);
    rule->nwait = p->nwait;
    rule->wait = p->nwait ? p->wait : NULL;
    return p->rule_from;
}

/* ---------------------------------------------------------------- observe, step by step */

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Per-round row of the window over active ranks, and the natural streaks. A rank fresh because
 * the rule forced it (sync, majority initiator, wait set incl. tau) tells nothing about its speed:
 * its natural streak is left unchanged; it resets only on an unforced fresh round. It is NOT reset
 * at a mode change: that would cap L at about (window/2) * Fn in the first window of a new mode
 * and invite an immediate exit; a rank that recovered shows it by its next unforced fresh round. */
static wrow_t count_round(ctl_policy_t *p, const pcoll_record_t *rec) {
    wrow_t row = {0, 0, 0, 0, 0, 0, 0};
    uint32_t *ns = p->s.ns;
    for (int i = 0; i < p->P; i++) {
        if (!rec_active(rec, i)) continue;
        int forced = rec->mode == PCOLL_SYNC || rec->initiator == i || (rec->waited && rec->waited[i]);
        row.active++;
        if (rec->fresh[i]) row.fresh++;
        if (rec->streak[i] > row.max) row.max = rec->streak[i];
        if (!forced) {
            row.nfree++;
            if (rec->fresh[i]) {
                row.nfresh++;
                ns[i] = 0;
            } else
                ns[i]++;
        } else if (!rec->fresh[i]) {
            ns[i]++;
        }
        if (ns[i] > row.nmax) row.nmax = ns[i];
    }
    if (row.max > p->st.max_streak) p->st.max_streak = row.max;
    return row;
}

/* Keeps the step times of each rank's latest deposits (a merged deposit reports the sum of its
 * steps' times; unreported, zero, negative or non-finite times are skipped). */
static void record_costs(struct ctl_state *s, const pcoll_record_t *rec, int adaptive) {
    const int N = s->cost_n;
    /* step times: adaptive policies report cycle times as costs and the step times beside them,
     * static ones step times as costs (ctl_step_cost) */
    const float *c = adaptive && rec->step ? rec->step : rec->cost;
    for (int i = 0; i < s->P; i++) {
        s->act[i] = (uint8_t)rec_active(rec, i);
        float v = c ? c[i] : 0.0f;
        if (!rec->fresh[i] || !(v > 0) || !isfinite(v)) continue;
        s->cost[(size_t)i * N + s->cost_pos[i]] = v / (float)rec->fresh[i];
        s->cost_pos[i] = (s->cost_pos[i] + 1) % N;
        if (s->cost_cnt[i] < N) s->cost_cnt[i]++;
        s->cost_seen = 1;
    }
}

/* tau: checks the record against the bound and the library's wait set, computes the library wait
 * set of the next round. Returns 1 if tau forced a wait in this round. */
static uint8_t track_tau(ctl_policy_t *p, const pcoll_record_t *rec) {
    const int tau = p->c.tau, P = p->P;
    if (tau <= 0) return 0;
    uint8_t forced = 0;
    if (p->c.tau_by == CTL_TAU_LIBRARY) {
        for (int k = 0; k < p->ntau_next; k++) {
            int i = p->tau_next[k];
            if (rec_active(rec, i) && !rec->fresh[i]) p->st.tau_misses++;
        }
        forced = p->ntau_next > 0;
    } else {
        for (int i = 0; i < P && !forced; i++) forced = p->last_wait[i] == rec->round;
    }
    p->ntau_next = 0;
    for (int i = 0; i < P; i++) {
        if (!rec_active(rec, i)) continue;
        if (rec->streak[i] > (uint32_t)tau) p->st.tau_violations++;
        if (pcoll_must_wait(rec->streak[i], tau)) p->tau_next[p->ntau_next++] = i;
    }
    if (p->c.tau_by == CTL_TAU_LIBRARY) p->st.tau_waits += p->ntau_next;
    return forced;
}

/* tau_by=policy: the wait set of round r + lag (into p->tmp); returns its size, reason in why. */
static int policy_wait_set(ctl_policy_t *p, const pcoll_record_t *rec, int level, char *why, size_t n) {
    const ctl_policy_cfg_t *c = &p->c;
    if (c->tau <= 0 || c->tau_by != CTL_TAU_POLICY || level == CTL_LV_SYNC ||
        (c->kind == CTL_STATIC && c->base.mode == PCOLL_SYNC))
        return 0;
    uint32_t thr = (uint32_t)(c->tau - c->lag + 1);
    int nw = 0;
    for (int i = 0; i < p->P; i++) {
        if (!rec_active(rec, i) || rec->streak[i] < thr) continue;
        if (p->last_wait[i] != NONE && p->last_wait[i] > rec->round) continue; /* already waited in (r, e) */
        p->tmp[nw++] = i;
    }
    if (nw) {
        int k = snprintf(why, n, "streak >= tau-lag+1 = %u: wait for", thr);
        for (int j = 0; j < nw && k < (int)n - 12; j++) k += snprintf(why + k, n - k, " %d", p->tmp[j]);
        if (k >= (int)n - 12) snprintf(why + n - 5, 5, "...");
    }
    return nw;
}

/* v's 8 bytes, least significant first, into the FNV-1a hash *h (the same on any byte order) */
static void fnv(uint64_t *h, uint64_t v) {
    for (int i = 0; i < 8; i++) *h = hash_fnv1a64_word(*h, (v >> (8 * i)) & 0xff);
}

static void hash_decision(uint64_t *h, uint64_t r, uint64_t e, int what, const pcoll_rule_t *nr) {
    fnv(h, r);
    fnv(h, e);
    fnv(h, (uint64_t)what);
    fnv(h, (uint64_t)nr->mode);
    fnv(h, (uint64_t)(nr->mode == PCOLL_QUORUM ? nr->quorum : 0));
    fnv(h, (uint64_t)nr->nwait);
    for (int j = 0; j < nr->nwait; j++) fnv(h, (uint64_t)nr->wait[j]);
}

/* The gain's range and mean over the rounds where it was defined. */
static void note_gain(ctl_policy_stats_t *st, double gain) {
    if (isnan(gain)) return;
    if (st->gain_n == 0 || gain < st->gain_min) st->gain_min = gain;
    if (st->gain_n == 0 || gain > st->gain_max) st->gain_max = gain;
    st->gain_sum += gain;
    st->gain_n++;
}

/* The decision made observing round r (what: CTL_DEC_* bits; level verdict v, wait set p->tmp[0..nw)):
 * switch bookkeeping, the new rule, the hash, and *out (old rule: a copy of the wait set, so the
 * caller sees it after it is overwritten). */
static void commit(ctl_policy_t *p, uint64_t r, int what, const verdict_t *v, int nw, const sig_t *g,
                   const char *wwhy, ctl_decision_t *out) {
    struct ctl_state *s = &p->s;
    const uint64_t e = r + (uint64_t)p->c.lag, eg = s->base + e;
    pcoll_rule_t oldr, newr;
    level_rule(p, s->level, &oldr);
    memcpy(p->old_wait, p->wait, p->nwait * sizeof(int));
    p->old_nwait = p->nwait;
    oldr.nwait = p->old_nwait;
    oldr.wait = p->old_nwait ? p->old_wait : NULL;
    qsort(p->tmp, nw, sizeof(int), cmp_int);
    memcpy(p->wait, p->tmp, nw * sizeof(int));
    p->nwait = nw;
    if (what & CTL_DEC_MODE) {
        rate_switched(p);
        if (v->probe) p->st.probes++;
        s->level = v->to;
        s->mode_from = eg;
        window_reset(s);
        p->st.mode_switches++;
    }
    if (what & CTL_DEC_WAIT) p->st.wait_changes++;
    p->st.decisions++;
    p->rule_from = e; /* wait-only decisions do not restart the window */
    level_rule(p, s->level, &newr);
    newr.nwait = p->nwait;
    newr.wait = p->nwait ? p->wait : NULL;
    hash_decision(&p->hash, r, e, what, &newr);
    if (!out) return;
    memset(out, 0, sizeof *out);
    out->round = r;
    out->effective = e;
    out->what = what;
    out->old_rule = oldr;
    out->new_rule = newr;
    out->L = g->L;
    out->A = g->A;
    out->F = g->F;
    out->T = g->T;
    out->gain = g->gain;
    if ((what & CTL_DEC_MODE) && nw)
        snprintf(out->reason, sizeof out->reason, "%s; %s", v->why, wwhy);
    else if (what & CTL_DEC_MODE)
        snprintf(out->reason, sizeof out->reason, "%s", v->why);
    else if (nw)
        snprintf(out->reason, sizeof out->reason, "%s", wwhy);
    else
        snprintf(out->reason, sizeof out->reason, "wait set cleared");
}

int ctl_policy_observe(ctl_policy_t *p, const pcoll_record_t *rec, ctl_decision_t *out) {
    if (!p || !rec) return CTL_ERR_ARG;
    if (rec->P != p->P || rec->round != p->next) return CTL_ERR_ORDER;
    if (!rec->fresh || !rec->flags || !rec->streak) return CTL_ERR_ARG;
    const ctl_policy_cfg_t *c = &p->c;
    struct ctl_state *s = &p->s;
    const uint64_t r = rec->round, rg = s->base + r; /* local and global round */
    const uint64_t e = r + (uint64_t)c->lag;

    /* 1. what the round says: window row, step times, tau, rate measurement */
    const int adaptive = c->kind == CTL_ADAPTIVE;
    wrow_t row = count_round(p, rec);
    record_costs(s, rec, adaptive);
    row.tau = track_tau(p, rec);
    if (rg >= s->mode_from && row.active > 0) window_push(s, &row);
    sig_t g = signals(s);
    if (adaptive) g.gain = NAN; /* reported for static policies only: the rate rule does not read it */
    note_gain(&p->st, g.gain);
    if (adaptive) rate_observe(p, rec, (int)row.active);

    /* 2. the level */
    verdict_t v = {s->level, 0, ""};
    if (adaptive && rg >= s->mode_from && row.active > 0) rate_evaluate(p, rg, &v);

    /* 3. the wait set (tau_by=policy) */
    char wwhy[96] = "";
    int nw = policy_wait_set(p, rec, v.to, wwhy, sizeof wwhy);
    int what = 0;
    if (v.to != s->level) what |= CTL_DEC_MODE | (v.probe ? CTL_DEC_PROBE : 0);
    if (nw != p->nwait || memcmp(p->tmp, p->wait, nw * sizeof(int))) what |= CTL_DEC_WAIT;
    for (int j = 0; j < nw; j++) p->last_wait[p->tmp[j]] = e;
    if (c->tau > 0 && c->tau_by == CTL_TAU_POLICY) p->st.tau_waits += nw;
    p->next = r + 1;
    p->st.rounds++;
    p->st.lv_rounds[level_of_mode(rec->mode)]++;
    if (!what) return 0;

    commit(p, r, what, &v, nw, &g, wwhy, out);
    return 1;
}

int ctl_policy_tau_wait(const ctl_policy_t *p, uint64_t *round, int *ranks, int max) {
    if (round) *round = p->next;
    if (p->c.tau <= 0 || p->st.rounds == 0) return 0;
    for (int k = 0; k < p->ntau_next && k < max; k++) ranks[k] = p->tau_next[k];
    return p->ntau_next;
}

void ctl_policy_stats(const ctl_policy_t *p, ctl_policy_stats_t *st) {
    const struct ctl_state *s = &p->s;
    *st = p->st;
    pcoll_rule_t r;
    level_rule(p, s->level, &r);
    st->mode = r.mode;
    st->quorum = r.quorum;
    st->mode_from = s->mode_from > s->base ? s->mode_from - s->base : 0;
    st->probe = s->probe;
    st->window_fill = s->w_len;
    sig_t g = signals(s);
    st->L = g.L;
    st->A = g.A;
    st->F = g.F;
    st->T = g.T;
    st->gain = p->c.kind == CTL_ADAPTIVE ? NAN : g.gain;
    int chosen = s->phase ? s->incumbent : s->level;
    st->kind = p->c.kind;
    st->light_quorum = p->light.mode == PCOLL_QUORUM ? p->light.quorum : 0;
    const int adaptive = p->c.kind == CTL_ADAPTIVE;
    st->choice = adaptive ? chosen : -1;
    st->rival = adaptive && !s->phase ? s->rival : -1;
    st->probing = adaptive && s->phase;
    for (int lv = 0; lv < CTL_NLV; lv++) {
        int ok = s->scored_at[lv] != NONE;
        st->rate[lv] = ok ? s->rate[lv] : NAN;
        st->lag[lv] = ok ? s->lag[lv] : NAN;
        st->score[lv] = ok ? s->score[lv] : NAN;
        st->score_se[lv] = ok ? rate_se(s, lv) : NAN;
        st->samples[lv] = ok ? s->pool_n[lv] : 0;
        st->predicted[lv] = s->pred[lv] > 0 ? s->pred[lv] : NAN;
    }
}

uint64_t ctl_policy_hash(const ctl_policy_t *p) { return p->hash; }
