/* end.c -- how a run ends: a fatal error on one rank, an error every rank agrees on, or the
 * normal finish. A run that fails exits non-zero on every rank, and its launcher reports the
 * failure (run_abort). */
#include "trainer/end.h"
#include "trainer/watchdog.h"
#include <stdlib.h>

/* A note after an error: this rank was the one not running (its error is a consequence). */
static void note_self_silent(run_t *r) {
    char s[512];
    if (watch_self_silent(r, s, sizeof s)) fprintf(stderr, "eager-train: rank %d: note: %s\n", r->me, s);
}

_Noreturn void run_die(run_t *r, const char *what, const char *msg) {
    fprintf(stderr, "eager-train: rank %d: %s: %s\n", r->me, what, msg);
    note_self_silent(r);
    fflush(stderr);
    if (r->me == 0 && r->log) { /* the other ranks may be anywhere: rank 0 records only itself */
        char why[1024];
        snprintf(why, sizeof why, "rank %d: %s: %s", r->me, what, msg);
        watch_log_owned(r);
        run_close(r, why, 0);
    }
    run_abort(r, 1);
}

void run_stall_abort(void *arg, const char *msg) {
    run_t *r = arg;
    char s[512];
    if (watch_self_silent(r, s, sizeof s)) /* the stall is this rank's own: blame nobody else */
        fprintf(stderr, "eager-train: rank %d: %s; the rounds stalled meanwhile; ending the job\n", r->me, s);
    else
        fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    run_abort(r, 3);
}

void run_agree(run_t *r, int ok, const char *what, const char *msg) {
    int bad = !ok, nbad = 0;
    watch_enter(r, what);
    MPI_Allreduce(&bad, &nbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    watch_leave(r);
    if (!nbad) return;
    if (nbad == r->P) {
        if (r->me == 0)
            fprintf(stderr, "eager-train: %s: %s%s\n", what, msg, r->P > 1 ? " (on every rank)" : "");
    } else if (!ok)
        fprintf(stderr, "eager-train: rank %d: %s: %s\n", r->me, what, msg);
    else if (r->me == 0)
        fprintf(stderr, "eager-train: another rank failed (%s); exiting\n", what);
    fflush(stderr);
    watch_log_owned(r);
    watch_enter(r, "failure report");
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
        run_close(r, why, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    watch_leave(r);
    watch_stop(r);
    run_finalize(r);
    run_fail_launcher(r);
    exit(1);
}

int run_finish(run_t *r) {
    watch_log_owned(r);
    watch_enter(r, "run summary");
    int rc = run_close(r, NULL, 1); /* the run's JSON written, the modules' files closed */
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    watch_leave(r);
    watch_stop(r);
    pcoll_record_free(&r->rec);
    ctl_state_free(r->carried);
    free(r->perm);
    if (r->be) r->be->ops->close(r->be);
    nn_model_free(r->model);
    data_close(r->train);
    data_close(r->test);
    if (run_finalize(r) && !rc) rc = 1;
    if (rc) run_fail_launcher(r);
    return rc;
}
