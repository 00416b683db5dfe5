/* run.h -- eager-train's run context and the modules that work on it.
 *
 *   main.c      the outline: set up, train epoch after epoch, finish
 *   setup.c     MPI, options, threads, data, model, optimiser, backend, resume, round config
 *   epoch.c     one epoch: the step loop on libpcoll, the join, the controller's end of epoch;
 *               with --ckpt-every-steps, in parts, each ended like an epoch and checkpointed
 *   rounds.c    applying completed rounds (lr and weight decay of a round) and dealing batches
 *   replicas.c  the epoch end: replicas checked equal, BN averaged, evaluation, checkpoint
 *   curve.c     the accuracy curve (--curve-every): model snapshots, evaluated at the epoch end
 *   runlog.c    every line on the console and every field of the run's JSON
 *   run.c       fatal errors (one rank, or agreed by all) and the end of the run
 *   watchdog.c  a rank dead or hung in a collective outside the training rounds, named and the
 *               job ended within --t-abort
 *
 * One run_t per process, passed by pointer; nothing lives in file-scope variables.
 */
#ifndef TRAINER_RUN_H
#define TRAINER_RUN_H

#include "collectives/pcoll.h"
#include "collectives/sim/imbalance.h"
#include "controller/controller.h"
#include "trainer/backend.h"
#include "trainer/data/data.h"
#include "trainer/nn/nn.h"
#include "trainer/trainer.h"

typedef struct runlog runlog_t;
struct watch;

typedef struct { /* this rank's timers and counters, summed over the run */
    double compute, inject, wait, apply;
    long steps;
    uint32_t max_streak;
} rank_stats_t;

typedef struct {      /* one epoch on this rank */
    double t0;        /* start (MPI_Wtime) */
    long steps;       /* shard: this rank's steps; global: batches / P (nominal) */
    int64_t nbatches; /* batches of the epoch, all ranks together */
    long mysteps;     /* steps this rank ran */
    double loss_sum;  /* training loss and top-1 of this rank's steps */
    long loss_n, correct, seen;
    uint64_t rounds, fresh_sum, stale_n; /* rounds applied (every rank applies every round) */
    uint64_t grads;                      /* the gradients in them: fresh_sum plus merged deposits */
    double stale_sum;
    uint32_t max_stale, max_streak;
    uint64_t fresh0;        /* resumed mid-epoch: the fresh gradients of the rounds before the resume, */
    double share0;          /* and the sum of those rounds' fresh shares (fresh / the ranks then) */
    double t_dep;           /* this rank's previous deposit (MPI_Wtime; the epoch start at first) */
    ctl_policy_stats_t ctl; /* the controller's statistics at the epoch end (equal on all ranks) */
} epoch_t;

/* The run so far, equal on every rank: rounds, fresh and stale gradients, staleness, the last
 * evaluation (-1: none yet), the wall time when target_top1 was first reached (-1: not yet), the
 * FNV-1a over every epoch's controller decision hash. The checkpoint carries it as it is. */
typedef ckpt_totals_t run_totals_t;

typedef struct {      /* one snapshot of the accuracy curve */
    int epoch;        /* 1-based */
    uint64_t batches; /* fresh gradients applied in the run when it was taken (all ranks) */
    double wall;      /* this rank's wall time then; once evaluated, the latest over the ranks */
} curve_snap_t;

typedef struct {      /* the accuracy curve (--curve-every; all zero when off) */
    data_set_t *test; /* the first --curve-test test samples */
    size_t cap, n;    /* snapshots an epoch can take; taken this epoch */
    curve_snap_t *snap;
    float *params, *bn; /* cap x nparams, cap x nbn_stats: the snapshots' models (this rank's BN) */
    float *now;         /* nparams + nbn_stats: the current model while the snapshots are evaluated */
} curve_t;

typedef struct run {
    cfg_t cfg;
    int P, me;                   /* world size and this rank */
    int local_rank, local_ranks; /* on this host */
    int threads;                 /* compute threads of this rank */
    data_set_t *train, *test;
    nn_model_t *model; /* host model: the CPU backend trains it, others mirror it */
    backend_t *be;
    nn_sgd_t sgd;
    nn_lr_sched_t sched;
    ctl_config_t ctl;            /* controller of the epochs that follow --mode */
    ctl_config_t ctl_sync;       /* controller of --initial-sync / --final-sync epochs */
    char policy[400];            /* --mode and --policy-opts as one policy string (cfg_policy) */
    ctl_policy_cfg_t policy_cfg; /* that string parsed, tau = --tau: the mode's one parse */
    ctl_state_t *carried;        /* adaptive: the controller state the next epoch continues (ctl.resume) */
    ckpt_restart_t restarts[CKPT_MAX_RESTARTS]; /* every resume of the run, oldest first (--resume) */
    int nrestarts;
    pcoll_config_t pcoll;
    imb_t imb;
    int global;     /* --epoch-mode global */
    int late_go;    /* --late go */
    int64_t *perm;  /* global: this epoch's permutation of the training set */
    int epoch0;     /* first epoch to run (> 0 after --resume) */
    double wall0;   /* training wall time before this process (--resume) */
    double t_start; /* MPI_Wtime of the run's start, less wall0 */
    rank_stats_t rs;
    run_totals_t tot;
    int epochs_done;    /* epochs completed (the checkpoint's epoch after --resume) */
    ckpt_epoch_t at;    /* --resume from a mid-epoch checkpoint: how far epoch epoch0 had got */
    int at_ranks;       /* the world size that got there */
    pcoll_record_t rec; /* scratch record of pcoll_next */
    runlog_t *log;      /* output: console and JSON (rank 0 writes) */
    curve_t curve;
    struct gstats *gstats; /* --grad-stats (gradstats.c); NULL when off and on ranks other than 0 */
    struct watch *watch;   /* the watchdog (watchdog.c); NULL before watch_start, after watch_stop */
    int unreceived;        /* messages found unreceived before MPI_Finalize (run_unreceived) */
} run_t;

/* ---- config.c (the options themselves: trainer.h) ---------------------------------------- */
/* --mode and --policy-opts as the controller's policy with the bound of --tau: the one place the
 * mode is parsed and tau enters the policy. spec: the policy string. -1 with a message in err
 * naming the options: a tau key in --policy-opts (tau is set by --tau only), a bad mode or key, a
 * bound the policy cannot keep. */
int cfg_policy(const cfg_t *c, ctl_policy_cfg_t *policy, char *spec, size_t speclen, char *err, size_t n);
/* The options that need the number of ranks P (known once MPI is up): a quorum of more than P
 * ranks (the rounds would wait for every rank: sync under another name) and a slow rank that is
 * not in 0..P-1. Returns 0, or -1 with a message in err naming the option and P. */
int cfg_check_ranks(const cfg_t *c, const ctl_policy_cfg_t *policy, int P, char *err, size_t n);

/* ---- setup.c --------------------------------------------------------------------------- */
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
/* One split of --data with the first `limit` samples (0: all). NULL with the reason in err. */
data_set_t *run_open_split(const cfg_t *c, data_split_t split, int64_t limit, char *err, size_t n);

/* ---- epoch.c --------------------------------------------------------------------------- */
/* Trains one epoch: every step, every round applied, the join, the controller's end of epoch. */
void train_epoch(run_t *r, int epoch, epoch_t *e);

/* ---- rounds.c -------------------------------------------------------------------------- */
/* Applies every completed round in order (SGD with the round's lr and weight decay); dl: the
 * dealer of a global epoch (NULL: shard). Returns the rounds applied. */
int apply_rounds(run_t *r, pcoll_t *h, int epoch, epoch_t *e, dealer_t *dl);
/* The gradients a round carries (its deposits: more than |F_r| where a rank merged deposits). */
int round_grads(const pcoll_record_t *rec);
/* Global epoch: hands every batch dealt to this rank to the loader. */
void submit_dealt(run_t *r, data_iter_t *it, dealer_t *dl, int epoch);
/* nn's batch view of a data batch. */
void to_batch(nn_batch_t *nb, const data_batch_t *b);

/* ---- replicas.c ------------------------------------------------------------------------ */
/* The epoch end: the curve's snapshots evaluated, replicas checked equal, BN averaged,
 * evaluation, totals, log, checkpoint. */
void end_epoch(run_t *r, int epoch, epoch_t *e);
/* Collective: averages BN statistics, then compares the ranks' model hashes; returns the hash. A
 * mismatch names the differing ranks, closes the run's JSON with the reason and aborts every rank. */
uint64_t check_replicas(run_t *r, int epoch);
/* Collective: rank 0 writes the model, the run's totals, its restarts, the adaptive controller's
 * state and, mid-epoch (part, else NULL), the epoch in progress: what a resumed run continues.
 * epochs_done: epochs completed. Failure: every rank exits naming the file. */
void checkpoint(run_t *r, int epochs_done, const ckpt_epoch_t *part, double wall);
/* Collective: evaluation of the current model on `set`, sharded over the ranks (evaluation mode,
 * BN on the running statistics as they are); every rank gets the totals. */
void run_evaluate(run_t *r, const data_set_t *set, double *loss, double *top1, double *top5);

/* ---- curve.c (docs/DESIGN.md: the accuracy curve) ---------------------------------------- */
/* Collective, after the data and the model: with --curve-every, checks --curve-test against the
 * test set and the snapshots' memory against its bound (every rank exits naming the option),
 * opens the curve's test subset and allocates the snapshots. Does nothing when off. */
void curve_open(run_t *r);
/* After a round of nfresh gradients is applied and counted in e: a snapshot when the run's
 * applied batches passed a multiple of --curve-every. The same on every rank (the records are). */
void curve_round(run_t *r, int epoch, const epoch_t *e, int ngrads);
/* Collective, at the epoch end before anything else: evaluates the epoch's snapshots (their BN
 * statistics averaged over the ranks), logs them, restores the current model bitwise, and moves
 * r->t_start and e->t0 by the time that took (the same on every rank). */
void curve_end_epoch(run_t *r, int epoch, epoch_t *e);
void curve_close(run_t *r);

/* ---- gradstats.c (--grad-stats: diagnostics of the applied results) ----------------------- */
/* Collective, after the backend: with --grad-stats, rank 0 opens the CSV (an error names the file;
 * the CUDA backend is refused: its results live on the device). Does nothing when off. */
void gstats_open(run_t *r);
/* A round applied (res: its n host floats; round: its index in the epoch's handle): one CSV line on rank 0. */
void gstats_round(run_t *r, uint64_t round, int epoch, const pcoll_record_t *rec, const float *res);
void gstats_close(run_t *r);

/* ---- run.c ----------------------------------------------------------------------------- */
double run_now(void);
/* Fatal error on this rank: message naming the rank, the run's JSON closed (rank 0), every rank
 * aborted (non-zero). */
_Noreturn void run_die(run_t *r, const char *what, const char *msg);
/* Ends the job with status code from this rank (MPI_Abort), after making sure the launcher
 * reports a failure: Open MPI's `mpirun --enable-recovery` exits 0 whatever its ranks' exit
 * statuses and signals (4.1: a recoverable job skips their bookkeeping), so under it the rank
 * first sends SIGTERM to its launcher daemon (mpirun or orted), which then ends the job with a
 * non-zero status. */
_Noreturn void run_abort(run_t *r, int code);
/* Before MPI_Finalize or MPI_Comm_free (name: the communicator's): every message on comm that no
 * receive matched is received, named on stderr as a bug, and counted in r->unreceived, which
 * makes the rank exit non-zero. A message left unreceived at MPI_Finalize is erroneous MPI
 * (Open MPI drops it silently; MPICH over UCX warns); there should be none. */
void run_unreceived(run_t *r, MPI_Comm comm, const char *name);
/* MPI_Finalize after run_unreceived on MPI_COMM_WORLD; 1 when something was left unreceived. */
int run_finalize(run_t *r);
/* The controller's stall abort (ctl_config_t.on_abort; arg: the run): the controller's message,
 * or, when this rank itself was not running (stopped), that it is the silent one; then run_abort. */
void run_stall_abort(void *arg, const char *msg);
/* Collective: returns if every rank is ok; otherwise the failing ranks' messages are printed,
 * the run's JSON is closed with the reason, and every rank exits with status 1. */
void run_agree(run_t *r, int ok, const char *what, const char *msg);
/* Collective: the run's summary (exit "ok"), the final line; frees everything, finalizes MPI.
 * Returns the process's exit status. */
int run_finish(run_t *r);

/* ---- crash.c --------------------------------------------------------------------------- */
/* After MPI_Init: a SIGSEGV, SIGBUS, SIGILL or SIGFPE prints this rank, the address, the program
 * counter, the caller of a call through a null pointer and a backtrace to stderr, then goes on to
 * the handler it replaced (Open MPI's) or the default action. Test aid: EAGER_TEST_CRASH=RANK
 * makes RANK call a null function pointer from crash_test_null_call. */
void crash_install(int rank);
void crash_test_null_call(void);
void crash_test_before_init(void); /* EAGER_TEST_CRASH=RANK:init: RANK crashes before MPI_Init */

/* ---- watchdog.c ------------------------------------------------------------------------ */
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
