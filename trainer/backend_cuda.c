/* backend_cuda.c -- the CUDA backend: an adapter from backend.h to trainer/cuda/nn_cuda.h.
 * The model lives on the GPU (nn_cuda mirrors the host model, same parameter layout); gradients
 * and round results are device buffers (PCOLL_MEM_DEVICE). Whole-model operations copy to the
 * host model first, so the hash, the BN average and checkpoints are the CPU backend's.
 * Linked only into CUDA builds (trainer/prog.mk); backend.c finds it at run time. */
#include "trainer/backend.h"
#include "trainer/cuda/nn_cuda.h"
#include "trainer/metrics.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const backend_ops_t backend_cuda;

/* What a rank says of its GPU to the ranks of its node and to rank 0 (bytes over MPI). */
typedef struct {
    nn_cuda_gpu_t gpu;
    char host[MPI_MAX_PROCESSOR_NAME];
    int ok, rank; /* ok: the GPU chosen and described */
} rank_gpu_t;

typedef struct {
    backend_t base;
    nn_cuda_model_t *g;
    data_alloc_t pinned; /* the batches' memory under direct input (input_alloc) */
    rank_gpu_t *gpus;    /* rank 0: every rank's, by rank (the run JSON) */
    int P;
    int warm_n; /* the warm-up's training batch size (0: none ran) */
} cuda_backend_t;

static nn_cuda_model_t *gpu(const backend_t *b) { return ((const cuda_backend_t *)b)->g; }

/* -1 with "what: <nn_cuda's message>" in err when rc is non-zero. */
static int fail(const backend_t *b, int rc, const char *what, char *err, size_t n) {
    if (!rc) return 0;
    snprintf(err, n, "%s: %s", what, nn_cuda_error(gpu(b)));
    return -1;
}

/* Collective over node: every rank's GPU, judged by nn_cuda_share_check (identity: the UUID, or
 * host/bus id without one). 0, or -1 with the same reason on every rank of the node (a rank
 * whose own choice failed keeps its own reason). One line on local rank 0 when ranks share. */
static int check_sharing(const rank_gpu_t *me, MPI_Comm node, int allow, char *err, size_t n) {
    int lr, ls;
    MPI_Comm_rank(node, &lr);
    MPI_Comm_size(node, &ls);
    enum { ID = 192 };
    rank_gpu_t *all = calloc((size_t)ls, sizeof *all);
    char *ids = calloc((size_t)ls, ID);
    int *ranks = calloc((size_t)ls, sizeof *ranks), node_gpus = 0;
    if (!all || !ids || !ranks) { /* a few KiB: the collective cannot be left, so the job ends */
        fprintf(stderr, "eager-train: rank %d: out of memory comparing the node's GPUs\n", me->rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Allgather(me, (int)sizeof *me, MPI_BYTE, all, (int)sizeof *me, MPI_BYTE, node);
    for (int i = 0; i < ls; i++) {
        const nn_cuda_gpu_t *g = &all[i].gpu;
        ranks[i] = all[i].rank;
        if (all[i].ok)
            snprintf(ids + (size_t)i * ID, ID, "%s%s%s%s", g->uuid, g->uuid[0] ? "" : all[i].host,
                     g->uuid[0] ? "" : "/", g->uuid[0] ? "" : g->bus_id);
        node_gpus = g->visible > node_gpus ? g->visible : node_gpus;
        node_gpus = g->openable > node_gpus ? g->openable : node_gpus;
    }
    char why[1024] = "";
    int verdict = nn_cuda_share_check(ids, ID, ls, node_gpus, ranks, me->host, allow, why, sizeof why);
    free(all), free(ids), free(ranks);
    if (verdict == 1 && lr == 0) fprintf(stderr, "eager-train: %s\n", why);
    if (verdict >= 0) return 0;
    if (me->ok) snprintf(err, n, "%s", why);
    return -1;
}

static backend_t *cuda_open(nn_model_t *host, const cfg_t *c, MPI_Comm node, char *err, size_t n) {
    int lr, ls, me, P, len = 0;
    MPI_Comm_rank(node, &lr);
    MPI_Comm_size(node, &ls);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    rank_gpu_t mine;
    memset(&mine, 0, sizeof mine);
    mine.rank = me;
    MPI_Get_processor_name(mine.host, &len);
    mine.ok = nn_cuda_select_local_device(lr, ls, err, n) >= 0 && !nn_cuda_gpu_info(&mine.gpu, err, n);
    int ok = !check_sharing(&mine, node, c->share_gpu, err, n) && mine.ok;
    rank_gpu_t *all = me == 0 ? calloc((size_t)P, sizeof *all) : NULL; /* rank 0: the run JSON's */
    MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
    cuda_backend_t *b = ok ? calloc(1, sizeof *b) : NULL;
    if (!b) {
        free(all);
        if (ok) snprintf(err, n, "out of memory");
        return NULL;
    }
    b->gpus = all;
    b->P = P;
    b->base.ops = &backend_cuda;
    b->base.host = host;
    b->g = nn_cuda_model_build(host, c->batch, c->tf32 ? NN_CUDA_TF32_DEFAULT : NN_CUDA_TF32_OFF, err, n);
    if (!b->g) {
        free(b->gpus);
        free(b);
        return NULL;
    }
    return &b->base;
}

static void cuda_close(backend_t *b) {
    nn_cuda_model_free(gpu(b));
    free(((cuda_backend_t *)b)->gpus);
    free(b);
}

static int cuda_train_step(backend_t *b, const nn_batch_t *batch, long step, char *err, size_t n) {
    if (fail(b, nn_cuda_step_graph(gpu(b), batch), "model (cuda)", err, n)) return -1;
    if (nn_cuda_check_finite(gpu(b), step, err, n)) return -1;
    return fail(b, nn_cuda_sync(gpu(b)), "cuda", err, n);
}

/* nn_cuda_warmup; the fingerprint: the convolution algorithms at the training batch size (the
 * last shape, warmup_plan.h) */
static int cuda_warmup(backend_t *b, const nn_batch_t *batch, const int *training, int nb, uint64_t *fp,
                       char *err, size_t n) {
    if (fail(b, nn_cuda_warmup(gpu(b), batch, training, nb), "warm-up (cuda)", err, n)) return -1;
    ((cuda_backend_t *)b)->warm_n = nb ? batch[nb - 1].n : 0;
    *fp = nn_cuda_algo_hash(gpu(b), ((cuda_backend_t *)b)->warm_n);
    return 0;
}

static const float *cuda_grads(backend_t *b) { return nn_cuda_grads(gpu(b)); }
static double cuda_loss(const backend_t *b) { return nn_cuda_loss(gpu(b)); }
static int cuda_top1(const backend_t *b) { return nn_cuda_top1(gpu(b)); }
static int cuda_top5(const backend_t *b) { return nn_cuda_top5(gpu(b)); }

static int cuda_apply(backend_t *b, const float *round, const nn_sgd_t *sgd, char *err, size_t n) {
    return fail(b, nn_cuda_sgd_step_grad(gpu(b), round, sgd), "cuda sgd", err, n);
}

static void cuda_set_training(backend_t *b, int training) {
    nn_cuda_set_training(gpu(b), training);
    nn_set_training(b->host, training);
}

static int cuda_forward(backend_t *b, const nn_batch_t *batch, char *err, size_t n) {
    return fail(b, nn_cuda_forward(gpu(b), batch), "forward (cuda)", err, n);
}

static int cuda_average_bn(backend_t *b, MPI_Comm comm, char *err, size_t n) {
    nn_model_t *m = b->host;
    if (!m->nbn_stats) return 0;
    if (fail(b, nn_cuda_bn_stats_to_host(gpu(b), m->bn_stats), "cuda copy to host", err, n)) return -1;
    if (backend_host_average_bn(m, comm))
        return snprintf(err, n, "MPI_Allreduce of the BN statistics failed"), -1;
    return fail(b, nn_cuda_bn_stats_from_host(gpu(b), m->bn_stats), "cuda copy to device", err, n);
}

/* Copies parameters, momentum and BN statistics to the host model. */
static int to_host(backend_t *b, char *err, size_t n) {
    return fail(b, nn_cuda_copy_params_to_host(gpu(b), b->host), "cuda copy to host", err, n);
}

static int from_host(backend_t *b, char *err, size_t n) {
    return fail(b, nn_cuda_copy_params_from_host(gpu(b), b->host), "cuda copy to device", err, n);
}

static int cuda_hash(backend_t *b, uint64_t *h, char *err, size_t n) {
    if (to_host(b, err, n)) return -1;
    *h = backend_host_hash(b->host);
    return 0;
}

static int cuda_save(backend_t *b, const char *dir, const ckpt_meta_t *meta, char *path, size_t plen,
                     char *err, size_t n) {
    if (to_host(b, err, n)) return -1;
    return ckpt_save(dir, b->host, meta, path, plen, err, n) ? -1 : 0;
}

static int cuda_load(backend_t *b, const char *dir, ckpt_meta_t *meta, char *err, size_t n) {
    if (ckpt_load(dir, b->host, meta, err, n)) return -1;
    return from_host(b, err, n);
}

static void *pinned_alloc(void *ctx, size_t bytes) { return nn_cuda_host_alloc(ctx, bytes); }
static void pinned_release(void *ctx, void *p) { nn_cuda_host_free(ctx, p); }

/* page-locked batches where the model copies them directly (NN_CUDA_DIRECT_INPUT=1) */
static const data_alloc_t *cuda_input_alloc(backend_t *b) {
    cuda_backend_t *cb = (cuda_backend_t *)b;
    if (!nn_cuda_direct_input(cb->g)) return NULL;
    cb->pinned = (data_alloc_t){pinned_alloc, pinned_release, cb->g};
    return &cb->pinned;
}

/* "cuda_graph": whether the training steps ran as CUDA graphs, and why not (metrics.c);
 * environment.gpus: every rank's GPU (rank 0); environment.input_copy: staged or direct. */
static void cuda_add_json(backend_t *b, json_t *run) {
    json_object_set_new(run, "cuda_graph", metrics_cuda_graph(gpu(b)));
    const cuda_backend_t *cb = (const cuda_backend_t *)b;
    json_t *env = json_object_get(run, "environment"), *a = json_array();
    if (env)
        json_object_set_new(env, "input_copy",
                            json_string(nn_cuda_direct_input(cb->g) ? "direct" : "staged"));
    for (int p = 0; cb->gpus && p < cb->P; p++) {
        const nn_cuda_gpu_t *g = &cb->gpus[p].gpu;
        json_array_append_new(a, json_pack("{s:s, s:i, s:s, s:s, s:s?}", "host", cb->gpus[p].host, "device",
                                           g->device, "name", g->name, "bus_id", g->bus_id, "uuid",
                                           g->uuid[0] ? g->uuid : NULL));
    }
    if (env)
        json_object_set_new(env, "gpus", a);
    else
        json_decref(a);
    json_t *w = json_object_get(run, "warmup"); /* rank 0's searches and growths, late ones apart */
    nn_cuda_warm_stats_t ws;
    nn_cuda_warm_stats(gpu(b), cb->warm_n, &ws);
    if (w)
        json_object_update_new(w, json_pack("{s:I, s:I, s:I, s:I, s:I}", "searches", (json_int_t)ws.searches,
                                            "late_searches", (json_int_t)ws.late_searches, "grows",
                                            (json_int_t)ws.grows, "late_grows", (json_int_t)ws.late_grows,
                                            "workspace_bytes", (json_int_t)ws.ws_bytes));
}

const backend_ops_t backend_cuda = {
    .name = "cuda",
    .mem = PCOLL_MEM_DEVICE,
    .open = cuda_open,
    .close = cuda_close,
    .warmup = cuda_warmup,
    .train_step = cuda_train_step,
    .grads = cuda_grads,
    .loss = cuda_loss,
    .top1 = cuda_top1,
    .top5 = cuda_top5,
    .apply = cuda_apply,
    .set_training = cuda_set_training,
    .forward = cuda_forward,
    .average_bn = cuda_average_bn,
    .hash = cuda_hash,
    .to_host = to_host,
    .from_host = from_host,
    .save = cuda_save,
    .load = cuda_load,
    .input_alloc = cuda_input_alloc,
    .add_json = cuda_add_json,
};
