/* main.c -- eager-train: eager-SGD data-parallel training on libpcoll partial allreduces.
 *
 * Per epoch (shard semantics, the paper's): each rank runs its shard's steps
 *     forward/backward (nn) -> injected delay -> pcoll_deposit(grads) -> pcoll_wait(consumed)
 *     -> apply every completed round in order (SGD with the round's result)
 * then joins: its engine keeps taking part until every rank has joined, and every round is
 * applied by every rank, so the replicas are bitwise equal at the epoch end (checked: a hash of
 * parameters, momentum and BN statistics is compared across ranks before every evaluation).
 * The learning rate of a round is a function of (epoch, share of the epoch's gradients applied), never of a rank's own step,
 * so every rank applies a round with the same lr. BN running statistics are averaged across
 * ranks before every evaluation and checkpoint (as DDP broadcasts buffers).
 */
#include "collectives/pcoll.h"
#include "controller/controller.h"
#include "trainer/data/data.h"
#include "trainer/metrics.h"
#include "trainer/nn/nn.h"
#include "trainer/trainer.h"
#ifdef HAVE_NN_CUDA
#include "trainer/cuda/nn_cuda.h"
static nn_cuda_model_t *G;   /* --device cuda: the model on the GPU (m stays the host mirror) */
#endif
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern void openblas_set_num_threads(int);
#ifdef _OPENMP
#include <omp.h>
#endif

static int P, me;
static cfg_t C;

static double now(void) { return MPI_Wtime(); }
static void sleep_ms(double ms) {
    if (ms <= 0) return;
    struct timespec ts = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
    nanosleep(&ts, NULL);
}

/* Fatal error on one rank mid-run: print it naming the rank, abort every rank (non-zero). */
static void die(const char *what, const char *msg) {
    fprintf(stderr, "eager-train: rank %d: %s: %s\n", me, what, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Collective: every rank learns whether any rank failed; failing ranks print their message. */
static void agree_or_exit(int ok, const char *what, const char *msg) {
    int bad = !ok, nbad = 0;
    MPI_Allreduce(&bad, &nbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (!nbad) return;
    if (nbad == P) { if (me == 0) fprintf(stderr, "eager-train: %s: %s%s\n", what, msg,
                                          P > 1 ? " (on every rank)" : ""); }
    else if (!ok) fprintf(stderr, "eager-train: rank %d: %s: %s\n", me, what, msg);
    else if (me == 0) fprintf(stderr, "eager-train: another rank failed (%s); exiting\n", what);
    fflush(stderr);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    exit(1);
}

static uint64_t hash_buf(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

typedef struct {            /* per-rank timers and counters, summed over the run */
    double compute, inject, wait, apply;
    long steps, deposits;
    uint32_t max_streak;
} rank_stats_t;

typedef struct {            /* per-epoch outcome of the training loop on this rank */
    double loss_sum; long loss_n, correct, seen;
    uint64_t rounds, fresh_sum, stale_n; double stale_sum;
    uint32_t max_stale, max_streak;
} epoch_acc_t;

static int data_kind(const char *s) {
    return !strcmp(s, "cifar10") ? DATA_CIFAR10 : !strcmp(s, "imagenet") ? DATA_IMAGENET :
           !strcmp(s, "ucf101") ? DATA_UCF101 : !strcmp(s, "hyperplane") ? DATA_HYPERPLANE :
           !strcmp(s, "fmnist") ? DATA_FMNIST : 0;
}

static data_set_t *open_split(data_split_t split, char *err, size_t n) {
    data_spec_t s;
    memset(&s, 0, sizeof s);
    s.kind = data_kind(C.data);
    if (!s.kind) { snprintf(err, n, "--data '%s' is not a data kind", C.data); return NULL; }
    s.path = *C.data_path ? C.data_path : NULL;
    s.split = split;
    s.seed = C.seed;
    s.image_size = C.image_size;
    s.limit = split == DATA_TRAIN ? C.limit_train : C.limit_test;
    s.ucf_split = C.ucf_split;
    s.max_t = C.max_t;
    s.hp_features = C.hp_features;
    s.hp_samples = split == DATA_TRAIN ? C.hp_samples : C.hp_samples / 8;
    return data_open(&s, err, n);
}

static void to_batch(nn_batch_t *nb, const data_batch_t *b) {
    memset(nb, 0, sizeof *nb);
    nb->x = b->x;
    nb->labels = b->y;
    nb->targets = b->target;
    nb->lengths = b->lengths;
    nb->n = b->n;
    if (b->t_pad > 1) { nb->ndim = 2; nb->shape[0] = b->t_pad; nb->shape[1] = (int)(b->x_stride / (size_t)b->t_pad); }
}

/* The lr of a round: a function of the epoch and of the fraction of the epoch's gradients that
 * the rounds before it applied (sum of their fresh counts over the epoch's batches: P x steps
 * with even shards, or all batches dealt in a global epoch). Every rank holds the same records, so every replica uses the same lr, and
 * the schedule advances with the samples learnt, not with the round count: a solo epoch has ~3x
 * more rounds than a sync one, and a round index over `steps` would move a milestone or warm-up
 * that far ahead of its place (it did: solo rounds past `steps` ran at the next epoch's lr). */
static double lr_of(const nn_lr_sched_t *s, int epoch, uint64_t fresh_before, int64_t nbatches) {
    double f = nbatches > 0 ? (double)fresh_before / (double)nbatches : 0;
    return nn_lr_at(s, epoch + (f < 1 ? f : 1));
}

/* The weight decay of a round (--wd-per sample): --wd times the share of a whole round's gradients
 * that it carries, |F_r| / P, so that every mode decays by --wd x batches / P per epoch, sync's
 * decay per sample learnt, whatever its round sizes. With --div p a round of |F| gradients applies
 * |F|/P of a whole round's gradient mass but, decayed in full (--wd-per round), it decayed the
 * weights as much as a whole sync round: a solo epoch (~3x sync's rounds) decayed them ~3x harder,
 * and every partial run of issue 5 ended with a higher training loss than the sync run of its
 * seed. --div fresh makes every round a whole step (full decay). */
static float wd_of(const pcoll_record_t *rec) {
    if (!strcmp(C.wd_per, "round") || !strcmp(C.div, "fresh")) return (float)C.wd;
    return (float)(C.wd * (double)rec->nfresh / (double)P);
}

/* Applies every completed round (in order) with SGD; aggregates the records on rank 0. */
static int apply_rounds(pcoll_t *h, nn_model_t *m, nn_sgd_t *sgd, const nn_lr_sched_t *sched,
                        int epoch, int64_t nbatches, dealer_t *dl, pcoll_record_t *rec,
                        epoch_acc_t *acc, ragg_t *agg, json_t *rounds_json) {
    uint64_t r;
    const float *res;
    int rc, k = 0;
    while ((rc = pcoll_next(h, &r, &res, rec)) == PCOLL_OK) {
        if (rec->nfresh == 0) continue;  /* a round that only carried joins: not an SGD step */
        if (dl && dealer_round(dl, rec->fresh)) die("global epoch", "a rank deposited without a batch (internal)");
        sgd->lr = (float)lr_of(sched, epoch, acc->fresh_sum, nbatches);
        sgd->wd = wd_of(rec);
#ifdef HAVE_NN_CUDA
        if (G) { if (nn_cuda_sgd_step_grad(G, res, sgd)) die("cuda sgd", nn_cuda_error(G)); }
        else
#endif
        nn_sgd_step_grad(m, res, sgd);
        acc->rounds++;
        acc->fresh_sum += (uint64_t)rec->nfresh;
        for (int p = 0; p < P; p++) {
            if (rec->streak[p] > acc->max_streak) acc->max_streak = rec->streak[p];
            if (rec->fresh[p]) {
                acc->stale_n++; acc->stale_sum += rec->staleness[p];
                if (rec->staleness[p] > acc->max_stale) acc->max_stale = rec->staleness[p];
            }
        }
        if (me == 0) {
            ragg_add(agg, rec, sgd->lr, sgd->wd);
            if (agg->n >= C.round_agg) { json_array_append_new(rounds_json, ragg_json(agg, epoch)); ragg_reset(agg); }
        }
        k++;
    }
    if (rc < 0) die("pcoll_next", pcoll_last_error(h));
    return k;
}

/* --epoch-mode global: hands every batch dealt to this rank to the loader (prefetched, FIFO). */
static void submit_dealt(data_iter_t *it, dealer_t *dl, const int64_t *perm, int epoch) {
    int64_t b;
    while (dealer_unsubmitted(dl, &b))
        if (data_iter_submit(it, perm + b * C.batch, C.batch, epoch)) die("training data", "data_iter_submit failed");
}

/* Test-set evaluation, sharded over the ranks; every rank gets the totals. */
static void evaluate(nn_model_t *m, data_set_t *test, double *loss, double *top1, double *top5) {
    char err[512] = "";
    data_iter_t *it = data_iter_new(test, me, P, C.batch, 0, DATA_EVAL_FLAGS, err, sizeof err);
    if (!it) die("evaluation data", err);
    nn_set_training(m, getenv("EAGER_EVAL_BATCHSTATS") ? 1 : 0);  /* debugging aid */
    double s[4] = {0, 0, 0, 0};  /* loss sum, top1, top5, samples */
    const data_batch_t *b;
    int rc;
    while ((rc = data_iter_next(it, &b, err, sizeof err)) == 1) {
        nn_batch_t nb;
        to_batch(&nb, b);
#ifdef HAVE_NN_CUDA
        if (G) {
            nn_cuda_set_training(G, 0);
            if (nn_cuda_forward(G, &nb)) die("evaluation forward (cuda)", nn_cuda_error(G));
            s[0] += nn_cuda_loss(G) * b->n; s[1] += nn_cuda_top1(G); s[2] += nn_cuda_top5(G); s[3] += b->n;
            nn_cuda_set_training(G, 1);
            continue;
        }
#endif
        if (nn_forward(m, &nb)) die("evaluation forward", m->err);
        s[0] += m->loss * b->n; s[1] += m->top1; s[2] += m->top5; s[3] += b->n;
    }
    if (rc < 0) die("evaluation data", err);
    data_iter_free(it);
    nn_set_training(m, 1);
    double t[4];
    MPI_Allreduce(s, t, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    *loss = t[3] ? t[0] / t[3] : 0;
    *top1 = t[3] ? t[1] / t[3] : 0;
    *top5 = t[3] ? t[2] / t[3] : 0;
}

/* Averages BN running statistics across ranks; checks that the replicas are equal. */
static uint64_t sync_replicas(nn_model_t *m, int epoch) {
#ifdef HAVE_NN_CUDA
    if (G && (nn_cuda_copy_params_to_host(G, m) || nn_cuda_bn_stats_to_host(G, m->bn_stats)))
        die("cuda copy to host", nn_cuda_error(G));
#endif
    if (m->nbn_stats) {
        MPI_Allreduce(MPI_IN_PLACE, m->bn_stats, (int)m->nbn_stats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (size_t i = 0; i < m->nbn_stats; i++) m->bn_stats[i] /= (float)P;
#ifdef HAVE_NN_CUDA
        if (G && nn_cuda_bn_stats_from_host(G, m->bn_stats)) die("cuda copy to device", nn_cuda_error(G));
#endif
    }
    uint64_t h = 1469598103934665603ull;
    h = hash_buf(h, m->params, m->nparams * sizeof(float));
    h = hash_buf(h, m->mom, m->nparams * sizeof(float));
    h = hash_buf(h, m->bn_stats, m->nbn_stats * sizeof(float));
    uint64_t *all = malloc((size_t)P * sizeof *all);
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    int bad = 0;
    for (int p = 1; p < P; p++) bad |= all[p] != all[0];
    if (bad) {
        if (me == 0) {
            fprintf(stderr, "eager-train: replicas differ after epoch %d: weight hashes", epoch);
            for (int p = 0; p < P; p++) fprintf(stderr, " rank %d=%016llx", p, (unsigned long long)all[p]);
            fprintf(stderr, "\n  ranks differing from rank 0:");
            for (int p = 1; p < P; p++) if (all[p] != all[0]) fprintf(stderr, " %d", p);
            fprintf(stderr, "\n");
        }
        free(all);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    free(all);
    return h;
}

static const char *rule_name(pcoll_mode_t m, int q, char *buf, size_t n) {
    if (m == PCOLL_QUORUM) snprintf(buf, n, "quorum:%d", q);
    else snprintf(buf, n, "%s", pcoll_mode_name(m));
    return buf;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    char err[1024] = "";
    if (provided < MPI_THREAD_MULTIPLE) {
        if (!me) fprintf(stderr, "eager-train: the MPI library provides thread level %d, libpcoll "
                         "needs MPI_THREAD_MULTIPLE\n", provided);
        MPI_Finalize();
        return 1;
    }
    int prc = cfg_parse(&C, argc, argv, err, sizeof err);
    if (prc == 1) { if (!me) cfg_print_help(stdout); MPI_Finalize(); return 0; }
    agree_or_exit(prc == 0, "configuration", err);

    /* threads: the cores of this host shared by its ranks */
    MPI_Comm node;
    int local = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = C.threads ? C.threads : (int)(cores / local > 0 ? cores / local : 1);
    openblas_set_num_threads(threads);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    if (!*C.out) {
        mkdir("results", 0755);
        mkdir("results/runs", 0755);
        char mode[64];
        snprintf(mode, sizeof mode, "%s", C.mode);
        for (char *p = mode; *p; p++) if (*p == ':') *p = '-';
        snprintf(C.out, sizeof C.out, "results/runs/%s-%s.json", C.experiment, mode);
    }
    if (me == 0 && !C.quiet) {
        printf("eager-train: %d ranks, %d threads each; resolved configuration:\n", P, threads);
        cfg_print(&C, stdout);
        fflush(stdout);
    }

    /* data, model, optimiser */
    data_set_t *train = open_split(DATA_TRAIN, err, sizeof err);
    agree_or_exit(train != NULL, "training data", err);
    data_set_t *test = open_split(DATA_TEST, err, sizeof err);
    agree_or_exit(test != NULL, "test data", err);
    nn_model_t *m = nn_model_build(C.model, C.batch, C.seed, err, sizeof err);
    agree_or_exit(m != NULL, "model", err);
    {   /* the model's input against the data's sample shape, reported with both shapes */
        int d[3] = {0, 0, 0};
        int nd = data_sample_shape(train, d), ok = 1;
        if (m->in_ndim == 3 && nd == 3) ok = d[0] == m->in_shape[0] && d[1] == m->in_shape[1] && d[2] == m->in_shape[2];
        else if (m->in_ndim == 2 && nd == 2) ok = d[1] == m->in_shape[1];
        else if (m->in_ndim == 1 && nd == 1) ok = d[0] == m->in_shape[0];
        else ok = 0;
        snprintf(err, sizeof err, "model '%s' expects input %dx%dx%d (ndim %d) but %s samples are "
                 "%dx%dx%d (ndim %d)", C.model, m->in_shape[0], m->in_shape[1], m->in_shape[2],
                 m->in_ndim, C.data, d[0], d[1], d[2], nd);
        agree_or_exit(ok, "shape mismatch", err);
        int classes = data_num_classes(train);
        snprintf(err, sizeof err, "model '%s' has %d outputs but %s has %d classes", C.model,
                 m->nout, C.data, classes);
        agree_or_exit(classes == 0 || classes == m->nout, "shape mismatch", err);
    }
    nn_sgd_t sgd = {(float)C.lr, (float)C.momentum, (float)C.wd, C.nesterov, C.wd_bn};
    nn_lr_sched_t sched;
    nn_lr_sched_default(&sched, C.lr);
    sched.base_batch = C.base_batch;
    sched.global_batch = C.batch * P;
    sched.warmup_epochs = C.warmup;
    sched.warmup_start_lr = C.warmup_start_lr;
    sched.gamma = C.gamma;
    for (char *s = C.milestones; *s && sched.nmilestones < 16;) {
        sched.milestones[sched.nmilestones++] = strtod(s, &s);
        while (*s == ',') s++;
    }
    int epoch0 = 0;
    double wall0 = 0;
    if (C.resume) {
        ckpt_meta_t meta;
        int ok = ckpt_load(C.ckpt_dir, m, &meta, err, sizeof err) == 0;
        if (ok && meta.seed != C.seed) {
            ok = 0;
            snprintf(err, sizeof err, "checkpoint %s/latest.ckpt was written with --seed %llu, this "
                     "run has --seed %llu", C.ckpt_dir, (unsigned long long)meta.seed, (unsigned long long)C.seed);
        }
        agree_or_exit(ok, "resume", err);
        epoch0 = meta.epoch;
        wall0 = meta.wall_s;
        if (me == 0 && !C.quiet) printf("eager-train: resumed from %s/latest.ckpt after epoch %d\n", C.ckpt_dir, epoch0);
    }

    pcoll_mem_t memkind = PCOLL_MEM_HOST;
    if (!strcmp(C.device, "cuda")) {
#ifdef HAVE_NN_CUDA
        MPI_Comm nd;
        int lrank = 0, lsize = 1;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &nd);
        MPI_Comm_rank(nd, &lrank); MPI_Comm_size(nd, &lsize);
        MPI_Comm_free(&nd);
        int ok = nn_cuda_select_local_device(lrank, lsize, err, sizeof err) >= 0;  /* a device index */
        agree_or_exit(ok, "--device cuda", err);
        G = nn_cuda_model_build(m, C.batch, C.tf32 ? NN_CUDA_TF32_DEFAULT : NN_CUDA_TF32_OFF, err, sizeof err);
        agree_or_exit(G != NULL, "--device cuda", err);
        memkind = PCOLL_MEM_DEVICE;
#else
        agree_or_exit(0, "--device cuda", "this build has no CUDA backend (nvcc and cuDNN were not "
                      "found at build time); rebuild on a machine with the CUDA toolkit, or use --device cpu");
#endif
    }

    /* controller + libpcoll configuration (one handle per epoch; see the header comment) */
    ctl_config_t cc;
    ctl_config_default(&cc);
    char pol[400];
    snprintf(pol, sizeof pol, "%s%s%s", C.mode, *C.policy_opts ? "," : "", C.policy_opts);
    agree_or_exit(ctl_policy_parse(pol, &cc.policy, err, sizeof err) == 0, "policy", err);
    cc.policy.tau = C.tau;
    cc.t_warn = C.t_warn;
    cc.t_abort = C.t_abort;
    cc.log = stderr;
    ctl_state_t *carried = NULL;  /* adaptive: the controller state the next epoch continues */
    ctl_config_t cc_sync = cc;  /* the epochs of --initial-sync / --final-sync: a static sync policy */
    agree_or_exit(ctl_policy_parse("sync", &cc_sync.policy, err, sizeof err) == 0, "policy", err);
    cc_sync.policy.tau = C.tau;
    pcoll_config_t pc;
    pcoll_config_default(&pc);
    pc.div = !strcmp(C.div, "fresh") ? PCOLL_DIV_FRESH : PCOLL_DIV_P;
    pc.seed = C.seed;
    pc.tau = C.tau;
    pc.ring = C.ring ? C.ring : (2 * C.tau + 2 > 16 ? 2 * C.tau + 2 : 16);
    pc.horizon = 1;
    pc.poll_max_us = 2000;  /* idle engines poll at most every 2 ms: cheap on oversubscribed cores */
    pc.records = 1024;
    imb_t imb;
    imb_parse(C.imbalance, &imb, err, sizeof err);

    /* metrics (rank 0 writes) */
    char host[MPI_MAX_PROCESSOR_NAME] = "";
    int hl = 0;
    MPI_Get_processor_name(host, &hl);
    char *hosts_buf = calloc((size_t)P, MPI_MAX_PROCESSOR_NAME);
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts_buf, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    char **hosts = calloc((size_t)P, sizeof *hosts);
    for (int p = 0; p < P; p++) hosts[p] = hosts_buf + (size_t)p * MPI_MAX_PROCESSOR_NAME;
    int papi_mine = metrics_papi_start(), papi = 0;
    MPI_Allreduce(&papi_mine, &papi, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    json_t *root = NULL, *jepochs = NULL, *jrounds = NULL, *jswitch = NULL;
    if (me == 0) {
        root = json_object();
        json_object_set_new(root, "schema", json_string("eager-sgd-run/1"));
        json_object_set_new(root, "experiment", json_string(C.experiment));
        json_t *jc = cfg_to_json(&C);
        json_object_set_new(jc, "ranks", json_integer(P));
        json_object_set_new(jc, "threads", json_integer(threads));
        json_object_set_new(root, "config", jc);
        json_object_set_new(root, "environment", metrics_environment(P, hosts, argc, argv));
        json_object_set_new(root, "epochs", jepochs = json_array());
        json_t *r = json_object();
        json_object_set_new(r, "aggregation", json_integer(C.round_agg));
        json_object_set_new(r, "records", jrounds = json_array());
        json_object_set_new(root, "rounds", r);
        json_t *ct = json_object();
        json_object_set_new(ct, "policy", json_string(pol));
        json_object_set_new(ct, "decision_hash", json_string(""));
        json_object_set_new(ct, "switches", jswitch = json_array());
        json_object_set_new(root, "controller", ct);
        json_object_set_new(root, "papi", metrics_papi(papi));
    }

    rank_stats_t rs = {0};
    pcoll_record_t rec;
    pcoll_record_init(&rec, P);
    ragg_t agg;
    ragg_reset(&agg);
    uint64_t dec_hash = 1469598103934665603ull, tot_rounds = 0, tot_fresh = 0, tot_stale_n = 0;
    double tot_stale = 0, final_top1 = -1, final_top5 = -1, final_loss = 0, tt_target = -1;
    uint32_t run_max_stale = 0, run_max_streak = 0;
    double t_start = now() - wall0;
    char stepsbuf[64];
    int reached = 0;
    const int global = !strcmp(C.epoch_mode, "global");
    const int64_t ntrain = data_count(train);
    int64_t *perm = global ? malloc((size_t)ntrain * sizeof *perm) : NULL;
    if (global && !perm) die("global epoch", "out of memory for the permutation");

    for (int epoch = epoch0; epoch < C.epochs; epoch++) {
        double te0 = now();
        data_iter_t *it;
        long steps;         /* shard: this rank's steps; global: batches / P (nominal) */
        int64_t nbatches;   /* batches of the epoch, all ranks together */
        dealer_t dl;
        if (!global) {
            it = data_iter_new(train, me, P, C.batch, epoch,
                               DATA_TRAIN_FLAGS | DATA_DROP_LAST | DATA_EVEN_SHARDS, err, sizeof err);
            agree_or_exit(it != NULL, "training data", err);
            steps = data_iter_num_batches(it);
            if (C.max_steps && steps > C.max_steps) steps = C.max_steps;
            agree_or_exit(steps > 0, "training data", "no full batch per rank: lower --batch or use more data");
            nbatches = (int64_t)steps * P;
        } else {  /* one permutation of the whole set; batches dealt from the rounds (dealer.c) */
            it = data_iter_new_global(train, C.batch, DATA_AUGMENT | DATA_PREFETCH, err, sizeof err);
            agree_or_exit(it != NULL, "training data", err);
            nbatches = ntrain / C.batch;
            if (C.max_steps && nbatches > (int64_t)C.max_steps * P) nbatches = (int64_t)C.max_steps * P;
            agree_or_exit(nbatches > 0, "training data", "no full batch: lower --batch or use more data");
            steps = (long)((nbatches + P - 1) / P);
            data_permutation(ntrain, C.seed, epoch, perm);
            if (dealer_init(&dl, nbatches, P, me, 2)) die("global epoch", "dealer_init (internal)");
            submit_dealt(it, &dl, perm, epoch);
        }
        long mysteps = 0;
        pcoll_t *h = NULL;
        int rc = pcoll_create(MPI_COMM_WORLD, m->nparams, memkind, &pc, &h);
        agree_or_exit(rc == PCOLL_OK, "pcoll_create", pcoll_last_error(NULL));
        ctl_t *ctl = NULL;
        const int forced_sync = epoch < C.initial_sync || epoch >= C.epochs - C.final_sync;
        if (ctl_start(h, forced_sync ? &cc_sync : &cc, &ctl)) die("controller", "ctl_start failed");
        epoch_acc_t acc = {0};
        double t_dep = now();   /* this rank's previous deposit (the policy skips each rank's first) */
        for (long s = 0; global || s < steps; s++) {
            const data_batch_t *b;
            int64_t gb;
            if (global && !dealer_take(&dl, &gb)) break;   /* nothing more dealt to me: join */
            double t0 = now();
            int got = data_iter_next(it, &b, err, sizeof err);
            if (got < 0) die("training data", err);
            if (got == 0) die("training data", "shard ended before its batch count (internal)");
            mysteps++;
            nn_batch_t nb;
            to_batch(&nb, b);
            const float *grads = m->grads;
            double loss;
            int top1;
#ifdef HAVE_NN_CUDA
            if (G) {
                if (nn_cuda_step_graph(G, &nb)) die("model (cuda)", nn_cuda_error(G));
                if (nn_cuda_check_finite(G, (long)epoch * steps + s, err, sizeof err)) die("training", err);
                if (nn_cuda_sync(G)) die("cuda", nn_cuda_error(G));
                grads = nn_cuda_grads(G);
                loss = nn_cuda_loss(G);
                top1 = nn_cuda_top1(G);
            } else
#endif
            {
                nn_zero_grad(m);
                if (nn_forward(m, &nb) || nn_backward(m)) die("model", m->err);
                if (nn_check_finite(m, (long)epoch * steps + s, err, sizeof err)) die("training", err);
                loss = m->loss;
                top1 = m->top1;
            }
            double t1 = now();
            double d = imb_delay_ms(&imb, C.seed, (uint64_t)epoch * (uint64_t)(global ? nbatches : steps) + (uint64_t)s, me, P,
                                    (t1 - t0) * 1e3, b->cost);
            if (imb.busy) imb_busy_ms(d); else sleep_ms(d);  /* busy=1: the delay is computed */
            double t2 = now();
            acc.loss_sum += loss; acc.loss_n++;
            acc.correct += top1; acc.seen += b->n;
            /* the step time (or, for rule=rate, the time since the previous deposit) travels with
             * the deposit: the controller measures from it what each mode costs (ctl_step_cost) */
            rc = pcoll_set_cost(h, ctl_step_cost(forced_sync ? &cc_sync.policy : &cc.policy, t2 - t0, t2 - t_dep));
            if (rc) die("pcoll_set_cost", pcoll_last_error(h));
            t_dep = t2;
            if ((rc = pcoll_deposit(h, grads, 0))) die("pcoll_deposit", pcoll_last_error(h));
            if ((rc = pcoll_wait(h, PCOLL_WAIT_CONSUMED, C.t_abort + 5, NULL))) die("pcoll_wait", pcoll_last_error(h));
            double t3 = now();
            apply_rounds(h, m, &sgd, &sched, epoch, nbatches, global ? &dl : NULL, &rec, &acc, &agg, jrounds);
            if (global) submit_dealt(it, &dl, perm, epoch);
            double t4 = now();
            rs.compute += t1 - t0; rs.inject += t2 - t1; rs.wait += t3 - t2; rs.apply += t4 - t3;
            rs.steps++; rs.deposits++;
            if (me == 0 && C.log_every && (s + 1) % C.log_every == 0 && !C.quiet) {
                double el = now() - te0, rate = (double)(s + 1) * C.batch * P / el;
                printf("  epoch %d step %ld/%ld loss %.4f acc %.3f  %.0f samples/s  epoch left %.0f s\n",
                       epoch + 1, s + 1, steps, acc.loss_sum / acc.loss_n,
                       acc.seen ? (double)acc.correct / acc.seen : 0, rate, el / (s + 1) * (steps - s - 1));
                fflush(stdout);
            }
        }
        /* join: keep taking part until every rank has joined; apply every remaining round */
        pcoll_join(h);
        while ((rc = pcoll_wait(h, PCOLL_WAIT_NEWER, C.t_abort + 5, NULL)) == PCOLL_OK)
            apply_rounds(h, m, &sgd, &sched, epoch, nbatches, global ? &dl : NULL, &rec, &acc, &agg, jrounds);
        if (rc != PCOLL_DONE) die("pcoll_wait (epoch end)", pcoll_last_error(h));
        if (me == 0 && agg.n) { json_array_append_new(jrounds, ragg_json(&agg, epoch)); ragg_reset(&agg); }
        data_iter_free(it);
        /* controller: the thread ends by itself once it saw the all-joined round, but may still be
         * some records behind pcoll_wait's DONE: its stats are final, and the same on every rank,
         * only then (a snapshot taken earlier was carried into the next epoch's policy differently
         * on different ranks: a stall). The ranks' decision hashes are compared every epoch. */
        int cw = ctl_wait(ctl, C.t_abort + 5);
        if (cw != CTL_OK) die("controller", cw == CTL_ERR_TIMEOUT ? "the thread did not end after the all-joined round" : ctl_last_error(ctl));
        ctl_policy_stats_t cst;
        uint64_t ch = 0;
        ctl_stats(ctl, &cst, &ch);
        {
            uint64_t v[2] = {ch, cst.rounds}, lo[2], hi[2];
            MPI_Allreduce(v, lo, 2, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
            MPI_Allreduce(v, hi, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
            snprintf(err, sizeof err, "epoch %d: the ranks' controllers disagree (decision hash %016llx..%016llx, "
                     "rounds observed %llu..%llu; internal)", epoch + 1, (unsigned long long)lo[0],
                     (unsigned long long)hi[0], (unsigned long long)lo[1], (unsigned long long)hi[1]);
            agree_or_exit(lo[0] == hi[0] && lo[1] == hi[1], "controller", err);
        }
        dec_hash = hash_buf(dec_hash, &ch, sizeof ch);
        ctl_switch_t sw[64];
        size_t nsw = ctl_switch_log(ctl, sw, 64);
        if (me == 0)
            for (size_t i = 0; i < nsw && i < 64; i++) {
                char a[32], bb[32];
                json_t *o = json_object();
                json_object_set_new(o, "epoch", json_integer(epoch));
                json_object_set_new(o, "round", json_integer((json_int_t)sw[i].round));
                json_object_set_new(o, "effective", json_integer((json_int_t)sw[i].effective));
                json_object_set_new(o, "from", json_string(rule_name(sw[i].old_mode, sw[i].old_quorum, a, sizeof a)));
                json_object_set_new(o, "to", json_string(rule_name(sw[i].new_mode, sw[i].new_quorum, bb, sizeof bb)));
                json_object_set_new(o, "reason", json_string(sw[i].reason));
                json_array_append_new(jswitch, o);
                if (!C.quiet) printf("  controller: epoch %d round %llu: %s\n", epoch + 1, (unsigned long long)sw[i].round, sw[i].reason);
            }
        /* adaptive: the next epoch continues the controller's whole state (ctl_state_t: mode, probes,
         * window, measurements); the policy is a pure function of the records, so every rank
         * carries over the same */
        if (cc.policy.kind == CTL_ADAPTIVE && !forced_sync) {
            ctl_state_free(carried);
            if (!(carried = ctl_state(ctl))) die("controller", "out of memory (controller state)");
            cc.resume = carried;
        }
        int cs = ctl_stop(&ctl);
        if (cs != CTL_OK) die("controller", "the controller thread ended with an error");
        if ((rc = pcoll_finalize(&h, C.t_abort + 5))) die("pcoll_finalize", pcoll_strerror(rc));

        if (papi) {  /* this epoch's counters of every rank's training thread */
            long long pv[3], *pall = me == 0 ? malloc((size_t)P * sizeof pv) : NULL;
            metrics_papi_read(pv);
            MPI_Gather(pv, 3, MPI_LONG_LONG, pall, 3, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
            if (me == 0) {
                json_t *pr = json_object_get(json_object_get(root, "papi"), "per_rank");
                for (int p = 0; p < P; p++) {
                    json_t *o = json_object();
                    json_object_set_new(o, "rank", json_integer(p));
                    json_object_set_new(o, "epoch", json_integer(epoch + 1));
                    json_object_set_new(o, "cycles", json_integer(pall[3 * p]));
                    json_object_set_new(o, "instructions", json_integer(pall[3 * p + 1]));
                    json_object_set_new(o, "cache_misses", json_integer(pall[3 * p + 2]));
                    json_array_append_new(pr, o);
                }
                free(pall);
            }
        }
        /* replicas: same weights everywhere; BN statistics averaged; then evaluate */
        char hx[32];
        snprintf(hx, sizeof hx, "%016llx", (unsigned long long)sync_replicas(m, epoch));
        double ep_s = now() - te0, wall = now() - t_start;
        double tl = 0, t1 = -1, t5 = -1;
        int last = epoch + 1 == C.epochs;
        if ((epoch + 1) % C.eval_every == 0 || last) evaluate(m, test, &tl, &t1, &t5);
        double loc[7] = {acc.loss_sum, (double)acc.loss_n, (double)acc.correct, (double)acc.seen,
                         (double)acc.rounds, (double)acc.fresh_sum, (double)mysteps}, glob[7];
        MPI_Allreduce(loc, glob, 7, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        long steps_min = mysteps, steps_max = mysteps;
        if (global) {
            MPI_Allreduce(&mysteps, &steps_min, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
            MPI_Allreduce(&mysteps, &steps_max, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
        }
        double train_loss = glob[1] ? glob[0] / glob[1] : 0;
        double train_acc = glob[3] ? glob[2] / glob[3] : 0;
        uint64_t rounds = acc.rounds;  /* every rank applied every round */
        double fresh_frac = rounds ? (double)acc.fresh_sum / ((double)rounds * P) : 1;
        tot_rounds += rounds; tot_fresh += acc.fresh_sum; tot_stale += acc.stale_sum; tot_stale_n += acc.stale_n;
        if (acc.max_stale > run_max_stale) run_max_stale = acc.max_stale;
        if (acc.max_streak > run_max_streak) run_max_streak = acc.max_streak;
        if (acc.max_streak > rs.max_streak) rs.max_streak = acc.max_streak;
        final_loss = train_loss;
        if (t1 >= 0) { final_top1 = t1; final_top5 = t5; }
        int istgt = data_num_classes(train) > 0 && t1 >= 0 && C.target_top1 > 0 && t1 >= C.target_top1;
        if (istgt && !reached) { reached = 1; tt_target = wall; }
        double lr_now = nn_lr_at(&sched, epoch);  /* the lr this epoch started with */
        if (me == 0) {
            json_t *o = json_object();
            json_object_set_new(o, "epoch", json_integer(epoch + 1));
            json_object_set_new(o, "wall_s", json_real(wall));
            json_object_set_new(o, "epoch_s", json_real(ep_s));
            json_object_set_new(o, "lr", json_real(nn_lr_at(&sched, epoch)));
            json_object_set_new(o, "train_loss", json_real(train_loss));
            int cls = data_num_classes(train) > 0;
            json_object_set_new(o, "train_top1", cls ? json_real(train_acc) : json_null());
            json_object_set_new(o, "test_loss", t1 >= 0 ? json_real(tl) : json_null());
            json_object_set_new(o, "test_top1", t1 >= 0 && cls ? json_real(t1) : json_null());
            json_object_set_new(o, "test_top5", t1 >= 0 && cls ? json_real(t5) : json_null());
            json_object_set_new(o, "steps", json_integer((json_int_t)glob[6]));
            json_object_set_new(o, "rank_steps_min", json_integer(steps_min));
            json_object_set_new(o, "rank_steps_max", json_integer(steps_max));
            json_object_set_new(o, "samples", json_integer((json_int_t)glob[3]));
            json_object_set_new(o, "rounds", json_integer((json_int_t)rounds));
            json_object_set_new(o, "fresh_fraction", json_real(fresh_frac));
            json_object_set_new(o, "mean_staleness", json_real(acc.stale_n ? acc.stale_sum / acc.stale_n : 0));
            json_object_set_new(o, "max_staleness", json_integer(acc.max_stale));
            json_object_set_new(o, "max_streak", json_integer(acc.max_streak));
            if (cst.gain_n) {   /* the controller's gain over this epoch's rounds (controller.h) */
                json_t *g = json_object();
                json_object_set_new(g, "min", json_real(cst.gain_min));
                json_object_set_new(g, "mean", json_real(cst.gain_sum / (double)cst.gain_n));
                json_object_set_new(g, "max", json_real(cst.gain_max));
                json_object_set_new(g, "rounds", json_integer((json_int_t)cst.gain_n));
                json_object_set_new(o, "gain", g);
            } else {
                json_object_set_new(o, "gain", json_null());
            }
            json_object_set_new(o, "weights_hash", json_string(hx));
            json_array_append_new(jepochs, o);
            if (!C.quiet) {
                if (global) snprintf(stepsbuf, sizeof stepsbuf, "global: %lld batches, %ld-%ld per rank",
                                     (long long)nbatches, steps_min, steps_max);
                else snprintf(stepsbuf, sizeof stepsbuf, "%ld steps x %d ranks", steps, P);
                if (data_num_classes(train) > 0)
                    printf("epoch %3d/%d  %6.1f s  loss %.4f  train %.2f%%  test %s%.2f%% (top-5 %.2f%%)  "
                           "%.0f samples/s  rounds %llu fresh %.2f  lr %.4g  [%s]\n", epoch + 1, C.epochs, wall,
                           train_loss, 100 * train_acc, t1 >= 0 ? "" : "-", t1 >= 0 ? 100 * t1 : 0,
                           t5 >= 0 ? 100 * t5 : 0, glob[3] / ep_s, (unsigned long long)rounds, fresh_frac,
                           lr_now, stepsbuf);
                else
                    printf("epoch %3d/%d  %6.1f s  train loss %.6f  test loss %.6f  %.0f samples/s  rounds %llu "
                           "fresh %.2f  [%s]\n", epoch + 1, C.epochs, wall, train_loss, tl, glob[3] / ep_s,
                           (unsigned long long)rounds, fresh_frac, stepsbuf);
                fflush(stdout);
            }
        }
        if (*C.ckpt_dir && ((C.ckpt_every && (epoch + 1) % C.ckpt_every == 0) || last)) {
            ckpt_meta_t meta = {epoch + 1, C.seed, 0, wall, P};
            char path[1200];
            int ok = 1;
            if (me == 0) ok = ckpt_save(C.ckpt_dir, m, &meta, path, sizeof path, err, sizeof err) == 0;
            MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
            if (!ok) { if (me == 0) fprintf(stderr, "eager-train: %s\n", err); MPI_Abort(MPI_COMM_WORLD, 1); }
            if (me == 0 && !C.quiet) printf("  checkpoint %s\n", path);
        }
        if (me == 0 && metrics_write(root, C.out, err, sizeof err)) fprintf(stderr, "eager-train: %s\n", err);
    }

    /* per-rank timers: who was the straggler */
    double mine[6] = {rs.compute, rs.inject, rs.wait, rs.apply, (double)rs.steps, (double)rs.max_streak};
    double *all = me == 0 ? malloc((size_t)P * sizeof mine) : NULL;
    MPI_Gather(mine, 6, MPI_DOUBLE, all, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int exit_code = 0;
    if (me == 0) {
        json_t *jr = json_array();
        int strag = 0;
        for (int p = 0; p < P; p++) {
            json_t *o = json_object();
            double *v = all + 6 * p;
            json_object_set_new(o, "rank", json_integer(p));
            json_object_set_new(o, "host", json_string(hosts[p]));
            json_object_set_new(o, "steps", json_integer((json_int_t)v[4]));
            json_object_set_new(o, "compute_s", json_real(v[0]));
            json_object_set_new(o, "inject_s", json_real(v[1]));
            json_object_set_new(o, "wait_s", json_real(v[2]));
            json_object_set_new(o, "apply_s", json_real(v[3]));
            json_object_set_new(o, "max_streak", json_integer((json_int_t)v[5]));
            json_array_append_new(jr, o);
            if (v[0] + v[1] > all[6 * strag] + all[6 * strag + 1]) strag = p;
        }
        json_object_set_new(root, "ranks", jr);
        char hx[32];
        snprintf(hx, sizeof hx, "%016llx", (unsigned long long)dec_hash);  /* checked equal every epoch */
        json_object_set_new(json_object_get(root, "controller"), "decision_hash", json_string(hx));
        json_t *s = json_object();
        double wall = now() - t_start;
        json_object_set_new(s, "wall_s", json_real(wall));
        json_object_set_new(s, "epochs", json_integer(C.epochs));
        int cls = data_num_classes(train) > 0;
        json_object_set_new(s, "final_test_top1", cls && final_top1 >= 0 ? json_real(final_top1) : json_null());
        json_object_set_new(s, "final_test_top5", cls && final_top5 >= 0 ? json_real(final_top5) : json_null());
        json_object_set_new(s, "final_train_loss", json_real(final_loss));
        json_object_set_new(s, "target_top1", cls && C.target_top1 > 0 ? json_real(C.target_top1) : json_null());
        json_object_set_new(s, "time_to_target_s", tt_target >= 0 ? json_real(tt_target) : json_null());
        json_object_set_new(s, "fresh_fraction", json_real(tot_rounds ? (double)tot_fresh / ((double)tot_rounds * P) : 1));
        json_object_set_new(s, "mean_staleness", json_real(tot_stale_n ? tot_stale / tot_stale_n : 0));
        json_object_set_new(s, "max_staleness", json_integer(run_max_stale));
        json_object_set_new(s, "max_streak", json_integer(run_max_streak));
        json_object_set_new(s, "bn_stats", json_string("averaged across ranks before every evaluation and checkpoint"));
        json_object_set_new(s, "straggler", json_integer(strag));
        json_object_set_new(s, "exit", json_string(exit_code ? "error" : "ok"));
        json_object_set_new(root, "summary", s);
#ifdef HAVE_NN_CUDA
        if (G) json_object_set_new(root, "cuda_graph", metrics_cuda_graph(G));
#endif
        if (metrics_write(root, C.out, err, sizeof err)) { fprintf(stderr, "eager-train: %s\n", err); exit_code = 1; }
        else if (!C.quiet) {
            char t1s[32] = "-";
            if (final_top1 >= 0 && cls) snprintf(t1s, sizeof t1s, "%.2f%%", 100 * final_top1);
            printf("eager-train: %s: %d epochs in %.1f s, final test top-1 %s, metrics %s\n",
                   C.mode, C.epochs, wall, t1s, C.out);
        }
        json_decref(root);
        free(all);
    }
    MPI_Bcast(&exit_code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    pcoll_record_free(&rec);
    free(perm);
    ctl_state_free(carried);
#ifdef HAVE_NN_CUDA
    if (G) nn_cuda_model_free(G);
#endif
    nn_model_free(m);
    data_close(train);
    data_close(test);
    free(hosts); free(hosts_buf);
    MPI_Finalize();
    return exit_code;
}
