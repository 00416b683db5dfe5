/* hog.c -- pcoll-hog: the load jobs/interfere.sh runs beside chosen ranks (a noisy neighbour).
 *
 * Usage: pcoll-hog cpu|mem [--mb N] [--watch PID]
 *   cpu        spins on integer arithmetic: takes the core(s) it may run on (its affinity, set by
 *              the caller with taskset) from whatever else runs there
 *   mem        copies between two buffers of N MiB each (--mb, default 64: larger than a node's
 *              last-level cache, so every pass goes to memory) as fast as it can: takes memory
 *              bandwidth from the whole socket, and its core as the cpu hog does
 *   --watch P  exits when process P is gone (checked every 50 ms): interfere.sh passes its own pid
 * Runs until SIGTERM / SIGINT / SIGKILL, the watched process ending, or its parent ending (Linux:
 * PR_SET_PDEATHSIG, SIGKILL). Exit 0 on a signal or the watched process gone, 2 on a bad argument
 * (one line naming it), 1 when the buffers cannot be allocated. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 1 while the watched process exists (kill(pid, 0) fails with ESRCH once it is gone) */
static int alive(pid_t pid) { return pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH; }

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "cpu") && strcmp(argv[1], "mem"))) {
        fprintf(stderr, "pcoll-hog: the first argument must be cpu or mem, not '%s'\n",
                argc > 1 ? argv[1] : "");
        return 2;
    }
    const int mem = !strcmp(argv[1], "mem");
    long mb = 64;
    pid_t watch = 0;
    for (int i = 2; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--mb") && i + 1 < argc) {
            mb = strtol(argv[++i], &end, 10);
            if (*end || mb < 1 || mb > 65536) {
                fprintf(stderr, "pcoll-hog: --mb takes a number of MiB in 1..65536, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--watch") && i + 1 < argc) {
            long p = strtol(argv[++i], &end, 10);
            if (*end || p < 1) {
                fprintf(stderr, "pcoll-hog: --watch takes a process id, not '%s'\n", argv[i]);
                return 2;
            }
            watch = (pid_t)p;
        } else {
            fprintf(stderr,
                    "pcoll-hog: unknown argument '%s' (usage: pcoll-hog cpu|mem [--mb N] [--watch PID])\n",
                    argv[i]);
            return 2;
        }
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) return 0; /* the parent is already gone */
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    char *a = NULL, *b = NULL;
    size_t n = (size_t)mb << 20;
    if (mem) {
        a = malloc(n);
        b = malloc(n);
        if (!a || !b) {
            fprintf(stderr, "pcoll-hog: cannot allocate 2 x %ld MiB\n", mb);
            free(a);
            free(b);
            return 1;
        }
        memset(a, 1, n);
        memset(b, 2, n);
    }
    volatile unsigned long acc = 1;
    double next = now_s() + 0.05;
    while (!stop) {
        if (mem) {
            /* one pass in 1 MiB pieces, checking the stop conditions between them */
            for (size_t off = 0; off < n && !stop; off += (size_t)1 << 20)
                memcpy(b + off, a + off, (size_t)1 << 20);
            char *t = a;
            a = b;
            b = t;
        } else {
            for (int i = 0; i < 1 << 20; i++) acc = acc * 6364136223846793005UL + 1442695040888963407UL;
        }
        if (now_s() >= next) {
            if (!alive(watch)) break;
            next = now_s() + 0.05;
        }
    }
    free(a);
    free(b);
    return 0;
}
