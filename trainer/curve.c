/* curve.c -- the accuracy curve (--curve-every N, --curve-test M; docs/DESIGN.md).
 *
 * Time to accuracy read at epoch ends is quantised to whole epochs, and an evaluation barrier
 * every N rounds would stop the partial modes' ranks from running apart. So the run only takes
 * snapshots: after the round in which the run's applied batches B (fresh gradients, all ranks,
 * across epochs: the same on every rank, since every rank holds the same records) pass a
 * multiple of N, every rank copies its model (parameters and its own BN running statistics) and
 * notes its wall time. At the epoch end every rank evaluates the epoch's snapshots together:
 * BN statistics averaged over the ranks, the wall time the latest over the ranks (the moment
 * every replica held that model), the first M test samples sharded as the epoch's evaluation
 * is; then the current model is restored bitwise and the time this took leaves the run's clock.
 */
#include "trainer/curve.h"
#include "trainer/datasplit.h"
#include "trainer/end.h"
#include "trainer/eval.h"
#include "trainer/runlog.h"
#include "trainer/watchdog.h"
#include <stdlib.h>
#include <string.h>

/* Host memory one rank may hold in snapshots. A bound against running out of memory, not a
 * tuning constant: the models this trainer runs on CPUs are a few MiB at most, so it allows tens
 * of snapshots per epoch; a larger --curve-every needs fewer. */
#define CURVE_MAX_BYTES (64.0 * 1024 * 1024)

/* The most batches an epoch applies: every training sample once in whole batches (shard epochs
 * drop each rank's last partial batch, so they apply no more), --max-steps per rank at most. */
static int64_t epoch_batches_max(const run_t *r) {
    int64_t nb = data_count(r->train) / r->cfg.batch;
    if (r->cfg.max_steps && nb > (int64_t)r->cfg.max_steps * r->P) nb = (int64_t)r->cfg.max_steps * r->P;
    return nb;
}

/* The close hook: at the finish, the snapshots and the test subset freed. */
static int curve_close(run_t *r, const char *why, int collective) {
    (void)collective;
    if (why) return 0;
    curve_t *cv = &r->curve;
    free(cv->snap);
    free(cv->params);
    free(cv->bn);
    free(cv->now);
    if (cv->test) data_close(cv->test);
    memset(cv, 0, sizeof *cv);
    return 0;
}

void curve_open(run_t *r) {
    const cfg_t *c = &r->cfg;
    curve_t *cv = &r->curve;
    memset(cv, 0, sizeof *cv);
    if (!c->curve_every) return;
    char err[1024] = "";
    int64_t ntest = data_count(r->test);
    snprintf(err, sizeof err, "--curve-test %ld is larger than the test set (%lld samples%s)", c->curve_test,
             (long long)ntest, c->limit_test ? " with --limit-test" : "");
    run_agree(r, c->curve_test <= ntest, "configuration", err);
    /* B passes at most nb / N + 1 multiples of N in an epoch of nb batches */
    const nn_model_t *m = r->model;
    const double one = (double)(m->nparams + m->nbn_stats) * sizeof(float);
    const int64_t nb = epoch_batches_max(r);
    cv->cap = (size_t)(nb / c->curve_every + 1);
    const double need = one * (double)(cv->cap + 1); /* + the current model while evaluating */
    const double fit = CURVE_MAX_BYTES / one - 1;    /* snapshots that fit */
    if (fit < 1)
        snprintf(err, sizeof err,
                 "--curve-every: one snapshot of this model is %.1f MiB, above the %.0f MiB bound",
                 one / 1048576, CURVE_MAX_BYTES / 1048576);
    else
        snprintf(err, sizeof err,
                 "--curve-every %ld: up to %zu snapshots per epoch (%lld batches) of %.2f MiB each need %.0f "
                 "MiB, above the %.0f MiB bound; use --curve-every %lld or more",
                 c->curve_every, cv->cap, (long long)nb, one / 1048576, need / 1048576,
                 CURVE_MAX_BYTES / 1048576,
                 fit >= 2 ? (long long)(nb / ((long long)fit - 1) + 1) : (long long)nb + 1);
    run_agree(r, need <= CURVE_MAX_BYTES, "configuration", err);
    cv->snap = calloc(cv->cap, sizeof *cv->snap);
    cv->params = malloc(cv->cap * m->nparams * sizeof(float));
    cv->bn = malloc((cv->cap * m->nbn_stats + 1) * sizeof(float));
    cv->now = malloc((m->nparams + m->nbn_stats) * sizeof(float));
    run_agree(r, cv->snap && cv->params && cv->bn && cv->now, "accuracy curve",
              "out of memory for the snapshots");
    cv->test = run_open_split(c, DATA_TEST, c->curve_test, err, sizeof err);
    run_agree(r, cv->test != NULL, "accuracy curve test data", err);
    run_on_close(r, curve_close);
}

void curve_round(run_t *r, int epoch, const epoch_t *e, int ngrads) {
    const long every = r->cfg.curve_every;
    if (!every) return;
    const uint64_t b = (uint64_t)epoch * (uint64_t)e->nbatches + e->grads; /* after this round */
    if (b / (uint64_t)every == (b - (uint64_t)ngrads) / (uint64_t)every) return;
    curve_t *cv = &r->curve;
    const nn_model_t *m = r->model;
    char err[512] = "";
    if (cv->n == cv->cap)
        run_die(r, "accuracy curve", "more snapshots in an epoch than it has batches (internal)");
    if (r->be->ops->to_host(r->be, err, sizeof err)) run_die(r, "accuracy curve snapshot", err);
    memcpy(cv->params + cv->n * m->nparams, m->params, m->nparams * sizeof(float));
    memcpy(cv->bn + cv->n * m->nbn_stats, m->bn_stats, m->nbn_stats * sizeof(float));
    cv->snap[cv->n++] = (curve_snap_t){epoch + 1, b, run_now() - r->t_start};
}

/* The host model's parameters and BN statistics from p and bn, then on the backend. */
static void load(run_t *r, const float *p, const float *bn) {
    nn_model_t *m = r->model;
    char err[512] = "";
    memcpy(m->params, p, m->nparams * sizeof(float));
    memcpy(m->bn_stats, bn, m->nbn_stats * sizeof(float));
    if (r->be->ops->from_host(r->be, err, sizeof err)) run_die(r, "accuracy curve", err);
}

void curve_end_epoch(run_t *r, int epoch, epoch_t *e) {
    curve_t *cv = &r->curve;
    nn_model_t *m = r->model;
    char err[512] = "";
    (void)epoch;
    if (!cv->n) return; /* every rank took the same snapshots */
    /* one reduction for all the snapshots' BN statistics, one for their times; the first is where
     * the ranks meet, so the time measured from there on is the same stretch on every rank */
    const int nbn = (int)(cv->n * m->nbn_stats);
    watch_enter(r, "accuracy curve");
    int bad = nbn && MPI_Allreduce(MPI_IN_PLACE, cv->bn, nbn, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    watch_leave(r);
    if (bad) run_die(r, "accuracy curve", "MPI_Allreduce of the BN statistics failed");
    for (int i = 0; i < nbn; i++) cv->bn[i] /= (float)r->P;
    const double t0 = run_now();
    double *wall = malloc(cv->n * sizeof *wall);
    if (!wall) run_die(r, "accuracy curve", "out of memory");
    for (size_t i = 0; i < cv->n; i++) wall[i] = cv->snap[i].wall;
    watch_enter(r, "accuracy curve");
    MPI_Allreduce(MPI_IN_PLACE, wall, (int)cv->n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    watch_leave(r);
    if (r->be->ops->to_host(r->be, err, sizeof err)) run_die(r, "accuracy curve", err);
    memcpy(cv->now, m->params, m->nparams * sizeof(float));
    memcpy(cv->now + m->nparams, m->bn_stats, m->nbn_stats * sizeof(float));
    for (size_t i = 0; i < cv->n; i++) {
        double loss, top1, top5;
        cv->snap[i].wall = wall[i];
        load(r, cv->params + i * m->nparams, cv->bn + i * m->nbn_stats);
        run_evaluate(r, cv->test, &loss, &top1, &top5);
        runlog_curve(r, &cv->snap[i], loss, top1);
    }
    free(wall);
    load(r, cv->now, cv->now + m->nparams); /* the replicas' hash check follows: bitwise */
    cv->n = 0;
    double dt = run_now() - t0;
    watch_enter(r, "accuracy curve");
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    watch_leave(r);
    r->t_start += dt;
    e->t0 += dt;
}
