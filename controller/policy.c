/* policy.c -- the controller's deterministic policy (see controller.h for the rules).
 * Pure: no MPI calls, no threads, no clocks, no globals. */
#include "controller/controller.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT64_MAX

enum { LV_LIGHT = 0, LV_MAJ = 1, LV_SYNC = 2 };

struct ctl_policy {
    ctl_policy_cfg_t c;
    int P;
    uint64_t next;              /* next round expected */
    pcoll_rule_t light;         /* LIGHT level rule (solo or quorum) */

    /* latest decided rule */
    int level;
    int prev_level;             /* level before the last mode switch (-1: none) */
    uint64_t mode_from;         /* effective round of the latest mode change */
    uint64_t rule_from;         /* effective round of the latest decision (0: none) */
    int *wait, nwait;           /* latest decided wait set (sorted) */
    int *old_wait, old_nwait;   /* copy handed out in the last decision's old_rule */
    int *tmp;                   /* scratch: wait set under construction */

    /* window over rounds >= mode_from */
    uint32_t *w_max, *w_fresh, *w_active, *w_nmax, *w_nfresh, *w_nfree;
    uint8_t *w_tau;
    int w_len, w_pos;
    uint64_t s_max, s_fresh, s_active, s_nmax, s_nfresh, s_nfree, s_tau;
    uint32_t *ns;               /* natural streak per rank (rounds since fresh without being forced) */

    /* step times (rec->cost) of the last cost_n deposits of each rank, for G; kept across modes */
    float *cost;                /* [P][cost_n] ring */
    int *cost_cnt;              /* [P] step times pushed (saturates at cost_n) */
    int *cost_pos;              /* [P] next ring slot */
    uint8_t *act;               /* [P] active in the latest record */
    int cost_seen;              /* some rank has reported a step time */

    /* tau */
    int *tau_next, ntau_next;   /* library tau wait set of round `next` */
    uint64_t *last_wait;        /* tau_by=policy: last round with p in a policy wait set */

    int dwell, probe;
    uint64_t probe_at;          /* effective round of the pending probe, or NONE */
    int lprobe;                 /* LIGHT probe interval (light_fresh) */
    uint64_t lblock;            /* no return to LIGHT before this effective round (0: none) */
    uint64_t lprobe_at;         /* effective round of the latest return to LIGHT, or NONE */

    uint64_t hash;
    ctl_policy_stats_t st;
};

/* ---------------------------------------------------------------- config */

void ctl_policy_default(ctl_policy_cfg_t *c)
{
    memset(c, 0, sizeof *c);
    c->kind = CTL_ADAPTIVE;
    c->base.mode = PCOLL_SOLO;
    c->base.quorum = 1;
    c->tau = 0;
    c->tau_by = CTL_TAU_LIBRARY;
    c->lag = 2;
    c->window = 32;
    c->min_dwell = 32;
    c->max_dwell = 1024;
    c->maj_enter = 4.0;
    c->maj_exit = 2.0;
    c->wait_enter = 0.10;
    c->wait_exit = 0.02;
    c->sync_fresh = 0.20;
    c->sync_streak = 8.0;
    c->sync_wait = 0.50;
    c->sync_probe = 256;
    c->probe_max = 4096;
    c->light_fresh = 0.0;
    c->pay_enter = 1.5;
    c->pay_exit = 1.3;
    c->cost_n = 32;
}

static int fail(char *err, size_t n, const char *fmt, ...)
{
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return CTL_ERR_ARG;
}

int ctl_policy_check(const ctl_policy_cfg_t *c, char *err, size_t n)
{
    if (!c) return fail(err, n, "policy config is NULL");
    if (c->kind != CTL_STATIC && c->kind != CTL_ADAPTIVE) return fail(err, n, "bad policy kind %d", c->kind);
    if (c->base.mode < PCOLL_SYNC || c->base.mode > PCOLL_QUORUM)
        return fail(err, n, "bad base mode %d", (int)c->base.mode);
    if (c->base.mode == PCOLL_QUORUM && (c->base.quorum < 1 || c->base.quorum > PCOLL_MAX_RANKS))
        return fail(err, n, "quorum %d out of range 1..%d", c->base.quorum, PCOLL_MAX_RANKS);
    if (c->base.nwait != 0) return fail(err, n, "base rule must have an empty wait set (nwait=%d)", c->base.nwait);
    if (c->tau < 0 || c->tau > 1000000) return fail(err, n, "tau=%d out of range 0..1000000", c->tau);
    if (c->tau_by != CTL_TAU_LIBRARY && c->tau_by != CTL_TAU_POLICY) return fail(err, n, "bad tau_by %d", c->tau_by);
    if (c->lag < 1 || c->lag > 1000000) return fail(err, n, "lag=%d out of range 1..1000000", c->lag);
    if (c->tau_by == CTL_TAU_POLICY && c->tau > 0 && c->tau < c->lag)
        return fail(err, n, "tau_by=policy needs tau >= lag (tau=%d, lag=%d)", c->tau, c->lag);
    if (c->window < 1 || c->window > 65536) return fail(err, n, "window=%d out of range 1..65536", c->window);
    if (c->min_dwell < 1) return fail(err, n, "dwell=%d must be >= 1", c->min_dwell);
    if (c->max_dwell < c->min_dwell || c->max_dwell > (1 << 30))
        return fail(err, n, "max_dwell=%d must be >= dwell=%d", c->max_dwell, c->min_dwell);
    if (!(c->maj_enter > 0) || !(c->maj_exit >= 0) || !(c->maj_exit < c->maj_enter))
        return fail(err, n, "need 0 <= maj_exit < maj_enter (maj_exit=%g, maj_enter=%g)", c->maj_exit, c->maj_enter);
    if (!(c->wait_enter > 0) || !(c->wait_exit >= 0) || !(c->wait_exit < c->wait_enter))
        return fail(err, n, "need 0 <= wait_exit < wait_enter (wait_exit=%g, wait_enter=%g)", c->wait_exit, c->wait_enter);
    if (!(c->sync_fresh >= 0 && c->sync_fresh < 1)) return fail(err, n, "sync_fresh=%g out of range [0,1)", c->sync_fresh);
    if (!(c->sync_streak > 0)) return fail(err, n, "sync_streak=%g must be > 0", c->sync_streak);
    if (!(c->sync_wait > c->wait_exit && c->sync_wait <= 1))
        return fail(err, n, "sync_wait=%g must be in (wait_exit, 1]", c->sync_wait);
    if (!(c->light_fresh >= 0 && c->light_fresh < 1)) return fail(err, n, "light_fresh=%g out of range [0,1)", c->light_fresh);
    if (c->light_block < 0 || c->light_probe < 0 || c->light_probe > (1 << 30))
        return fail(err, n, "light_block=%d and light_probe=%d must be >= 0", c->light_block, c->light_probe);
    if (c->sync_held < 0 || c->probe_start < 0 || c->probe_start > c->probe_max)
        return fail(err, n, "sync_held=%d must be >= 0 and probe_start=%d in [0, probe_max=%d]", c->sync_held,
                    c->probe_start, c->probe_max);
    if (c->sync_probe < 1 || c->probe_max < c->sync_probe || c->probe_max > (1 << 30))
        return fail(err, n, "need 1 <= probe=%d <= probe_max=%d", c->sync_probe, c->probe_max);
    if (!(c->pay_enter >= 0 && c->pay_enter <= 100) || !(c->pay_exit > 0 && c->pay_exit <= 100))
        return fail(err, n, "need pay_enter=%g in [0, 100] (0: off) and pay_exit=%g in (0, 100]",
                    c->pay_enter, c->pay_exit);
    if (c->cost_n < 2 || c->cost_n > 1024) return fail(err, n, "cost_n=%d out of range 2..1024", c->cost_n);
    return CTL_OK;
}

static int parse_rule(const char *s, pcoll_rule_t *r)
{
    memset(r, 0, sizeof *r);
    if (!strcmp(s, "solo")) { r->mode = PCOLL_SOLO; r->quorum = 1; return 0; }
    if (!strcmp(s, "majority")) { r->mode = PCOLL_MAJORITY; return 0; }
    if (!strcmp(s, "sync")) { r->mode = PCOLL_SYNC; return 0; }
    if (!strncmp(s, "quorum:", 7)) {
        char *end;
        errno = 0;
        long q = strtol(s + 7, &end, 10);
        if (errno || end == s + 7 || *end || q < 1 || q > PCOLL_MAX_RANKS) return -1;
        r->mode = PCOLL_QUORUM;
        r->quorum = (int)q;
        return 0;
    }
    return -1;
}

static int parse_int(const char *v, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) return -1;
    *out = (int)x;
    return 0;
}

static int parse_dbl(const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x)) return -1;
    *out = x;
    return 0;
}

#define KEYS "tau, tau_by, lag, window, dwell, max_dwell, maj_enter, maj_exit, wait_enter, " \
             "wait_exit, sync_fresh, sync_streak, sync_wait, probe, probe_max, light_fresh, " \
             "light_block, light_probe, sync_held, probe_start, pay_enter, pay_exit, cost_n, start"

int ctl_policy_parse(const char *s, ctl_policy_cfg_t *c, char *err, size_t n)
{
    if (err && n) err[0] = 0;
    if (!c) return fail(err, n, "policy config is NULL");
    ctl_policy_default(c);
    if (!s || !*s) return fail(err, n, "empty policy (expected adaptive, solo, majority, sync or quorum:Q)");
    char buf[512];
    if (strlen(s) >= sizeof buf) return fail(err, n, "policy string too long (%zu chars)", strlen(s));
    strcpy(buf, s);
    char *save = NULL;
    char *tok = strtok_r(buf, ",", &save);
    if (!tok) return fail(err, n, "policy '%s': no policy name", s);
    if (!strcmp(tok, "adaptive")) {
        c->kind = CTL_ADAPTIVE;
    } else {
        c->kind = CTL_STATIC;
        if (parse_rule(tok, &c->base))
            return fail(err, n, "unknown policy '%s' in '%s' (expected adaptive, solo, majority, sync or quorum:Q with Q >= 1)", tok, s);
    }
    while ((tok = strtok_r(NULL, ",", &save))) {
        char *eq = strchr(tok, '=');
        if (!eq) return fail(err, n, "policy '%s': option '%s' has no value (expected key=value; keys: " KEYS ")", s, tok);
        *eq = 0;
        const char *k = tok, *v = eq + 1;
        int bad = 0;
        const char *want = "";
        if (!strcmp(k, "tau")) { bad = parse_int(v, 0, 1000000, &c->tau); want = "integer 0..1000000"; }
        else if (!strcmp(k, "tau_by")) {
            want = "library or policy";
            if (!strcmp(v, "library")) c->tau_by = CTL_TAU_LIBRARY;
            else if (!strcmp(v, "policy")) c->tau_by = CTL_TAU_POLICY;
            else bad = 1;
        }
        else if (!strcmp(k, "lag")) { bad = parse_int(v, 1, 1000000, &c->lag); want = "integer >= 1"; }
        else if (!strcmp(k, "window")) { bad = parse_int(v, 1, 65536, &c->window); want = "integer 1..65536"; }
        else if (!strcmp(k, "dwell")) { bad = parse_int(v, 1, 1 << 30, &c->min_dwell); want = "integer >= 1"; }
        else if (!strcmp(k, "max_dwell")) { bad = parse_int(v, 1, 1 << 30, &c->max_dwell); want = "integer >= 1"; }
        else if (!strcmp(k, "maj_enter")) { bad = parse_dbl(v, &c->maj_enter); want = "number"; }
        else if (!strcmp(k, "maj_exit")) { bad = parse_dbl(v, &c->maj_exit); want = "number"; }
        else if (!strcmp(k, "wait_enter")) { bad = parse_dbl(v, &c->wait_enter); want = "number"; }
        else if (!strcmp(k, "wait_exit")) { bad = parse_dbl(v, &c->wait_exit); want = "number"; }
        else if (!strcmp(k, "sync_fresh")) { bad = parse_dbl(v, &c->sync_fresh); want = "number"; }
        else if (!strcmp(k, "sync_streak")) { bad = parse_dbl(v, &c->sync_streak); want = "number"; }
        else if (!strcmp(k, "sync_wait")) { bad = parse_dbl(v, &c->sync_wait); want = "number"; }
        else if (!strcmp(k, "probe")) { bad = parse_int(v, 1, 1 << 30, &c->sync_probe); want = "integer >= 1"; }
        else if (!strcmp(k, "probe_max")) { bad = parse_int(v, 1, 1 << 30, &c->probe_max); want = "integer >= 1"; }
        else if (!strcmp(k, "light_fresh")) { bad = parse_dbl(v, &c->light_fresh); want = "number"; }
        else if (!strcmp(k, "light_block")) { bad = parse_int(v, 0, 1 << 30, &c->light_block); want = "integer >= 0"; }
        else if (!strcmp(k, "light_probe")) { bad = parse_int(v, 0, 1 << 30, &c->light_probe); want = "integer >= 0"; }
        else if (!strcmp(k, "sync_held")) { bad = parse_int(v, 0, 1 << 30, &c->sync_held); want = "integer >= 0"; }
        else if (!strcmp(k, "probe_start")) { bad = parse_int(v, 0, 1 << 30, &c->probe_start); want = "integer >= 0"; }
        else if (!strcmp(k, "pay_enter")) { bad = parse_dbl(v, &c->pay_enter); want = "number"; }
        else if (!strcmp(k, "pay_exit")) { bad = parse_dbl(v, &c->pay_exit); want = "number"; }
        else if (!strcmp(k, "cost_n")) { bad = parse_int(v, 2, 1024, &c->cost_n); want = "integer 2..1024"; }
        else if (!strcmp(k, "start")) {
            want = "solo, majority, sync or quorum:Q";
            if (c->kind != CTL_ADAPTIVE)
                return fail(err, n, "policy '%s': option 'start' is only for adaptive", s);
            bad = parse_rule(v, &c->base);
        }
        else return fail(err, n, "policy '%s': unknown option '%s' (keys: " KEYS ")", s, k);
        if (bad) return fail(err, n, "policy '%s': bad value '%s' for option '%s' (%s)", s, v, k, want);
    }
    char e2[256];
    if (ctl_policy_check(c, e2, sizeof e2)) return fail(err, n, "policy '%s': %s", s, e2);
    return CTL_OK;
}

static const char *rule_str(const pcoll_rule_t *r, char *b, size_t n)
{
    if (r->mode == PCOLL_QUORUM) snprintf(b, n, "quorum:%d", r->quorum);
    else snprintf(b, n, "%s", r->mode == PCOLL_SOLO ? "solo" : r->mode == PCOLL_MAJORITY ? "majority" : "sync");
    return b;
}

const char *ctl_policy_format(const ctl_policy_cfg_t *c, char *buf, size_t n)
{
    char r[32];
    rule_str(&c->base, r, sizeof r);
    int k;
    if (c->kind == CTL_ADAPTIVE) k = snprintf(buf, n, "adaptive,start=%s", r);
    else k = snprintf(buf, n, "%s", r);
    if (k < 0 || (size_t)k >= n) return buf;
    snprintf(buf + k, n - k,
             ",tau=%d,tau_by=%s,lag=%d,window=%d,dwell=%d,max_dwell=%d,maj_enter=%.17g,maj_exit=%.17g,"
             "wait_enter=%.17g,wait_exit=%.17g,sync_fresh=%.17g,sync_streak=%.17g,sync_wait=%.17g,"
             "probe=%d,probe_max=%d,light_fresh=%.17g,light_block=%d,light_probe=%d,sync_held=%d,probe_start=%d,"
             "pay_enter=%.17g,pay_exit=%.17g,cost_n=%d",
             c->tau, c->tau_by == CTL_TAU_POLICY ? "policy" : "library", c->lag, c->window, c->min_dwell,
             c->max_dwell, c->maj_enter, c->maj_exit, c->wait_enter, c->wait_exit, c->sync_fresh,
             c->sync_streak, c->sync_wait, c->sync_probe, c->probe_max, c->light_fresh, c->light_block,
             c->light_probe, c->sync_held, c->probe_start, c->pay_enter, c->pay_exit, c->cost_n);
    return buf;
}

/* ---------------------------------------------------------------- lifecycle */

static int level_of(pcoll_mode_t m)
{
    return m == PCOLL_SYNC ? LV_SYNC : m == PCOLL_MAJORITY ? LV_MAJ : LV_LIGHT;
}

static void level_rule(const ctl_policy_t *p, int lv, pcoll_rule_t *r)
{
    memset(r, 0, sizeof *r);
    if (p->c.kind == CTL_STATIC) { r->mode = p->c.base.mode; r->quorum = p->c.base.quorum; return; }
    if (lv == LV_LIGHT) { *r = p->light; return; }
    r->mode = lv == LV_MAJ ? PCOLL_MAJORITY : PCOLL_SYNC;
}

static const char *level_name(const ctl_policy_t *p, int lv, char *b, size_t n)
{
    pcoll_rule_t r;
    level_rule(p, lv, &r);
    return rule_str(&r, b, n);
}

ctl_policy_t *ctl_policy_new(const ctl_policy_cfg_t *c, int P)
{
    if (ctl_policy_check(c, NULL, 0) || P < 1 || P > PCOLL_MAX_RANKS) return NULL;
    ctl_policy_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->c = *c;
    p->c.base.wait = NULL;
    p->P = P;
    int W = c->window;
    p->wait = calloc(P, sizeof(int));
    p->old_wait = calloc(P, sizeof(int));
    p->tmp = calloc(P, sizeof(int));
    p->tau_next = calloc(P, sizeof(int));
    p->last_wait = malloc(P * sizeof(uint64_t));
    p->w_max = calloc(W, sizeof(uint32_t));
    p->w_fresh = calloc(W, sizeof(uint32_t));
    p->w_active = calloc(W, sizeof(uint32_t));
    p->w_tau = calloc(W, 1);
    p->w_nmax = calloc(W, sizeof(uint32_t));
    p->w_nfresh = calloc(W, sizeof(uint32_t));
    p->w_nfree = calloc(W, sizeof(uint32_t));
    p->ns = calloc(P, sizeof(uint32_t));
    p->cost = calloc((size_t)P * (size_t)c->cost_n, sizeof(float));
    p->cost_cnt = calloc(P, sizeof(int));
    p->cost_pos = calloc(P, sizeof(int));
    p->act = calloc(P, 1);
    if (!p->wait || !p->old_wait || !p->tmp || !p->tau_next || !p->last_wait || !p->w_max || !p->w_fresh ||
        !p->w_active || !p->w_tau || !p->w_nmax || !p->w_nfresh || !p->w_nfree || !p->ns || !p->cost ||
        !p->cost_cnt || !p->cost_pos || !p->act) {
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
    p->level = level_of(c->base.mode);
    p->prev_level = -1;
    p->dwell = c->min_dwell;
    p->probe = c->probe_start > 0 ? c->probe_start : c->sync_probe;
    p->probe_at = NONE;
    p->lprobe = c->light_probe > 0 ? c->light_probe : c->sync_probe;
    p->lblock = (uint64_t)c->light_block;
    p->lprobe_at = NONE;
    p->hash = 1469598103934665603ULL;
    p->st.G_min = p->st.G_max = NAN;
    return p;
}

void ctl_policy_free(ctl_policy_t *p)
{
    if (!p) return;
    free(p->wait); free(p->old_wait); free(p->tmp); free(p->tau_next); free(p->last_wait);
    free(p->w_max); free(p->w_fresh); free(p->w_active); free(p->w_tau);
    free(p->w_nmax); free(p->w_nfresh); free(p->w_nfree); free(p->ns);
    free(p->cost); free(p->cost_cnt); free(p->cost_pos); free(p->act);
    free(p);
}

const ctl_policy_cfg_t *ctl_policy_cfg(const ctl_policy_t *p) { return &p->c; }

void ctl_policy_initial(const ctl_policy_t *p, pcoll_rule_t *rule)
{
    level_rule(p, level_of(p->c.base.mode), rule);
}

uint64_t ctl_policy_rule(const ctl_policy_t *p, pcoll_rule_t *rule)
{
    level_rule(p, p->level, rule);
    rule->nwait = p->nwait;
    rule->wait = p->nwait ? p->wait : NULL;
    return p->rule_from;
}

/* ---------------------------------------------------------------- observe */

static void window_reset(ctl_policy_t *p)
{
    p->w_len = p->w_pos = 0;
    p->s_max = p->s_fresh = p->s_active = p->s_tau = 0;
    p->s_nmax = p->s_nfresh = p->s_nfree = 0;
}

typedef struct { uint32_t max, fresh, active, nmax, nfresh, nfree; uint8_t tau; } wrow_t;

static void window_push(ctl_policy_t *p, const wrow_t *x)
{
    int W = p->c.window, k = p->w_pos;
    if (p->w_len == W) {
        p->s_max -= p->w_max[k]; p->s_fresh -= p->w_fresh[k]; p->s_active -= p->w_active[k];
        p->s_nmax -= p->w_nmax[k]; p->s_nfresh -= p->w_nfresh[k]; p->s_nfree -= p->w_nfree[k];
        p->s_tau -= p->w_tau[k];
    } else {
        p->w_len++;
    }
    p->w_max[k] = x->max; p->w_fresh[k] = x->fresh; p->w_active[k] = x->active;
    p->w_nmax[k] = x->nmax; p->w_nfresh[k] = x->nfresh; p->w_nfree[k] = x->nfree;
    p->w_tau[k] = x->tau;
    p->s_max += x->max; p->s_fresh += x->fresh; p->s_active += x->active;
    p->s_nmax += x->nmax; p->s_nfresh += x->nfresh; p->s_nfree += x->nfree;
    p->s_tau += x->tau;
    p->w_pos = (k + 1) % W;
}

typedef struct { double L, A, F, T, G; } sig_t;

/* G, what partial rounds buy over sync, from the agreed step times of the last cost_n deposits of
 * each active rank (c_p[i]: p's i-th latest):
 *     G = S * sum_p (1 / mean_p c_p) / n_active,    S = mean_i max_p c_p[i]
 * sum_p 1/mean_p is the rate at which partial rounds take gradients (every rank at its own speed);
 * n_active / S is sync's (every step waits for the slowest of a draw of step times; pairing the
 * ranks' i-th latest times keeps the tail of random delays in S). G = 1: equal ranks, nothing to
 * gain; a rank k times slower than the others: G -> about k (P-1)/P + 1/P. Communication is not in
 * it: partial rounds have to beat sync by a margin (pay_enter). NAN until every rank has cost_n/2
 * step times (or none reports any), and once a rank has joined: the tail of an epoch, when the
 * ranks run out of data one by one, is not what the next epoch will look like. */
static double gain(const ctl_policy_t *p)
{
    const int P = p->P, N = p->c.cost_n;
    int m = N;
    for (int i = 0; i < P; i++) {
        if (!p->act[i]) return NAN;     /* the tail of an epoch, once ranks join, says nothing */
        if (p->cost_cnt[i] < m) m = p->cost_cnt[i];
    }
    if (m < N / 2) return NAN;
    double rate = 0, S = 0;
    for (int i = 0; i < P; i++) {
        double sum = 0;
        for (int k = 0; k < p->cost_cnt[i]; k++) sum += p->cost[(size_t)i * N + k];
        if (!(sum > 0)) return NAN;     /* kept times are > 0, but may underflow when divided */
        rate += p->cost_cnt[i] / sum;
    }
    for (int j = 1; j <= m; j++) {
        double mx = 0;
        for (int i = 0; i < P; i++) {
            double v = p->cost[(size_t)i * N + (p->cost_pos[i] - j + N) % N];
            if (v > mx) mx = v;
        }
        S += mx;
    }
    return S / m * rate / P;
}

static sig_t signals(const ctl_policy_t *p)
{
    sig_t s = { NAN, NAN, NAN, NAN, gain(p) };
    if (p->w_len == 0 || p->s_active == 0) return s;
    double n = (double)p->w_len;
    s.F = (double)p->s_fresh / (double)p->s_active;
    s.A = (double)p->s_max / n * s.F;
    s.T = (double)p->s_tau / n;
    if (p->s_nfree > 0) s.L = (double)p->s_nmax / n * ((double)p->s_nfresh / (double)p->s_nfree);
    return s;
}

static void fnv(uint64_t *h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        *h ^= (v >> (8 * i)) & 0xff;
        *h *= 1099511628211ULL;
    }
}

static int active(const pcoll_record_t *rec, int i)
{
    return !(rec->flags[i] & (PCOLL_F_JOINED | PCOLL_F_FAILED));
}

/* Adaptive level decision; returns the new level (== p->level: none) and writes the reason. */
static int evaluate(ctl_policy_t *p, uint64_t r, sig_t g, int *probe, int *fresh_exit, char *why, size_t n)
{
    const ctl_policy_cfg_t *c = &p->c;
    *probe = 0;
    *fresh_exit = 0;
    uint64_t in_mode = r + 1 - p->mode_from;
    int tau = c->tau > 0, pay = c->pay_enter > 0 && p->cost_seen;
    char a[24], b[24];
    if (p->level == LV_SYNC) {
        if (p->mode_from == 0) in_mode += (uint64_t)c->sync_held;  /* started in sync: the carried spell */
        /* with step times, a due probe waits until they say that partial rounds would pay */
        if (in_mode >= (uint64_t)p->probe && (!pay || g.G >= c->pay_exit)) {
            *probe = 1;
            char gs[48] = "";
            if (pay) snprintf(gs, sizeof gs, ", G=%.2f >= pay_exit %.2f", g.G, c->pay_exit);
            snprintf(why, n, "probe after %llu rounds in sync (probe interval %d%s): %s -> %s",
                     (unsigned long long)in_mode, p->probe, gs, level_name(p, LV_SYNC, a, sizeof a),
                     level_name(p, LV_MAJ, b, sizeof b));
            return LV_MAJ;
        }
        return LV_SYNC;
    }
    uint64_t need = (uint64_t)(c->window > p->dwell ? c->window : p->dwell);
    if (p->w_len < c->window || in_mode < need) return p->level;
    int W = c->window, to = -1;
    if (pay && g.G < c->pay_enter) {   /* false while G is NAN */
        snprintf(why, n, "G=%.2f < pay_enter %.2f: sync would cost about as much as partial rounds "
                 "(L=%.2f F=%.2f T=%.2f)", g.G, c->pay_enter, g.L, g.F, g.T);
        to = LV_SYNC;
    } else if (p->level == LV_LIGHT) {
        if (g.L >= c->maj_enter)
            snprintf(why, n, "L=%.2f >= maj_enter %.2f over %d rounds (A=%.2f F=%.2f T=%.2f)", g.L, c->maj_enter, W,
                     g.A, g.F, g.T), to = LV_MAJ;
        else if (tau && g.T >= c->wait_enter)
            snprintf(why, n, "T=%.2f >= wait_enter %.2f over %d rounds (L=%.2f F=%.2f)", g.T, c->wait_enter, W,
                     g.L, g.F), to = LV_MAJ;
        else if (c->light_fresh > 0 && g.F < c->light_fresh)
            snprintf(why, n, "F=%.2f < light_fresh %.2f over %d rounds (L=%.2f T=%.2f): stale rounds", g.F,
                     c->light_fresh, W, g.L, g.T), to = LV_MAJ;
        /* leaving LIGHT (for any reason) while its rounds carry too few gradients blocks it */
        if (to == LV_MAJ && c->light_fresh > 0 && g.F < c->light_fresh) {
            size_t k = strlen(why);
            if (!strstr(why, "light_fresh")) snprintf(why + k, n - k, ", F < light_fresh %.2f", c->light_fresh);
            *fresh_exit = 1;
        }
    } else {
        if (g.F <= c->sync_fresh)
            snprintf(why, n, "F=%.2f <= sync_fresh %.2f over %d rounds (L=%.2f A=%.2f T=%.2f)", g.F, c->sync_fresh, W,
                     g.L, g.A, g.T), to = LV_SYNC;
        else if (!tau && g.A >= c->sync_streak)
            snprintf(why, n, "A=%.2f >= sync_streak %.2f over %d rounds (L=%.2f F=%.2f)", g.A, c->sync_streak, W,
                     g.L, g.F), to = LV_SYNC;
        else if (tau && g.T >= c->sync_wait)
            snprintf(why, n, "T=%.2f >= sync_wait %.2f over %d rounds (L=%.2f F=%.2f)", g.T, c->sync_wait, W,
                     g.L, g.F), to = LV_SYNC;
        else if (g.L <= c->maj_exit && (!tau || g.T <= c->wait_exit) && r + (uint64_t)c->lag >= p->lblock) {
            if (tau) snprintf(why, n, "L=%.2f <= maj_exit %.2f and T=%.2f <= wait_exit %.2f over %d rounds (F=%.2f)",
                              g.L, c->maj_exit, g.T, c->wait_exit, W, g.F);
            else snprintf(why, n, "L=%.2f <= maj_exit %.2f over %d rounds (F=%.2f)", g.L, c->maj_exit, W, g.F);
            to = LV_LIGHT;
        }
    }
    if (to < 0) return p->level;
    size_t k = strlen(why);
    snprintf(why + k, n - k, ": %s -> %s", level_name(p, p->level, a, sizeof a), level_name(p, to, b, sizeof b));
    return to;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int ctl_policy_observe(ctl_policy_t *p, const pcoll_record_t *rec, ctl_decision_t *out)
{
    if (!p || !rec) return CTL_ERR_ARG;
    if (rec->P != p->P || rec->round != p->next) return CTL_ERR_ORDER;
    if (!rec->fresh || !rec->flags || !rec->streak) return CTL_ERR_ARG;
    const ctl_policy_cfg_t *c = &p->c;
    const int P = p->P;
    const uint64_t r = rec->round;
    const int tau = c->tau;

    /* per-round metrics over active ranks. Natural streak: a rank fresh because the rule forced it
     * (sync, majority initiator, wait set incl. tau) tells nothing about its speed: its natural
     * streak is left unchanged; it resets only on an unforced fresh round. It is NOT reset at a
     * mode change: that would cap L at about (window/2) * Fn in the first window of a new mode
     * and invite an immediate exit; a rank that recovered shows it by its next unforced fresh
     * round. */
    wrow_t row = { 0, 0, 0, 0, 0, 0, 0 };
    for (int i = 0; i < P; i++) {
        if (!active(rec, i)) continue;
        int forced = rec->mode == PCOLL_SYNC || rec->initiator == i || (rec->waited && rec->waited[i]);
        row.active++;
        if (rec->fresh[i]) row.fresh++;
        if (rec->streak[i] > row.max) row.max = rec->streak[i];
        if (!forced) {
            row.nfree++;
            if (rec->fresh[i]) { row.nfresh++; p->ns[i] = 0; }
            else p->ns[i]++;
        } else if (!rec->fresh[i]) {
            p->ns[i]++;
        }
        if (p->ns[i] > row.nmax) row.nmax = p->ns[i];
    }
    const uint32_t na = row.active;
    if (row.max > p->st.max_streak) p->st.max_streak = row.max;

    /* step times for G (a merged deposit reports the sum of its steps' times) */
    const int N = c->cost_n;
    for (int i = 0; i < P; i++) {
        p->act[i] = (uint8_t)active(rec, i);
        float v = rec->cost ? rec->cost[i] : 0.0f;
        if (!rec->fresh[i] || !(v > 0) || !isfinite(v)) continue;
        p->cost[(size_t)i * N + p->cost_pos[i]] = v / (float)rec->fresh[i];
        p->cost_pos[i] = (p->cost_pos[i] + 1) % N;
        if (p->cost_cnt[i] < N) p->cost_cnt[i]++;
        p->cost_seen = 1;
    }

    /* tau bookkeeping */
    uint8_t tau_round = 0;
    if (tau > 0) {
        if (c->tau_by == CTL_TAU_LIBRARY) {
            for (int k = 0; k < p->ntau_next; k++) {
                int i = p->tau_next[k];
                if (active(rec, i) && !rec->fresh[i]) p->st.tau_misses++;
            }
            tau_round = p->ntau_next > 0;
        } else {
            for (int i = 0; i < P && !tau_round; i++) tau_round = p->last_wait[i] == r;
        }
        for (int i = 0; i < P; i++)
            if (active(rec, i) && rec->streak[i] > (uint32_t)tau) p->st.tau_violations++;
        p->ntau_next = 0;
        for (int i = 0; i < P; i++)
            if (active(rec, i) && rec->streak[i] >= (uint32_t)tau) p->tau_next[p->ntau_next++] = i;
        if (c->tau_by == CTL_TAU_LIBRARY) p->st.tau_waits += p->ntau_next;
    }

    row.tau = tau_round;
    if (r >= p->mode_from && na > 0) window_push(p, &row);
    sig_t g = signals(p);
    if (!isnan(g.G)) {
        if (p->st.G_n == 0 || g.G < p->st.G_min) p->st.G_min = g.G;
        if (p->st.G_n == 0 || g.G > p->st.G_max) p->st.G_max = g.G;
        p->st.G_sum += g.G;
        p->st.G_n++;
    }

    /* mode */
    const uint64_t e = r + (uint64_t)c->lag;
    int new_level = p->level, probe = 0, fresh_exit = 0;
    char why[200] = "";
    if (c->kind == CTL_ADAPTIVE && r >= p->mode_from && na > 0)
        new_level = evaluate(p, r, g, &probe, &fresh_exit, why, sizeof why);

    /* tau_by=policy wait set for round e */
    int nw = 0;
    char wwhy[96] = "";
    if (tau > 0 && c->tau_by == CTL_TAU_POLICY && new_level != LV_SYNC &&
        !(c->kind == CTL_STATIC && c->base.mode == PCOLL_SYNC)) {
        uint32_t thr = (uint32_t)(tau - c->lag + 1);
        for (int i = 0; i < P; i++) {
            if (!active(rec, i) || rec->streak[i] < thr) continue;
            if (p->last_wait[i] != NONE && p->last_wait[i] > r) continue; /* already waited in (r, e) */
            p->tmp[nw++] = i;
        }
        if (nw) {
            int k = snprintf(wwhy, sizeof wwhy, "streak >= tau-lag+1 = %u: wait for", thr);
            for (int j = 0; j < nw && k < (int)sizeof wwhy - 12; j++)
                k += snprintf(wwhy + k, sizeof wwhy - k, " %d", p->tmp[j]);
            if (k >= (int)sizeof wwhy - 12) snprintf(wwhy + sizeof wwhy - 5, 5, "...");
        }
    }

    int what = 0;
    if (new_level != p->level) what |= CTL_DEC_MODE | (probe ? CTL_DEC_PROBE : 0);
    if (nw != p->nwait || memcmp(p->tmp, p->wait, nw * sizeof(int))) what |= CTL_DEC_WAIT;

    /* commit the tau bookkeeping that depends on the final wait set */
    for (int j = 0; j < nw; j++) p->last_wait[p->tmp[j]] = e;
    if (tau > 0 && c->tau_by == CTL_TAU_POLICY) p->st.tau_waits += nw;
    p->next = r + 1;
    p->st.rounds++;

    if (!what) return 0;

    /* old rule (copy the current wait set so the caller can see it after we overwrite) */
    pcoll_rule_t oldr, newr;
    level_rule(p, p->level, &oldr);
    memcpy(p->old_wait, p->wait, p->nwait * sizeof(int));
    p->old_nwait = p->nwait;
    oldr.nwait = p->old_nwait;
    oldr.wait = p->old_nwait ? p->old_wait : NULL;
    qsort(p->tmp, nw, sizeof(int), cmp_int);
    memcpy(p->wait, p->tmp, nw * sizeof(int));
    p->nwait = nw;

    if (what & CTL_DEC_MODE) {
        int old = p->level;
        if (fresh_exit) {
            /* LIGHT left for stale rounds: block it for a probe interval; a return to LIGHT that
             * ends this way within 4*max(window, dwell) rounds failed: the interval doubles */
            uint64_t span = 4 * (uint64_t)(c->window > p->dwell ? c->window : p->dwell);
            if (p->lprobe_at != NONE && e - p->lprobe_at <= span)
                p->lprobe = p->lprobe > c->probe_max / 2 ? c->probe_max : p->lprobe * 2;
            else if (p->lprobe_at != NONE)
                p->lprobe = c->light_probe > 0 ? c->light_probe : c->sync_probe;
            p->lblock = e + (uint64_t)p->lprobe;
            p->lprobe_at = NONE;
            p->st.light_exits++;
        } else if (new_level == LV_LIGHT) {
            p->lprobe_at = e;
        }
        if (probe) {
            p->probe_at = e;
            p->st.probes++;
        } else if (new_level == LV_SYNC) {
            /* a probe that ends in sync within 4*max(window, dwell) rounds failed: back off */
            uint64_t span = 4 * (uint64_t)(c->window > p->dwell ? c->window : p->dwell);
            if (p->probe_at != NONE && e - p->probe_at <= span) {
                p->st.probe_failures++;
                p->probe = p->probe > c->probe_max / 2 ? c->probe_max : p->probe * 2;
            } else {
                p->probe = c->sync_probe;
            }
            p->probe_at = NONE;
        } else {
            if (p->probe_at != NONE) { p->probe = c->sync_probe; p->probe_at = NONE; } /* probe held */
            /* dwell backoff on a quick reversal A -> B -> A */
            uint64_t held = e - p->mode_from;
            if (new_level == p->prev_level && held < 2 * (uint64_t)p->dwell)
                p->dwell = p->dwell > c->max_dwell / 2 ? c->max_dwell : p->dwell * 2;
            else
                p->dwell = c->min_dwell;
        }
        p->prev_level = old;
        p->level = new_level;
        p->mode_from = e;
        window_reset(p);
        p->st.mode_switches++;
    }
    if (what & CTL_DEC_WAIT) p->st.wait_changes++;
    p->st.decisions++;
    p->rule_from = e;   /* wait-only decisions do not restart the window */
    level_rule(p, p->level, &newr);
    newr.nwait = p->nwait;
    newr.wait = p->nwait ? p->wait : NULL;

    fnv(&p->hash, r);
    fnv(&p->hash, e);
    fnv(&p->hash, (uint64_t)what);
    fnv(&p->hash, (uint64_t)newr.mode);
    fnv(&p->hash, (uint64_t)(newr.mode == PCOLL_QUORUM ? newr.quorum : 0));
    fnv(&p->hash, (uint64_t)newr.nwait);
    for (int j = 0; j < newr.nwait; j++) fnv(&p->hash, (uint64_t)newr.wait[j]);

    if (out) {
        memset(out, 0, sizeof *out);
        out->round = r;
        out->effective = e;
        out->what = what;
        out->old_rule = oldr;
        out->new_rule = newr;
        out->L = g.L; out->A = g.A; out->F = g.F; out->T = g.T; out->G = g.G;
        if ((what & CTL_DEC_MODE) && (what & CTL_DEC_WAIT) && nw)
            snprintf(out->reason, sizeof out->reason, "%s; %s", why, wwhy);
        else if (what & CTL_DEC_MODE)
            snprintf(out->reason, sizeof out->reason, "%s", why);
        else if (nw)
            snprintf(out->reason, sizeof out->reason, "%s", wwhy);
        else
            snprintf(out->reason, sizeof out->reason, "wait set cleared");
    }
    return 1;
}

int ctl_policy_tau_wait(const ctl_policy_t *p, uint64_t *round, int *ranks, int max)
{
    if (round) *round = p->next;
    if (p->c.tau <= 0 || p->st.rounds == 0) return 0;
    for (int k = 0; k < p->ntau_next && k < max; k++) ranks[k] = p->tau_next[k];
    return p->ntau_next;
}

void ctl_policy_stats(const ctl_policy_t *p, ctl_policy_stats_t *st)
{
    *st = p->st;
    pcoll_rule_t r;
    level_rule(p, p->level, &r);
    st->mode = r.mode;
    st->quorum = r.quorum;
    st->mode_from = p->mode_from;
    st->dwell = p->dwell;
    st->probe = p->probe;
    st->light_probe = p->lprobe;
    st->light_block_until = p->lblock;
    st->window_fill = p->w_len;
    sig_t g = signals(p);
    st->L = g.L; st->A = g.A; st->F = g.F; st->T = g.T; st->G = g.G;
}

void ctl_policy_carry(const ctl_policy_stats_t *st, ctl_policy_cfg_t *c)
{
    c->base.mode = st->mode;
    c->base.quorum = st->quorum;
    c->light_probe = st->light_probe;
    c->light_block = st->light_block_until > st->rounds ? (int)(st->light_block_until - st->rounds) : 0;
    uint64_t held = 0;  /* a sync spell in effect at the end; one that began at round 0 continues c's */
    if (st->mode == PCOLL_SYNC && st->rounds > st->mode_from)
        held = st->rounds - st->mode_from + (st->mode_from == 0 ? (uint64_t)c->sync_held : 0);
    c->sync_held = held > (1u << 30) ? 1 << 30 : (int)held;
    c->probe_start = st->probe;
}

uint64_t ctl_policy_hash(const ctl_policy_t *p) { return p->hash; }
