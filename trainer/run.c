/* run.c -- the bottom of the trainer: the close hooks, and the job ended so that its launcher
 * reports a failure (run_abort) or MPI finalized with no message left unreceived. */
#include "trainer/run.h"
#include "trainer/output.h"
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

double run_now(void) { return MPI_Wtime(); }

void run_on_close(run_t *r, run_close_fn fn) {
    if (r->nclose == RUN_MAX_CLOSE) {
        fprintf(stderr, "eager-train: rank %d: more than %d close hooks (internal)\n", r->me, RUN_MAX_CLOSE);
        run_abort(r, 1);
    }
    r->close[r->nclose++] = fn;
}

int run_close(run_t *r, const char *why, int collective) {
    int failed = 0;
    while (r->nclose > 0) {
        run_close_fn fn = r->close[--r->nclose];
        failed |= fn(r, why, collective) != 0;
    }
    return failed;
}

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

void run_fail_launcher(const run_t *r) {
    const char *rec = getenv("OMPI_MCA_orte_enable_recovery");
    if (!rec || !(rec[0] == '1' || rec[0] == 't' || rec[0] == 'T')) return;
    pid_t pid = launcher_pid();
    if (pid <= 0) return;
    fprintf(stderr,
            "eager-train: rank %d: mpirun --enable-recovery ignores exit statuses: ending the job through "
            "its launcher (pid %d) so that it exits non-zero\n",
            r->me, (int)pid);
    output_drain(2.0); /* the launcher forwards what this rank printed before it is ended */
    kill(pid, SIGTERM);
}

_Noreturn void run_abort(run_t *r, int code) {
    run_fail_launcher(r);
    output_drain(2.0);
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
