/* run.h -- eager-train's run context, and the bottom of the trainer: the close hooks, the abort and
 * MPI_Finalize (run.c). The modules, each with its own header, from the bottom up (a module calls
 * only those above it in this list, and those below only through the close hooks):
 *
 *   run.c        the close hooks; ending the job (MPI_Abort that the launcher reports), MPI_Finalize
 *   watchdog.c   a rank dead or hung in a collective outside the training rounds, named and the job
 *                ended within --t-abort
 *   end.c        how a run ends: a fatal error on one rank, one every rank agrees on, the finish
 *   runlog.c     every line on the console and every field of the run's JSON
 *   datasplit.c  one split of --data opened
 *   eval.c       evaluation of the model on a data set
 *   curve.c      the accuracy curve (--curve-every): model snapshots, evaluated at the epoch end
 *   gradstats.c  --grad-stats: diagnostics of the applied results
 *   apply.c      completed rounds applied (lr and weight decay of a round)
 *   epoch_end.c  the epoch end: replicas checked equal, BN averaged, evaluation, checkpoint
 *   epoch.c      one epoch: the step loop on libpcoll, the join, the controller's end of epoch
 *   setup.c      MPI, options, threads, data, model, optimiser, backend, resume, round config
 *   main.c       the outline: set up, train epoch after epoch, finish
 *
 * Beside them, on no run_t: config.c (options), checkpoint.c, dealer.c (--epoch-mode global),
 * metrics.c (pieces of the run's JSON), crash.c, batch.h and the backends (backend.h); the
 * injected delays are collectives/sim/imbalance.h's. Data flows one way: data -> backend (gradient) -> libpcoll (rounds) -> backend
 * (apply); the controller sets libpcoll's rules; the run log only reads.
 *
 * One run_t per process, passed by pointer; nothing lives in file-scope variables.
 */
#ifndef TRAINER_RUN_H
#define TRAINER_RUN_H

#include "collectives/pcoll.h"
#include "collectives/sim/imbalance.h"
#include "controller/controller.h"
#include "trainer/backend.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/data/data.h"
#include "trainer/nn/nn.h"

typedef struct runlog runlog_t;
struct watch;
struct run;

/* A close hook: what a module must do when the run ends (run_on_close). why: NULL at the normal
 * finish, else the reason the run stops; collective: every rank calls it at the same point (else
 * this rank alone, perhaps from the watchdog's thread, and the process aborts next). Returns 0, or
 * 1 when it failed (the run then exits non-zero). */
typedef int (*run_close_fn)(struct run *r, const char *why, int collective);
#define RUN_MAX_CLOSE 8

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
    const char *data_path;       /* libpcoll's data path of the latest handle (pcoll_data_path) */
    struct json_t *warm_json;    /* rank 0: the run JSON's "warmup" (run_warmup), until written */
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
    imb_sched_t imb; /* --imbalance: its epochs resolved to steps by the first epoch (train_epoch) */
    int global;      /* --epoch-mode global */
    int late_go;     /* --late go */
    int64_t *perm;   /* global: this epoch's permutation of the training set */
    int epoch0;      /* first epoch to run (> 0 after --resume) */
    double wall0;    /* training wall time before this process (--resume) */
    double t_start;  /* MPI_Wtime of the run's start, less wall0 */
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
    run_close_fn close[RUN_MAX_CLOSE]; /* the close hooks (run_on_close), in registration order */
    int nclose;
} run_t;

/* ---- run.c ----------------------------------------------------------------------------- */
double run_now(void); /* MPI_Wtime */
/* Adds a close hook (modules add theirs when they open). At most RUN_MAX_CLOSE: one more is a
 * bug, and this rank aborts. */
void run_on_close(run_t *r, run_close_fn fn);
/* Calls every close hook, the last added first, each at most once (it is removed before it is
 * called). why, collective: as run_close_fn. Returns 1 when any hook failed, else 0. */
int run_close(run_t *r, const char *why, int collective);
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
/* Open MPI only: under `mpirun --enable-recovery` (Open MPI sets OMPI_MCA_orte_enable_recovery
 * in the ranks' environment) the launcher ignores the ranks' exit statuses: a failing rank ends
 * the job through its launcher daemon (SIGTERM), which then exits non-zero; the launcher is
 * first given up to 2 s to read what this rank printed (output_drain). Elsewhere (Open MPI's
 * mpirun without it, MPICH's hydra, srun) the launcher ends the job at the first non-zero exit or
 * MPI_Abort and reports it: it does nothing. */
void run_fail_launcher(const run_t *r);
/* MPI_Finalize after run_unreceived on MPI_COMM_WORLD; 1 when something was left unreceived. */
int run_finalize(run_t *r);

#endif
