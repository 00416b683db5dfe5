/* options.c -- the controller policy's configuration: the table of keys with their ranges and
 * defaults, and the check, parse and format that read it. Pure. */
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
 * and the key list of the messages all read this table. Types: 'i' int,
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
    KI("probe", sync_probe, 1, 1 << 30, 256),
    KI("probe_max", probe_max, 1, 1 << 30, 4096),
    KI("cost_n", cost_n, 2, 1024, 32),
    KE("staleness", staleness, CTL_STALE_LINEAR, "quadratic", "linear", "bound"),
    KE("screen", screen, 1, "off", "on"),
    KE("change", change, 0, "score", "steps"),
    KE("worth", worth, 0, "assumed", "measured"),
    {"start", 'r', offsetof(ctl_policy_cfg_t, base), 0, 0, 0, {0}},
};
#define NKEYS (sizeof KEYS / sizeof KEYS[0])

static int *key_int(ctl_policy_cfg_t *c, const polkey_t *k) { return (int *)((char *)c + k->off); }

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
        if (KEYS[i].type == 'i' || KEYS[i].type == 'e') *key_int(c, &KEYS[i]) = (int)KEYS[i].def;
    }
}

int policy_fail(char *err, size_t n, const char *fmt, ...) {
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return CTL_ERR_ARG;
}

int ctl_policy_check(const ctl_policy_cfg_t *c, char *err, size_t n) {
    if (!c) return policy_fail(err, n, "policy config is NULL");
    if (c->kind != CTL_STATIC && c->kind != CTL_ADAPTIVE)
        return policy_fail(err, n, "bad policy kind %d", c->kind);
    if (c->base.mode < PCOLL_SYNC || c->base.mode > PCOLL_QUORUM)
        return policy_fail(err, n, "bad base mode %d", (int)c->base.mode);
    if (c->base.mode == PCOLL_QUORUM && (c->base.quorum < 1 || c->base.quorum > PCOLL_MAX_RANKS))
        return policy_fail(err, n, "quorum %d out of range 1..%d", c->base.quorum, PCOLL_MAX_RANKS);
    if (c->base.nwait != 0)
        return policy_fail(err, n, "base rule must have an empty wait set (nwait=%d)", c->base.nwait);
    ctl_policy_cfg_t *w = (ctl_policy_cfg_t *)c; /* read through the table's accessors only */
    for (size_t i = 0; i < NKEYS; i++) {
        const polkey_t *k = &KEYS[i];
        if (k->type == 'i' || k->type == 'e') {
            int v = *key_int(w, k);
            if (v < k->lo || v > k->hi)
                return policy_fail(err, n, "%s=%d out of range %.0f..%.0f", k->key, v, k->lo, k->hi);
        }
    }
    if (c->tau_by == CTL_TAU_POLICY && c->tau > 0 && c->tau < c->lag)
        return policy_fail(err, n, "tau_by=policy needs tau >= lag (tau=%d, lag=%d)", c->tau, c->lag);
    if (c->probe_max < c->sync_probe)
        return policy_fail(err, n, "need 1 <= probe=%d <= probe_max=%d", c->sync_probe, c->probe_max);
    return CTL_OK;
}

/* libpcoll's parser; the controller keeps quorum 0 for majority and sync (its saved states and
 * decision hashes have it so). */
static int parse_rule(const char *s, pcoll_rule_t *r) {
    if (pcoll_parse_mode(s, r) != PCOLL_OK) return -1;
    if (r->mode == PCOLL_MAJORITY || r->mode == PCOLL_SYNC) r->quorum = 0;
    return 0;
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
    if (!c) return policy_fail(err, n, "policy config is NULL");
    ctl_policy_default(c);
    if (!s || !*s)
        return policy_fail(err, n, "empty policy (expected adaptive, solo, majority, sync or quorum:Q)");
    char buf[512];
    if (strlen(s) >= sizeof buf) return policy_fail(err, n, "policy string too long (%zu chars)", strlen(s));
    strcpy(buf, s);
    char *save = NULL;
    char *tok = strtok_r(buf, ",", &save);
    if (!tok) return policy_fail(err, n, "policy '%s': no policy name", s);
    if (!strcmp(tok, "adaptive")) {
        c->kind = CTL_ADAPTIVE;
    } else {
        c->kind = CTL_STATIC;
        if (parse_rule(tok, &c->base))
            return policy_fail(
                err, n,
                "unknown policy '%s' in '%s' (expected adaptive, solo, majority, sync or quorum:Q "
                "with Q >= 1)",
                tok, s);
    }
    char keys[512];
    int start = 0; /* the start rule was given */
    while ((tok = strtok_r(NULL, ",", &save))) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return policy_fail(err, n, "policy '%s': option '%s' has no value (expected key=value; keys: %s)",
                               s, tok, key_list(keys, sizeof keys));
        *eq = 0;
        const char *k = tok, *v = eq + 1;
        if (!strcmp(k, "rule")) { /* the one adaptive rule's name, still accepted */
            if (strcmp(v, "rate"))
                return policy_fail(err, n,
                                   "policy '%s': bad value '%s' for option 'rule' (rate is the one adaptive "
                                   "rule; rule=thresholds is gone)",
                                   s, v);
            continue;
        }
        const polkey_t *key = NULL;
        for (size_t i = 0; i < NKEYS && !key; i++)
            if (!strcmp(k, KEYS[i].key)) key = &KEYS[i];
        if (!key)
            return policy_fail(err, n, "policy '%s': unknown option '%s' (keys: %s)", s, k,
                               key_list(keys, sizeof keys));
        if (key->type == 'r' && c->kind != CTL_ADAPTIVE)
            return policy_fail(err, n, "policy '%s': option 'start' is only for adaptive", s);
        start |= key->type == 'r';
        char want[64];
        if (parse_key(key, v, c, want, sizeof want))
            return policy_fail(err, n, "policy '%s': bad value '%s' for option '%s' (%s)", s, v, k, want);
    }
    /* adaptive starts in sync unless told otherwise (docs/DESIGN.md#7-the-controller) */
    if (c->kind == CTL_ADAPTIVE && !start) parse_rule("sync", &c->base);
    char e2[256];
    if (ctl_policy_check(c, e2, sizeof e2)) return policy_fail(err, n, "policy '%s': %s", s, e2);
    return CTL_OK;
}

const char *rule_str(const pcoll_rule_t *r, char *b, size_t n) {
    return pcoll_format_mode(r->mode, r->quorum, b, n);
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
        else if (key->type == 'e')
            k += (size_t)snprintf(buf + k, n - k, ",%s=%s", key->key, key->names[*key_int(w, key)]);
        else if (c->kind == CTL_ADAPTIVE)
            k += (size_t)snprintf(buf + k, n - k, ",start=%s", r);
    }
    return buf;
}

double ctl_step_cost(const ctl_policy_cfg_t *c, double step_s, double cycle_s) {
    return c->kind == CTL_ADAPTIVE ? cycle_s : step_s;
}
