/* compare_load.c -- pcoll-compare's inputs: run files (eager-sgd-run/1, and PyTorch DDP runs of
 * trainer/ref/ddp_mirror.py: ddp-run/1 with "program": "pytorch-ddp") become run_t with the
 * figures the tables use; allreduce benchmark files become bench_t; other JSON is skipped, and so
 * are the partial files of unfinished runs (*.partial.json, trainer/runlog.h) met in a folder. */
#include "results/compare.h"
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define RUN_SCHEMA "eager-sgd-run/1"
#define DDP_SCHEMA "ddp-run/1" /* the subset of RUN_SCHEMA a DDP run has: config, epochs, summary */

static const char *num_text(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return v ? val_text(v) : NULL;
}

/* Index of the first record of points (the epochs, or the accuracy curve: both have test_top1
 * and wall_s) whose test top-1 reaches target; with hold, of the first record from which every
 * later one reaches it too (a curve evaluated on a test subset swings by tens of points while the
 * learning rate is high, and its first crossing can be one lucky snapshot). Records without a
 * top-1 are passed over. -1 if none, no target or no array. */
static long reach_index(const json_t *points, double target, int hold) {
    if (isnan(target)) return -1;
    long at = -1;
    size_t i;
    const json_t *e;
    json_array_foreach(points, i, e) {
        double t = jnum(e, "test_top1");
        if (isnan(t)) continue;
        if (t < target)
            at = -1;
        else if (at < 0)
            at = (long)i;
        if (at >= 0 && !hold) break;
    }
    return at;
}

/* number k of record i of points; NAN if i < 0 or the record lacks it */
static double point_num(const json_t *points, long i, const char *k) {
    return i < 0 ? NAN : jnum(json_array_get(points, (size_t)i), k);
}

/* The training samples applied through record i: a curve point's own "samples" (counted over the
 * whole run), or the epochs' "samples" summed through epoch i; NAN if i < 0, or a record lacks the
 * count. */
static double samples_through(const json_t *points, long i, int from_curve) {
    if (from_curve || i < 0) return point_num(points, i, "samples");
    double sum = 0;
    for (long j = 0; j <= i; j++) sum += point_num(points, j, "samples");
    return sum;
}

/* key k of the last epoch that has it as a number; NAN if none */
static double last_epoch_num(const json_t *epochs, const char *k) {
    size_t n = json_array_size(epochs);
    for (size_t i = n; i-- > 0;) {
        double v = jnum(json_array_get(epochs, i), k);
        if (!isnan(v)) return v;
    }
    return NAN;
}

/* a summary figure, else the last epoch's */
static double summary_or_last(const json_t *sum, const char *sk, const json_t *ep, const char *ek) {
    double v = jnum(sum, sk);
    return isnan(v) ? last_epoch_num(ep, ek) : v;
}

/* per-rank wait_s, indexed by each entry's "rank" where that is a valid index */
static void read_waits(run_t *r, const json_t *ranks) {
    r->nw = (int)json_array_size(ranks);
    r->wait = amalloc(sizeof(double) * (size_t)(r->nw ? r->nw : 1));
    for (int i = 0; i < r->nw; i++) r->wait[i] = NAN;
    for (int i = 0; i < r->nw; i++) {
        const json_t *rk = json_array_get(ranks, (size_t)i);
        double idx = jnum(rk, "rank");
        int at = (!isnan(idx) && idx >= 0 && idx < r->nw) ? (int)idx : i;
        r->wait[at] = jnum(rk, "wait_s");
    }
}

double time_to_target(const run_t *r, double target, int hold, double *samples, int *from_curve) {
    const json_t *curve = json_object_get(r->root, "curve"), *ep = json_object_get(r->root, "epochs");
    long at = reach_index(curve, target, hold);
    double t = point_num(curve, at, "wall_s");
    int on_curve = !isnan(t);
    if (!on_curve) at = reach_index(ep, target, hold), t = point_num(ep, at, "wall_s");
    if (samples)
        *samples = samples_through(on_curve ? curve : ep, at, on_curve); /* through the same record */
    if (from_curve) *from_curve = on_curve;
    return t;
}

int controller_levels(const json_t *epochs, ctl_levels_t *l) {
    *l = (ctl_levels_t){0};
    size_t i;
    const json_t *e;
    json_array_foreach(epochs, i, e) {
        const json_t *ctl = json_object_get(e, "controller"), *lv = json_object_get(ctl, "levels");
        if (!json_is_object(ctl) || json_array_size(lv) != 3) continue;
        l->switches += jnum(ctl, "switches");
        l->probes += jnum(ctl, "probes");
        l->chosen = jstr(ctl, "chosen") ? jstr(ctl, "chosen") : l->chosen;
        for (int k = 0; k < 3; k++) {
            const json_t *x = json_array_get(lv, (size_t)k);
            l->names[k] = jstr(x, "level");
            l->rounds[k] += jnum(x, "rounds");
        }
    }
    for (int k = 0; k < 3; k++) l->all += l->rounds[k];
    return l->all > 0 && l->names[0] && l->names[1] && l->names[2] ? 0 : -1;
}

double level_share(const ctl_levels_t *l, const char *level) {
    for (int k = 0; k < 3; k++)
        if (l->names[k] && !strcmp(l->names[k], level)) return l->rounds[k] / l->all;
    return NAN;
}

/* An adaptive run's level rounds (controller_levels) as one note: the share of the rounds each level
 * ran, the switches and probes, the level chosen at the end. Nothing for runs without them. */
static void controller_note(compare_t *c, const char *path, const json_t *epochs) {
    ctl_levels_t l;
    if (controller_levels(epochs, &l) < 0) return;
    cmp_note(c,
             "%s: controller rounds %s %.0f%%, %s %.0f%%, %s %.0f%%; %.0f switches (%.0f probes); chosen at "
             "the end: %s",
             path, l.names[0], 100 * l.rounds[0] / l.all, l.names[1], 100 * l.rounds[1] / l.all, l.names[2],
             100 * l.rounds[2] / l.all, l.switches, l.probes, l.chosen ? l.chosen : "none yet");
}

static void add_run(compare_t *c, const char *path, json_t *root, int ddp) {
    run_t *r = amalloc(sizeof *r);
    r->ddp = ddp;
    r->path = astrdup(path);
    r->root = root;
    const json_t *cfg = json_object_get(root, "config");
    const json_t *env = json_object_get(root, "environment");
    const json_t *sum = json_object_get(root, "summary");
    const json_t *ep = json_object_get(root, "epochs");
    const json_t *ctl = json_object_get(root, "controller");
    r->cfg = cfg;
    r->experiment = jstr(root, "experiment") ? jstr(root, "experiment") : "(unnamed)";
    r->data = jstr(cfg, "data") ? jstr(cfg, "data") : "?";
    r->model = jstr(cfg, "model") ? jstr(cfg, "model") : "?";
    r->mode = jstr(cfg, "mode") ? jstr(cfg, "mode") : "?";
    r->imbalance = jstr(cfg, "imbalance") ? jstr(cfg, "imbalance") : "none";
    r->policy = jstr(ctl, "policy") ? jstr(ctl, "policy") : jstr(cfg, "policy");
    r->exit = jstr(sum, "exit");
    r->ranks_s = num_text(cfg, "ranks");
    if (!r->ranks_s) r->ranks_s = num_text(env, "ranks");
    if (!r->ranks_s) r->ranks_s = "?";
    r->epochs_s = num_text(cfg, "epochs") ? num_text(cfg, "epochs") : "?";
    r->batch_s = num_text(cfg, "batch") ? num_text(cfg, "batch") : "?";
    r->wall = summary_or_last(sum, "wall_s", ep, "wall_s");
    r->top1 = summary_or_last(sum, "final_test_top1", ep, "test_top1");
    r->top5 = summary_or_last(sum, "final_test_top5", ep, "test_top5");
    r->train_loss = summary_or_last(sum, "final_train_loss", ep, "train_loss");
    r->test_loss = last_epoch_num(ep, "test_loss");
    r->target = !isnan(c->target) ? c->target : jnum(sum, "target_top1");
    /* the accuracy curve (--curve-every) where the run has one and it reaches the target: its
     * points are not tied to epoch ends; else the first epoch end that reaches it */
    r->ttt = time_to_target(r, r->target, c->hold, &r->sttt, &r->ttt_curve);
    /* held on a curve evaluated on a test subset, yet the whole test set ends below the target:
     * the held time flatters the run */
    if (c->hold && r->ttt_curve && r->top1 < r->target)
        cmp_note(c,
                 "%s: stays at the target (%.2f%%) on its curve, evaluated on part of the test set, but "
                 "ends at %.2f%% on all of it",
                 path, 100 * r->target, 100 * r->top1);
    r->fresh = jnum(sum, "fresh_fraction");
    r->mstal = jnum(sum, "mean_staleness");
    r->maxstal = jnum(sum, "max_staleness");
    r->streak = jnum(sum, "max_streak");
    r->straggler = jnum(sum, "straggler");
    r->seed = jnum(cfg, "seed");
    size_t ne = json_array_size(ep);
    r->whash = ne ? jstr(json_array_get(ep, ne - 1), "weights_hash") : NULL;
    r->cpu = jstr(env, "cpu");
    if (!ddp) read_waits(r, json_object_get(root, "ranks"));
    if (ddp) {
        r->mode = "ddp";
        r->modelabel = jstr(root, "program") ? jstr(root, "program") : "pytorch-ddp";
    } else if (!strcmp(r->mode, "adaptive")) {
        /* the policy's options name the row: "adaptive,staleness=quadratic" -> adaptive/staleness=quadratic */
        const char *p = r->policy ? r->policy : "";
        if (!strncmp(p, "adaptive", 8) && (p[8] == ',' || !p[8])) p += 8 + (p[8] == ',');
        r->modelabel = *p && strcmp(p, "none") ? aprintf("adaptive/%s", p) : "adaptive";
    } else
        r->modelabel = r->mode;
    r->extra = r->pextra = "";
    if (!json_is_object(sum) || !json_is_array(ep) || !json_is_object(cfg))
        cmp_note(
            c,
            "%s lacks config, epochs or summary; check it with pcoll-validate results/schema/%s.schema.json",
            path, ddp ? "ddp" : "run");
    if (!ddp && !c->versus) controller_note(c, path, ep); /* --versus shows them in its table */
    if (r->exit && strcmp(r->exit, "ok"))
        cmp_note(c, "%s ended with exit \"%s\" (its numbers cover what it finished)", path, r->exit);
    pl_push(&c->runs, r);
}

static int seen_path(plist *seen, const char *path) {
    char rp[PATH_MAX];
    const char *k = realpath(path, rp) ? rp : path;
    if (pl_find_str(seen, k) >= 0) return 1;
    pl_push(seen, astrdup(k));
    return 0;
}

int cmp_load_file(compare_t *c, const char *path, plist *seen, int explicit) {
    if (seen_path(seen, path)) return 0;
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        if (json_error_code(&je) == json_error_cannot_open_file) {
            fprintf(stderr, "pcoll-compare: cannot read %s: %s\n", path, je.text);
            return -1;
        }
        fprintf(stderr, "note: skipping %s: not valid JSON (line %d: %s)\n", path, je.line, je.text);
        return 0;
    }
    const char *schema = jstr(root, "schema");
    if (schema && (!strcmp(schema, RUN_SCHEMA) || !strcmp(schema, DDP_SCHEMA))) {
        add_run(c, path, root, !strcmp(schema, DDP_SCHEMA));
        return 0;
    }
    if (json_is_object(root) && json_is_array(json_object_get(root, "results")) &&
        json_object_get(root, "unit_ms")) {
        bench_t *b = amalloc(sizeof *b);
        b->path = astrdup(path);
        b->root = root;
        pl_push(&c->benches, b);
        return 0;
    }
    if (schema)
        fprintf(stderr, "note: skipping %s: schema \"%s\" is not %s or %s\n", path, schema, RUN_SCHEMA,
                DDP_SCHEMA);
    else
        fprintf(stderr, "note: skipping %s: not an %s run file%s\n", path, RUN_SCHEMA,
                explicit ? " (no \"schema\" key)" : "");
    json_decref(root);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int cmp_load_dir(compare_t *c, const char *dir, plist *seen) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "pcoll-compare: cannot open %s: %s\n", dir, strerror(errno));
        return -1;
    }
    plist names = {0};
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        pl_push(&names, aprintf("%s/%s", dir, de->d_name));
    }
    closedir(d);
    if (names.n) qsort(names.v, (size_t)names.n, sizeof(void *), cmp_str);
    int rc = 0;
    for (int i = 0; i < names.n; i++) {
        const char *p = names.v[i];
        struct stat st;
        if (stat(p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (cmp_load_dir(c, p, seen) < 0) rc = -1;
        } else if (S_ISREG(st.st_mode)) {
            size_t l = strlen(p);
            if (l > 13 && !strcmp(p + l - 13, ".partial.json"))
                fprintf(stderr,
                        "note: skipping %s: the record of a run that is running or did not finish "
                        "(its summary.exit says which); name the file to compare it\n",
                        p);
            else if (l > 5 && !strcmp(p + l - 5, ".json") && cmp_load_file(c, p, seen, 0) < 0)
                rc = -1;
        }
    }
    return rc;
}
