/* replay_algo.h: when a captured graph may replay and which convolution algorithms may run, as
 * pure functions (trainer/cuda/replay_algo.c: plain C, no CUDA call, only cuDNN's enum values), so
 * that tests/cuda/test_cuda_replay_algo.c checks them without a GPU. */
#ifndef TRAINER_CUDA_REPLAY_ALGO_H
#define TRAINER_CUDA_REPLAY_ALGO_H

#ifdef __cplusplus
extern "C" {
#endif

/* What a captured training-step graph depends on besides the buffers fixed at build time. */
typedef struct {
    int N;                     /* batch size */
    int tf32;                  /* NN_CUDA_TF32_* mask the convolution algorithms were chosen for */
    unsigned long long ws_gen; /* generation of the shared cuDNN workspace: +1 per reallocation */
} nn_cuda_graph_key_t;

/* 1 when a graph captured under cap may replay a step under now, else 0: the batch size and TF32
 * mask must match, and the workspace must be the same allocation (the graph holds its address;
 * growing it for another batch size, e.g. in evaluation, frees the block the graph points to). */
int nn_cuda_graph_replayable(const nn_cuda_graph_key_t *cap, const nn_cuda_graph_key_t *now);

enum { NN_CUDA_CONV_FWD = 0, NN_CUDA_CONV_BWD_DATA = 1, NN_CUDA_CONV_BWD_FILTER = 2 };

/* 1 when the cuDNN convolution algorithm `algo` (a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
 * value for kind NN_CUDA_CONV_*), reporting math type `math` (cudnnMathType_t), may run under the
 * TF32 mask tf32.  With NN_CUDA_TF32_CUDNN every algorithm cuDNN offers is allowed.  Strict fp32
 * (bit clear) refuses tensor-op math and the Winograd and FFT algorithms: their transforms round
 * in ways whose error exceeds the 1e-4 agreement with the CPU / PyTorch references on small
 * batch-norm batches; what is left (implicit / explicit GEMM, direct) computes plain fp32 sums. */
int nn_cuda_conv_algo_allowed(int kind, int algo, int math, int tf32);

#ifdef __cplusplus
}
#endif
#endif
