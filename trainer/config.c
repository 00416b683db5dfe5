/* config.c -- the trainer's options: one table (name, type, default, help) drives --help, the
 * config file, the flags, printing and the JSON copy, so they cannot drift apart.
 * Config file: "key = value" lines, '#' comments, keys = long option names. Flags win. */
#include "trainer/config.h"
#include "collectives/sim/imbalance.h"
#include "trainer/nn/nn.h"
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef enum { T_INT, T_LONG, T_DBL, T_STR, T_BOOL, T_U64 } ty_t;
typedef struct {
    const char *name;
    ty_t ty;
    size_t off, size;
    const char *def; /* "" = derived from the experiment (see apply_experiment) */
    double lo, hi;   /* range for numbers */
    const char *help;
} opt_t;

#define O(n, t, f, d, lo, hi, h) \
    { n, t, offsetof(cfg_t, f), sizeof(((cfg_t *)0)->f), d, lo, hi, h }
static const opt_t opts[] = {
    O("config", T_STR, config, "", 0, 0, "read options from this file (key = value lines)"),
    O("experiment", T_STR, experiment, "fmnist", 0, 0,
      "fmnist | cifar10 | imagenet | ucf101 | hyperplane (sets the defaults marked *)"),
    O("model", T_STR, model, "", 0, 0,
      "* nn model description, e.g. 'resnet-cifar n=5 shortcut=A classes=10'"),
    O("data", T_STR, data, "", 0, 0, "* data kind: fmnist | cifar10 | imagenet | ucf101 | hyperplane"),
    O("data-path", T_STR, data_path, "", 0, 0,
      "* data folder (fmnist: Debian's /usr/share/datasets/fashion-mnist)"),
    O("epochs", T_INT, epochs, "", 1, 100000, "* epochs to train"),
    O("batch", T_INT, batch, "", 1, 65536, "* per-rank batch size"),
    O("lr", T_DBL, lr, "", 0, 100, "* base learning rate (before the linear scaling rule)"),
    O("base-batch", T_INT, base_batch, "", 0, 1 << 30,
      "* linear scaling: lr x global batch / base-batch (0: off)"),
    O("momentum", T_DBL, momentum, "0.9", 0, 1, "SGD momentum (PyTorch formulation)"),
    O("wd", T_DBL, wd, "", 0, 1, "* weight decay"),
    O("wd-bn", T_BOOL, wd_bn, "0", 0, 1, "apply weight decay to batch-norm parameters and biases too"),
    O("wd-per", T_STR, wd_per, "sample", 0, 0,
      "weight decay of a round: sample (by its share |F|/P of a whole round) | round (in full)"),
    O("momentum-per", T_STR, mom_per, "sample", 0, 0,
      "momentum of a round: sample (advanced by its share |F|/P of a step) | round (a whole step)"),
    O("nesterov", T_BOOL, nesterov, "0", 0, 1, "Nesterov momentum"),
    O("warmup", T_DBL, warmup, "", 0, 1000, "* linear warm-up epochs"),
    O("warmup-start-lr", T_DBL, warmup_start_lr, "-1", -1, 100, "warm-up start lr (-1: base lr unscaled)"),
    O("milestones", T_STR, milestones, "", 0, 0, "* comma list of epochs where lr is multiplied by gamma"),
    O("gamma", T_DBL, gamma, "0.1", 0, 1, "lr decay factor at each milestone"),
    O("mode", T_STR, mode, "sync", 0, 0, "sync | solo | majority | quorum:Q | adaptive"),
    O("policy-opts", T_STR, policy_opts, "", 0, 0,
      "adaptive policy options (controller.h) except tau, e.g. 'window=32' or 'tau_by=policy'"),
    O("initial-sync", T_INT, initial_sync, "0", 0, 100000,
      "run the first N epochs synchronously whatever --mode says (0: none)"),
    O("final-sync", T_INT, final_sync, "0", 0, 100000,
      "run the last N epochs synchronously whatever --mode says (0: none)"),
    O("tau", T_INT, tau, "2", 0, 1 << 20,
      "staleness bound: a rank left out of tau rounds in a row is waited for (0: unbounded)"),
    O("ring", T_INT, ring, "0", 0, 1 << 20,
      "rounds a slow rank may lag (results ring); 0: max(16, 2 tau + 2)"),
    O("div", T_STR, div, "p", 0, 0, "average the sum by p (ranks, the paper) or fresh (contributors)"),
    O("late", T_STR, late, "wait", 0, 0,
      "after a deposit: wait (until a round took it) | go (until a newer round completed)"),
    O("epoch-mode", T_STR, epoch_mode, "shard", 0, 0,
      "shard (each rank its 1/P of the data) | global (batches dealt from the rounds)"),
    O("seed", T_U64, seed, "1", 0, 0,
      "seed: initialisation, data order, augmentation, injection, majority draw"),
    O("imbalance", T_STR, imbalance, "none", 0, 0,
      "injected delays: none | linear:unit=MS | random:k=K,d=MS | lognormal:mean=MS,std=MS | "
      "slow:rank=R,factor=F | inherent:unit=MS; ,busy=1: computed, not slept; phases: M@0/M@STEP/... or "
      "M@0ep/M@1.5ep/..."),
    O("eval-every", T_INT, eval_every, "1", 1, 100000,
      "evaluate on the test set every N epochs (and at the end)"),
    O("ckpt-every", T_INT, ckpt_every, "0", 0, 100000,
      "checkpoint every N epochs (0: only at the end if --ckpt-dir)"),
    O("ckpt-every-steps", T_INT, ckpt_every_steps, "0", 0, 1 << 30,
      "also checkpoint mid-epoch every N steps of each rank; needs --ckpt-dir (0: off)"),
    O("ckpt-dir", T_STR, ckpt_dir, "", 0, 0, "checkpoint folder (\"\": no checkpoints)"),
    O("resume", T_BOOL, resume, "0", 0, 1, "continue from ckpt-dir/latest.ckpt, on any number of ranks"),
    O("out", T_STR, out, "", 0, 0, "metrics JSON file (\"\": results/runs/<experiment>-<mode>.json)"),
    O("round-agg", T_INT, round_agg, "10", 1, 1 << 20,
      "per-round records are aggregated over N rounds in the JSON"),
    O("target-top1", T_DBL, target_top1, "", 0, 1, "* test top-1 target for time-to-accuracy (0..1)"),
    O("limit-train", T_LONG, limit_train, "0", 0, 1e12, "use only the first N training samples (0: all)"),
    O("limit-test", T_LONG, limit_test, "0", 0, 1e12, "use only the first N test samples (0: all)"),
    O("curve-every", T_LONG, curve_every, "0", 0, 1e12,
      "accuracy curve: snapshot every N batches applied, evaluated at the epoch end (0: off)"),
    O("curve-test", T_LONG, curve_test, "2000", 1, 1e12,
      "the accuracy curve's test subset: the first M test samples"),
    O("grad-stats", T_STR, grad_stats, "", 0, 0,
      "CSV of per-round statistics of the applied results, rank 0 (\"\": off; cpu only)"),
    O("max-steps", T_INT, max_steps, "0", 0, 1 << 30, "cap on steps per rank per epoch (0: the whole shard)"),
    O("threads", T_INT, threads, "0", 0, 256,
      "compute threads per rank (0: cores / ranks on this host, >= 1)"),
    O("log-every", T_INT, log_every, "0", 0, 1 << 30,
      "rank 0 prints a progress line every N steps (0: per epoch)"),
    O("image-size", T_INT, image_size, "224", 8, 1024, "ImageNet crop size"),
    O("ucf-split", T_INT, ucf_split, "1", 1, 3, "UCF101 official split"),
    O("max-t", T_INT, max_t, "40", 1, 100000, "UCF101: frames per sequence kept (truncation)"),
    O("hp-features", T_INT, hp_features, "8192", 1, 1 << 24, "hyperplane features"),
    O("hp-samples", T_LONG, hp_samples, "16384", 1, 1e9, "hyperplane training samples"),
    O("t-warn", T_DBL, t_warn, "10", 0.1, 1e6,
      "stall watchdog: warn after this many seconds without a round"),
    O("t-abort", T_DBL, t_abort, "60", 0.2, 1e6, "stall watchdog: abort the job after this many seconds"),
    O("quiet", T_BOOL, quiet, "0", 0, 1, "rank 0 prints only the final line"),
    O("device", T_STR, device, "cpu", 0, 0,
      "cpu | cuda (the CUDA backend; needs a build with nvcc + cuDNN + NCCL)"),
    O("tf32", T_BOOL, tf32, "1", 0, 1, "cuda: TF32 in cuDNN convolutions, as PyTorch enables by default"),
    O("share-gpu", T_BOOL, share_gpu, "0", 0, 1,
      "cuda: allow ranks to share a GPU while another GPU of their node carries none"),
};
#define NOPTS (int)(sizeof opts / sizeof opts[0])

static const opt_t *find(const char *name) {
    for (int i = 0; i < NOPTS; i++)
        if (!strcmp(opts[i].name, name)) return &opts[i];
    return NULL;
}

static int set(cfg_t *c, const opt_t *o, const char *v, const char *where, char *err, size_t n) {
    char *p = (char *)c + o->off, *end = NULL;
    errno = 0;
    switch (o->ty) {
    case T_STR:
        if (strlen(v) >= o->size)
            return snprintf(err, n, "%s: value of --%s is too long (max %zu characters)", where, o->name,
                            o->size - 1),
                   -1;
        strcpy(p, v);
        return 0;
    case T_BOOL:
        if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes") || !*v)
            *(int *)p = 1;
        else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no"))
            *(int *)p = 0;
        else
            return snprintf(err, n, "%s: --%s takes 0/1/true/false, not '%s'", where, o->name, v), -1;
        return 0;
    case T_U64: {
        unsigned long long x = strtoull(v, &end, 0);
        if (!*v || *end || errno || *v == '-')
            return snprintf(err, n, "%s: --%s needs an unsigned integer, not '%s'", where, o->name, v), -1;
        *(uint64_t *)p = x;
        return 0;
    }
    default: {
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x))
            return snprintf(err, n, "%s: --%s needs a number, not '%s'", where, o->name, v), -1;
        if ((o->ty == T_INT || o->ty == T_LONG) && x != floor(x))
            return snprintf(err, n, "%s: --%s needs an integer, not '%s'", where, o->name, v), -1;
        if (x < o->lo || x > o->hi)
            return snprintf(err, n, "%s: --%s = %s is out of range [%g, %g]", where, o->name, v, o->lo,
                            o->hi),
                   -1;
        if (o->ty == T_INT)
            *(int *)p = (int)x;
        else if (o->ty == T_LONG)
            *(long *)p = (long)x;
        else
            *(double *)p = x;
        return 0;
    }
    }
}

static void trim(char *s) {
    size_t a = 0, b = strlen(s);
    while (a < b && isspace((unsigned char)s[a])) a++;
    while (b > a && isspace((unsigned char)s[b - 1])) b--;
    memmove(s, s + a, b - a);
    s[b - a] = 0;
}

static void val(const cfg_t *c, const opt_t *o, char *buf, size_t n);

/* given[i]: how option i got its value */
enum { FROM_DEFAULT = 0, FROM_FLAG = 1, FROM_FILE = 2 };

/* One line in c->notes for a config-file value that a flag overrides (rank 0 prints the notes). */
static void note_override(cfg_t *c, const opt_t *o, const char *where, const char *fileval) {
    char flag[300];
    val(c, o, flag, sizeof flag);
    size_t used = strlen(c->notes);
    snprintf(c->notes + used, sizeof c->notes - used,
             "eager-train: --%s %s from the command line wins over %s = %s at %s\n", o->name, flag, o->name,
             fileval, where);
}

/* Reads the config file's "key = value" lines into c: a key given as a flag keeps the flag's value
 * (noted in c->notes), the others are marked FROM_FILE in given. Returns 0, or -1 with a message
 * naming the file (and line): unreadable, a directory, a bad line, an unknown key or value. */
static int read_file(cfg_t *c, const char *path, uint8_t *given, char *err, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return snprintf(err, n, "--config %s: %s", path, strerror(errno)), -1;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return snprintf(err, n, "--config %s: is a directory, not a file of 'key = value' lines", path), -1;
    }
    char line[1024], where[600];
    int ln = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        ln++;
        char *h = strchr(line, '#');
        if (h) *h = 0;
        trim(line);
        if (!*line) continue;
        char *eq = strchr(line, '=');
        snprintf(where, sizeof where, "%s:%d", path, ln);
        if (!eq) {
            snprintf(err, n, "%s: expected 'key = value', got '%s'", where, line);
            rc = -1;
            break;
        }
        *eq = 0;
        char *k = line, *v = eq + 1;
        trim(k);
        trim(v);
        const opt_t *o = find(k);
        if (!o || !strcmp(k, "config")) {
            snprintf(err, n, "%s: unknown option '%s' (see --help)", where, k);
            rc = -1;
        } else if (given[o - opts] == FROM_FLAG)
            note_override(c, o, where, v);
        else if (set(c, o, v, where, err, n))
            rc = -1;
        else
            given[o - opts] = FROM_FILE;
    }
    if (!rc && ferror(f)) {
        snprintf(err, n, "--config %s: read error after line %d: %s", path, ln, strerror(errno));
        rc = -1;
    }
    fclose(f);
    return rc;
}

/* Defaults marked * in --help: the paper's settings per experiment (docs/DESIGN.md). */
static void apply_experiment(cfg_t *c, const uint8_t *given) {
    struct {
        const char *e, *model, *data, *epochs, *batch, *lr, *bb, *wd, *warm, *ms, *target;
    } t[] = {
        {"fmnist", "resnet-fmnist", "fmnist", "5", "64", "0.1", "0", "5e-4", "0", "4", "0.90"},
        {"cifar10", "resnet-cifar n=5 shortcut=A classes=10", "cifar10", "190", "128", "0.1", "128", "1e-4",
         "0", "81,122,164", "0.91"},
        {"imagenet", "resnet50 classes=1000", "imagenet", "90", "128", "0.1", "256", "1e-4", "5",
         "30,60,80,90", "0.75"},
        {"ucf101", "lstm in=2048 hidden=512 steps=40 classes=101", "ucf101", "50", "32", "0.01", "0", "1e-4",
         "0", "", "0.70"},
        {"hyperplane", "hyperplane features=8192", "hyperplane", "5", "64", "0.25", "0", "0", "0", "", "0"},
    };
    int k = 0;
    for (int i = 0; i < 5; i++)
        if (!strcmp(c->experiment, t[i].e)) k = i;
    const char *vals[] = {t[k].model, t[k].data, t[k].epochs, t[k].batch,  t[k].lr, t[k].bb,
                          t[k].wd,    t[k].warm, t[k].ms,     t[k].target, ""};
    const char *names[] = {"model", "data",   "epochs",     "batch",       "lr",       "base-batch",
                           "wd",    "warmup", "milestones", "target-top1", "data-path"};
    char e[8];
    for (int i = 0; i < 11; i++) {
        const opt_t *o = find(names[i]);
        if (!given[o - opts]) set(c, o, vals[i], "default", e, sizeof e);
    }
    if (!strcmp(c->model, "resnet-fmnist") || !strncmp(c->model, "hyperplane", 10)) {
        if (!strncmp(c->model, "hyperplane", 10) && !given[find("model") - opts]) {
            snprintf(c->model, sizeof c->model, "hyperplane features=%d", c->hp_features);
        }
    }
}

/* --milestones: "" or a comma list of at most NMILESTONES epochs, each a finite number >= 0 (the
 * lr schedule keeps that many). Returns 0, or -1 with a message quoting the list and the item. */
#define NMILESTONES (int)(sizeof(((nn_lr_sched_t *)0)->milestones) / sizeof(double))
static int check_milestones(const char *list, char *err, size_t n) {
    int k = 0;
    for (const char *p = list; *p; k++) {
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        size_t il = strcspn(p, ",");
        if (end == p || end != p + il || errno || !isfinite(x) || x < 0)
            return snprintf(err, n, "--milestones '%s': item %d '%.*s' is not an epoch (a number >= 0)", list,
                            k + 1, (int)il, p),
                   -1;
        if (k + 1 > NMILESTONES)
            return snprintf(err, n, "--milestones '%s': more than %d epochs", list, NMILESTONES), -1;
        p += il;
        if (*p == ',' && !*++p)
            return snprintf(err, n, "--milestones '%s': ends with ',' (expected an epoch after it)", list),
                   -1;
    }
    return 0;
}

/* 1 if the comma list s has the key k (as "k=..." or a bare "k"). */
static int has_key(const char *s, const char *k) {
    size_t kl = strlen(k);
    for (const char *p = s;; p++) {
        if (!strncmp(p, k, kl) && (p[kl] == '=' || p[kl] == ',' || !p[kl])) return 1;
        if (!(p = strchr(p, ','))) return 0;
    }
}

int cfg_policy(const cfg_t *c, ctl_policy_cfg_t *policy, char *spec, size_t speclen, char *err, size_t n) {
    if (has_key(c->policy_opts, "tau"))
        return snprintf(err, n, "--policy-opts '%s': the staleness bound is set by --tau only",
                        c->policy_opts),
               -1;
    snprintf(spec, speclen, "%s%s%s", c->mode, *c->policy_opts ? "," : "", c->policy_opts);
    char e[300];
    if (ctl_policy_parse(spec, policy, e, sizeof e))
        return snprintf(err, n, "--mode '%s' --policy-opts '%s': %s", c->mode, c->policy_opts, e), -1;
    policy->tau = c->tau;
    if (ctl_policy_check(policy, e, sizeof e))
        return snprintf(err, n, "--tau %d with --mode '%s' --policy-opts '%s': %s", c->tau, c->mode,
                        c->policy_opts, e),
               -1;
    return 0;
}

int cfg_check_ranks(const cfg_t *c, const ctl_policy_cfg_t *policy, int P, char *err, size_t n) {
    if (policy->base.mode == PCOLL_QUORUM && policy->base.quorum > P)
        return snprintf(err, n, "--mode '%s'%s%s%s: quorum %d is more than the %d ranks of this run (1..%d)",
                        c->mode, policy->kind == CTL_ADAPTIVE ? " --policy-opts '" : "",
                        policy->kind == CTL_ADAPTIVE ? c->policy_opts : "",
                        policy->kind == CTL_ADAPTIVE ? "'" : "", policy->base.quorum, P, P),
               -1;
    imb_sched_t im;
    if (imb_sched_parse(c->imbalance, &im, err, n)) return -1;
    for (int i = 0; i < im.n; i++)
        if (im.phase[i].kind == IMB_SLOW && im.phase[i].rank >= P)
            return snprintf(err, n,
                            "--imbalance '%s': rank %d does not exist in this run of %d ranks (0..%d)",
                            c->imbalance, im.phase[i].rank, P, P - 1),
                   -1;
    return 0;
}

int cfg_parse(cfg_t *c, int argc, char **argv, char *err, size_t n) {
    memset(c, 0, sizeof *c);
    uint8_t given[NOPTS] = {0};
    char e[8];
    for (int i = 0; i < NOPTS; i++)
        if (*opts[i].def) set(c, &opts[i], opts[i].def, "default", e, sizeof e);
    /* flags first (they win), remembering which were given */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (strncmp(a, "--", 2))
            return snprintf(err, n, "unexpected argument '%s' (options start with --; see --help)", a), -1;
        char key[64];
        const char *eq = strchr(a, '='), *v;
        size_t kl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (kl >= sizeof key) kl = sizeof key - 1;
        memcpy(key, a + 2, kl);
        key[kl] = 0;
        const opt_t *o = find(key);
        if (!o) return snprintf(err, n, "unknown option --%s (see --help)", key), -1;
        if (eq)
            v = eq + 1;
        else if (o->ty == T_BOOL && (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2)))
            v = "1";
        else if (i + 1 < argc)
            v = argv[++i];
        else
            return snprintf(err, n, "option --%s needs a value", key), -1;
        char where[80];
        snprintf(where, sizeof where, "command line");
        if (set(c, o, v, where, err, n)) return -1;
        given[o - opts] = FROM_FLAG;
    }
    if (*c->config && read_file(c, c->config, given, err, n)) return -1;
    const char *ex[] = {"fmnist", "cifar10", "imagenet", "ucf101", "hyperplane"};
    int okx = 0;
    for (int i = 0; i < 5; i++) okx |= !strcmp(c->experiment, ex[i]);
    if (!okx)
        return snprintf(err, n,
                        "--experiment '%s' is not one of fmnist, cifar10, imagenet, "
                        "ucf101, hyperplane",
                        c->experiment),
               -1;
    apply_experiment(c, given);
    /* validate the composite values */
    if (strcmp(c->device, "cpu") && strcmp(c->device, "cuda"))
        return snprintf(err, n, "--device '%s' must be cpu or cuda", c->device), -1;
    if (strcmp(c->wd_per, "sample") && strcmp(c->wd_per, "round"))
        return snprintf(err, n, "--wd-per '%s' must be sample or round", c->wd_per), -1;
    if (strcmp(c->mom_per, "sample") && strcmp(c->mom_per, "round"))
        return snprintf(err, n, "--momentum-per '%s' must be sample or round", c->mom_per), -1;
    if (!strcmp(c->mom_per, "sample") && !strcmp(c->wd_per, "round"))
        return snprintf(err, n,
                        "--wd-per round needs --momentum-per round (with --momentum-per sample a round "
                        "decays by its share of a step, as --wd-per sample)"),
               -1;
    if (strcmp(c->div, "p") && strcmp(c->div, "fresh"))
        return snprintf(err, n, "--div '%s' must be p or fresh", c->div), -1;
    if (strcmp(c->epoch_mode, "shard") && strcmp(c->epoch_mode, "global"))
        return snprintf(err, n, "--epoch-mode '%s' must be shard or global", c->epoch_mode), -1;
    if (strcmp(c->late, "wait") && strcmp(c->late, "go"))
        return snprintf(err, n, "--late '%s' must be wait or go", c->late), -1;
    if (!strcmp(c->late, "go") && c->ckpt_every_steps)
        return snprintf(err, n,
                        "--late go with --ckpt-every-steps: a mid-epoch checkpoint counts one gradient per "
                        "fresh rank and round, which merged deposits break; use epoch checkpoints "
                        "(--ckpt-every) or --late wait"),
               -1;
    imb_sched_t im;
    if (imb_sched_parse(c->imbalance, &im, err, n)) return -1;
    if (check_milestones(c->milestones, err, n)) return -1;
    if (c->resume && !*c->ckpt_dir) return snprintf(err, n, "--resume needs --ckpt-dir"), -1;
    if (c->ckpt_every_steps && !*c->ckpt_dir)
        return snprintf(err, n, "--ckpt-every-steps needs --ckpt-dir"), -1;
    if (c->t_abort <= c->t_warn)
        return snprintf(err, n, "--t-abort (%g) must be larger than --t-warn (%g)", c->t_abort, c->t_warn),
               -1;
    return 0;
}

void cfg_print_help(FILE *f) {
    fprintf(f, "eager-train: eager-SGD data-parallel training on libpcoll partial allreduces.\n"
               "usage: mpirun -np P eager-train [--option value | --option=value]...\n"
               "The semantics of a round, tau, the epoch modes and the controller: docs/DESIGN.md;\n"
               "results and the commands that reproduce them: docs/EXPERIMENTS.md.\n"
               "options (* = default depends on --experiment):\n");
    for (int i = 0; i < NOPTS; i++)
        fprintf(f, "  --%-16s %-8s %s%s\n", opts[i].name, *opts[i].def ? opts[i].def : "*", opts[i].help,
                opts[i].ty == T_BOOL ? " [flag]" : "");
}

static void val(const cfg_t *c, const opt_t *o, char *buf, size_t n) {
    const char *p = (const char *)c + o->off;
    switch (o->ty) {
    case T_STR: snprintf(buf, n, "%s", p); break;
    case T_BOOL:
    case T_INT: snprintf(buf, n, "%d", *(const int *)p); break;
    case T_LONG: snprintf(buf, n, "%ld", *(const long *)p); break;
    case T_U64: snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case T_DBL: snprintf(buf, n, "%.9g", *(const double *)p); break;
    }
}

void cfg_print(const cfg_t *c, FILE *f) {
    char b[600];
    for (int i = 0; i < NOPTS; i++) {
        val(c, &opts[i], b, sizeof b);
        fprintf(f, "  %-16s = %s\n", opts[i].name, b);
    }
}

json_t *cfg_to_json(const cfg_t *c) {
    json_t *o = json_object();
    for (int i = 0; i < NOPTS; i++) {
        const opt_t *op = &opts[i];
        const char *p = (const char *)c + op->off;
        json_t *v;
        switch (op->ty) {
        case T_STR: v = json_string(p); break;
        case T_BOOL: v = json_boolean(*(const int *)p); break;
        case T_INT: v = json_integer(*(const int *)p); break;
        case T_LONG: v = json_integer(*(const long *)p); break;
        case T_U64: v = json_integer((json_int_t) * (const uint64_t *)p); break;
        default: v = json_real(*(const double *)p);
        }
        json_object_set_new(o, op->name, v);
    }
    return o;
}
