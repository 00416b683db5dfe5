/* compare_group.c -- pcoll-compare's tables and rows (results/README.md states the rules):
 *   1. one table per experiment + data + model + ranks + epochs + batch;
 *   2. an experiment split over several tables gets a note saying in what;
 *   3. within a table, config keys whose values differ split rows and label them;
 *   4. one row per mode label + imbalance + those keys; repeats are averaged;
 *   5. baselines, paired deltas and the table's notes. */
#include "results/compare.h"
#include <stdlib.h>
#include <string.h>

static int num_or_str_cmp(const char *a, const char *b) {
    char *ea, *eb;
    double x = strtod(a, &ea), y = strtod(b, &eb);
    if (!*ea && !*eb && ea != a && eb != b) return (x > y) - (x < y);
    return strcmp(a, b);
}

static int cmp_table(const void *pa, const void *pb) {
    const group_t *a = *(const group_t *const *)pa, *b = *(const group_t *const *)pb;
    int c;
    if ((c = strcmp(a->experiment, b->experiment))) return c;
    if ((c = strcmp(a->data, b->data))) return c;
    if ((c = strcmp(a->model, b->model))) return c;
    if ((c = num_or_str_cmp(a->ranks_s, b->ranks_s))) return c;
    if ((c = num_or_str_cmp(a->epochs_s, b->epochs_s))) return c;
    return num_or_str_cmp(a->batch_s, b->batch_s);
}

static int mode_order(const char *m) {
    if (!strcmp(m, "ddp")) return -1;
    if (!strcmp(m, "sync")) return 0;
    if (!strcmp(m, "solo")) return 1;
    if (!strcmp(m, "majority")) return 2;
    if (!strncmp(m, "quorum", 6)) return 3;
    if (!strncmp(m, "adaptive", 8)) return 4;
    return 5;
}

/* rows: balanced first, then by imbalance, mode (ddp, sync, solo, majority, quorum:Q by Q, adaptive),
 * label, differing keys */
static int cmp_row(const void *pa, const void *pb) {
    const row_t *a = *(const row_t *const *)pa, *b = *(const row_t *const *)pb;
    int ia = strcmp(a->imbalance, "none") != 0, ib = strcmp(b->imbalance, "none") != 0;
    if (ia != ib) return ia - ib;
    int c;
    if ((c = strcmp(a->imbalance, b->imbalance))) return c;
    if ((c = mode_order(a->mode) - mode_order(b->mode))) return c;
    if (!strncmp(a->mode, "quorum:", 7) && !strncmp(b->mode, "quorum:", 7) &&
        (c = atoi(a->mode + 7) - atoi(b->mode + 7)))
        return c;
    if ((c = strcmp(a->modelabel, b->modelabel))) return c;
    return strcmp(a->extra, b->extra);
}

static const char *group_key_of(const run_t *r, const char *k) {
    return !strcmp(k, "data")     ? r->data
           : !strcmp(k, "model")  ? r->model
           : !strcmp(k, "ranks")  ? r->ranks_s
           : !strcmp(k, "epochs") ? r->epochs_s
                                  : r->batch_s;
}

/* 1. */
static void make_tables(compare_t *c) {
    for (int i = 0; i < c->runs.n; i++) {
        run_t *r = c->runs.v[i];
        group_t *g = NULL;
        for (int j = 0; j < c->groups.n && !g; j++) {
            group_t *h = c->groups.v[j];
            if (!strcmp(h->experiment, r->experiment) && !strcmp(h->data, r->data) &&
                !strcmp(h->model, r->model) && !strcmp(h->ranks_s, r->ranks_s) &&
                !strcmp(h->epochs_s, r->epochs_s) && !strcmp(h->batch_s, r->batch_s))
                g = h;
        }
        if (!g) {
            g = amalloc(sizeof *g);
            *g = (group_t){.experiment = r->experiment,
                           .data = r->data,
                           .model = r->model,
                           .ranks_s = r->ranks_s,
                           .epochs_s = r->epochs_s,
                           .batch_s = r->batch_s};
            pl_push(&c->groups, g);
        }
        pl_push(&g->runs, r);
    }
    if (c->groups.n) qsort(c->groups.v, (size_t)c->groups.n, sizeof(void *), cmp_table);
}

/* 2. */
static void note_split_experiments(compare_t *c) {
    plist done = {0};
    for (int i = 0; i < c->groups.n; i++) {
        group_t *g = c->groups.v[i];
        if (pl_find_str(&done, g->experiment) >= 0) continue;
        pl_push(&done, (void *)g->experiment);
        int ng = 0;
        for (int j = 0; j < c->groups.n; j++)
            ng += !strcmp(((group_t *)c->groups.v[j])->experiment, g->experiment);
        if (ng < 2) continue;
        sbuf b = {0};
        for (const char *const *k = cmp_group_keys; *k; k++) {
            plist vals = {0};
            for (int j = 0; j < c->runs.n; j++) {
                run_t *r = c->runs.v[j];
                if (strcmp(r->experiment, g->experiment)) continue;
                const char *v = group_key_of(r, *k);
                if (pl_find_str(&vals, v) < 0) pl_push(&vals, (void *)v);
            }
            if (vals.n > 1) sb_printf(&b, "%s%s (%s)", b.n ? ", " : "", *k, vs_list(&vals));
        }
        cmp_note(c, "%s: runs differ in %s; they are not averaged and appear in %d separate tables",
                 g->experiment, b.s ? b.s : "?", ng);
        free(b.s);
    }
}

/* 3. sets every run's extra ("[k=v,...]") and pextra (the same keys less those a sync run is
 * blind to: what pairs a run with a sync run of its seed) */
static void label_differing_keys(compare_t *c, group_t *g) {
    plist keys = {0};
    for (int i = 0; i < g->runs.n; i++) {
        run_t *r = g->runs.v[i];
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)r->cfg, k, v) {
            (void)v;
            if (!key_ignored(c, k) && pl_find_str(&keys, k) < 0) pl_push(&keys, (void *)k);
        }
    }
    plist diff = {0};
    sbuf nb = {0};
    for (int ki = 0; ki < keys.n; ki++) {
        const char *k = keys.v[ki];
        plist vals = {0};
        for (int i = 0; i < g->runs.n; i++) {
            run_t *r = g->runs.v[i];
            if (key_moot(k, r)) continue;
            char *t = cfg_val(c, r, k);
            if (pl_find_str(&vals, t) < 0) pl_push(&vals, t);
        }
        if (vals.n > 1) {
            pl_push(&diff, (void *)k);
            sb_printf(&nb, "%s%s (%s)", nb.n ? ", " : "", k, vs_list(&vals));
        }
    }
    if (diff.n) {
        pl_push(&g->notes,
                aprintf("note: runs differ in %s; such runs are not averaged (rows marked [%s=...])", nb.s,
                        (const char *)diff.v[0]));
        for (int i = 0; i < g->runs.n; i++) {
            run_t *r = g->runs.v[i];
            sbuf eb = {0};
            for (int ki = 0; ki < diff.n; ki++) {
                if (key_moot(diff.v[ki], r)) continue;
                sb_printf(&eb, "%s%s=%s", eb.n ? "," : "[", (const char *)diff.v[ki],
                          cfg_val(c, r, diff.v[ki]));
            }
            if (eb.n) sb_printf(&eb, "]");
            r->extra = sb_take(&eb);
            for (int ki = 0; ki < diff.n; ki++)
                if (!key_blind_to_sync(diff.v[ki]))
                    sb_printf(&eb, "%s=%s;", (const char *)diff.v[ki], cfg_val(c, r, diff.v[ki]));
            r->pextra = eb.n ? sb_take(&eb) : "";
        }
    }
    free(nb.s);
}

/* the table's target top-1: --target, else the runs' common one, else none (noted) */
static void table_target(const compare_t *c, group_t *g) {
    plist tg = {0};
    for (int i = 0; i < g->runs.n; i++) {
        run_t *r = g->runs.v[i];
        char *t = isnan(r->target) ? astrdup("none") : aprintf("%g", r->target);
        if (pl_find_str(&tg, t) < 0) pl_push(&tg, t);
    }
    g->target = NAN;
    if (!isnan(c->target))
        g->target = c->target;
    else if (tg.n == 1)
        g->target = ((run_t *)g->runs.v[0])->target;
    else
        pl_push(&g->notes,
                aprintf("note: runs have different target_top1 (%s); each run's own target is used "
                        "for time to target (pass --target T to use one)",
                        vs_list(&tg)));
}

/* which time to target the table shows: the runs' accuracy curves (--curve-every), epoch ends,
 * or both (noted, and named in the column's head) */
static void target_source(const compare_t *c, group_t *g) {
    for (int i = 0; i < g->runs.n; i++) {
        const run_t *r = g->runs.v[i];
        g->ttt_n += !isnan(r->ttt);
        g->ttt_curve += r->ttt_curve;
    }
    if (c->hold)
        pl_push(&g->notes, astrdup("note: to target (--hold): from the first point (curve) or epoch end "
                                   "after which the run stays at or above the target to its end"));
    if (!g->ttt_curve) return;
    if (g->ttt_curve == g->ttt_n)
        pl_push(&g->notes,
                astrdup("note: to target (curve): the wall time of the first point of each run's "
                        "accuracy curve (--curve-every snapshots, evaluated on the first --curve-test "
                        "test samples) that reaches the target"));
    else
        pl_push(&g->notes,
                aprintf("note: to target (curve/epoch): from the accuracy curve (--curve-every) for %d "
                        "of the %d runs that reached the target, from the first epoch end that "
                        "reached it for the others",
                        g->ttt_curve, g->ttt_n));
}

/* 4. */
static void make_rows(group_t *g) {
    for (int i = 0; i < g->runs.n; i++) {
        run_t *r = g->runs.v[i];
        if (!isnan(r->top1)) g->classif = 1;
        row_t *row = NULL;
        for (int j = 0; j < g->rows.n && !row; j++) {
            row_t *w = g->rows.v[j];
            if (!strcmp(w->modelabel, r->modelabel) && !strcmp(w->imbalance, r->imbalance) &&
                !strcmp(w->extra, r->extra))
                row = w;
        }
        if (!row) {
            row = amalloc(sizeof *row);
            *row = (row_t){.mode = r->mode,
                           .modelabel = r->modelabel,
                           .imbalance = r->imbalance,
                           .extra = r->extra,
                           .label = *r->extra ? aprintf("%s %s", r->modelabel, r->extra) : r->modelabel};
            pl_push(&g->rows, row);
        }
        pl_push(&row->runs, r);
    }
    if (g->rows.n) qsort(g->rows.v, (size_t)g->rows.n, sizeof(void *), cmp_row);
    for (int j = 0; j < g->rows.n; j++) row_stats(g->rows.v[j]);
}

/* 5. */
static void compare_rows(compare_t *c, group_t *g) {
    sync_baselines(g);
    ddp_baselines(g);
    int pairs = g->classif ? paired_deltas(c, g) : 0, repeats = 0, nobase = 0, unpaired_base = 0;
    for (int j = 0; j < g->rows.n; j++) {
        const row_t *row = g->rows.v[j];
        g->has_ddp |= !strcmp(row->mode, "ddp");
        repeats |= row->runs.n > 1;
        nobase |= row->base < 0;
        unpaired_base |= row->base < 0 && row->pdtop1.n > 0;
    }
    /* the paired columns where they say more than Δ: rows with repeats (a mean ± error over
     * pairs), or a row without a sync run under its own imbalance (its Δ is '-', its pairs are
     * with the sync runs of its seeds under another) */
    if (pairs && (repeats || unpaired_base) && (g->paired = 1))
        pl_push(&g->notes,
                astrdup("note: paired Δ: each run's top-1 minus that of the sync run with the same seed "
                        "and setting, under any imbalance (sync is bit-identical under every imbalance; "
                        "the final weight hashes are checked); mean ± standard error [pairs]"));
    if (repeats)
        pl_push(&g->notes,
                astrdup("note: rows with n > 1 are repeats of one setting and mode: mean ± sample std "
                        "(run-to-run noise)"));
    if (nobase)
        pl_push(&g->notes,
                astrdup("note: '-' in speedup / Δ: no sync run of the same setting and imbalance"));
    if (g->has_ddp)
        pl_push(&g->notes,
                astrdup("note: vs DDP: this row's mean wall time (to target: mean time to target) over that "
                        "of the pytorch-ddp row of the same imbalance; below 1 is faster than DDP"));
}

void cmp_group(compare_t *c) {
    make_tables(c);
    note_split_experiments(c);
    for (int gi = 0; gi < c->groups.n; gi++) {
        group_t *g = c->groups.v[gi];
        label_differing_keys(c, g);
        table_target(c, g);
        target_source(c, g);
        make_rows(g);
        compare_rows(c, g);
    }
}
