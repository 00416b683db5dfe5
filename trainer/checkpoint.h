/* checkpoint.h -- atomic, checksummed checkpoints (checkpoint.c), each value range-checked
 * before a resume uses it. */
#ifndef TRAINER_CHECKPOINT_H
#define TRAINER_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

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
typedef struct { /* the run's totals (run_totals_t in run.h), as the checkpoint carries them */
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

#endif
