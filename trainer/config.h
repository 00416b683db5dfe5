/* config.h -- eager-train's options (config.c): one table with each option's default and help
 * line; parsed from --config FILE and the flags, validated, printed; the policy string of --mode
 * and --policy-opts with --tau. */
#ifndef TRAINER_CONFIG_H
#define TRAINER_CONFIG_H

#include "controller/controller.h"
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
    char policy_opts[256]; /* extra adaptive-policy options, e.g. "window=32" */
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
    int share_gpu;    /* cuda: ranks may share a GPU while their node has an unused one */
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

/* --mode and --policy-opts as the controller's policy with the bound of --tau: the one place the
 * mode is parsed and tau enters the policy. spec: the policy string. -1 with a message in err
 * naming the options: a tau key in --policy-opts (tau is set by --tau only), a bad mode or key, a
 * bound the policy cannot keep. */
int cfg_policy(const cfg_t *c, ctl_policy_cfg_t *policy, char *spec, size_t speclen, char *err, size_t n);
/* The options that need the number of ranks P (known once MPI is up): a quorum of more than P
 * ranks (the rounds would wait for every rank: sync under another name) and a slow rank that is
 * not in 0..P-1. Returns 0, or -1 with a message in err naming the option and P. */
int cfg_check_ranks(const cfg_t *c, const ctl_policy_cfg_t *policy, int P, char *err, size_t n);

#endif
