/* nn_cuda.h: the CUDA backend of the nn library (library "nn_cuda", build/libnn_cuda.a; built
 * only when nvcc and cuDNN are present: `make` prints nvcc=yes cudnn=yes).
 *
 * A GPU model MIRRORS a CPU model (trainer/nn/nn.h): it is built from an nn_model_t (its layer
 * list, slots, parameter tensors and BN layers), copies the CPU model's parameters, momentum and
 * BN running statistics to the device, and from then on runs every layer on the GPU:
 *   convolution (forward, backward data, backward filter)  cuDNN, algorithms found once per
 *                                                          (layer, batch size) and cached
 *   batch norm (training / inference / backward, spatial)  cuDNN (running var unbiased,
 *                                                          momentum 0.1, eps 1e-5: PyTorch's)
 *   max / average pooling                                  cuDNN
 *   LSTM (padded variable-length sequences)                cuDNN RNN API v8 (cudnnRNNForward,
 *                                                          cudnnRNNBackwardData_v8/Weights_v8)
 *   fully connected                                        cuBLAS sgemm
 *   ReLU, residual add, option-A shortcut, global average  our kernels (trainer/cuda/kernels.cu)
 *   pooling, softmax cross-entropy + top-1/top-5, MSE,
 *   SGD momentum over the whole parameter buffer
 *
 * Memory.  As on the CPU, ONE device buffer each for parameters, gradients and momentum, with
 * EXACTLY the CPU layout (cpu->ptensors offsets, PyTorch order), so the whole gradient is one
 * device pointer + nparams (nn_cuda_grads): hand it to a PCOLL_MEM_DEVICE partial allreduce.
 * BN running statistics: one device buffer with the layout of cpu->bn_stats.
 * Activations are NCHW on the device (cuDNN's native layout; the CPU uses CNHW internally, which
 * is invisible to callers: inputs, outputs and parameters have the same layout on both).
 *
 * Precision.  fp32 storage.  TF32 (tensor cores, 10-bit mantissa) is a bit mask: NN_CUDA_TF32_CUDNN
 * (convolutions + LSTM) and NN_CUDA_TF32_CUBLAS (fully connected).  NN_CUDA_TF32_DEFAULT = CUDNN
 * only, which is PyTorch's default (torch.backends.cudnn.allow_tf32 = True,
 * torch.backends.cuda.matmul.allow_tf32 = False).  0 = strict fp32 (the tests compare against the
 * CPU and PyTorch references with it).
 *
 * Streams and threads.  A model owns one CUDA stream and one cuDNN + one cuBLAS handle; use it
 * from one thread at a time.  Every call that returns host-visible results (nn_cuda_forward's loss,
 * copies to host) synchronises that stream; nn_cuda_backward and nn_cuda_sgd_step* only enqueue
 * (call nn_cuda_sync before reading device buffers from another stream or library, e.g. before
 * pcoll_deposit of nn_cuda_grads()).
 *
 * Errors.  Functions return NN_OK (0), an nn_err_t, or NN_CUDA_ERR when a CUDA/cuDNN/cuBLAS call
 * failed; the one-line message (naming the call, layer and status) is in nn_cuda_error(m).
 * Kernels are checked at launch; with NN_CUDA_DEBUG=1 in the environment every kernel launch is
 * also waited for, so an asynchronous fault (illegal address, ...) is reported under the name of
 * the kernel and layer that caused it rather than by a later, unrelated call.
 *
 * Source layout (trainer/cuda/): nn_cuda_impl.h (internal types), kernels.cu, layers.cu
 * (convolution, fully connected, workspace, algorithm choice), lstm.cu, drivers.cu (forward and
 * backward over the layer list), staging.cu (batch checks, host <-> device copies), setup.cu
 * (device choice, model build and free), step.cu (training step, CUDA graph, SGD), replay_algo.c and
 * device_pick.c (pure decision functions, tested without a GPU).
 */
#ifndef TRAINER_NN_CUDA_H
#define TRAINER_NN_CUDA_H

#include "trainer/nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { NN_CUDA_ERR = -20 };

enum {
    NN_CUDA_TF32_OFF = 0,
    NN_CUDA_TF32_CUDNN = 1,  /* convolutions and the LSTM may use TF32 tensor cores */
    NN_CUDA_TF32_CUBLAS = 2, /* fully connected (cuBLAS) may use TF32 */
    NN_CUDA_TF32_ALL = 3,
    NN_CUDA_TF32_DEFAULT = NN_CUDA_TF32_CUDNN /* = PyTorch's defaults */
};

typedef struct nn_cuda_model nn_cuda_model_t;

/* Number of CUDA devices (> 0), or 0 with the reason in why, e.g.
 * "cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime version". */
int nn_cuda_available(char *why, size_t n);
/* The GPU of local rank local_rank (0..local_size-1) among local_size ranks on a node with ndev
 * visible GPUs: local_rank itself while local_size <= ndev (one GPU per rank), else
 * local_rank % ndev (ranks share GPUs round-robin; libpcoll then takes its staged path).
 * Returns the device index (>= 0), or -1 with a non-empty reason in why when ndev < 1 or
 * local_rank is outside 0..local_size-1.  Pure function (trainer/cuda/device_pick.c, in every
 * build, no CUDA call). */
int nn_cuda_pick_device(int local_rank, int local_size, int ndev, char *why, size_t n);
/* Whether the GPUs the ranks of one node chose may be shared (the rule of --share-gpu; pure
 * function, trainer/cuda/device_pick.c).  ids: local_size strings, stride bytes apart, the
 * identity of the GPU each local rank uses (its UUID, compared across ranks: device indexes differ
 * in meaning under per-task CUDA_VISIBLE_DEVICES); "" for a rank without one (not counted).
 * node_gpus: the GPUs the node's ranks could use (the most any rank saw or could open).  ranks:
 * each local rank's world rank (names in messages; NULL: local ranks); node: the host's name.
 * Sharing by necessity: every rank that shares a GPU does so because each of
 * min(ranks, node_gpus) GPUs already carries a rank (more ranks than GPUs).  Returns 0 when no
 * two ranks share a GPU (why ""); 1 when they share by necessity or allow is set (why: one line
 * saying so); -1 when two ranks share a GPU while one of the node's GPUs carries none, with why
 * naming those ranks, the node and the GPU. */
int nn_cuda_share_check(const char *ids, size_t stride, int local_size, int node_gpus, const int *ranks,
                        const char *node, int allow, char *why, size_t n);
/* The GPU a rank uses: what the run JSON records and what nn_cuda_share_check compares. */
typedef struct {
    char name[256];  /* cudaDeviceProp.name */
    char bus_id[32]; /* PCI bus id, e.g. 0000:1b:00.0 */
    char uuid[48];   /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (nvidia-smi's form); "" if unknown */
    int device;      /* the CUDA device index (under this process's CUDA_VISIBLE_DEVICES) */
    int visible;     /* CUDA devices this process sees */
    int openable;    /* /dev/nvidiaN device files this process can open (GPUs of the node it could
                      * reach with another CUDA_VISIBLE_DEVICES; 0 where there are none) */
} nn_cuda_gpu_t;
/* The calling thread's current GPU into g.  0, or -1 with the reason in why. */
int nn_cuda_gpu_info(nn_cuda_gpu_t *g, char *why, size_t n);
/* cudaSetDevice(nn_cuda_pick_device(local_rank, local_size, device count)) for the calling
 * thread.  Returns the device index (>= 0, not a status: test it with >= 0), or -1 with a
 * non-empty reason in why.  Call before nn_cuda_model_build and before
 * pcoll_create(..., PCOLL_MEM_DEVICE, ...). */
int nn_cuda_select_local_device(int local_rank, int local_size, char *why, size_t n);
/* nn_cuda_select_local_device with the node's rank count unknown (local_size = local_rank + 1). */
int nn_cuda_select_device(int local_rank, char *why, size_t n);
/* One line: device name, compute capability, memory, CUDA runtime/driver, cuDNN, cuBLAS versions. */
void nn_cuda_describe(char *buf, size_t n);

/* Builds the GPU mirror of cpu (any max_batch, independent of cpu->max_batch: build the CPU model
 * with max_batch 1 when only its layout and initial parameters are needed).  Copies cpu's params,
 * momentum and BN statistics.  tf32: NN_CUDA_TF32_* mask.  The CPU model is not referenced after
 * the call.  Returns NULL with the reason in err. */
nn_cuda_model_t *nn_cuda_model_build(const nn_model_t *cpu, int max_batch, int tf32, char *err, size_t n);
void nn_cuda_model_free(nn_cuda_model_t *m);
/* How a batch reaches the device. 0 (staged): copied into the model's page-locked staging buffers
 * on the host, then to the device; the caller's arrays may be any host memory. 1 (direct): copied
 * straight from the caller's arrays (cudaMemcpyDefault), which is asynchronous, and saves the host
 * copy, where they are page-locked (nn_cuda_host_alloc); pageable and device memory work too.
 * Either way a call that takes a batch returns after the batch was read. The default at build is
 * staged, or direct where NN_CUDA_DIRECT_INPUT=1 in the environment. */
void nn_cuda_set_direct_input(nn_cuda_model_t *m, int on);
int nn_cuda_direct_input(const nn_cuda_model_t *m);
/* Page-locked host memory usable by every device (cudaHostAllocPortable), allocated with the
 * model's device current in the calling thread; NULL when it cannot be had. Free with
 * nn_cuda_host_free. */
void *nn_cuda_host_alloc(nn_cuda_model_t *m, size_t bytes);
void nn_cuda_host_free(nn_cuda_model_t *m, void *p);
/* Switches TF32 (drops cached convolution algorithms and the captured step graph). */
int nn_cuda_set_tf32(nn_cuda_model_t *m, int tf32);
void nn_cuda_set_training(nn_cuda_model_t *m, int training);
const char *nn_cuda_error(const nn_cuda_model_t *m);

/* Forward over a host batch (same checks and errors as nn_forward): copies x, labels/targets and
 * lengths to the device, runs the model, and returns once loss/top1/top5 are on the host. */
int nn_cuda_forward(nn_cuda_model_t *m, const nn_batch_t *b);
/* Backward of the last forward: ACCUMULATES into the device gradient buffer (enqueued only). */
int nn_cuda_backward(nn_cuda_model_t *m);
/* Zeroes the device gradient buffer (enqueued).  A failure is kept and returned by the next
 * nn_cuda_forward / nn_cuda_backward / nn_cuda_step_graph (with its message in nn_cuda_error). */
void nn_cuda_zero_grad(nn_cuda_model_t *m);
/* A whole training step's computation, zero_grad + forward + backward, for fixed shapes:
 * the first call at a batch size runs eagerly (and picks the cuDNN algorithms), the second
 * captures the step into a CUDA graph, later calls copy the batch in and replay the graph (one
 * launch instead of hundreds).  Used for image models in training mode; models with an LSTM
 * (host-side sequence-length descriptors change per batch) and evaluation mode fall back to the
 * eager path.  Same results as nn_cuda_zero_grad + nn_cuda_forward + nn_cuda_backward.
 * b == NULL: the same step on the batch already on the device (the last one a forward or step
 * copied in), nothing copied from the host; NN_ERR_ARG before any batch was. */
int nn_cuda_step_graph(nn_cuda_model_t *m, const nn_batch_t *b);

/* How nn_cuda_step_graph ran the steps so far.  A step that could have replayed a graph but ran
 * eagerly (capture failed, NN_CUDA_NO_GRAPH set) counts in eager_steps with the reason in
 * eager_why; warm-up steps (the first at a batch size, or after the graph was invalidated) and
 * the steps of models the graph does not cover (LSTM, evaluation mode) count in warm_steps. */
typedef struct {
    long graph_steps;   /* replays of a captured graph (the capturing step included) */
    long captures;      /* graphs captured (a new one after each invalidation) */
    long invalidations; /* graphs dropped because the workspace, batch size or TF32 mask changed */
    long warm_steps;    /* eager steps by design (see above) */
    long eager_steps;   /* eager steps that should have been graphs */
    char eager_why[256];
} nn_cuda_graph_stats_t;
void nn_cuda_graph_stats(const nn_cuda_model_t *m, nn_cuda_graph_stats_t *s);

/* The warm-up (docs/DESIGN.md#warm-up), once before the run's first collective: runs batch[i],
 * i < nb, as the run will run that shape: training[i] != 0: nn_cuda_step_graph twice in training
 * mode (the eager step with the cuDNN algorithm searches and workspace growth, then the capture
 * and first replay of the graph; models that run eagerly: two eager steps); 0: one nn_cuda_forward
 * in evaluation mode. Put the evaluation shapes first and the training shape last, so that the
 * graph is captured after the workspace reached its largest size (trainer/warmup_plan.h). On
 * return the BN statistics are those before the call (copied aside on the device and back), as
 * is the training mode; parameters and momentum are not written by these calls; the gradient,
 * loss and top-k are the last batch's (the next step overwrites them); no random state is used
 * (dropout descriptors have probability 0). From then on an algorithm search or a buffer growth is
 * "late" (nn_cuda_warm_stats; a growth says so on stderr, naming the layer and the sizes).
 * Returns 0, or an error code with the message in nn_cuda_error (the statistics restored where the
 * device still allowed it). */
int nn_cuda_warmup(nn_cuda_model_t *m, const nn_batch_t *batch, const int *training, int nb);

typedef struct {
    uint64_t algo_hash; /* nn_cuda_algo_hash at the warm-up's training batch size */
    long searches;      /* convolution algorithm searches (a layer's forward, or its backward pair) */
    long late_searches; /* ... after the warm-up */
    long grows;         /* workspace / LSTM reserve reallocations (stream-ordered) */
    long late_grows;    /* ... after the warm-up */
    size_t ws_bytes;    /* the cuDNN workspace now */
} nn_cuda_warm_stats_t;
void nn_cuda_warm_stats(const nn_cuda_model_t *m, int batch, nn_cuda_warm_stats_t *s);
/* FNV-1a 64 over every convolution layer's chosen algorithms and math types (forward, backward
 * data, backward filter; -1 where not chosen) at batch size N: equal on two ranks iff they run
 * the same algorithms at N. */
uint64_t nn_cuda_algo_hash(const nn_cuda_model_t *m, int N);

double nn_cuda_loss(const nn_cuda_model_t *m);
int nn_cuda_top1(const nn_cuda_model_t *m);
int nn_cuda_top5(const nn_cuda_model_t *m);
int nn_cuda_batch(const nn_cuda_model_t *m);
/* Output of the last forward as row-major (batch, nout) on the host (like nn_output). */
int nn_cuda_output(nn_cuda_model_t *m, float *dst);

/* Device buffers (CPU layout), valid for the model's lifetime. */
size_t nn_cuda_nparams(const nn_cuda_model_t *m);
float *nn_cuda_params(nn_cuda_model_t *m);
float *nn_cuda_grads(nn_cuda_model_t *m);
float *nn_cuda_momentum(nn_cuda_model_t *m);
float *nn_cuda_bn_stats(nn_cuda_model_t *m);
size_t nn_cuda_nbn_stats(const nn_cuda_model_t *m);
void *nn_cuda_stream(nn_cuda_model_t *m); /* cudaStream_t */
int nn_cuda_sync(nn_cuda_model_t *m);     /* waits for the model's stream */

/* SGD with momentum, PyTorch's formulation, exactly as nn_sgd_step_grad (weight decay only on
 * tensors with decay=1 unless o->wd_all).  dev_grad: nparams floats in DEVICE memory (e.g. a
 * pcoll_next result of a PCOLL_MEM_DEVICE handle).  Runs on the model's stream and returns once
 * the update has read dev_grad, so the caller may hand the buffer back at once (the next
 * pcoll_next may reuse that results-ring slot).  nn_cuda_sgd_step (the model's own gradients)
 * only enqueues. */
int nn_cuda_sgd_step_grad(nn_cuda_model_t *m, const float *dev_grad, const nn_sgd_t *o);
int nn_cuda_sgd_step(nn_cuda_model_t *m, const nn_sgd_t *o);

/* NaN/Inf guard as nn_check_finite (same messages), on the last loss and the device gradients. */
int nn_cuda_check_finite(nn_cuda_model_t *m, long step, char *err, size_t n);

/* Host <-> device copies (synchronous).  to_host: params, momentum and BN statistics into cpu
 * (which must have the same description), e.g. for hashing, evaluation on the CPU, checkpoints;
 * from_host: the reverse (after nn_model_load / nn_model_init). */
int nn_cuda_copy_params_to_host(nn_cuda_model_t *m, nn_model_t *cpu);
int nn_cuda_copy_params_from_host(nn_cuda_model_t *m, const nn_model_t *cpu);
int nn_cuda_grads_to_host(nn_cuda_model_t *m, float *dst);    /* nparams floats */
int nn_cuda_bn_stats_to_host(nn_cuda_model_t *m, float *dst); /* nbn_stats floats */
int nn_cuda_bn_stats_from_host(nn_cuda_model_t *m, const float *src);

#ifdef __cplusplus
}
#endif
#endif
