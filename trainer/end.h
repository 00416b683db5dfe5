/* end.h -- how a run ends (end.c): a fatal error on one rank, an error every rank agrees on, or
 * the normal finish. Whenever rank 0 can, the run's JSON is closed with a summary whose "exit" says
 * why the run stopped ("ok" only for a run that finished): the close hooks (run.h) do it. */
#ifndef TRAINER_END_H
#define TRAINER_END_H

#include "trainer/run.h"

/* Fatal error on this rank: message naming the rank, the run's JSON closed (rank 0), every rank
 * aborted (non-zero). */
_Noreturn void run_die(run_t *r, const char *what, const char *msg);
/* The controller's stall abort (ctl_config_t.on_abort; arg: the run): the controller's message,
 * or, when this rank itself was not running (stopped), that it is the silent one; then run_abort. */
void run_stall_abort(void *arg, const char *msg);
/* Collective: returns if every rank is ok; otherwise the failing ranks' messages are printed,
 * the run's JSON is closed with the reason, and every rank exits with status 1. */
void run_agree(run_t *r, int ok, const char *what, const char *msg);
/* Collective: the run's summary (exit "ok"), the final line; frees everything, finalizes MPI.
 * Returns the process's exit status. */
int run_finish(run_t *r);

#endif
