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
static const char *const sync_blind_keys[] = {"initial-sync", "final-sync", "tau", "ring", "div", NULL};

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

/* a key the run lacks takes its --assume value, else "(unset)" (runs written before an option
 * existed) */
char *cfg_val(const compare_t *c, const run_t *r, const char *k) {
    const json_t *v = json_object_get(r->cfg, k);
    if (!v)
        for (int i = 0; i < c->assume.n; i++) {
            const char *a = c->assume.v[i], *eq = strchr(a, '=');
            char *key = astrdup(a);
            key[eq - a] = 0;
            if (key_eq(key, k)) return astrdup(eq + 1);
        }
    return val_text(v);
}
