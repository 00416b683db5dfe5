/* gradstats.c -- --grad-stats FILE: diagnostics of the results the rounds apply.
 *
 * Rank 0 writes one CSV line per round it applies: the round (its index in the epoch's libpcoll
 * handle), its epoch, mode, fresh ranks and lr, the squared norm of its result u_r (the summed
 * gradients over P, as applied), and the inner products <u_r, u_{r-s}> with the results of the
 * s = 1..4 rounds before (over the run, across epochs). Results of different rounds hold gradients of
 * different batches, so the inner products estimate how the expected gradient changes from round
 * to round, without the batches' noise: what a gradient computed s rounds ago is still worth
 * (docs/DESIGN.md, section 6, gradient statistics). Every replica applies the same results, so rank 0's lines are
 * every rank's. Host results only. */
#include "trainer/gradstats.h"
#include "trainer/end.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LAGS = 4 };

struct gstats {
    FILE *f;
    size_t n;
    float *hist; /* LAGS results, the newest at (k - 1) % LAGS */
    uint64_t k;  /* results kept so far */
};

/* The close hook (rank 0): at the finish, the CSV closed. */
static int gstats_close(run_t *r, const char *why, int collective) {
    (void)collective;
    if (why) return 0;
    struct gstats *g = r->gstats;
    if (!g) return 0;
    if (fclose(g->f)) fprintf(stderr, "eager-train: --grad-stats: closing %s failed\n", r->cfg.grad_stats);
    free(g->hist);
    free(g);
    r->gstats = NULL;
    return 0;
}

void gstats_open(run_t *r) {
    const cfg_t *c = &r->cfg;
    if (!c->grad_stats[0]) return;
    char err[640] = "";
    int ok = strcmp(c->device, "cuda") != 0;
    if (!ok) snprintf(err, sizeof err, "--grad-stats needs --device cpu (the results live on the GPU)");
    run_agree(r, ok, "configuration", err);
    if (r->me != 0) return;
    struct gstats *g = calloc(1, sizeof *g);
    if (g) g->n = r->model->nparams;
    if (g) g->hist = malloc(LAGS * g->n * sizeof *g->hist);
    if (!g || !g->hist) run_die(r, "--grad-stats", "out of memory for the results kept");
    if (!(g->f = fopen(c->grad_stats, "w"))) {
        snprintf(err, sizeof err, "cannot write %s: %s", c->grad_stats, strerror(errno));
        run_die(r, "--grad-stats", err);
    }
    fprintf(g->f, "round,epoch,mode,fresh,lr,sq,dot1,dot2,dot3,dot4\n");
    r->gstats = g;
    run_on_close(r, gstats_close);
}

void gstats_round(run_t *r, uint64_t round, int epoch, const pcoll_record_t *rec, const float *res) {
    struct gstats *g = r->gstats;
    if (!g) return;
    double sq = 0, dot[LAGS] = {0};
    for (size_t i = 0; i < g->n; i++) sq += (double)res[i] * res[i];
    for (int s = 1; s <= LAGS && (uint64_t)s <= g->k; s++) {
        const float *u = g->hist + ((g->k - (uint64_t)s) % LAGS) * g->n;
        double d = 0;
        for (size_t i = 0; i < g->n; i++) d += (double)res[i] * u[i];
        dot[s - 1] = d;
    }
    memcpy(g->hist + (g->k % LAGS) * g->n, res, g->n * sizeof *res);
    g->k++;
    fprintf(g->f, "%llu,%d,%s,%d,%.6g,%.9g", (unsigned long long)round, epoch + 1, pcoll_mode_name(rec->mode),
            rec->nfresh, r->sgd.lr, sq);
    for (int s = 0; s < LAGS; s++) {
        if ((uint64_t)s < g->k - 1)
            fprintf(g->f, ",%.9g", dot[s]);
        else
            fputs(",", g->f);
    }
    fputc('\n', g->f);
}
