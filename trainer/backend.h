/* backend.h -- where the model's arithmetic runs: one table of functions per device, chosen at
 * run time by --device (cpu: trainer/backend_cpu.c; cuda: trainer/backend_cuda.c, linked only in
 * builds with nvcc, cuDNN and the device-capable libpcoll).
 *
 * Every backend trains a model that mirrors the HOST model (nn.h): the trainer builds the host
 * model, and the backend either trains it in place (cpu) or keeps the model on the device and
 * copies parameters, momentum and BN statistics back to the host model whenever a whole-model
 * operation needs them (hash, BN average, checkpoint). The gradient a step leaves (grads) and
 * the round results handed to apply live in the memory kind `mem` (pcoll.h), so they go to and
 * from libpcoll without a copy.
 *
 * Every function returns 0, or -1 with a one-line message in err (the hash, BN average and
 * checkpoint functions: a message naming the device call or file). The trainer's loop calls only
 * these functions and never asks which backend it holds.
 */
#ifndef TRAINER_BACKEND_H
#define TRAINER_BACKEND_H

#include "collectives/pcoll.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/data/data.h"
#include "trainer/nn/nn.h"
#include <mpi.h>

typedef struct backend backend_t;

typedef struct {
    const char *name; /* the --device value that selects this backend */
    pcoll_mem_t mem;  /* memory kind of grads() and of the round results apply() reads */
    /* Builds the backend on the host model (kept, not owned). Collective over node (the ranks
     * of this host, MPI_Comm_split_type SHARED: they pick and compare their GPUs) and
     * MPI_COMM_WORLD (every rank's GPU to rank 0, for the run JSON): every rank calls it, and
     * every rank of a node that breaks the GPU sharing rule (--share-gpu) gets the same reason.
     * NULL with the reason in err. */
    backend_t *(*open)(nn_model_t *host, const cfg_t *c, MPI_Comm node, char *err, size_t n);
    void (*close)(backend_t *b);
    /* One training step's computation: zero the gradient, forward, backward, then check the
     * loss and gradient are finite (step names the step in the message). */
    int (*train_step)(backend_t *b, const nn_batch_t *batch, long step, char *err, size_t n);
    const float *(*grads)(backend_t *b); /* the last step's gradient (nparams floats, `mem`) */
    double (*loss)(const backend_t *b);  /* loss of the last forward (mean over the batch) */
    int (*top1)(const backend_t *b);     /* correct top-1 / top-5 predictions of the last */
    int (*top5)(const backend_t *b);     /* forward (counts over the batch) */
    /* SGD with momentum on the model with a round's result (nparams floats in `mem`). */
    int (*apply)(backend_t *b, const float *round, const nn_sgd_t *sgd, char *err, size_t n);
    /* Training mode (BN on batch statistics) or evaluation mode (running statistics). */
    void (*set_training)(backend_t *b, int training);
    /* Forward only (evaluation): loss, top1, top5 then read as after a training step. */
    int (*forward)(backend_t *b, const nn_batch_t *batch, char *err, size_t n);
    /* Collective over comm: replaces every rank's BN running statistics by their mean. */
    int (*average_bn)(backend_t *b, MPI_Comm comm, char *err, size_t n);
    /* FNV-1a 64 over parameters, momentum and BN statistics (equal iff the replicas are). */
    int (*hash)(backend_t *b, uint64_t *h, char *err, size_t n);
    /* Whole-model copies: to_host leaves parameters, momentum and BN statistics in the host model;
     * from_host makes the backend's model the host model's (the CPU backend trains the host model:
     * both do nothing). */
    int (*to_host)(backend_t *b, char *err, size_t n);
    int (*from_host)(backend_t *b, char *err, size_t n);
    /* Checkpoints (checkpoint.c's format, written from / read into the host model). */
    int (*save)(backend_t *b, const char *dir, const ckpt_meta_t *meta, char *path, size_t plen, char *err,
                size_t n);
    int (*load)(backend_t *b, const char *dir, ckpt_meta_t *meta, char *err, size_t n);
    /* The warm-up, once before the run's first collective (docs/DESIGN.md#warm-up): runs batch[i],
     * i < nb, as the run will (training[i]: a training step, else an evaluation forward), so that
     * the backend's one-time work (cuda: cuDNN's algorithm searches, workspace sizing, the CUDA
     * graph's capture) is done; parameters, momentum and BN statistics are left as they were
     * (cuda: BN statistics restored, the rest not written). *fingerprint: what it chose (cuda:
     * the convolution algorithms at the training batch size), equal on ranks that chose alike.
     * NULL: nothing to warm up (cpu). */
    int (*warmup)(backend_t *b, const nn_batch_t *batch, const int *training, int nb, uint64_t *fingerprint,
                  char *err, size_t n);
    /* The memory the trainer's batches should be loaded into, the kind this backend copies from
     * fastest (cuda with direct input: page-locked); NULL (the entry or its result): malloc. The
     * allocator lives as long as the backend. */
    const data_alloc_t *(*input_alloc)(backend_t *b);
    /* Adds the backend's own fields to the run's JSON object (rank 0, at the run's end); NULL:
     * none. */
    void (*add_json)(backend_t *b, struct json_t *run);
} backend_ops_t;

struct backend {
    const backend_ops_t *ops;
    nn_model_t *host; /* the host model the backend mirrors */
};

/* Opens the backend named by device ("cpu" | "cuda"). NULL with the reason in err: an unknown
 * name, a build without that backend (naming what the build lacked), or the backend's own open. */
backend_t *backend_open(const char *device, nn_model_t *host, const cfg_t *c, MPI_Comm node, char *err,
                        size_t n);

/* Host-model steps shared by the backends: the BN average over comm (collective) and the hash. */
int backend_host_average_bn(nn_model_t *m, MPI_Comm comm);
uint64_t backend_host_hash(const nn_model_t *m);

extern const backend_ops_t backend_cpu;

#endif
