/* compare_versus.c -- pcoll-compare --versus MODE (results/README.md states the rules): per table
 * (setting) and imbalance, each row's time to every target, first crossing and held, mean ± sample
 * std over the runs that reached it (k/n reached), and its final top-1; then the rows of MODE
 * against the best static mode of their imbalance: per target and kind, the ratio of times paired
 * by seed (mean ± standard error [pairs], and how many standard errors from 1), the final top-1,
 * and each run's share of rounds in sync / majority / solo. The targets are --target's, else per
 * table the mean final top-1 of its sync runs (one per seed) less 4 points (lower) and 1 point
 * (higher). */
#include "results/compare.h"
#include <stdlib.h>
#include <string.h>

#define NT_MAX 8 /* targets (compare_t.vtarget) */

static int static_mode(const char *m) {
    return !strcmp(m, "sync") || !strcmp(m, "solo") || !strcmp(m, "majority") || !strncmp(m, "quorum", 6);
}

/* a static row of the comparison: a static mode other than the one compared */
static int is_static(const compare_t *c, const row_t *row) {
    return static_mode(row->mode) && strcmp(row->mode, c->versus);
}

/* The table's targets into t (ascending as given); their origin in *why. 0 if there are none (no
 * --target and no sync run with a final top-1). */
static int table_targets(const compare_t *c, const group_t *g, double *t, const char **why) {
    if (c->nvtarget) {
        for (int i = 0; i < c->nvtarget; i++) t[i] = c->vtarget[i];
        *why = "--target";
        return c->nvtarget;
    }
    /* one sync run per seed (the first read): sync is bit-identical under every imbalance, so a
     * seed run under several imbalances would otherwise weigh more than the others */
    double sum = 0;
    int n = 0;
    plist seeds = {0};
    for (int i = 0; i < g->runs.n; i++) {
        const run_t *r = g->runs.v[i];
        char *k = aprintf("%g", r->seed);
        if (strcmp(r->mode, "sync") || isnan(r->top1) || pl_find_str(&seeds, k) >= 0) continue;
        pl_push(&seeds, k);
        sum += r->top1, n++;
    }
    if (!n) return 0;
    t[0] = sum / n - 0.04;
    t[1] = sum / n - 0.01;
    *why = aprintf("sync's mean final top-1, %.2f%% over %d seed(s), less 4 and 1 points", 100 * sum / n, n);
    return 2;
}

/* the row's times to target t (NAN: never reached) as mean ± std over the runs that reached it */
static stat_t row_time(const row_t *row, double t, int hold) {
    double *x = amalloc(sizeof(double) * (size_t)(row->runs.n ? row->runs.n : 1));
    for (int i = 0; i < row->runs.n; i++) x[i] = time_to_target(row->runs.v[i], t, hold, NULL, NULL);
    return stat_of(x, row->runs.n);
}

/* fmt_reached's text; "- (0/n reached)" when no run reached the target */
static char *fmt_time(const row_t *row, stat_t s) {
    return s.n ? fmt_reached(s, row->runs.n) : aprintf("- (0/%d reached)", row->runs.n);
}

/* The best static row of imbalance imb for target t: the fewest runs that never reach it, then the
 * smallest mean time; NULL if no static row reaches it. */
static const row_t *best_static(const compare_t *c, const group_t *g, const char *imb, double t, int hold) {
    const row_t *best = NULL;
    int bmiss = 0;
    double bmean = 0;
    for (int j = 0; j < g->rows.n; j++) {
        const row_t *row = g->rows.v[j];
        if (!is_static(c, row) || strcmp(row->imbalance, imb)) continue;
        stat_t s = row_time(row, t, hold);
        int miss = row->runs.n - s.n;
        if (!s.n) continue;
        if (!best || miss < bmiss || (miss == bmiss && s.mean < bmean))
            best = row, bmiss = miss, bmean = s.mean;
    }
    return best;
}

/* the run of row with seed s (the first if several), NULL if none */
static const run_t *run_of_seed(const row_t *row, double s) {
    for (int i = 0; i < row->runs.n; i++) {
        const run_t *r = row->runs.v[i];
        if (r->seed == s) return r;
    }
    return NULL;
}

/* v's time over best's time to target t, paired by seed: mean ± standard error [pairs of v's runs],
 * how many standard errors the mean is from 1, and best's label. A seed where either run never
 * reaches t, or best has no run, is no pair. */
static char *fmt_ratio(const row_t *v, const row_t *best, double t, int hold) {
    if (!best) return "- (no static mode reaches it)";
    double *q = amalloc(sizeof(double) * (size_t)(v->runs.n ? v->runs.n : 1));
    for (int i = 0; i < v->runs.n; i++) {
        const run_t *a = v->runs.v[i], *b = isnan(a->seed) ? NULL : run_of_seed(best, a->seed);
        double ta = time_to_target(a, t, hold, NULL, NULL),
               tb = b ? time_to_target(b, t, hold, NULL, NULL) : NAN;
        q[i] = tb > 0 ? ta / tb : NAN;
    }
    stat_t s = stat_of(q, v->runs.n);
    char *pairs = s.n < v->runs.n ? aprintf("[%d of %d]", s.n, v->runs.n) : aprintf("[%d]", s.n);
    if (!s.n) return aprintf("- %s vs %s", pairs, best->label);
    if (s.n == 1) return aprintf("%.2f %s vs %s", s.mean, pairs, best->label);
    double se = s.std / sqrt(s.n);
    char *z = se > 0 ? aprintf("%+.1f SE", (s.mean - 1) / se) : astrdup("SE 0");
    return aprintf("%.2f ± %.2f %s %s vs %s", s.mean, se, pairs, z, best->label);
}

static int by_seed(const void *pa, const void *pb) {
    const run_t *a = *(const run_t *const *)pa, *b = *(const run_t *const *)pb;
    return (a->seed > b->seed) - (a->seed < b->seed);
}

/* each run's rounds in sync / majority / solo (%), in seed order: "s1 100/0/0, s2 ..." */
static char *fmt_shares(const row_t *v) {
    const run_t **rs = amalloc(sizeof(void *) * (size_t)(v->runs.n ? v->runs.n : 1));
    for (int i = 0; i < v->runs.n; i++) rs[i] = v->runs.v[i];
    qsort(rs, (size_t)v->runs.n, sizeof(void *), by_seed);
    sbuf b = {0};
    for (int i = 0; i < v->runs.n; i++) {
        ctl_levels_t l;
        sb_printf(&b, "%ss%.0f ", i ? ", " : "", rs[i]->seed);
        if (controller_levels(json_object_get(rs[i]->root, "epochs"), &l) < 0)
            sb_printf(&b, "-");
        else
            sb_printf(&b, "%.0f/%.0f/%.0f", 100 * level_share(&l, "sync"), 100 * level_share(&l, "majority"),
                      100 * level_share(&l, "solo"));
    }
    return b.n ? sb_take(&b) : "-";
}

/* v's mean final top-1, and the static row of its imbalance with the highest one */
static char *fmt_top1(const compare_t *c, const group_t *g, const row_t *v) {
    const row_t *best = NULL;
    for (int j = 0; j < g->rows.n; j++) {
        const row_t *row = g->rows.v[j];
        if (is_static(c, row) && !strcmp(row->imbalance, v->imbalance) && row->top1.n &&
            (!best || row->top1.mean > best->top1.mean))
            best = row;
    }
    char *a = fmt_stat(v->top1, "%.2f", 100);
    return best ? aprintf("%s; %s %.2f", a, best->label, 100 * best->top1.mean) : a;
}

static void print_table(const compare_t *c, const group_t *g, FILE *o) {
    double t[NT_MAX];
    const char *why = "";
    int nt = table_targets(c, g, t, &why);
    fprintf(o, "### %s: %s against the best static mode\n\n", group_setting(g), c->versus);
    for (int k = 0; k < g->notes.n; k++)
        if (!strncmp(g->notes.v[k], "note: runs differ", 17))
            fprintf(o, "%s\n\n", (const char *)g->notes.v[k]);
    if (!nt) {
        fprintf(o, "no target: no sync run with a final top-1 in this table (give --target T)\n\n");
        return;
    }
    fprintf(o, "targets:");
    for (int i = 0; i < nt; i++) fprintf(o, "%s %.2f%%", i ? (i == nt - 1 ? " and" : ",") : "", 100 * t[i]);
    fprintf(o, " (%s)\n\n", why);
    /* every row: its times to each target, first crossing and held */
    fprintf(o, "| imbalance | mode/policy | n | top-1 (%%) |");
    for (int i = 0; i < nt; i++) fprintf(o, " to %.2f%%: first (s) | held (s) |", 100 * t[i]);
    fprintf(o, "\n|---|---|--:|--:|");
    for (int i = 0; i < nt; i++) fprintf(o, "--:|--:|");
    fprintf(o, "\n");
    for (int j = 0; j < g->rows.n; j++) {
        const row_t *row = g->rows.v[j];
        fprintf(o, "| %s | %s | %d | %s |", row->imbalance, row->label, row->runs.n,
                fmt_stat(row->top1, "%.2f", 100));
        for (int i = 0; i < nt; i++)
            for (int h = 0; h < 2; h++) fprintf(o, " %s |", fmt_time(row, row_time(row, t[i], h)));
        fprintf(o, "\n");
    }
    /* the compared mode's rows against the best static mode of their imbalance */
    fprintf(o, "\n| imbalance | %s |", c->versus);
    for (int i = 0; i < nt; i++) fprintf(o, " to %.2f%%: first | held |", 100 * t[i]);
    fprintf(o, " top-1 (%%): %s; best static | rounds sync/majority/solo (%%) |\n|---|---|", c->versus);
    for (int i = 0; i < nt; i++) fprintf(o, "---|---|");
    fprintf(o, "---|---|\n");
    int shown = 0;
    for (int j = 0; j < g->rows.n; j++) {
        const row_t *v = g->rows.v[j];
        if (strcmp(v->mode, c->versus)) continue;
        shown++;
        fprintf(o, "| %s | %s |", v->imbalance, v->label);
        for (int i = 0; i < nt; i++)
            for (int h = 0; h < 2; h++)
                fprintf(o, " %s |", fmt_ratio(v, best_static(c, g, v->imbalance, t[i], h), t[i], h));
        fprintf(o, " %s | %s |\n", fmt_top1(c, g, v), fmt_shares(v));
    }
    if (!shown) fprintf(o, "| (no %s runs) |\n", c->versus);
    fprintf(o, "\n");
}

void print_versus(const compare_t *c, FILE *o) {
    for (int i = 0; i < c->notes.n; i++) fprintf(o, "note: %s\n", (const char *)c->notes.v[i]);
    if (c->notes.n) fprintf(o, "\n");
    int any = 0;
    for (int gi = 0; gi < c->groups.n; gi++) {
        const group_t *g = c->groups.v[gi];
        if (!g->classif) continue; /* regression tables have no top-1 to reach */
        print_table(c, g, o);
        any = 1;
    }
    if (!any) {
        fprintf(o, "no classification runs (a top-1) to compare\n");
        return;
    }
    fprintf(o, "note: to T: first = the wall time of the first point (accuracy curve, else epoch end) at or "
               "above T; held = of the first point from which the run stays at or above T to its end "
               "(pcoll-compare --hold); mean ± sample std over the runs that reached T (k/n reached)\n");
    fprintf(o, "note: best static: per imbalance, target and kind, the static mode (sync, solo, majority, "
               "quorum) whose runs all reach T with the smallest mean time (else the one with the fewest "
               "that do not)\n");
    fprintf(o,
            "note: %s vs best: per seed, %s's time over the best static mode's of the same seed; mean ± "
            "standard error [pairs; 'k of n': n-k seeds where either never reached T], and (mean - 1) / "
            "standard error\n",
            c->versus, c->versus);
    fprintf(o, "note: top-1: final test top-1 on the whole test set, mean ± sample std; best static: the "
               "static mode with the highest mean; rounds: each run's share of rounds at each level, by "
               "seed\n");
}
