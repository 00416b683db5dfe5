/* base.c -- the helpers every libpcoll file uses: the clock, timed waits on condition variables,
 * the sticky error and the engine's wake-up (pcoll_impl.h). Calls nothing else in libpcoll. */
#include "collectives/pcoll_impl.h"
#include <stdarg.h>
#include <time.h>

double pcoll_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A condition variable whose timed waits count CLOCK_MONOTONIC (a step of the wall clock does
 * not lengthen them): the engine's and the liveness thread's, which wait with pcoll_cond_wait_s. */
void pcoll_cond_init(pthread_cond_t *cv) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

/* Waits on cv (made by pcoll_cond_init, mu held) for at most sec seconds. */
void pcoll_cond_wait_s(pthread_cond_t *cv, pthread_mutex_t *mu, double sec) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long ns = ts.tv_nsec + (long)((sec - (double)(long)sec) * 1e9);
    ts.tv_sec += (time_t)sec + ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

/* Sticky error of this rank (caller holds mu). The first one is kept: later errors are its
 * consequences, and every later call returns the first code with the first message. */
void pcoll_set_error(struct pcoll *h, int code, const char *fmt, ...) {
    if (h->err) return;
    h->err = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->errmsg, sizeof h->errmsg, fmt, ap);
    va_end(ap);
    pthread_cond_broadcast(&h->cv_app);
    pcoll_wake_engine(h);
}

/* Message of a call that failed without breaking the handle (caller holds mu). */
void pcoll_call_error(struct pcoll *h, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->callmsg, sizeof h->callmsg, fmt, ap);
    va_end(ap);
}

void pcoll_wake_engine(struct pcoll *h) {
    h->events++;
    pthread_cond_signal(&h->cv_eng);
}

int pcoll_mpi_fail(struct pcoll *h, int rc, const char *what) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, s, &len);
    pthread_mutex_lock(&h->mu);
    pcoll_set_error(h, PCOLL_ERR_MPI, "rank %d: %s failed: %s", h->me, what, s);
    pthread_mutex_unlock(&h->mu);
    return PCOLL_ERR_MPI;
}
