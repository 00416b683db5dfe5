/* run.c -- how a run ends: a fatal error on one rank, an error every rank agrees on, or the
 * normal finish. Whenever rank 0 can, the run's JSON is closed with a summary whose "exit" says
 * why the run stopped ("ok" only for a run that finished). */
#include "trainer/run.h"
#include "trainer/runlog.h"
#include <stdlib.h>

double run_now(void) { return MPI_Wtime(); }

_Noreturn void run_die(run_t *r, const char *what, const char *msg) {
    fprintf(stderr, "eager-train: rank %d: %s: %s\n", r->me, what, msg);
    fflush(stderr);
    if (r->me == 0 && r->log) { /* the other ranks may be anywhere: rank 0 records only itself */
        char why[1024];
        snprintf(why, sizeof why, "rank %d: %s: %s", r->me, what, msg);
        runlog_finish(r, why, 0);
    }
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void run_agree(run_t *r, int ok, const char *what, const char *msg) {
    int bad = !ok, nbad = 0;
    MPI_Allreduce(&bad, &nbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (!nbad) return;
    if (nbad == r->P) {
        if (r->me == 0)
            fprintf(stderr, "eager-train: %s: %s%s\n", what, msg, r->P > 1 ? " (on every rank)" : "");
    } else if (!ok)
        fprintf(stderr, "eager-train: rank %d: %s: %s\n", r->me, what, msg);
    else if (r->me == 0)
        fprintf(stderr, "eager-train: another rank failed (%s); exiting\n", what);
    fflush(stderr);
    if (r->log) { /* rank 0 may not hold the message: the first failing rank sends it */
        int first = ok ? r->P : r->me, from = 0;
        char why[1024];
        MPI_Allreduce(&first, &from, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (r->me == from && nbad == r->P)
            snprintf(why, sizeof why, "%s: %s", what, msg);
        else if (r->me == from)
            snprintf(why, sizeof why, "rank %d: %s: %s", r->me, what, msg);
        if (from != 0) {
            if (r->me == from) MPI_Send(why, sizeof why, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
            if (r->me == 0) MPI_Recv(why, sizeof why, MPI_CHAR, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        runlog_finish(r, why, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    exit(1);
}

int run_finish(run_t *r) {
    int rc = runlog_finish(r, NULL, 1);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    pcoll_record_free(&r->rec);
    ctl_state_free(r->carried);
    curve_close(r);
    free(r->perm);
    if (r->be) r->be->ops->close(r->be);
    nn_model_free(r->model);
    data_close(r->train);
    data_close(r->test);
    MPI_Finalize();
    return rc;
}
