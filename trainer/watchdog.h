/* watchdog.h -- a rank dead or hung in a collective outside the training rounds (watchdog.c),
 * named and the job ended within --t-abort. */
#ifndef TRAINER_WATCHDOG_H
#define TRAINER_WATCHDOG_H

#include "trainer/run.h"

/* Every collective outside the training rounds is covered: a peer silent for --t-warn (dead,
 * stopped) is warned about and, after --t-abort, the job ends naming it; while this rank waits in
 * a phase, a live peer that has not reached it is named likewise. Every rank enters the same
 * phases in the same order.
 * Test aid: EAGER_TEST_PAUSE=RANK:PHASE:SECONDS[:NTH] makes RANK sleep (alive) before its NTH
 * (default 1st) entry into PHASE, after printing a line with its pid. */
/* Starts the thread (right after MPI_Init; bounds: the controller's defaults until watch_bounds).
 * Returns 0, or -1 (EAGER_TEST_PAUSE malformed: rank 0 said why; out of memory; MPI). */
int watch_start(run_t *r);
void watch_bounds(run_t *r, double t_warn, double t_abort); /* --t-warn, --t-abort */
/* This rank now waits in the collective(s) named phase, until watch_leave. Nested calls belong to
 * the outer phase. watch_leave never returns once the watchdog is ending the job. */
void watch_enter(run_t *r, const char *phase);
/* watch_enter for a phase that holds local work as long as its own (the warm-up's cuDNN searches
 * and graph capture), bounded by deadline seconds (> 0) instead of --t-abort: a live peer that
 * has not reached the phase is waited for up to deadline, and this rank ends the job once it has
 * been in the phase for deadline, whatever it waits for (the bound on work that never ends while
 * every rank is in the same phase, where no peer would judge). <= 0: watch_enter. */
void watch_enter_until(run_t *r, const char *phase, double deadline);
void watch_leave(run_t *r);
/* on = 1: in the training rounds, where libpcoll and the controller judge the peers. */
void watch_rounds(run_t *r, int on);
/* From now on the main thread finishes the run log itself (the watchdog never writes it). */
void watch_log_owned(run_t *r);
/* 1 with a sentence in s when this rank was not running for longer than --t-warn lately (its
 * watchdog thread woke that late, or has not run since): it is the rank that went silent. */
int watch_self_silent(run_t *r, char *s, size_t n);
/* Ends the thread, tells the peers this rank has finished, receives every heartbeat still in
 * flight to it and frees the watchdog's communicator (run_unreceived checks it first). Collective:
 * every rank calls it at the same point; a rank that does not take part within --t-abort is hung,
 * and the job is aborted naming it. */
void watch_stop(run_t *r);

#endif
