/* epoch_end.c -- the epoch end: the accuracy curve's snapshots evaluated (curve.c), BN running
 * statistics averaged across ranks (as DDP broadcasts buffers), the replicas checked bitwise
 * equal (a hash of parameters, momentum and BN statistics), evaluation on the test set, the
 * epoch's totals and record, the checkpoint. */
#include "trainer/epoch_end.h"
#include "trainer/curve.h"
#include "trainer/end.h"
#include "trainer/eval.h"
#include "trainer/runlog.h"
#include "trainer/watchdog.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t check_replicas(run_t *r, int epoch) {
    char err[512] = "";
    backend_t *be = r->be;
    watch_enter(r, "BN statistics");
    int bn = be->ops->average_bn(be, MPI_COMM_WORLD, err, sizeof err);
    watch_leave(r);
    if (bn) run_die(r, "BN statistics", err);
    uint64_t h = 0;
    if (be->ops->hash(be, &h, err, sizeof err)) run_die(r, "weights hash", err);
    uint64_t *all = malloc((size_t)r->P * sizeof *all);
    if (!all) run_die(r, "weights hash", "out of memory");
    watch_enter(r, "weights hash");
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    watch_leave(r);
    int bad = 0;
    for (int p = 1; p < r->P; p++) bad |= all[p] != all[0];
    if (bad) {
        if (r->me == 0) {
            fprintf(stderr, "eager-train: replicas differ after epoch %d: weight hashes", epoch);
            for (int p = 0; p < r->P; p++) fprintf(stderr, " rank %d=%016llx", p, (unsigned long long)all[p]);
            fprintf(stderr, "\n  ranks differing from rank 0:");
            for (int p = 1; p < r->P; p++)
                if (all[p] != all[0]) fprintf(stderr, " %d", p);
            fprintf(stderr, "\n");
        }
        snprintf(err, sizeof err, "replicas differ after epoch %d", epoch);
        runlog_finish(r, err, 1);
        MPI_Barrier(MPI_COMM_WORLD);
        run_abort(r, 4);
    }
    free(all);
    return h;
}

/* The epoch's figures over all ranks, and the run's totals. */
static void sum_epoch(run_t *r, const epoch_t *e, epoch_report_t *p) {
    double loc[7] = {e->loss_sum,       (double)e->loss_n,    (double)e->correct, (double)e->seen,
                     (double)e->rounds, (double)e->fresh_sum, (double)e->mysteps},
           glob[7];
    watch_enter(r, "epoch totals");
    MPI_Allreduce(loc, glob, 7, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    p->steps_min = p->steps_max = e->mysteps;
    if (r->global) {
        MPI_Allreduce(&e->mysteps, &p->steps_min, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&e->mysteps, &p->steps_max, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    }
    watch_leave(r);
    p->train_loss = glob[1] ? glob[0] / glob[1] : 0;
    p->train_top1 = glob[3] ? glob[2] / glob[3] : 0;
    p->samples = glob[3];
    p->steps = glob[6];
    /* the mean over the rounds of each round's fresh share (a resumed epoch's earlier rounds: of the
     * ranks then, e->share0); the totals count fresh gradients in units of this P */
    const double share = e->share0 + (double)(e->fresh_sum - e->fresh0) / r->P;
    p->fresh_fraction = !e->rounds  ? 1
                        : e->fresh0 ? share / (double)e->rounds
                                    : (double)e->fresh_sum / ((double)e->rounds * r->P);
    run_totals_t *t = &r->tot;
    t->rounds += e->rounds, t->fresh += e->fresh_sum - e->fresh0 + (uint64_t)llround(e->share0 * r->P),
        t->stale += e->stale_sum, t->stale_n += e->stale_n;
    if (e->max_stale > t->max_stale) t->max_stale = e->max_stale;
    if (e->max_streak > t->max_streak) t->max_streak = e->max_streak;
    if (e->max_streak > r->rs.max_streak) r->rs.max_streak = e->max_streak;
    t->final_loss = p->train_loss;
    if (p->evaluated) t->final_top1 = p->test_top1, t->final_top5 = p->test_top5;
    int hit = data_num_classes(r->train) > 0 && p->evaluated && r->cfg.target_top1 > 0 &&
              p->test_top1 >= r->cfg.target_top1;
    if (hit && t->t_target < 0) t->t_target = p->wall;
}

void checkpoint(run_t *r, int epochs_done, const ckpt_epoch_t *part, double wall) {
    ckpt_meta_t meta = {.epoch = epochs_done,
                        .part = part ? *part : (ckpt_epoch_t){0},
                        .seed = r->cfg.seed,
                        .wall_s = wall,
                        .ranks = r->P,
                        .tot = r->tot,
                        .nrestarts = r->nrestarts};
    memcpy(meta.restarts, r->restarts, sizeof meta.restarts);
    char path[1200] = "", err[1200] = "";
    int ok = 1;
    if (r->me == 0 && r->carried && ctl_state_save(r->carried, NULL, 0, &meta.ctl_len) == CTL_OK) {
        meta.ctl = malloc(meta.ctl_len);
        ok = meta.ctl && ctl_state_save(r->carried, meta.ctl, meta.ctl_len, &meta.ctl_len) == CTL_OK;
        if (!ok) snprintf(err, sizeof err, "the controller state could not be serialised (out of memory)");
    }
    if (r->me == 0 && ok)
        ok = r->be->ops->save(r->be, r->cfg.ckpt_dir, &meta, path, sizeof path, err, sizeof err) == 0;
    free(meta.ctl);
    run_agree(r, ok, "checkpoint", err);
    runlog_checkpoint(r, path);
}

void end_epoch(run_t *r, int epoch, epoch_t *e) {
    const cfg_t *c = &r->cfg;
    epoch_report_t p = {.test_top1 = -1, .test_top5 = -1};
    curve_end_epoch(r, epoch, e); /* before the epoch's times: they exclude it */
    p.weights_hash = check_replicas(r, epoch);
    double now = run_now();
    p.epoch_s = now - e->t0;
    p.wall = now - r->t_start;
    int last = epoch + 1 == c->epochs;
    if ((epoch + 1) % c->eval_every == 0 || last) {
        run_evaluate(r, r->test, &p.test_loss, &p.test_top1, &p.test_top5);
        p.evaluated = 1;
    }
    p.lr = nn_lr_at(&r->sched, epoch); /* the lr this epoch started with */
    sum_epoch(r, e, &p);
    runlog_epoch(r, epoch, e, &p);
    r->epochs_done = epoch + 1;
    if (*c->ckpt_dir && ((c->ckpt_every && (epoch + 1) % c->ckpt_every == 0) || last))
        checkpoint(r, epoch + 1, NULL, p.wall);
    runlog_save(r);
}
