/* compare_keys.c -- which config keys of a run split pcoll-compare's rows, and their values.
 * Keys are the trainer's option names (trainer/config.c); '-' and '_' are treated alike. */
#include "results/compare.h"
#include <string.h>

/* keys that make a table (compare_group.c): runs that differ in them are never averaged */
const char *const cmp_group_keys[] = {"data", "model", "ranks", "epochs", "batch", NULL};
/* keys of the trainer's config that never split rows: the row keys themselves, the seed (repeats
 * differ in it), the target, output / logging / checkpoint / data paths, the stall watchdog and
 * the accuracy curve and the gradient statistics (they leave the training and its wall times
 * unchanged) */
static const char *const ignored_keys[] = {
    "seed",      "mode",    "imbalance",   "target-top1", "experiment", "config", "out",
    "log-every", "quiet",   "round-agg",   "ckpt-dir",    "ckpt-every", "resume", "data-path",
    "t-warn",    "t-abort", "curve-every", "curve-test",  "grad-stats", NULL};
/* keys that only matter under mode adaptive: compared among adaptive runs only */
static const char *const adaptive_keys[] = {"policy-opts", "controller", "horizon", NULL};
/* keys a sync run's trajectory does not depend on (it waits for all, every round is fresh):
 * compared among the other modes only, and ignored when pairing runs with sync runs by seed */
static const char *const sync_blind_keys[] = {"initial-sync", "final-sync", "tau", "ring",
                                              "div",          "late",       NULL};
/* options added to the trainer after runs were written, with the value those runs had (KEY=VALUE,
 * as --assume; --assume overrides them) */
static const char *const later_keys[] = {"late=wait", NULL};

int key_eq(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a == '-' ? '_' : *a, y = *b == '-' ? '_' : *b;
        if (x != y) return 0;
    }
    return *a == *b;
}

int key_in(const char *k, const char *const *l) {
    for (; *l; l++)
        if (key_eq(*l, k)) return 1;
    return 0;
}

int key_ignored(const compare_t *c, const char *k) {
    if (key_in(k, ignored_keys) || key_in(k, cmp_group_keys)) return 1;
    for (int i = 0; i < c->ignore.n; i++)
        if (key_eq(c->ignore.v[i], k)) return 1;
    return 0;
}

int key_blind_to_sync(const char *k) { return key_in(k, adaptive_keys) || key_in(k, sync_blind_keys); }

int key_moot(const char *k, const run_t *r) {
    if (r->ddp && !json_object_get(r->cfg, k)) return 1; /* a trainer option DDP has no counterpart of */
    return (key_in(k, adaptive_keys) && strcmp(r->mode, "adaptive")) ||
           (key_in(k, sync_blind_keys) && !strcmp(r->mode, "sync"));
}

/* KEY=VALUE's value if KEY is k, else NULL */
static char *kv_val(const char *a, const char *k) {
    const char *eq = strchr(a, '=');
    char *key = astrdup(a); /* the arena's: freed with it */
    key[eq - a] = 0;
    return key_eq(key, k) ? astrdup(eq + 1) : NULL;
}

/* a key the run lacks takes its --assume value, else the value of runs written before the option
 * existed (later_keys), else "(unset)" */
char *cfg_val(const compare_t *c, const run_t *r, const char *k) {
    const json_t *v = json_object_get(r->cfg, k);
    char *x = NULL;
    for (int i = 0; !v && !x && i < c->assume.n; i++) x = kv_val(c->assume.v[i], k);
    for (int i = 0; !v && !x && later_keys[i]; i++) x = kv_val(later_keys[i], k);
    return x ? x : val_text(v);
}
