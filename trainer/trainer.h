/* trainer.h -- the eager-SGD trainer program (build/bin/eager-train): its self-contained modules.
 *
 *   config.c      options (table with defaults and help), config file + flags, validation
 *   metrics.c     pieces of the run's JSON (results/schema/run.schema.json), written with jansson
 *   checkpoint.c  atomic, checksummed checkpoints, each value range-checked before a resume uses it
 *   dealer.c      --epoch-mode global: batches dealt from the round history
 *
 * The program around them (the run context, set-up, the epoch loop, backends, output) is
 * described in run.h. Data flows one way: data -> backend (gradient) -> libpcoll (rounds) ->
 * backend (apply); the controller sets libpcoll's rules; the run log only reads.
 */
#ifndef TRAINER_H
#define TRAINER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* FNV-1a 64: the trainer's hash of bytes (weights, decisions, model descriptions). */
#define FNV1A64_INIT 1469598103934665603ull
static inline uint64_t fnv1a64(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* ---- configuration --------------------------------------------------------------------- */
typedef struct {
    char config[256];    /* file the options came from ("" = none) */
    char experiment[32]; /* fmnist | cifar10 | imagenet | ucf101 | hyperplane */
    char model[256];     /* nn model description (default from the experiment) */
    char data[32];       /* data kind (default from the experiment) */
    char data_path[512];
    int epochs, batch, eval_every, ckpt_every, log_every, max_steps, threads;
    int ckpt_every_steps; /* also checkpoint mid-epoch every N steps of each rank (0: epoch ends only) */
    double lr, momentum, wd, gamma, warmup, warmup_start_lr;
    int wd_bn, nesterov, base_batch;
    char milestones[128];  /* comma list of epochs */
    char mode[64];         /* sync | solo | majority | quorum:Q | adaptive */
    char policy_opts[256]; /* extra adaptive-policy options, e.g. "window=32,maj_enter=4" */
    int initial_sync;      /* the first N epochs run synchronously, whatever --mode says */
    int final_sync;        /* the last N epochs run synchronously, whatever --mode says */
    int tau, ring;
    char div[8];        /* p | fresh */
    char wd_per[8];     /* sample | round */
    char mom_per[8];    /* sample | round: momentum by a round's share of a step, or per round */
    char epoch_mode[8]; /* shard | global (docs/DESIGN.md) */
    char late[8]; /* wait | go: after a deposit, wait until a round took it, or only for a newer round */
    uint64_t seed;
    char imbalance[128]; /* none | linear:unit=MS | random:k=K,d=MS | lognormal:mean=MS,std=MS
                               | slow:rank=R,factor=F | inherent:unit=MS; ",busy=1": computed */
    char out[512];       /* metrics JSON */
    char ckpt_dir[512];
    int resume;
    int round_agg;
    double target_top1;
    long limit_train, limit_test;
    long curve_every;     /* snapshot every N batches applied (0: no accuracy curve) */
    long curve_test;      /* the curve's evaluation: the first M test samples */
    char grad_stats[512]; /* per-round statistics of the applied results, CSV ("": off) */
    int image_size, ucf_split, max_t, hp_features;
    long hp_samples;
    double t_warn, t_abort;
    int quiet;
    char device[8];   /* cpu | cuda */
    int tf32;         /* cuda: TF32 for cuDNN convolutions (PyTorch's default) */
    char notes[1024]; /* lines for the user from cfg_parse: flags that override config-file values */
} cfg_t;

/* Parses argv (and --config FILE, whose keys are the long option names); flags win over the
 * file, and each such override gets a line in c->notes. Returns 0, or 1 for --help (printed), or -1 with a message in err naming the option,
 * value, file and line. Deterministic: every rank gets the same result. */
int cfg_parse(cfg_t *c, int argc, char **argv, char *err, size_t errlen);
void cfg_print_help(FILE *f);
/* Writes "key = value" lines (the resolved configuration) to f, or fills a jansson object. */
void cfg_print(const cfg_t *c, FILE *f);
struct json_t;
struct json_t *cfg_to_json(const cfg_t *c);

/* ---- checkpoints ------------------------------------------------------------------------ */
struct nn_model;
#define CKPT_MAX_RESTARTS 64
typedef struct {              /* one resume of the run (kept in every later checkpoint) */
    int epoch;                /* epochs completed at the checkpoint it resumed from */
    int ranks_before;         /* world size that wrote the checkpoint */
    int ranks_after;          /* world size that resumed from it */
    double wall_lost_s;       /* wall time from the checkpoint's write to the resume (>= 0) */
    int controller_continued; /* 1: the adaptive controller's state was continued */
    int64_t batches_done;     /* where in epoch `epoch` + 1 it resumed: its batches trained (the
                                 checkpoint's part.fresh; 0 at an epoch's end); -1: not recorded
                                 (a restart read from a format-3 checkpoint) */
    int64_t samples_done;     /* the checkpoint's part.pos (samples of that epoch's permutation
                                 trained; 0 at an epoch's end); -1: not recorded, likewise */
} ckpt_restart_t;
typedef struct { /* the run's totals (run.h's run_totals_t), as the checkpoint carries them */
    uint64_t rounds, fresh, stale_n, decision_hash;
    double stale, final_top1, final_top5, final_loss, t_target; /* -1: not evaluated / reached */
    uint32_t max_stale, max_streak;
} ckpt_totals_t;
typedef struct {     /* the epoch in progress at a mid-epoch checkpoint (all zero at an epoch's end) */
    int64_t pos;     /* samples of the epoch's permutation trained: its prefix perm[0..pos) */
    uint64_t rounds; /* the epoch's rounds so far and their gradients (the same on every rank) */
    uint64_t fresh;  /* batches trained in the epoch so far (every one in a round: pos = fresh x batch) */
    uint64_t stale_n;
    double stale;
    uint32_t max_stale, max_streak;
    double loss_sum; /* the epoch's training loss, top-1 and samples so far, summed over the ranks */
    uint64_t loss_n, correct, seen, steps;
} ckpt_epoch_t;
typedef struct {
    int version;       /* load: the file's format (1: no checksum, totals or controller state; 2: no
                    mid-epoch position; 3: no position in its restarts) */
    int epoch;         /* epochs completed */
    ckpt_epoch_t part; /* mid-epoch: how far epoch `epoch` + 1 had got (part.pos > 0) */
    uint64_t seed;
    double wall_s; /* training wall time so far */
    int ranks;     /* world size that wrote it */
    ckpt_totals_t tot;
    int nrestarts;
    ckpt_restart_t restarts[CKPT_MAX_RESTARTS];
    void *ctl;      /* adaptive controller state (ctl_state_save bytes) or NULL. save: not owned;
                       load: a malloc'd copy the caller frees */
    size_t ctl_len; /* its length in bytes */
} ckpt_meta_t;
/* Writes DIR/ckpt-EEEE.ckpt (mid-epoch: DIR/ckpt-EEEE-BBBBBBBB.ckpt, B = the next epoch's batches
 * trained) and DIR/latest.ckpt atomically (format: checkpoint.c). 0, or -1 with a message naming
 * the file. */
int ckpt_save(const char *dir, const struct nn_model *m, const ckpt_meta_t *meta, char *path_out, size_t plen,
              char *err, size_t errlen);
/* Loads dir/latest.ckpt into m and meta. Before anything reaches m it checks the whole file's
 * checksum, the model (description and size), every scalar's range and every tensor (parameters
 * and momentum finite with squares that are floats, BN means finite, BN variances finite and
 * >= 0). -1 with a message naming the file and the field; m is then unchanged. */
int ckpt_load(const char *dir, struct nn_model *m, ckpt_meta_t *meta, char *err, size_t errlen);
/* Removes the temporary files (.NAME.tmp) an interrupted ckpt_save left in dir; returns how many
 * (0 when dir does not exist). */
int ckpt_clean_tmp(const char *dir);
uint64_t ckpt_desc_hash(const char *desc, size_t nparams);

/* ---- global epochs (dealer.c) ------------------------------------------------------------ */
#define DEALER_QMAX 8
typedef struct {
    int64_t nb, cursor; /* batches of the epoch; next batch not yet dealt */
    int P, me;
    int64_t q[DEALER_QMAX]; /* my batches: taken [head, tail), submitted [head.., sub) */
    unsigned head, sub, tail;
} dealer_t;
/* Rank p starts with `ahead` batches (p, P+p, ...). -1 on a bad argument. */
int dealer_init(dealer_t *d, int64_t nbatches, int P, int me, int ahead);
/* The same from batch `cursor` on (batches 0..cursor-1 were dealt before: a mid-epoch checkpoint,
 * or the part of the epoch before it): rank p starts with cursor+p, cursor+P+p, ..., and dealing
 * stops at nbatches. dealer_init is dealer_init_at with cursor 0. -1 on a bad argument. */
int dealer_init_at(dealer_t *d, int64_t nbatches, int64_t cursor, int P, int me, int ahead);
/* After round r: fresh[p] = deposits of rank p in r (the record's fresh[]); each takes a batch.
 * -1 if this rank would hold more than DEALER_QMAX batches (it deposited without taking). */
int dealer_round(dealer_t *d, const uint8_t *fresh);
/* Next of my batches not yet handed to the loader (1), or none (0). */
int dealer_unsubmitted(dealer_t *d, int64_t *b);
/* My next batch to train on (1), or none left this epoch (0: join). */
int dealer_take(dealer_t *d, int64_t *b);

#endif
