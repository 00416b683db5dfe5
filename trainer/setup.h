/* setup.h -- the run set up, step by step (setup.c), in the order main.c calls them. */
#ifndef TRAINER_SETUP_H
#define TRAINER_SETUP_H

#include "trainer/run.h"

/* MPI with MPI_THREAD_MULTIPLE, checked on every rank: when any rank got less, rank 0 prints one
 * line naming the MPI library, the level provided and the rank, and every rank returns 1 (MPI
 * finalized). Test aid: EAGER_TEST_THREAD_LEVEL=single|funneled|serialized asks for that level.
 * Zeroes r. Returns 0, or 1 after printing why. */
int run_init(run_t *r, int *argc, char ***argv);
/* Options: 0 to go on, 1 after --help was printed (MPI finalized; -1 when run_finalize found a
 * message left unreceived). Bad options: every rank exits. */
int run_configure(run_t *r, int argc, char **argv);
void run_set_threads(run_t *r);   /* the host's cores shared by its ranks */
void run_open_data(run_t *r);     /* training and test sets */
void run_build_model(run_t *r);   /* the host model, checked against the data's shape */
void run_set_optimiser(run_t *r); /* SGD and the lr schedule */
void run_open_backend(run_t *r);  /* --device */
void run_resume(run_t *r);        /* --resume: model, epoch and wall time from the checkpoint */
void run_set_rounds(run_t *r);    /* controller, libpcoll and imbalance configuration */
/* Collective, once before the first pcoll_create (warmup.c, docs/DESIGN.md#warm-up): the
 * backend's warm-up on every shape the run will run, in the watchdog's phase "warm-up" bounded by
 * the controller's first-deposit bound (max(t_first, --t-abort)), then every rank agrees it
 * succeeded (a failure ends every rank, the failing one naming why). Rank 0 keeps the run JSON's
 * "warmup" (each rank's seconds and fingerprint, the shapes) in r->warm_json. */
void run_warmup(run_t *r);

#endif
