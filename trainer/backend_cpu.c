/* backend_cpu.c -- the CPU backend: trains the host model in place (nn.h, OpenBLAS + OpenMP). */
#include "trainer/backend.h"
#include <stdlib.h>

static backend_t *cpu_open(nn_model_t *host, const cfg_t *c, MPI_Comm node, char *err, size_t n) {
    (void)c, (void)node;
    backend_t *b = calloc(1, sizeof *b);
    if (!b) return snprintf(err, n, "out of memory"), NULL;
    b->ops = &backend_cpu;
    b->host = host;
    return b;
}

static void cpu_close(backend_t *b) { free(b); }

static int cpu_train_step(backend_t *b, const nn_batch_t *batch, long step, char *err, size_t n) {
    nn_model_t *m = b->host;
    nn_zero_grad(m);
    if (nn_forward(m, batch) || nn_backward(m)) return snprintf(err, n, "model: %s", m->err), -1;
    return nn_check_finite(m, step, err, n) ? -1 : 0;
}

static const float *cpu_grads(backend_t *b) { return b->host->grads; }
static double cpu_loss(const backend_t *b) { return b->host->loss; }
static int cpu_top1(const backend_t *b) { return b->host->top1; }
static int cpu_top5(const backend_t *b) { return b->host->top5; }

static int cpu_apply(backend_t *b, const float *round, const nn_sgd_t *sgd, char *err, size_t n) {
    (void)err, (void)n;
    nn_sgd_step_grad(b->host, round, sgd);
    return 0;
}

static void cpu_set_training(backend_t *b, int training) { nn_set_training(b->host, training); }

static int cpu_forward(backend_t *b, const nn_batch_t *batch, char *err, size_t n) {
    if (nn_forward(b->host, batch)) return snprintf(err, n, "forward: %s", b->host->err), -1;
    return 0;
}

static int cpu_average_bn(backend_t *b, MPI_Comm comm, char *err, size_t n) {
    if (backend_host_average_bn(b->host, comm))
        return snprintf(err, n, "MPI_Allreduce of the BN statistics failed"), -1;
    return 0;
}

static int cpu_hash(backend_t *b, uint64_t *h, char *err, size_t n) {
    (void)err, (void)n;
    *h = backend_host_hash(b->host);
    return 0;
}

/* The host model is the model: nothing to copy. */
static int cpu_copy(backend_t *b, char *err, size_t n) {
    (void)b, (void)err, (void)n;
    return 0;
}

static int cpu_save(backend_t *b, const char *dir, const ckpt_meta_t *meta, char *path, size_t plen,
                    char *err, size_t n) {
    return ckpt_save(dir, b->host, meta, path, plen, err, n) ? -1 : 0;
}

static int cpu_load(backend_t *b, const char *dir, ckpt_meta_t *meta, char *err, size_t n) {
    return ckpt_load(dir, b->host, meta, err, n) ? -1 : 0;
}

const backend_ops_t backend_cpu = {
    .name = "cpu",
    .mem = PCOLL_MEM_HOST,
    .open = cpu_open,
    .close = cpu_close,
    .train_step = cpu_train_step,
    .grads = cpu_grads,
    .loss = cpu_loss,
    .top1 = cpu_top1,
    .top5 = cpu_top5,
    .apply = cpu_apply,
    .set_training = cpu_set_training,
    .forward = cpu_forward,
    .average_bn = cpu_average_bn,
    .hash = cpu_hash,
    .to_host = cpu_copy,
    .from_host = cpu_copy,
    .save = cpu_save,
    .load = cpu_load,
    .warmup = NULL, /* nothing is chosen or sized at a first step: no warm-up */
};
