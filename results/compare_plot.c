/* compare_plot.c -- pcoll-compare's figures: per table the training loss and test top-1 (or test
 * loss) against wall time, one line per row (repeats averaged epoch by epoch; the test figure
 * draws a row's accuracy curve instead when all its runs carry one); per allreduce
 * benchmark file the paper's Fig. 9 (latency against message size, one panel per skew). Writes
 * SLUG.dat + SLUG.gp and runs gnuplot on them ($PCOLL_GNUPLOT or PATH). */
#include "results/compare.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------------------------------- */
/* figures                                                                                    */

static char *slug(const char *s) {
    char *o = astrdup(s);
    for (char *p = o; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
              *p == '.'))
            *p = '_';
    return o;
}
static char *gp_quote(const char *s) { /* gnuplot "..." string: escape \ and " */
    sbuf b = {0};
    for (; *s; s++) sb_printf(&b, "%s%c", (*s == '"' || *s == '\\') ? "\\" : "", *s);
    return sb_take(&b);
}
static char *sh_quote(const char *s) {
    sbuf b = {0};
    sb_printf(&b, "'");
    for (; *s; s++) {
        if (*s == '\'')
            sb_printf(&b, "'\\''");
        else
            sb_printf(&b, "%c", *s);
    }
    sb_printf(&b, "'");
    return sb_take(&b);
}
static const char *dnum(double x) { return isnan(x) ? "NaN" : aprintf("%.10g", x); }

static const char *gnuplot_bin(void) {
    const char *g = getenv("PCOLL_GNUPLOT");
    return g && *g ? g : "gnuplot";
}
static int have_gnuplot(void) {
    char *cmd = aprintf("command -v %s >/dev/null 2>&1", sh_quote(gnuplot_bin()));
    return system(cmd) == 0;
}
static const char *png_terminal(void) {
    char *cmd = aprintf("%s -e 'set terminal pngcairo' </dev/null >/dev/null 2>&1", sh_quote(gnuplot_bin()));
    return system(cmd) == 0 ? "pngcairo" : "png";
}

typedef struct {
    const char *dir;
    plist gp;
    plist outs;
} plotctx;

static FILE *open_out(const char *dir, const char *name) {
    char *p = aprintf("%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f) fprintf(stderr, "pcoll-compare: cannot write %s: %s\n", p, strerror(errno));
    return f;
}

/* the array KEY ("epochs", "curve") of run i of row r; NULL when the run has none */
static const json_t *run_array(const row_t *r, int i, const char *key) {
    return json_object_get(((run_t *)r->runs.v[i])->root, key);
}

/* The number of points of row r's accuracy curve ("curve", --curve-every): the shortest curve
 * among its runs, or 0 when any run has none (the row is then drawn from its epoch ends). */
static int row_curve_len(const row_t *r) {
    int len = 0;
    for (int i = 0; i < r->runs.n; i++) {
        int k = (int)json_array_size(run_array(r, i, "curve"));
        if (k == 0) return 0;
        if (i == 0 || k < len) len = k;
    }
    return len;
}

/* Writes row r's first len curve points to d as gnuplot block idx, each the mean over the row's
 * runs of the point with the same index. The columns put wall_s, test_loss and test_top1 where the
 * epoch blocks have them (2, 4, 5), so the figure reads either kind with the same "using". */
static void write_curve_block(FILE *d, const row_t *r, int idx, int len) {
    fprintf(d,
            "\n\n# index %d: accuracy curve of %s imbalance=%s n=%d\n# point wall_s epoch test_loss "
            "test_top1_pct batches samples\n",
            idx, r->label, r->imbalance, r->runs.n);
    static const char *keys[] = {"wall_s", "epoch", "test_loss", "test_top1", "batches", "samples"};
    double *xs = amalloc(sizeof(double) * (size_t)r->runs.n);
    for (int p = 0; p < len; p++) {
        fprintf(d, "%d", p);
        for (int k = 0; k < 6; k++) {
            for (int i = 0; i < r->runs.n; i++)
                xs[i] = jnum(json_array_get(run_array(r, i, "curve"), (size_t)p), keys[k]);
            double m = stat_of(xs, r->runs.n).mean;
            fprintf(d, " %s", dnum(k == 3 ? 100 * m : m));
        }
        fprintf(d, "\n");
    }
}

/* per-row epoch curves (repeats: epoch-wise mean) and, for rows whose runs all have one, the
 * accuracy curve (repeats: point-wise mean); writes SLUG.dat and SLUG.gp */
static int plot_group(plotctx *pc, const group_t *g, const char *pngterm) {
    char *s = slug(aprintf("%s_%s_%s_p%s_e%s_b%s", g->experiment, g->model, g->data, g->ranks_s, g->epochs_s,
                           g->batch_s));
    int any = 0;
    for (int i = 0; i < g->runs.n; i++)
        any |= json_array_size(json_object_get(((run_t *)g->runs.v[i])->root, "epochs")) > 0;
    if (!any) {
        fprintf(stderr, "note: no figure for %s: its runs have no epochs\n", group_title(g));
        return 0;
    }
    FILE *d = open_out(pc->dir, aprintf("%s.dat", s));
    if (!d) return -1;
    int *cidx = amalloc(sizeof(int) * (size_t)(g->rows.n ? g->rows.n : 1)), ncurves = 0;
    for (int j = 0; j < g->rows.n; j++)
        cidx[j] = row_curve_len(g->rows.v[j]) > 0 ? g->rows.n + ncurves++ : -1;
    fprintf(d,
            "# pcoll-compare: %s\n# one block (gnuplot index) per row; repeats are averaged epoch by epoch\n",
            group_title(g));
    if (ncurves)
        fprintf(d, "# then one block per row whose runs all carry an accuracy curve (--curve-every), for the "
                   "test figure;\n# its repeats are averaged point by point (same index, up to the shortest "
                   "curve)\n");
    for (int j = 0; j < g->rows.n; j++) {
        row_t *r = g->rows.v[j];
        int ne = 0;
        for (int i = 0; i < r->runs.n; i++) {
            int k = (int)json_array_size(json_object_get(((run_t *)r->runs.v[i])->root, "epochs"));
            if (k > ne) ne = k;
        }
        fprintf(d,
                "%s# index %d: %s imbalance=%s n=%d\n# epoch wall_s train_loss test_loss test_top1_pct "
                "test_top5_pct\n",
                j ? "\n\n" : "", j, r->label, r->imbalance, r->runs.n);
        static const char *keys[] = {"wall_s", "train_loss", "test_loss", "test_top1", "test_top5"};
        double *xs = amalloc(sizeof(double) * (size_t)r->runs.n);
        for (int e = 0; e < ne; e++) {
            fprintf(d, "%d", e);
            for (int k = 0; k < 5; k++) {
                for (int i = 0; i < r->runs.n; i++)
                    xs[i] = jnum(
                        json_array_get(json_object_get(((run_t *)r->runs.v[i])->root, "epochs"), (size_t)e),
                        keys[k]);
                double m = stat_of(xs, r->runs.n).mean;
                fprintf(d, " %s", dnum(k >= 3 ? 100 * m : m));
            }
            fprintf(d, "\n");
        }
    }
    for (int j = 0; j < g->rows.n; j++)
        if (cidx[j] >= 0) write_curve_block(d, g->rows.v[j], cidx[j], row_curve_len(g->rows.v[j]));
    fclose(d);
    FILE *f = open_out(pc->dir, aprintf("%s.gp", s));
    if (!f) return -1;
    const char *title = gp_quote(group_title(g));
    fprintf(f,
            "# pcoll-compare: run 'gnuplot %s.gp' in this folder\nset datafile missing \"NaN\"\nset grid\n"
            "set xlabel \"wall time (s)\"\n",
            s);
    int multi_imb = 0;
    for (int j = 1; j < g->rows.n; j++)
        multi_imb |= strcmp(((row_t *)g->rows.v[j])->imbalance, ((row_t *)g->rows.v[0])->imbalance) != 0;
    for (int t = 0; t < 2; t++) {
        const char *ext = t ? "svg" : "png";
        fprintf(f, "set terminal %s size 1000,600 noenhanced\n", t ? "svg" : pngterm);
        for (int fig = 0; fig < 2; fig++) {
            const char *name = fig == 0 ? "loss" : (g->classif ? "top1" : "testloss");
            int col = fig == 0 ? 3 : (g->classif ? 5 : 4);
            const char *yl = fig == 0 ? "training loss" : (g->classif ? "test top-1 (%)" : "test loss");
            char *outname = aprintf("%s_%s.%s", s, name, ext);
            pl_push(&pc->outs, aprintf("%s/%s", pc->dir, outname));
            fprintf(f, "set output \"%s\"\nset title \"%s\"\nset ylabel \"%s\"\nset key %s right\nplot ",
                    gp_quote(outname), title, yl, (fig == 1 && g->classif) ? "bottom" : "top");
            for (int j = 0; j < g->rows.n; j++) {
                row_t *r = g->rows.v[j];
                char *lab = multi_imb ? aprintf("%s (%s)", r->label, r->imbalance) : aprintf("%s", r->label);
                if (r->runs.n > 1) lab = aprintf("%s n=%d", lab, r->runs.n);
                int curve = fig == 1 && cidx[j] >= 0;
                fprintf(f, "%s\"%s.dat\" index %d using 2:%d with %s title \"%s\"", j ? ", \\\n     " : "", s,
                        curve ? cidx[j] : j, col, curve ? "lines" : "linespoints", gp_quote(lab));
            }
            fprintf(f, "\n");
        }
    }
    fprintf(f, "unset output\n");
    fclose(f);
    pl_push(&pc->gp, aprintf("%s.gp", s));
    return 0;
}

/* Fig. 9 style: mean latency vs message size, one panel per skew, one line per mode */
static int plot_bench(plotctx *pc, const bench_t *b, const char *pngterm) {
    const char *base = strrchr(b->path, '/') ? strrchr(b->path, '/') + 1 : b->path;
    char *stem = astrdup(base);
    size_t l = strlen(stem);
    if (l > 5 && !strcmp(stem + l - 5, ".json")) stem[l - 5] = 0;
    char *s = slug(aprintf("bench_%s", stem));
    const json_t *res = json_object_get(b->root, "results");
    plist modes = {0}, skews = {0};
    size_t i;
    const json_t *e;
    json_array_foreach(res, i, e) {
        const char *m = jstr(e, "mode"), *k = jstr(e, "skew");
        if (m && pl_find_str(&modes, m) < 0) pl_push(&modes, (void *)m);
        if (k && pl_find_str(&skews, k) < 0) pl_push(&skews, (void *)k);
    }
    FILE *d = open_out(pc->dir, aprintf("%s.dat", s));
    if (!d) return -1;
    fprintf(d, "# pcoll-compare: allreduce benchmark %s; one block per mode x skew\n", b->path);
    int blk = 0;
    for (int k = 0; k < skews.n; k++)
        for (int m = 0; m < modes.n; m++) {
            fprintf(d,
                    "%s# index %d: mode=%s skew=%s\n# bytes mean_latency_us min_latency_us max_latency_us\n",
                    blk ? "\n\n" : "", blk, (const char *)modes.v[m], (const char *)skews.v[k]);
            json_array_foreach(res, i, e) {
                if (!jstr(e, "mode") || !jstr(e, "skew") || strcmp(jstr(e, "mode"), modes.v[m]) ||
                    strcmp(jstr(e, "skew"), skews.v[k]))
                    continue;
                fprintf(d, "%s %s %s %s\n", dnum(jnum(e, "bytes")), dnum(jnum(e, "mean_latency_us")),
                        dnum(jnum(e, "min_latency_us")), dnum(jnum(e, "max_latency_us")));
            }
            blk++;
        }
    fclose(d);
    FILE *f = open_out(pc->dir, aprintf("%s.gp", s));
    if (!f) return -1;
    fprintf(f,
            "# pcoll-compare: run 'gnuplot %s.gp' in this folder\nset datafile missing \"NaN\"\nset grid\n"
            "set logscale xy\nset format x \"%%.0s%%cB\"\nset xlabel \"message size\"\nset ylabel \"mean "
            "latency (us)\"\n"
            "set key below\n",
            s);
    for (int t = 0; t < 2; t++) {
        const char *ext = t ? "svg" : "png";
        char *outname = aprintf("%s.%s", s, ext);
        pl_push(&pc->outs, aprintf("%s/%s", pc->dir, outname));
        fprintf(f,
                "set terminal %s size %d,650 noenhanced\nset output \"%s\"\nset multiplot layout 1,%d title "
                "\"%s\"\n",
                t ? "svg" : pngterm, 600 * (skews.n ? skews.n : 1), gp_quote(outname), skews.n ? skews.n : 1,
                gp_quote(aprintf("partial allreduce latency, P=%.0f, unit %g ms (%s)", jnum(b->root, "ranks"),
                                 jnum(b->root, "unit_ms"), base)));
        for (int k = 0; k < skews.n; k++) {
            fprintf(f, "set title \"skew: %s\"\nplot ", gp_quote(skews.v[k]));
            for (int m = 0; m < modes.n; m++)
                fprintf(f, "%s\"%s.dat\" index %d using 1:2 with linespoints lw 2 title \"%s\"",
                        m ? ", \\\n     " : "", s, k * modes.n + m, gp_quote(modes.v[m]));
            fprintf(f, "\n");
        }
        fprintf(f, "unset multiplot\n");
    }
    fprintf(f, "unset output\n");
    fclose(f);
    pl_push(&pc->gp, aprintf("%s.gp", s));
    return 0;
}

int do_plots(const compare_t *c, const char *dir) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "pcoll-compare: cannot create %s: %s\n", dir, strerror(errno));
        return -1;
    }
    int have = have_gnuplot();
    const char *pngterm = have ? png_terminal() : "pngcairo";
    plotctx pc = {dir, {0}, {0}};
    int rc = 0;
    for (int gi = 0; gi < c->groups.n; gi++)
        if (plot_group(&pc, c->groups.v[gi], pngterm) < 0) rc = -1;
    for (int bi = 0; bi < c->benches.n; bi++)
        if (plot_bench(&pc, c->benches.v[bi], pngterm) < 0) rc = -1;
    if (!have) {
        fprintf(stderr,
                "note: gnuplot not found (%s): wrote the .dat and .gp files to %s but no figures; "
                "install it (apt-get install -y gnuplot-nox) and run 'cd %s && gnuplot FILE.gp'\n",
                gnuplot_bin(), dir, dir);
        return rc;
    }
    for (int k = 0; k < pc.gp.n; k++) {
        char *cmd = aprintf("cd %s && %s %s", sh_quote(dir), sh_quote(gnuplot_bin()), sh_quote(pc.gp.v[k]));
        if (system(cmd) != 0) {
            fprintf(stderr, "pcoll-compare: gnuplot failed on %s/%s\n", dir, (const char *)pc.gp.v[k]);
            rc = -1;
        }
    }
    for (int k = 0; k < pc.outs.n; k++) {
        struct stat st;
        if (stat(pc.outs.v[k], &st) == 0 && st.st_size > 0)
            fprintf(stderr, "wrote %s\n", (const char *)pc.outs.v[k]);
        else {
            fprintf(stderr, "pcoll-compare: %s was not produced\n", (const char *)pc.outs.v[k]);
            rc = -1;
        }
    }
    return rc;
}
