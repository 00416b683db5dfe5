/* compare_print.c -- pcoll-compare's Markdown: per table its title, notes, one row per mode/policy
 * + imbalance with mean ± std over repeats, and its files; per allreduce benchmark file a latency
 * table (mean latency in us per mode/skew and message size). */
#include "results/compare.h"
#include <string.h>

char *fmt_stat(stat_t s, const char *f, double scale) {
    if (!s.n) return "-";
    char fm[64];
    if (s.n == 1) return aprintf(f, s.mean * scale);
    snprintf(fm, sizeof fm, "%s ± %s", f, f);
    return aprintf(fm, s.mean * scale, s.std * scale);
}

static char *fmt_int_stat(stat_t s) {
    if (!s.n) return "-";
    if (s.n == 1) return aprintf("%.0f", s.mean);
    return aprintf("%.1f ± %.1f", s.mean, s.std);
}

/* A paired statistic of a row (each run against the sync run of its seed): mean ± standard error
 * [pairs] in format f; "-" for the sync row itself or without pairs. */
static char *fmt_paired(const row_t *row, stat_t s, const char *f) {
    if (!s.n || !strcmp(row->mode, "sync")) return "-";
    char fm[64];
    if (s.n == 1) {
        snprintf(fm, sizeof fm, "%s [1]", f);
        return aprintf(fm, s.mean);
    }
    snprintf(fm, sizeof fm, "%s ± %%.2f [%%d]", f);
    return aprintf(fm, s.mean, s.std / sqrt(s.n), s.n);
}

char *fmt_reached(stat_t s, int n) {
    if (!s.n) return "-";
    char *v = fmt_stat(s, "%.1f", 1);
    return s.n < n ? aprintf("%s (%d/%d reached)", v, s.n, n) : v;
}

static char *fmt_wait(const row_t *row) {
    if (!row->nw) return "-";
    if (row->nw <= 16) {
        sbuf b = {0};
        sb_printf(&b, "w=[");
        for (int k = 0; k < row->nw; k++) {
            if (isnan(row->wait[k]))
                sb_printf(&b, "%s-", k ? "," : "");
            else
                sb_printf(&b, "%s%.2f", k ? "," : "", row->wait[k]);
        }
        sb_printf(&b, "]s");
        return sb_take(&b);
    }
    double mn = INFINITY, mx = -INFINITY, sum = 0;
    int at = -1, n = 0;
    for (int k = 0; k < row->nw; k++) {
        double w = row->wait[k];
        if (isnan(w)) continue;
        n++;
        sum += w;
        if (w < mn) mn = w;
        if (w > mx) {
            mx = w;
            at = k;
        }
    }
    if (!n) return "-";
    return aprintf("w: min %.2f mean %.2f max %.2f s (rank %d)", mn, sum / n, mx, at);
}

static char *fmt_num(double x, const char *f) { return isnan(x) ? "-" : aprintf(f, x); }

const char *group_setting(const group_t *g) {
    return aprintf("%s: model=%s data=%s ranks=%s epochs=%s batch=%s", g->experiment, g->model, g->data,
                   g->ranks_s, g->epochs_s, g->batch_s);
}

const char *group_title(const group_t *g) {
    sbuf b = {0};
    sb_printf(&b, "%s", group_setting(g));
    if (g->classif) {
        if (!isnan(g->target))
            sb_printf(&b, ", target top-1 %.2f%%", 100 * g->target);
        else
            sb_printf(&b, ", no common target top-1");
    } else
        sb_printf(&b, " (regression: losses)");
    return sb_take(&b);
}

#define NCOL_MAX 20
typedef struct {
    int ncol;
    const char *head[NCOL_MAX];
} cols_t;

static void row_cells(const group_t *g, const row_t *row, const char **c, cols_t *h) {
    int n = 0;
#define COL(name, val)       \
    do {                     \
        h->head[n] = (name); \
        c[n++] = (val);      \
    } while (0)
    COL("mode/policy", row->label);
    COL("ranks", g->ranks_s);
    COL("imbalance", row->imbalance);
    COL("n", aprintf("%d", row->runs.n));
    COL("wall (s)", fmt_stat(row->wall, "%.1f", 1));
    if (g->classif) {
        COL(!g->ttt_curve              ? "to target (s)"
            : g->ttt_curve == g->ttt_n ? "to target (curve, s)"
                                       : "to target (curve/epoch, s)",
            fmt_reached(row->ttt, row->runs.n));
        COL("top-1 (%)", fmt_stat(row->top1, "%.2f", 100));
        COL("top-5 (%)", fmt_stat(row->top5, "%.2f", 100));
        COL("Δtop-1 (pts)", fmt_num(row->dtop1, "%+.2f"));
        if (g->paired) COL("paired Δ (pts)", fmt_paired(row, row->pdtop1, "%+.2f"));
        if (g->paired && g->ttt_n) COL("samples to target / sync's", fmt_paired(row, row->psamp, "%.2f"));
    } else {
        COL("train loss", fmt_stat(row->train_loss, "%.4g", 1));
        COL("test loss", fmt_stat(row->test_loss, "%.4g", 1));
        COL("Δloss", fmt_num(row->dloss, "%+.4g"));
    }
    COL("speedup", isnan(row->speedup) ? "-" : aprintf("%.2fx", row->speedup));
    if (g->has_ddp) {
        COL("time vs DDP", fmt_num(row->vs_ddp, "%.2f"));
        if (g->classif) COL("to target vs DDP", fmt_num(row->ttt_vs_ddp, "%.2f"));
    }
    COL("staleness mean", fmt_stat(row->mstal, "%.2f", 1));
    COL("staleness max", fmt_int_stat(row->maxstal));
    COL("max streak", fmt_int_stat(row->streak));
    COL("fresh", fmt_stat(row->fresh, "%.3f", 1));
    COL("wait per rank", fmt_wait(row));
#undef COL
    h->ncol = n;
}

void print_markdown(const compare_t *cmp, FILE *o) {
    for (int i = 0; i < cmp->notes.n; i++) fprintf(o, "note: %s\n", (const char *)cmp->notes.v[i]);
    if (cmp->notes.n) fprintf(o, "\n");
    for (int gi = 0; gi < cmp->groups.n; gi++) {
        group_t *g = cmp->groups.v[gi];
        fprintf(o, "### %s\n\n", group_title(g));
        for (int k = 0; k < g->notes.n; k++) fprintf(o, "%s\n", (const char *)g->notes.v[k]);
        if (g->notes.n) fprintf(o, "\n");
        for (int j = 0; j < g->rows.n; j++) {
            const char *c[NCOL_MAX];
            cols_t h;
            row_cells(g, g->rows.v[j], c, &h);
            if (j == 0) {
                fprintf(o, "|");
                for (int k = 0; k < h.ncol; k++) fprintf(o, " %s |", h.head[k]);
                fprintf(o, "\n|");
                for (int k = 0; k < h.ncol; k++) fprintf(o, "%s|", k < 4 ? "---" : "--:");
                fprintf(o, "\n");
            }
            fprintf(o, "|");
            for (int k = 0; k < h.ncol; k++) fprintf(o, " %s |", c[k]);
            fprintf(o, "\n");
        }
        fprintf(o, "\nfiles:");
        for (int j = 0; j < g->rows.n; j++) {
            row_t *row = g->rows.v[j];
            for (int i = 0; i < row->runs.n; i++) fprintf(o, " %s", ((run_t *)row->runs.v[i])->path);
        }
        fprintf(o, "\n\n");
    }
    for (int bi = 0; bi < cmp->benches.n; bi++) {
        bench_t *b = cmp->benches.v[bi];
        const json_t *res = json_object_get(b->root, "results");
        plist sizes = {0}, series = {0};
        size_t i;
        const json_t *e;
        json_array_foreach(res, i, e) {
            char *sz = aprintf("%.0f", jnum(e, "bytes"));
            char *se = aprintf("%s/%s", jstr(e, "mode") ? jstr(e, "mode") : "?",
                               jstr(e, "skew") ? jstr(e, "skew") : "?");
            if (pl_find_str(&sizes, sz) < 0) pl_push(&sizes, sz);
            if (pl_find_str(&series, se) < 0) pl_push(&series, se);
        }
        fprintf(o, "### allreduce benchmark: %s (P=%.0f, unit %g ms): mean latency (us)\n\n", b->path,
                jnum(b->root, "ranks"), jnum(b->root, "unit_ms"));
        fprintf(o, "| mode/skew |");
        for (int s = 0; s < sizes.n; s++) fprintf(o, " %s B |", (const char *)sizes.v[s]);
        fprintf(o, "\n|---|");
        for (int s = 0; s < sizes.n; s++) fprintf(o, "--:|");
        fprintf(o, "\n");
        int wrong = 0;
        for (int q = 0; q < series.n; q++) {
            fprintf(o, "| %s |", (const char *)series.v[q]);
            for (int s = 0; s < sizes.n; s++) {
                double v = NAN;
                json_array_foreach(res, i, e) {
                    char *sz = aprintf("%.0f", jnum(e, "bytes"));
                    char *se = aprintf("%s/%s", jstr(e, "mode") ? jstr(e, "mode") : "?",
                                       jstr(e, "skew") ? jstr(e, "skew") : "?");
                    if (!strcmp(sz, sizes.v[s]) && !strcmp(se, series.v[q])) v = jnum(e, "mean_latency_us");
                }
                fprintf(o, " %s |", fmt_num(v, "%.1f"));
            }
            fprintf(o, "\n");
        }
        json_array_foreach(res, i, e) if (jnum(e, "wrong") > 0) wrong = 1;
        fprintf(o, "\n%s", wrong ? "note: some results have wrong > 0 (incorrect sums)\n\n" : "");
    }
}
