/* dev_wait.c -- the bounded wait of the device data path (pcoll_dev.h: pcoll_dev_poll): a device
 * operation (an NCCL communicator's initialisation, a round's CUDA event) polled together with
 * NCCL's asynchronous error against a deadline. Pure C over the caller's query functions, so
 * the states (pending, done, failed, past the deadline) are tested without a GPU
 * (tests/collectives/test_dev_wait.c); pcoll_nccl.cu feeds it cudaEventQuery and
 * ncclCommGetAsyncError. */
#include "collectives/pcoll_dev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mono_now(void *arg) {
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static void mono_sleep(void *arg, double s) {
    (void)arg;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

int pcoll_dev_poll(const pcoll_dev_poll_t *p, const char *what, char *msg, size_t mlen) {
    double (*now)(void *) = p->now ? p->now : mono_now;
    void (*nap)(void *, double) = p->sleep ? p->sleep : mono_sleep;
    const double t0 = now(p->arg);
    double nap_s = 1e-6;
    char why[400] = "";
    for (long i = 0;; i++) {
        int d = p->done(p->arg, why, sizeof why);
        if (d > 0) return PCOLL_OK;
        if (d < 0 || (p->async && p->async(p->arg, why, sizeof why))) {
            snprintf(msg, mlen, "%s: %s", what, why);
            return PCOLL_ERR_MPI;
        }
        double t = now(p->arg) - t0;
        if (p->timeout_s > 0 && t >= p->timeout_s) {
            snprintf(msg, mlen, "%s: not done after %.1f s", what, t);
            return PCOLL_ERR_TIMEOUT;
        }
        if (i < p->spin) continue;
        nap(p->arg, nap_s);
        nap_s = nap_s * 2 < p->max_sleep_s ? nap_s * 2 : p->max_sleep_s;
    }
}

double pcoll_dev_env_s(const char *name, double dflt) {
    const char *v = getenv(name);
    char *end = NULL;
    double x = v && *v ? strtod(v, &end) : dflt;
    return v && *v && (*end || !(x >= 0)) ? dflt : x;
}
