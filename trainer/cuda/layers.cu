// layers.cu: the cuDNN / cuBLAS layers of the CUDA backend: the shared cuDNN workspace, tensor
// descriptors, activation-gradient slots, convolution (algorithms found once per layer and batch
// size, filtered by replay_algo.c) and fully connected (cuBLAS).  LSTM: lstm.cu.
#include "trainer/cuda/nn_cuda_impl.h"

namespace nncu {

static int Ndesc4(nn_cuda_model_t *m, cudnnTensorDescriptor_t d, int N, const struct nn_slot *s) {
    DNN(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, s->c, s->h, s->w));
    return NN_OK;
}

/* activation gradient of slot s for an accumulating writer: zeroed on first use */
int dslot_acc(nn_cuda_model_t *m, int s, float **p) {
    if (!m->dinit[s]) {
        CK(cudaMemsetAsync(DACT(m, s), 0, sizeof(float) * slot_n(&m->slots[s]) * m->N, m->st));
        m->dinit[s] = 1;
    }
    *p = DACT(m, s);
    return NN_OK;
}
/* for a writer that can overwrite: returns whether to accumulate (0 on first use) */
int dslot_ow(nn_cuda_model_t *m, int s, float **p) {
    int acc = m->dinit[s];
    m->dinit[s] = 1;
    *p = DACT(m, s);
    return acc;
}

/* Stream-ordered growth (docs/DESIGN.md#warm-up): the old block is freed on m->st after the work
 * queued before that uses it, the new one allocated on m->st for the work queued after; unlike
 * cudaFree, neither waits for the whole device (an NCCL reduction of libpcoll's engine in flight
 * on another stream).  The warm-up sizes every buffer for the run's shapes, so a growth after it
 * is a shape the warm-up did not foresee: said on stderr, counted (nn_cuda_warm_stats). */
int grow_async(nn_cuda_model_t *m, void **p, size_t *size, size_t need, const char *who, const char *what) {
    if (need <= *size) return NN_OK;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CK(cudaStreamIsCapturing(m->st, &cs));
    if (cs != cudaStreamCaptureStatusNone) {
        seterr(m, "internal: %s: %s growth to %zu bytes during graph capture", who, what, need);
        return NN_CUDA_ERR;
    }
    m->grows++;
    if (m->warmed) {
        m->late_grows++;
        fprintf(stderr,
                "nn_cuda: %s: %s grows from %zu to %zu bytes after the warm-up (a shape it did not run; "
                "stream-ordered, no device-wide wait)\n",
                who, what, *size, need);
    }
    if (*p) CK(cudaFreeAsync(*p, m->st));
    *p = NULL;
    *size = 0;
    CK(cudaMallocAsync(p, need, m->st));
    *size = need;
    return NN_OK;
}

/* Grows the shared cuDNN workspace to at least need bytes (12.5% headroom).  A reallocation
 * bumps ws_gen: a graph captured before it holds the freed block and must not replay
 * (nn_cuda_graph_replayable; step.cu drops it before the next step). */
int grow_ws(nn_cuda_model_t *m, size_t need, const char *who) {
    if (need <= m->ws_size) return NN_OK;
    TRY(grow_async(m, &m->ws, &m->ws_size, need + (need >> 3), who, "cuDNN workspace"));
    m->ws_gen++;
    return NN_OK;
}

static cudnnMathType_t conv_math(const nn_cuda_model_t *m) {
    return (m->tf32 & NN_CUDA_TF32_CUDNN) ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}
/* strict fp32 runs every algorithm with FMA math */
static cudnnMathType_t run_math(const nn_cuda_model_t *m, cudnnMathType_t t) {
    return (m->tf32 & NN_CUDA_TF32_CUDNN) ? t : CUDNN_FMA_MATH;
}

int set_descs(nn_cuda_model_t *m, int li, int N) {
    gl_t *g = &m->gl[li];
    nn_layer_t *l = &m->layers[li];
    if (g->descN == N) return NN_OK;
    if (g->xd && l->in >= 0) TRY(Ndesc4(m, g->xd, N, &m->slots[l->in]));
    if (g->yd && l->out >= 0) TRY(Ndesc4(m, g->yd, N, &m->slots[l->out]));
    if (l->type == L_BN) DNN(cudnnDeriveBNTensorDescriptor(g->bnd, g->xd, CUDNN_BATCHNORM_SPATIAL));
    g->descN = N;
    return NN_OK;
}

/* the algorithm cache entry of layer li for batch N; a new one replaces the oldest entry that is
 * neither the captured graph's nor the warm-up's batch size */
static algo_t *find_algo(nn_cuda_model_t *m, int li, int N) {
    gl_t *g = &m->gl[li];
    for (int i = 0; i < g->nalgo; i++)
        if (g->algo[i].N == N) return &g->algo[i];
    algo_t *a;
    if (g->nalgo < MAX_ALGO_N)
        a = &g->algo[g->nalgo++];
    else {
        for (int tries = 0; tries < MAX_ALGO_N; tries++) {
            int v = g->algo[g->next_algo].N;
            if (v != m->gkey.N && v != m->warmN) break;
            g->next_algo = (g->next_algo + 1) % MAX_ALGO_N;
        }
        a = &g->algo[g->next_algo];
        g->next_algo = (g->next_algo + 1) % MAX_ALGO_N;
    }
    memset(a, 0, sizeof *a);
    a->N = N;
    return a;
}

/* An algorithm search synchronises the stream: inside a graph capture that would end the capture
 * with an error far from its cause, so it is refused here with the layer's name. */
static int may_search(nn_cuda_model_t *m, const nn_layer_t *l) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CK(cudaStreamIsCapturing(m->st, &cs));
    if (cs != cudaStreamCaptureStatusNone) {
        seterr(m, "%s: no cached convolution algorithm for batch %d during graph capture (internal)", l->name,
               m->N);
        return NN_CUDA_ERR;
    }
    CK(cudaStreamSynchronize(m->st));
    m->searches++;
    if (m->warmed) m->late_searches++;
    DNN(cudnnSetConvolutionMathType(m->gl[l - m->layers].cd, conv_math(m)));
    return NN_OK;
}

/* the real workspace of (algo, math) on layer g at the current descriptors; NOT_SUPPORTED when
 * cuDNN has no kernel for that pair */
static cudnnStatus_t ws_of(nn_cuda_model_t *m, gl_t *g, const cudnnConvolutionFwdAlgoPerf_t &p, size_t *s) {
    return cudnnGetConvolutionForwardWorkspaceSize(m->dnn, g->xd, g->wd, g->cd, g->yd, p.algo, s);
}
static cudnnStatus_t ws_of(nn_cuda_model_t *m, gl_t *g, const cudnnConvolutionBwdDataAlgoPerf_t &p,
                           size_t *s) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(m->dnn, g->wd, g->yd, g->cd, g->xd, p.algo, s);
}
static cudnnStatus_t ws_of(nn_cuda_model_t *m, gl_t *g, const cudnnConvolutionBwdFilterAlgoPerf_t &p,
                           size_t *s) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(m->dnn, g->xd, g->yd, g->cd, g->wd, p.algo, s);
}
/* the fastest successful entry of a cudnnFind* result that replay_algo.c allows and that cuDNN accepts
 * with the math type it will run under (*ws: its workspace under that math type), or -1 */
template <typename Perf>
static int first_allowed(nn_cuda_model_t *m, gl_t *g, int kind, const Perf *perf, int ret, size_t *ws) {
    for (int k = 0; k < ret; k++) {
        if (perf[k].status != CUDNN_STATUS_SUCCESS ||
            !nn_cuda_conv_algo_allowed(kind, (int)perf[k].algo, (int)perf[k].mathType, m->tf32))
            continue;
        size_t s = 0;
        if (cudnnSetConvolutionMathType(g->cd, run_math(m, perf[k].mathType)) != CUDNN_STATUS_SUCCESS ||
            ws_of(m, g, perf[k], &s) != CUDNN_STATUS_SUCCESS)
            continue;
        *ws = s > perf[k].memory ? s : perf[k].memory;
        return k;
    }
    return -1;
}

static const char *const KIND_NAME[] = {"forward", "backward-data", "backward-filter"};

#define PICK(kind, perf, ret, algo_out, math_out, ws_out)                                                 \
    do {                                                                                                  \
        size_t w_ = 0;                                                                                    \
        int k_ = first_allowed(m, g, kind, perf, ret, &w_);                                               \
        if (k_ < 0) {                                                                                     \
            seterr(m, "%s: no usable cuDNN %s algorithm (N=%d, tf32=%d)", l->name, KIND_NAME[kind], m->N, \
                   m->tf32);                                                                              \
            return NN_CUDA_ERR;                                                                           \
        }                                                                                                 \
        algo_out = perf[k_].algo;                                                                         \
        math_out = run_math(m, perf[k_].mathType);                                                        \
        ws_out = w_;                                                                                      \
        TRY(grow_ws(m, ws_out, l->name));                                                                 \
    } while (0)

int conv_fwd(nn_cuda_model_t *m, int li) {
    nn_layer_t *l = &m->layers[li];
    gl_t *g = &m->gl[li];
    algo_t *a = find_algo(m, li, m->N);
    if (!a->have_f) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        int ret = 0;
        TRY(may_search(m, l));
        DNN(cudnnFindConvolutionForwardAlgorithm(m->dnn, g->xd, g->wd, g->cd, g->yd,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &ret, perf));
        PICK(NN_CUDA_CONV_FWD, perf, ret, a->f, a->fm, a->fws);
        a->have_f = 1;
    }
    DNN(cudnnSetConvolutionMathType(g->cd, a->fm));
    float *out = ACT(m, l->out);
    DNN(cudnnConvolutionForward(m->dnn, &ONE, g->xd, ACT(m, l->in), g->wd, PAR(m, l->p), g->cd, a->f, m->ws,
                                m->ws_size, &ZERO, g->yd, out));
    if (l->bias) DNN(cudnnAddTensor(m->dnn, &ONE, g->biasd, PAR(m, l->p + 1), &ONE, g->yd, out));
    return NN_OK;
}

int conv_bwd(nn_cuda_model_t *m, int li, const float *dout) {
    nn_layer_t *l = &m->layers[li];
    gl_t *g = &m->gl[li];
    algo_t *a = find_algo(m, li, m->N);
    if (!a->have_w || (l->need_din && !a->have_d)) {
        TRY(may_search(m, l));
        if (!a->have_w) {
            cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
            int ret = 0;
            DNN(cudnnFindConvolutionBackwardFilterAlgorithm(
                m->dnn, g->xd, g->yd, g->cd, g->wd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &ret, perf));
            PICK(NN_CUDA_CONV_BWD_FILTER, perf, ret, a->w, a->wm, a->wws);
            a->have_w = 1;
        }
        if (l->need_din && !a->have_d) {
            cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
            int ret = 0;
            DNN(cudnnFindConvolutionBackwardDataAlgorithm(m->dnn, g->wd, g->yd, g->cd, g->xd,
                                                          CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &ret, perf));
            PICK(NN_CUDA_CONV_BWD_DATA, perf, ret, a->d, a->dm, a->dws);
            a->have_d = 1;
        }
    }
    DNN(cudnnSetConvolutionMathType(g->cd, a->wm));
    DNN(cudnnConvolutionBackwardFilter(m->dnn, &ONE, g->xd, ACT(m, l->in), g->yd, dout, g->cd, a->w, m->ws,
                                       m->ws_size, &ONE, g->wd, GRD(m, l->p)));
    if (l->bias)
        DNN(cudnnConvolutionBackwardBias(m->dnn, &ONE, g->yd, dout, &ONE, g->biasd, GRD(m, l->p + 1)));
    if (l->need_din) {
        float *din;
        int acc = dslot_ow(m, l->in, &din);
        DNN(cudnnSetConvolutionMathType(g->cd, a->dm));
        DNN(cudnnConvolutionBackwardData(m->dnn, &ONE, g->wd, PAR(m, l->p), g->yd, dout, g->cd, a->d, m->ws,
                                         m->ws_size, acc ? &ONE : &ZERO, g->xd, din));
    }
    return NN_OK;
}

int fc_fwd(nn_cuda_model_t *m, nn_layer_t *l) {
    int N = m->N, I = m->slots[l->in].c, O = m->slots[l->out].c;
    float *out = ACT(m, l->out);
    /* row-major out (N,O) = in (N,I) w^T; column-major: out^T (O,N) = w^T^T (O,I) in^T (I,N) */
    BL(cublasSgemm(m->blas, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, &ONE, PAR(m, l->p), I, ACT(m, l->in), I, &ZERO,
                   out, O));
    if (l->bias) {
        k_bias<<<nblk((size_t)N * O), 256, 0, m->st>>>(out, PAR(m, l->p + 1), N, O);
        KCHECK("k_bias");
    }
    return NN_OK;
}

int fc_bwd(nn_cuda_model_t *m, nn_layer_t *l, const float *dout) {
    int N = m->N, I = m->slots[l->in].c, O = m->slots[l->out].c;
    /* dw (O,I) row-major += dout^T (O,N) in (N,I); column-major dw^T (I,O) += in^T (I,N) dout (N,O) */
    BL(cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, &ONE, ACT(m, l->in), I, dout, O, &ONE,
                   GRD(m, l->p), I));
    if (l->bias) /* db (O) += dout^T (O,N) * ones (N) */
        BL(cublasSgemv(m->blas, CUBLAS_OP_N, O, N, &ONE, dout, O, m->ones, 1, &ONE, GRD(m, l->p + 1), 1));
    if (l->need_din) {
        float *din;
        int acc = dslot_ow(m, l->in, &din);
        /* din (N,I) = dout (N,O) w (O,I); column-major din^T (I,N) = w^T (I,O) dout^T (O,N) */
        BL(cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, &ONE, PAR(m, l->p), I, dout, O,
                       acc ? &ONE : &ZERO, din, I));
    }
    return NN_OK;
}

} // namespace nncu
