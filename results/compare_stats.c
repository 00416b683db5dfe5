/* compare_stats.c -- pcoll-compare's statistics: a row's mean ± sample std over its repeats, its
 * sync baseline (speedup and deltas), and the seed-paired top-1 deltas against sync. */
#include "results/compare.h"
#include <string.h>

stat_t stat_of(const double *x, int n) {
    stat_t s = {NAN, NAN, 0};
    double sum = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(x[i])) {
            sum += x[i];
            s.n++;
        }
    if (!s.n) return s;
    s.mean = sum / s.n;
    double ss = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(x[i])) ss += (x[i] - s.mean) * (x[i] - s.mean);
    s.std = s.n > 1 ? sqrt(ss / (s.n - 1)) : 0;
    return s;
}

#define ROW_STAT(row, field)                                                                      \
    do {                                                                                          \
        double *xs_ = amalloc(sizeof(double) * (size_t)(row)->runs.n);                            \
        for (int i_ = 0; i_ < (row)->runs.n; i_++) xs_[i_] = ((run_t *)(row)->runs.v[i_])->field; \
        (row)->field = stat_of(xs_, (row)->runs.n);                                               \
    } while (0)

void row_stats(row_t *row) {
    ROW_STAT(row, wall);
    ROW_STAT(row, ttt);
    ROW_STAT(row, sttt);
    ROW_STAT(row, top1);
    ROW_STAT(row, top5);
    ROW_STAT(row, train_loss);
    ROW_STAT(row, test_loss);
    ROW_STAT(row, mstal);
    ROW_STAT(row, maxstal);
    ROW_STAT(row, streak);
    ROW_STAT(row, fresh);
    int nw = 0;
    for (int i = 0; i < row->runs.n; i++) {
        int k = ((run_t *)row->runs.v[i])->nw;
        if (k > nw) nw = k;
    }
    row->nw = nw;
    row->wait = amalloc(sizeof(double) * (size_t)(nw ? nw : 1));
    double *xs = amalloc(sizeof(double) * (size_t)row->runs.n);
    for (int k = 0; k < nw; k++) {
        for (int i = 0; i < row->runs.n; i++) {
            run_t *r = row->runs.v[i];
            xs[i] = k < r->nw ? r->wait[k] : NAN;
        }
        row->wait[k] = stat_of(xs, row->runs.n).mean;
    }
}

/* The row of mode `mode` that is row's baseline in g: the one of the same imbalance and differing
 * keys, else the only such row of that imbalance; -1 if none. */
static int baseline_row(const group_t *g, const row_t *row, const char *mode) {
    int cand = -1, ncand = 0;
    for (int k = 0; k < g->rows.n; k++) {
        const row_t *s = g->rows.v[k];
        if (strcmp(s->mode, mode) || strcmp(s->imbalance, row->imbalance)) continue;
        if (!strcmp(s->extra, row->extra)) return k;
        cand = k;
        ncand++;
    }
    return ncand == 1 ? cand : -1;
}

void sync_baselines(group_t *g) {
    for (int j = 0; j < g->rows.n; j++) {
        row_t *row = g->rows.v[j];
        row->base = baseline_row(g, row, "sync");
        row->speedup = row->dtop1 = row->dloss = NAN;
        if (row->base < 0) continue;
        const row_t *s = g->rows.v[row->base];
        if (s->wall.n && row->wall.n && row->wall.mean > 0) row->speedup = s->wall.mean / row->wall.mean;
        if (s->top1.n && row->top1.n) row->dtop1 = 100.0 * (row->top1.mean - s->top1.mean);
        if (s->test_loss.n && row->test_loss.n)
            row->dloss = row->test_loss.mean - s->test_loss.mean;
        else if (s->train_loss.n && row->train_loss.n)
            row->dloss = row->train_loss.mean - s->train_loss.mean;
    }
}

static double ratio(stat_t a, stat_t b) { return a.n && b.n && b.mean > 0 ? a.mean / b.mean : NAN; }

void ddp_baselines(group_t *g) {
    for (int j = 0; j < g->rows.n; j++) {
        row_t *row = g->rows.v[j];
        row->dbase = baseline_row(g, row, "ddp");
        const row_t *d = row->dbase >= 0 ? g->rows.v[row->dbase] : NULL;
        row->vs_ddp = d ? ratio(row->wall, d->wall) : NAN;
        row->ttt_vs_ddp = d ? ratio(row->ttt, d->ttt) : NAN;
    }
}

/* The sync run of r's seed and setting in g: the one under r's imbalance if there is one, else any.
 * Sync runs are bit-identical under every imbalance (the trainer deals evenly and waits for all),
 * so two sync runs of one seed that end in different weights are a broken premise: noted, unused. */
static const run_t *sync_of_seed(compare_t *c, const group_t *g, const run_t *r) {
    const run_t *hit = NULL;
    for (int i = 0; i < g->runs.n; i++) {
        const run_t *s = g->runs.v[i];
        if (strcmp(s->mode, "sync") || s->seed != r->seed || strcmp(s->pextra, r->pextra) || isnan(s->top1))
            continue;
        if (hit && hit->whash && s->whash && strcmp(hit->whash, s->whash)) {
            const char *cpus = hit->cpu && s->cpu && strcmp(hit->cpu, s->cpu)
                                   ? aprintf(" on different CPUs (%s / %s)", hit->cpu, s->cpu)
                                   : NULL;
            cmp_note(
                c,
                "sync runs %s and %s have seed %.0f but end in different weights (%s, %s)%s; seed %.0f is "
                "not paired",
                hit->path, s->path, s->seed, hit->whash, s->whash, cpus ? cpus : "", s->seed);
            return NULL;
        }
        if (!hit || !strcmp(s->imbalance, r->imbalance)) hit = s;
    }
    return hit;
}

int paired_deltas(compare_t *c, group_t *g) {
    int total = 0;
    for (int j = 0; j < g->rows.n; j++) {
        row_t *row = g->rows.v[j];
        double *d = amalloc(sizeof(double) * (size_t)row->runs.n),
               *q = amalloc(sizeof(double) * (size_t)row->runs.n);
        for (int i = 0; i < row->runs.n; i++) {
            const run_t *r = row->runs.v[i], *s = isnan(r->seed) ? NULL : sync_of_seed(c, g, r);
            d[i] = s && !isnan(r->top1) && s != r ? 100.0 * (r->top1 - s->top1) : NAN;
            q[i] = s && s != r && s->sttt > 0 ? r->sttt / s->sttt : NAN; /* NAN: either never reached */
        }
        row->pdtop1 = stat_of(d, row->runs.n);
        row->psamp = stat_of(q, row->runs.n);
        if (strcmp(row->mode, "sync")) total += row->pdtop1.n;
    }
    return total;
}
