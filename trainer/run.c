/* run.c -- how a run ends: a fatal error on one rank, an error every rank agrees on, or the
 * normal finish. Whenever rank 0 can, the run's JSON is closed with a summary whose "exit" says
 * why the run stopped ("ok" only for a run that finished). A run that fails exits non-zero on
 * every rank, and its launcher reports the failure (run_abort). */
#include "trainer/run.h"
#include "trainer/runlog.h"
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

double run_now(void) { return MPI_Wtime(); }

/* The nearest ancestor process that is an Open MPI launcher daemon (mpirun, orted), or 0. Names
 * are matched as prefixes: Debian starts Open MPI's as mpirun.openmpi / mpiexec.openmpi. */
static pid_t launcher_pid(void) {
    static const char *names[] = {"mpirun", "mpiexec", "orterun", "orted"};
    pid_t pid = getppid();
    for (int depth = 0; pid > 1 && depth < 8; depth++) {
        char path[64], comm[64] = "", stat[512] = "";
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f) return 0;
        if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
        fclose(f);
        for (size_t i = 0; i < sizeof names / sizeof *names; i++)
            if (!strncmp(comm, names[i], strlen(names[i]))) return pid;
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid); /* "pid (comm) state ppid ..." */
        if (!(f = fopen(path, "r"))) return 0;
        size_t got = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[got] = 0;
        char *close = strrchr(stat, ')');
        int ppid = 0;
        if (!close || sscanf(close + 1, " %*c %d", &ppid) != 1) return 0;
        pid = (pid_t)ppid;
    }
    return 0;
}

/* Open MPI only: under `mpirun --enable-recovery` (Open MPI sets OMPI_MCA_orte_enable_recovery in
 * the ranks' environment) the launcher ignores the ranks' exit statuses: a failing rank ends the
 * job through its launcher daemon, which then exits non-zero. Elsewhere (Open MPI's mpirun without
 * it, MPICH's hydra, srun) the launcher ends the job at the first non-zero exit or MPI_Abort and
 * reports it: nothing is needed. */
static void fail_launcher(const run_t *r) {
    const char *rec = getenv("OMPI_MCA_orte_enable_recovery");
    if (!rec || !(rec[0] == '1' || rec[0] == 't' || rec[0] == 'T')) return;
    pid_t pid = launcher_pid();
    if (pid <= 0) return;
    fprintf(stderr,
            "eager-train: rank %d: mpirun --enable-recovery ignores exit statuses: ending the job through "
            "its launcher (pid %d) so that it exits non-zero\n",
            r->me, (int)pid);
    fflush(stderr);
    kill(pid, SIGTERM);
}

_Noreturn void run_abort(run_t *r, int code) {
    fail_launcher(r);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

typedef struct {
    run_t *r;
    const char *name;
} unreceived_t;

static void report_unreceived(void *arg, int source, int tag, int bytes) {
    unreceived_t *u = arg;
    fprintf(stderr,
            "eager-train: rank %d: a message from rank %d (tag %d, %d bytes) on %s was never received "
            "before MPI_Finalize: a bug in eager-train, please report it\n",
            u->r->me, source, tag, bytes, u->name);
}

void run_unreceived(run_t *r, MPI_Comm comm, const char *name) {
    unreceived_t u = {r, name};
    r->unreceived += pcoll_unreceived(comm, report_unreceived, &u);
}

int run_finalize(run_t *r) {
    run_unreceived(r, MPI_COMM_WORLD, "MPI_COMM_WORLD");
    MPI_Finalize();
    return r->unreceived > 0;
}

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
        runlog_finish(r, why, 0);
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
        runlog_finish(r, why, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    watch_leave(r);
    watch_stop(r);
    run_finalize(r);
    fail_launcher(r);
    exit(1);
}

int run_finish(run_t *r) {
    watch_log_owned(r);
    watch_enter(r, "run summary");
    int rc = runlog_finish(r, NULL, 1);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    watch_leave(r);
    watch_stop(r);
    pcoll_record_free(&r->rec);
    ctl_state_free(r->carried);
    curve_close(r);
    gstats_close(r);
    free(r->perm);
    if (r->be) r->be->ops->close(r->be);
    nn_model_free(r->model);
    data_close(r->train);
    data_close(r->test);
    if (run_finalize(r) && !rc) rc = 1;
    if (rc) fail_launcher(r);
    return rc;
}
