/* compare_export.c -- pcoll-compare's machine-readable outputs: one flat CSV table (numbers
 * unformatted, empty = not available) and the tables as JSON (results/schema/compare.schema.json,
 * format pcoll-compare/1). */
#include "results/compare.h"
#include <string.h>

/* CSV: one flat table, numbers unformatted; empty = not available */
static void csv_field(FILE *o, const char *s, int last) {
    int q = strpbrk(s, ",\"\n") != NULL;
    if (q) {
        fputc('"', o);
        for (; *s; s++) {
            if (*s == '"') fputc('"', o);
            fputc(*s, o);
        }
        fputc('"', o);
    } else
        fputs(s, o);
    fputc(last ? '\n' : ',', o);
}
static const char *csv_num(double x) { return isnan(x) ? "" : aprintf("%.10g", x); }

void print_csv(const compare_t *c, FILE *o) {
    static const char *head[] = {"experiment",
                                 "data",
                                 "model",
                                 "ranks",
                                 "epochs",
                                 "batch",
                                 "target_top1",
                                 "mode",
                                 "policy_label",
                                 "imbalance",
                                 "extra",
                                 "n",
                                 "wall_s",
                                 "wall_s_std",
                                 "time_to_target_s",
                                 "time_to_target_s_std",
                                 "reached",
                                 "final_top1_pct",
                                 "final_top1_pct_std",
                                 "final_top5_pct",
                                 "final_top5_pct_std",
                                 "delta_top1_pts",
                                 "speedup",
                                 "time_vs_ddp",
                                 "time_to_target_vs_ddp",
                                 "final_train_loss",
                                 "final_train_loss_std",
                                 "final_test_loss",
                                 "final_test_loss_std",
                                 "delta_loss",
                                 "mean_staleness",
                                 "mean_staleness_std",
                                 "max_staleness",
                                 "max_streak",
                                 "fresh_fraction",
                                 "wait_s",
                                 "files",
                                 NULL};
    for (int k = 0; head[k]; k++) csv_field(o, head[k], head[k + 1] == NULL);
    for (int gi = 0; gi < c->groups.n; gi++) {
        group_t *g = c->groups.v[gi];
        for (int j = 0; j < g->rows.n; j++) {
            row_t *r = g->rows.v[j];
            sbuf w = {0}, f = {0};
            for (int k = 0; k < r->nw; k++)
                sb_printf(&w, "%s%s", k ? ";" : "", isnan(r->wait[k]) ? "" : aprintf("%.6g", r->wait[k]));
            for (int i = 0; i < r->runs.n; i++)
                sb_printf(&f, "%s%s", i ? ";" : "", ((run_t *)r->runs.v[i])->path);
            const char *v[] = {g->experiment,
                               g->data,
                               g->model,
                               g->ranks_s,
                               g->epochs_s,
                               g->batch_s,
                               csv_num(g->target),
                               r->mode,
                               r->modelabel,
                               r->imbalance,
                               r->extra,
                               aprintf("%d", r->runs.n),
                               csv_num(r->wall.mean),
                               csv_num(r->wall.std),
                               csv_num(r->ttt.mean),
                               csv_num(r->ttt.std),
                               aprintf("%d", r->ttt.n),
                               csv_num(100 * r->top1.mean),
                               csv_num(100 * r->top1.std),
                               csv_num(100 * r->top5.mean),
                               csv_num(100 * r->top5.std),
                               csv_num(r->dtop1),
                               csv_num(r->speedup),
                               csv_num(r->vs_ddp),
                               csv_num(r->ttt_vs_ddp),
                               csv_num(r->train_loss.mean),
                               csv_num(r->train_loss.std),
                               csv_num(r->test_loss.mean),
                               csv_num(r->test_loss.std),
                               csv_num(r->dloss),
                               csv_num(r->mstal.mean),
                               csv_num(r->mstal.std),
                               csv_num(r->maxstal.mean),
                               csv_num(r->streak.mean),
                               csv_num(r->fresh.mean),
                               sb_take(&w),
                               sb_take(&f)};
            int nv = (int)(sizeof v / sizeof v[0]);
            for (int k = 0; k < nv; k++) csv_field(o, v[k], k == nv - 1);
        }
    }
}

static json_t *jnv(double x) { return isnan(x) ? json_null() : json_real(x); }
static json_t *jstat(stat_t s, double scale) {
    json_t *o = json_object();
    json_object_set_new(o, "mean", jnv(s.n ? s.mean * scale : NAN));
    json_object_set_new(o, "std", jnv(s.n ? s.std * scale : NAN));
    json_object_set_new(o, "n", json_integer(s.n));
    return o;
}

int write_json(const compare_t *c, const char *out) {
    json_t *root = json_object(), *tables = json_array(), *notes = json_array();
    json_object_set_new(root, "format", json_string("pcoll-compare/1"));
    for (int i = 0; i < c->notes.n; i++) json_array_append_new(notes, json_string(c->notes.v[i]));
    json_object_set_new(root, "notes", notes);
    for (int gi = 0; gi < c->groups.n; gi++) {
        group_t *g = c->groups.v[gi];
        json_t *t = json_object(), *rows = json_array(), *gn = json_array();
        json_object_set_new(t, "title", json_string(group_title(g)));
        json_object_set_new(t, "experiment", json_string(g->experiment));
        json_object_set_new(t, "data", json_string(g->data));
        json_object_set_new(t, "model", json_string(g->model));
        json_object_set_new(t, "ranks", json_string(g->ranks_s));
        json_object_set_new(t, "epochs", json_string(g->epochs_s));
        json_object_set_new(t, "batch", json_string(g->batch_s));
        json_object_set_new(t, "kind", json_string(g->classif ? "classification" : "regression"));
        json_object_set_new(t, "target_top1", jnv(g->target));
        json_object_set_new(t, "target_held", json_boolean(c->hold));
        for (int k = 0; k < g->notes.n; k++) json_array_append_new(gn, json_string(g->notes.v[k]));
        json_object_set_new(t, "notes", gn);
        for (int j = 0; j < g->rows.n; j++) {
            row_t *r = g->rows.v[j];
            json_t *o = json_object(), *w = json_array(), *files = json_array();
            json_object_set_new(o, "mode", json_string(r->mode));
            json_object_set_new(o, "label", json_string(r->label));
            json_object_set_new(o, "imbalance", json_string(r->imbalance));
            json_object_set_new(o, "n", json_integer(r->runs.n));
            json_object_set_new(o, "wall_s", jstat(r->wall, 1));
            json_object_set_new(o, "time_to_target_s", jstat(r->ttt, 1));
            json_object_set_new(o, "final_top1_pct", jstat(r->top1, 100));
            json_object_set_new(o, "final_top5_pct", jstat(r->top5, 100));
            json_object_set_new(o, "delta_top1_pts", jnv(r->dtop1));
            json_object_set_new(o, "paired_delta_top1_pts", jstat(r->pdtop1, 1));
            json_object_set_new(o, "samples_to_target", jstat(r->sttt, 1));
            json_object_set_new(o, "paired_samples_to_target_vs_sync", jstat(r->psamp, 1));
            json_object_set_new(o, "final_train_loss", jstat(r->train_loss, 1));
            json_object_set_new(o, "final_test_loss", jstat(r->test_loss, 1));
            json_object_set_new(o, "delta_loss", jnv(r->dloss));
            json_object_set_new(o, "speedup", jnv(r->speedup));
            json_object_set_new(o, "baseline",
                                r->base >= 0 ? json_string(((row_t *)g->rows.v[r->base])->label)
                                             : json_null());
            json_object_set_new(o, "time_vs_ddp", jnv(r->vs_ddp));
            json_object_set_new(o, "time_to_target_vs_ddp", jnv(r->ttt_vs_ddp));
            json_object_set_new(o, "ddp_baseline",
                                r->dbase >= 0 ? json_string(((row_t *)g->rows.v[r->dbase])->label)
                                              : json_null());
            json_object_set_new(o, "mean_staleness", jstat(r->mstal, 1));
            json_object_set_new(o, "max_staleness", jstat(r->maxstal, 1));
            json_object_set_new(o, "max_streak", jstat(r->streak, 1));
            json_object_set_new(o, "fresh_fraction", jstat(r->fresh, 1));
            for (int k = 0; k < r->nw; k++) json_array_append_new(w, jnv(r->wait[k]));
            json_object_set_new(o, "wait_s", w);
            for (int i = 0; i < r->runs.n; i++)
                json_array_append_new(files, json_string(((run_t *)r->runs.v[i])->path));
            json_object_set_new(o, "files", files);
            json_array_append_new(rows, o);
        }
        json_object_set_new(t, "rows", rows);
        json_array_append_new(tables, t);
    }
    json_object_set_new(root, "tables", tables);
    int rc = json_dump_file(root, out, JSON_INDENT(1) | JSON_REAL_PRECISION(12));
    json_decref(root);
    if (rc) fprintf(stderr, "pcoll-compare: cannot write %s\n", out);
    return rc ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------- */
