/* replay_algo.c: see replay_algo.h. */
#include "trainer/cuda/replay_algo.h"
#include "trainer/cuda/nn_cuda.h"

#include <cudnn.h>

int nn_cuda_graph_replayable(const nn_cuda_graph_key_t *cap, const nn_cuda_graph_key_t *now) {
    return cap->N > 0 && cap->N == now->N && cap->tf32 == now->tf32 && cap->ws_gen == now->ws_gen;
}

static int transform_algo(int kind, int a) {
    switch (kind) {
    case NN_CUDA_CONV_FWD:
        return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
               a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    case NN_CUDA_CONV_BWD_DATA:
        return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
               a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
               a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    case NN_CUDA_CONV_BWD_FILTER:
        return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
               a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
               a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
    }
    return 1; /* unknown kind: treat as a transform (refused when strict) */
}

int nn_cuda_conv_algo_allowed(int kind, int algo, int math, int tf32) {
    if (math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return 0; /* fp32 down-converted to fp16/bf16 */
    if (tf32 & NN_CUDA_TF32_CUDNN) return 1;
    if (math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return 0;
    return !transform_algo(kind, algo);
}
