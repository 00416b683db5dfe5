/* policy.c -- the controller's deterministic policy (see controller.h for the rules).
 * Pure: no MPI calls, no threads, no clocks, no globals. */
#include "controller/policy_impl.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- config */

/* Every policy key, once: name, type, field, range, default. ctl_policy_default, _parse, _format
 * and the key list of the messages all read this table. Types: 'i' int, 'd' double (finite),
 * 'e' enum (names in `names`, value = index), 'r' a rule (solo | majority | sync | quorum:Q). */
typedef struct {
    const char *key;
    char type;
    size_t off;
    double lo, hi, def;
    const char *names[4];
} polkey_t;

#define KI(k, f, lo, hi, def)                                     \
    {                                                             \
        k, 'i', offsetof(ctl_policy_cfg_t, f), lo, hi, def, { 0 } \
    }
#define KD(k, f, lo, hi, def)                                     \
    {                                                             \
        k, 'd', offsetof(ctl_policy_cfg_t, f), lo, hi, def, { 0 } \
    }
#define KE(k, f, def, ...)                                                     \
    {                                                                          \
        k, 'e', offsetof(ctl_policy_cfg_t, f), 0,                              \
            sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *) - 1, def, { \
            __VA_ARGS__                                                        \
        }                                                                      \
    }
static const polkey_t KEYS[] = {
    KI("tau", tau, 0, 1000000, 0),
    KE("tau_by", tau_by, CTL_TAU_LIBRARY, "library", "policy"),
    KI("lag", lag, 1, 1000000, 2),
    KI("window", window, 1, 65536, 32),
    KI("dwell", min_dwell, 1, 1 << 30, 32),
    KI("max_dwell", max_dwell, 1, 1 << 30, 1024),
    KD("maj_enter", maj_enter, 0, HUGE_VAL, 4.0),
    KD("maj_exit", maj_exit, 0, HUGE_VAL, 2.0),
    KD("wait_enter", wait_enter, 0, HUGE_VAL, 0.10),
    KD("wait_exit", wait_exit, 0, HUGE_VAL, 0.02),
    KD("sync_fresh", sync_fresh, 0, 1, 0.20),
    KD("sync_streak", sync_streak, 0, HUGE_VAL, 8.0),
    KD("sync_wait", sync_wait, 0, 1, 0.50),
    KI("probe", sync_probe, 1, 1 << 30, 256),
    KI("probe_max", probe_max, 1, 1 << 30, 4096),
    KD("light_fresh", light_fresh, 0, 1, 0.0),
    KD("pay_enter", pay_enter, 0, 100, 1.5),
    KD("pay_exit", pay_exit, 0, 100, 1.3),
    KI("cost_n", cost_n, 2, 1024, 32),
    KE("rule", rule, CTL_RULE_RATE, "rate", "thresholds"),
    KE("staleness", staleness, CTL_STALE_QUADRATIC, "quadratic", "linear", "bound"),
    {"start", 'r', offsetof(ctl_policy_cfg_t, base), 0, 0, 0, {0}},
};
#define NKEYS (sizeof KEYS / sizeof KEYS[0])

static int *key_int(ctl_policy_cfg_t *c, const polkey_t *k) { return (int *)((char *)c + k->off); }
static double *key_dbl(ctl_policy_cfg_t *c, const polkey_t *k) { return (double *)((char *)c + k->off); }

static const char *key_list(char *buf, size_t cap) {
    buf[0] = 0;
    for (size_t i = 0, n = 0; i < NKEYS && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", KEYS[i].key);
    return buf;
}

void ctl_policy_default(ctl_policy_cfg_t *c) {
    memset(c, 0, sizeof *c);
    c->kind = CTL_ADAPTIVE;
    c->base.mode = PCOLL_SOLO;
    c->base.quorum = 1;
    for (size_t i = 0; i < NKEYS; i++) {
        if (KEYS[i].type == 'i' || KEYS[i].type == 'e')
            *key_int(c, &KEYS[i]) = (int)KEYS[i].def;
        else if (KEYS[i].type == 'd')
            *key_dbl(c, &KEYS[i]) = KEYS[i].def;
    }
}

static int fail(char *err, size_t n, const char *fmt, ...) {
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return CTL_ERR_ARG;
}

int ctl_policy_check(const ctl_policy_cfg_t *c, char *err, size_t n) {
    if (!c) return fail(err, n, "policy config is NULL");
    if (c->kind != CTL_STATIC && c->kind != CTL_ADAPTIVE) return fail(err, n, "bad policy kind %d", c->kind);
    if (c->base.mode < PCOLL_SYNC || c->base.mode > PCOLL_QUORUM)
        return fail(err, n, "bad base mode %d", (int)c->base.mode);
    if (c->base.mode == PCOLL_QUORUM && (c->base.quorum < 1 || c->base.quorum > PCOLL_MAX_RANKS))
        return fail(err, n, "quorum %d out of range 1..%d", c->base.quorum, PCOLL_MAX_RANKS);
    if (c->base.nwait != 0)
        return fail(err, n, "base rule must have an empty wait set (nwait=%d)", c->base.nwait);
    ctl_policy_cfg_t *w = (ctl_policy_cfg_t *)c; /* read through the table's accessors only */
    for (size_t i = 0; i < NKEYS; i++) {
        const polkey_t *k = &KEYS[i];
        if (k->type == 'i' || k->type == 'e') {
            int v = *key_int(w, k);
            if (v < k->lo || v > k->hi)
                return fail(err, n, "%s=%d out of range %.0f..%.0f", k->key, v, k->lo, k->hi);
        } else if (k->type == 'd') {
            double v = *key_dbl(w, k);
            if (!(v >= k->lo && v <= k->hi))
                return fail(err, n, "%s=%g out of range [%g, %g]", k->key, v, k->lo, k->hi);
        }
    }
    if (c->tau_by == CTL_TAU_POLICY && c->tau > 0 && c->tau < c->lag)
        return fail(err, n, "tau_by=policy needs tau >= lag (tau=%d, lag=%d)", c->tau, c->lag);
    if (c->max_dwell < c->min_dwell)
        return fail(err, n, "max_dwell=%d must be >= dwell=%d", c->max_dwell, c->min_dwell);
    if (!(c->maj_enter > 0) || !(c->maj_exit < c->maj_enter))
        return fail(err, n, "need 0 <= maj_exit < maj_enter (maj_exit=%g, maj_enter=%g)", c->maj_exit,
                    c->maj_enter);
    if (!(c->wait_enter > 0) || !(c->wait_exit < c->wait_enter))
        return fail(err, n, "need 0 <= wait_exit < wait_enter (wait_exit=%g, wait_enter=%g)", c->wait_exit,
                    c->wait_enter);
    if (!(c->sync_fresh < 1)) return fail(err, n, "sync_fresh=%g out of range [0,1)", c->sync_fresh);
    if (!(c->sync_streak > 0)) return fail(err, n, "sync_streak=%g must be > 0", c->sync_streak);
    if (!(c->sync_wait > c->wait_exit))
        return fail(err, n, "sync_wait=%g must be in (wait_exit, 1]", c->sync_wait);
    if (!(c->light_fresh < 1)) return fail(err, n, "light_fresh=%g out of range [0,1)", c->light_fresh);
    if (c->probe_max < c->sync_probe)
        return fail(err, n, "need 1 <= probe=%d <= probe_max=%d", c->sync_probe, c->probe_max);
    if (!(c->pay_exit > 0))
        return fail(err, n, "need pay_enter=%g in [0, 100] (0: off) and pay_exit=%g in (0, 100]",
                    c->pay_enter, c->pay_exit);
    return CTL_OK;
}

static int parse_rule(const char *s, pcoll_rule_t *r) {
    memset(r, 0, sizeof *r);
    if (!strcmp(s, "solo")) {
        r->mode = PCOLL_SOLO;
        r->quorum = 1;
        return 0;
    }
    if (!strcmp(s, "majority")) {
        r->mode = PCOLL_MAJORITY;
        return 0;
    }
    if (!strcmp(s, "sync")) {
        r->mode = PCOLL_SYNC;
        return 0;
    }
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

/* Parses v into key k of c; returns 0 or -1 and what the key wants in *want. */
static int parse_key(const polkey_t *k, const char *v, ctl_policy_cfg_t *c, char *want, size_t n) {
    char *end;
    errno = 0;
    switch (k->type) {
    case 'i': {
        snprintf(want, n, "integer %.0f..%.0f", k->lo, k->hi);
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || x < k->lo || x > k->hi) return -1;
        *key_int(c, k) = (int)x;
        return 0;
    }
    case 'd': {
        snprintf(want, n, "number");
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x)) return -1;
        *key_dbl(c, k) = x;
        return 0;
    }
    case 'e':
        snprintf(want, n, "%s%s%s or %s", k->names[0], k->names[2] ? ", " : "",
                 k->names[2] ? k->names[1] : "", k->names[k->names[2] ? 2 : 1]);
        for (int i = 0; i < 4 && k->names[i]; i++)
            if (!strcmp(v, k->names[i])) {
                *key_int(c, k) = i;
                return 0;
            }
        return -1;
    default: snprintf(want, n, "solo, majority, sync or quorum:Q"); return parse_rule(v, &c->base);
    }
}

int ctl_policy_parse(const char *s, ctl_policy_cfg_t *c, char *err, size_t n) {
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
            return fail(err, n,
                        "unknown policy '%s' in '%s' (expected adaptive, solo, majority, sync or quorum:Q "
                        "with Q >= 1)",
                        tok, s);
    }
    char keys[512];
    while ((tok = strtok_r(NULL, ",", &save))) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return fail(err, n, "policy '%s': option '%s' has no value (expected key=value; keys: %s)", s,
                        tok, key_list(keys, sizeof keys));
        *eq = 0;
        const char *k = tok, *v = eq + 1;
        const polkey_t *key = NULL;
        for (size_t i = 0; i < NKEYS && !key; i++)
            if (!strcmp(k, KEYS[i].key)) key = &KEYS[i];
        if (!key)
            return fail(err, n, "policy '%s': unknown option '%s' (keys: %s)", s, k,
                        key_list(keys, sizeof keys));
        if (key->type == 'r' && c->kind != CTL_ADAPTIVE)
            return fail(err, n, "policy '%s': option 'start' is only for adaptive", s);
        char want[64];
        if (parse_key(key, v, c, want, sizeof want))
            return fail(err, n, "policy '%s': bad value '%s' for option '%s' (%s)", s, v, k, want);
    }
    char e2[256];
    if (ctl_policy_check(c, e2, sizeof e2)) return fail(err, n, "policy '%s': %s", s, e2);
    return CTL_OK;
}

static const char *rule_str(const pcoll_rule_t *r, char *b, size_t n) {
    if (r->mode == PCOLL_QUORUM)
        snprintf(b, n, "quorum:%d", r->quorum);
    else
        snprintf(b, n, "%s",
                 r->mode == PCOLL_SOLO       ? "solo"
                 : r->mode == PCOLL_MAJORITY ? "majority"
                                             : "sync");
    return b;
}

const char *ctl_policy_format(const ctl_policy_cfg_t *c, char *buf, size_t n) {
    char r[32];
    rule_str(&c->base, r, sizeof r);
    size_t k = (size_t)snprintf(buf, n, "%s", c->kind == CTL_ADAPTIVE ? "adaptive" : r);
    ctl_policy_cfg_t *w = (ctl_policy_cfg_t *)c;
    for (size_t i = 0; i < NKEYS && k < n; i++) {
        const polkey_t *key = &KEYS[i];
        if (key->type == 'i')
            k += (size_t)snprintf(buf + k, n - k, ",%s=%d", key->key, *key_int(w, key));
        else if (key->type == 'd')
            k += (size_t)snprintf(buf + k, n - k, ",%s=%.17g", key->key, *key_dbl(w, key));
        else if (key->type == 'e')
            k += (size_t)snprintf(buf + k, n - k, ",%s=%s", key->key, key->names[*key_int(w, key)]);
        else if (c->kind == CTL_ADAPTIVE)
            k += (size_t)snprintf(buf + k, n - k, ",start=%s", r);
    }
    return buf;
}

double ctl_step_cost(const ctl_policy_cfg_t *c, double step_s, double cycle_s) {
    return c->kind == CTL_ADAPTIVE && c->rule == CTL_RULE_RATE ? cycle_s : step_s;
}

/* ---------------------------------------------------------------- lifecycle */

static void level_rule(const ctl_policy_t *p, int lv, pcoll_rule_t *r) {
    memset(r, 0, sizeof *r);
    if (p->c.kind == CTL_STATIC) {
        r->mode = p->c.base.mode;
        r->quorum = p->c.base.quorum;
        return;
    }
    if (lv == LV_LIGHT) {
        *r = p->light;
        return;
    }
    r->mode = lv == LV_MAJ ? PCOLL_MAJORITY : PCOLL_SYNC;
}

const char *level_name(const ctl_policy_t *p, int lv, char *b, size_t n) {
    pcoll_rule_t r;
    level_rule(p, lv, &r);
    return rule_str(&r, b, n);
}

int rec_active(const pcoll_record_t *rec, int i) {
    return !(rec->flags[i] & (PCOLL_F_JOINED | PCOLL_F_FAILED));
}

/* The doubling back-off of the dwell and of both probe intervals: twice cur, at most cap. */
int backoff(int cur, int cap) { return cur > cap / 2 ? cap : cur * 2; }

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
    p->hash = 1469598103934665603ULL;
    p->st.gain_min = p->st.gain_max = NAN;
    return p;
}

ctl_policy_t *ctl_policy_new(const ctl_policy_cfg_t *c, int P) { return policy_new(c, P, NULL); }

ctl_policy_t *ctl_policy_resume(const ctl_policy_cfg_t *c, int P, const ctl_state_t *st, char *err,
                                size_t n) {
    if (err && n) err[0] = 0;
    if (!st) return (void)fail(err, n, "controller state is NULL"), NULL;
    if (ctl_policy_check(c, err, n)) return NULL;
    if (c->kind != CTL_ADAPTIVE)
        return (void)fail(err, n, "a controller state resumes only an adaptive policy"), NULL;
    if (st->P != P || st->window != c->window || st->cost_n != c->cost_n)
        return (void)fail(err, n,
                          "controller state is for P=%d, window=%d, cost_n=%d; this run has P=%d, "
                          "window=%d, cost_n=%d",
                          st->P, st->window, st->cost_n, P, c->window, c->cost_n),
               NULL;
    ctl_policy_t *p = policy_new(c, P, st);
    if (!p) return (void)fail(err, n, "out of memory"), NULL;
    /* the new handle's rounds 0 .. lag-1 run the latest decided rule: a change decided in the
     * old handle's last rounds is in effect from the new handle's first round */
    struct ctl_state *s = &p->s;
    if (s->mode_from > s->base) s->mode_from = s->base;
    if (s->probe_at != NONE && s->probe_at > s->base) s->probe_at = s->base;
    if (s->lprobe_at != NONE && s->lprobe_at > s->base) s->lprobe_at = s->base;
    rate_start(s);
    return p;
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

/* ---------------------------------------------------------------- signals */

typedef struct {
    uint32_t max, fresh, active, nmax, nfresh, nfree;
    uint8_t tau;
} wrow_t;

static void window_push(struct ctl_state *s, const wrow_t *x) {
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

static sig_t signals(const struct ctl_state *s) {
    sig_t g = {NAN, NAN, NAN, NAN, gain(s)};
    if (s->w_len == 0 || s->s_active == 0) return g;
    double n = (double)s->w_len;
    g.F = (double)s->s_fresh / (double)s->s_active;
    g.A = (double)s->s_max / n * g.F;
    g.T = (double)s->s_tau / n;
    if (s->s_nfree > 0) g.L = (double)s->s_nmax / n * ((double)s->s_nfresh / (double)s->s_nfree);
    return g;
}

static void fnv(uint64_t *h, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        *h ^= (v >> (8 * i)) & 0xff;
        *h *= 1099511628211ULL;
    }
}

/* ---------------------------------------------------------------- rule=thresholds */

/* Level decision of the threshold rule (controller.h section 3b) at global round rg. */
static void thresholds_evaluate(ctl_policy_t *p, uint64_t rg, sig_t g, verdict_t *v) {
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
static void thresholds_switched(ctl_policy_t *p, int to, const verdict_t *v, uint64_t eg) {
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
static void record_costs(struct ctl_state *s, const pcoll_record_t *rec) {
    const int N = s->cost_n;
    for (int i = 0; i < s->P; i++) {
        s->act[i] = (uint8_t)rec_active(rec, i);
        float v = rec->cost ? rec->cost[i] : 0.0f;
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
        if (rec->streak[i] >= (uint32_t)tau) p->tau_next[p->ntau_next++] = i;
    }
    if (p->c.tau_by == CTL_TAU_LIBRARY) p->st.tau_waits += p->ntau_next;
    return forced;
}

/* tau_by=policy: the wait set of round r + lag (into p->tmp); returns its size, reason in why. */
static int policy_wait_set(ctl_policy_t *p, const pcoll_record_t *rec, int level, char *why, size_t n) {
    const ctl_policy_cfg_t *c = &p->c;
    if (c->tau <= 0 || c->tau_by != CTL_TAU_POLICY || level == LV_SYNC ||
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
        if (p->c.rule == CTL_RULE_RATE)
            rate_switched(p, s->level, v->to, v->probe);
        else
            thresholds_switched(p, v->to, v, eg);
        if (v->probe) p->st.probes++;
        s->prev_level = s->level;
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
    wrow_t row = count_round(p, rec);
    record_costs(s, rec);
    row.tau = track_tau(p, rec);
    if (rg >= s->mode_from && row.active > 0) window_push(s, &row);
    sig_t g = signals(s);
    int rate_rule = c->kind == CTL_ADAPTIVE && c->rule == CTL_RULE_RATE;
    if (rate_rule) g.gain = NAN; /* its costs are cycle times (ctl_step_cost): no gain in them */
    note_gain(&p->st, g.gain);
    if (rate_rule) rate_observe(p, rec, (int)row.active);

    /* 2. the level */
    verdict_t v = {s->level, 0, 0, ""};
    if (c->kind == CTL_ADAPTIVE && rg >= s->mode_from && row.active > 0) {
        if (rate_rule)
            rate_evaluate(p, rg, &v);
        else
            thresholds_evaluate(p, rg, g, &v);
    }

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
    p->st.lv_rounds[rec->mode == PCOLL_SYNC ? 0 : rec->mode == PCOLL_MAJORITY ? 1 : 2]++;
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
    st->dwell = s->dwell;
    st->probe = s->probe;
    st->light_probe = s->lprobe;
    st->light_block_until = s->lblock > s->base ? s->lblock - s->base : 0;
    st->window_fill = s->w_len;
    sig_t g = signals(s);
    st->L = g.L;
    st->A = g.A;
    st->F = g.F;
    st->T = g.T;
    st->gain = p->c.kind == CTL_ADAPTIVE && p->c.rule == CTL_RULE_RATE ? NAN : g.gain;
    const int order[3] = {LV_SYNC, LV_MAJ, LV_LIGHT};
    int chosen = s->phase ? s->incumbent : s->level;
    st->kind = p->c.kind;
    st->rule = p->c.rule;
    st->light_quorum = p->light.mode == PCOLL_QUORUM ? p->light.quorum : 0;
    st->choice = -1;
    st->probing = p->c.kind == CTL_ADAPTIVE && p->c.rule == CTL_RULE_RATE && s->phase;
    for (int i = 0; i < 3; i++) {
        if (order[i] == chosen && p->c.kind == CTL_ADAPTIVE && p->c.rule == CTL_RULE_RATE) st->choice = i;
        int lv = order[i];
        int ok = s->scored_at[lv] != NONE;
        st->rate[i] = ok ? s->rate[lv] : NAN;
        st->lag[i] = ok ? s->lag[lv] : NAN;
        st->score[i] = ok ? s->score[lv] : NAN;
        st->score_se[i] = ok ? rate_se(s, lv) : NAN;
        st->samples[i] = ok ? s->pool_n[lv] : 0;
    }
}

uint64_t ctl_policy_hash(const ctl_policy_t *p) { return p->hash; }
