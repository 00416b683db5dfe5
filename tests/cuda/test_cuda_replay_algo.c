/* test_cuda_replay_algo: the CUDA backend's pure decisions (trainer/cuda/replay_algo.c), without a GPU.
 *   graph replay: a graph captured at one batch size must not replay after the cuDNN workspace
 *     was reallocated (an evaluation pass at another batch size grew it), nor at another batch
 *     size or TF32 mask;
 *   strict fp32: Winograd and FFT convolution algorithms and tensor-op math are refused with
 *     TF32 off, every algorithm is allowed with cuDNN TF32 on. */
#include "trainer/cuda/nn_cuda.h"
#include "trainer/cuda/replay_algo.h"

#include <cudnn.h>
#include <stdio.h>

static int fails;
#define EXPECT(cond, what)                                        \
    do {                                                          \
        if (!(cond)) {                                            \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, what); \
            fails++;                                              \
        }                                                         \
    } while (0)

int main(void) {
    /* graph replay */
    nn_cuda_graph_key_t cap = {128, NN_CUDA_TF32_OFF, 3}, now = cap;
    EXPECT(nn_cuda_graph_replayable(&cap, &now), "same batch, mask and workspace: replay");
    now.ws_gen = 4;
    EXPECT(!nn_cuda_graph_replayable(&cap, &now),
           "workspace reallocated after capture (evaluation grew it): no replay");
    now = cap;
    now.N = 100;
    EXPECT(!nn_cuda_graph_replayable(&cap, &now), "other batch size: no replay");
    now = cap;
    now.tf32 = NN_CUDA_TF32_CUDNN;
    EXPECT(!nn_cuda_graph_replayable(&cap, &now), "other TF32 mask: no replay");
    nn_cuda_graph_key_t none = {0, 0, 0};
    now = none;
    EXPECT(!nn_cuda_graph_replayable(&none, &now), "no graph captured: nothing to replay");

    /* strict fp32 */
    const int off = NN_CUDA_TF32_OFF, on = NN_CUDA_TF32_CUDNN, fma = CUDNN_FMA_MATH,
              dflt = CUDNN_DEFAULT_MATH;
    EXPECT(nn_cuda_conv_algo_allowed(NN_CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, dflt, off),
           "fwd implicit GEMM, strict");
    EXPECT(nn_cuda_conv_algo_allowed(NN_CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, fma,
                                     off),
           "fwd precomp GEMM, strict");
    EXPECT(nn_cuda_conv_algo_allowed(NN_CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_GEMM, dflt, off),
           "fwd GEMM, strict");
    EXPECT(!nn_cuda_conv_algo_allowed(NN_CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, dflt, off),
           "fwd Winograd refused, strict");
    EXPECT(
        !nn_cuda_conv_algo_allowed(NN_CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, dflt, off),
        "fwd Winograd nonfused refused, strict");
    EXPECT(!nn_cuda_conv_algo_allowed(NN_CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_FFT, dflt, off),
           "fwd FFT refused, strict");
    EXPECT(!nn_cuda_conv_algo_allowed(NN_CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, fma, off),
           "fwd FFT tiling refused, strict");
    EXPECT(!nn_cuda_conv_algo_allowed(NN_CUDA_CONV_BWD_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, dflt,
                                      off),
           "bwd-data Winograd refused, strict");
    EXPECT(!nn_cuda_conv_algo_allowed(NN_CUDA_CONV_BWD_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, dflt,
                                      off),
           "bwd-data FFT tiling refused, strict");
    EXPECT(nn_cuda_conv_algo_allowed(NN_CUDA_CONV_BWD_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, dflt, off),
           "bwd-data algo 1, strict");
    EXPECT(
        !nn_cuda_conv_algo_allowed(NN_CUDA_CONV_BWD_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, dflt, off),
        "bwd-filter FFT refused, strict");
    EXPECT(!nn_cuda_conv_algo_allowed(NN_CUDA_CONV_BWD_FILTER,
                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, dflt, off),
           "bwd-filter Winograd refused, strict");
    EXPECT(nn_cuda_conv_algo_allowed(NN_CUDA_CONV_BWD_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, dflt, off),
           "bwd-filter algo 1, strict");
    EXPECT(!nn_cuda_conv_algo_allowed(NN_CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                      CUDNN_TENSOR_OP_MATH, off),
           "tensor-op math refused, strict");
    EXPECT(!nn_cuda_conv_algo_allowed(NN_CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                      CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, off),
           "tensor-op conversion refused, strict");
    EXPECT(nn_cuda_conv_algo_allowed(NN_CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
                                     CUDNN_TENSOR_OP_MATH, on),
           "TF32: Winograd allowed");
    EXPECT(nn_cuda_conv_algo_allowed(NN_CUDA_CONV_BWD_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, dflt,
                                     NN_CUDA_TF32_ALL),
           "TF32: FFT allowed");
    EXPECT(!nn_cuda_conv_algo_allowed(NN_CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                      CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, on),
           "TF32: conversion to fp16/bf16 refused (more than TF32 allows)");
    EXPECT(!nn_cuda_conv_algo_allowed(NN_CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_FFT, dflt,
                                      NN_CUDA_TF32_CUBLAS),
           "cuBLAS-only TF32 is strict for convolutions");
    if (fails) {
        printf("%d failures\n", fails);
        return 1;
    }
    printf("ok: graph replay rule, strict-fp32 algorithm rule\n");
    return 0;
}
