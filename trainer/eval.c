/* eval.c -- evaluation of the current model, sharded over the ranks. */
#include "trainer/eval.h"
#include "trainer/batch.h"
#include "trainer/end.h"
#include "trainer/watchdog.h"
#include <stdlib.h>

void run_evaluate(run_t *r, const data_set_t *set, double *loss, double *top1, double *top5) {
    char err[512] = "";
    backend_t *be = r->be;
    data_iter_t *it = data_iter_new(set, r->me, r->P, r->cfg.batch, 0, DATA_EVAL_FLAGS, err, sizeof err);
    if (!it) run_die(r, "evaluation data", err);
    be->ops->set_training(be, getenv("EAGER_EVAL_BATCHSTATS") ? 1 : 0); /* debugging aid */
    double s[4] = {0, 0, 0, 0};                                         /* loss sum, top1, top5, samples */
    const data_batch_t *b;
    int rc;
    while ((rc = data_iter_next(it, &b, err, sizeof err)) == 1) {
        nn_batch_t nb;
        to_batch(&nb, b);
        if (be->ops->forward(be, &nb, err, sizeof err)) run_die(r, "evaluation", err);
        s[0] += be->ops->loss(be) * b->n;
        s[1] += be->ops->top1(be);
        s[2] += be->ops->top5(be);
        s[3] += b->n;
    }
    if (rc < 0) run_die(r, "evaluation data", err);
    data_iter_free(it);
    be->ops->set_training(be, 1);
    double t[4];
    watch_enter(r, "evaluation");
    MPI_Allreduce(s, t, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    watch_leave(r);
    *loss = t[3] ? t[0] / t[3] : 0;
    *top1 = t[3] ? t[1] / t[3] : 0;
    *top5 = t[3] ? t[2] / t[3] : 0;
}
