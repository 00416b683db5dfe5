// nn_cuda.cu: the CUDA backend of the nn library (see nn_cuda.h).
// One translation unit: model mirror, per-layer forward/backward on cuDNN / cuBLAS / own kernels,
// losses, SGD, finite check, CUDA-graph capture of the training step.
// Activations are NCHW on the device: slot s of the CPU model (per-sample shape c,h,w) is a
// region of max_batch*c*h*w floats; for the actual batch N it holds (N,c,h,w) row-major.
// Backward follows the CPU driver (trainer/nn/model.c): reverse layer order, activation gradients
// zeroed (or overwritten) on first use in a backward, parameter gradients accumulated.
#include "trainer/cuda/nn_cuda.h"
#include "trainer/nn/nn_impl.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>

#define MAX_ALGO_N 4 /* batch sizes cached per convolution layer */

namespace {

struct algo_t {
  int N;
  int have_f, have_d, have_w;
  cudnnConvolutionFwdAlgo_t f;
  cudnnConvolutionBwdDataAlgo_t d;
  cudnnConvolutionBwdFilterAlgo_t w;
  cudnnMathType_t fm, dm, wm;
  size_t fws, dws, wws;
};

struct rnn_t {
  cudnnRNNDescriptor_t desc;
  cudnnDropoutDescriptor_t drop;
  void *drop_states;
  size_t drop_size;
  cudnnRNNDataDescriptor_t xd, yd;
  cudnnTensorDescriptor_t hd;
  size_t wsize;       /* weight space bytes */
  float *wspace;      /* alias into params (alias=1) or own copy */
  float *dwspace;     /* alias into grads or own */
  int alias;
  size_t moff[8], boff[8]; /* float offsets of the 8 matrices / biases inside the weight space */
  float *y, *dy, *dx; /* y (N,T,H); dy zeros; dx (N,T,D) scratch */
  void *reserve;
  size_t reserve_size;
  int32_t *dlens;
};

struct gl_t { /* GPU state of one layer */
  cudnnTensorDescriptor_t xd, yd, bnd, biasd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  cudnnPoolingDescriptor_t pd;
  int descN;
  algo_t algo[MAX_ALGO_N];
  int nalgo, next_algo;
  float *saved; /* BN: mean, invstd (2C) */
  rnn_t *rnn;
};

struct res_t {
  double loss;
  int top1, top5;
};

}  // namespace

struct nn_cuda_model {
  /* copy of the CPU graph */
  nn_layer_t *layers;
  int nlayers;
  struct nn_slot *slots;
  int nslots;
  nn_param_t *pt;
  int npt;
  nn_bnstat_t *bns;
  int nbns;
  size_t nparams, nbn;
  float bn_momentum, bn_eps;
  nn_task_t task;
  int nout, in_ndim, in_shape[3];
  char desc[256];
  /* device state */
  int device, max_batch, tf32, training;
  cudaStream_t st;
  cudnnHandle_t dnn;
  cublasHandle_t blas;
  void *blas_ws;
  float *params, *grads, *mom, *bn_stats;
  uint8_t *decay;
  size_t *soff; /* device offsets of the slots (floats) */
  float *acts, *dacts;
  size_t nacts;
  void *ws;
  size_t ws_size;
  float *ones;
  float *probs;
  double *rowloss;
  int *rowtop; /* 2 per sample */
  res_t *res_d, *res_h;
  int *labels_d, *lens_h;
  float *targets_d;
  float *stage;       /* pinned staging of the input */
  int *stage_lab;
  float *stage_tgt;
  size_t in_per;      /* floats per sample of the input */
  unsigned long long *bad_d, *bad_h;
  gl_t *gl;
  unsigned char *dinit;
  /* batch */
  int N, T, have_fwd;
  double loss;
  int top1, top5;
  /* graph */
  cudaGraph_t graph;
  cudaGraphExec_t gexec;
  int gN, warmN, graph_off;
  char err[512];
};

/* ------------------------------------------------------------------------------------------ */
/* errors                                                                                     */

static void seterr(nn_cuda_model_t *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->err, sizeof m->err, fmt, ap);
  va_end(ap);
}

#define CK(call)                                                                             \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      seterr(m, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_));        \
      return NN_CUDA_ERR;                                                                    \
    }                                                                                        \
  } while (0)
#define DNN(call)                                                                            \
  do {                                                                                       \
    cudnnStatus_t s_ = (call);                                                               \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                        \
      seterr(m, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudnnGetErrorString(s_));       \
      return NN_CUDA_ERR;                                                                    \
    }                                                                                        \
  } while (0)
#define BL(call)                                                                             \
  do {                                                                                       \
    cublasStatus_t s_ = (call);                                                              \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                       \
      seterr(m, "%s:%d: %s: cuBLAS status %d", __FILE__, __LINE__, #call, (int)s_);         \
      return NN_CUDA_ERR;                                                                    \
    }                                                                                        \
  } while (0)
#define TRY(x)                                                                               \
  do {                                                                                       \
    int r_ = (x);                                                                            \
    if (r_) return r_;                                                                       \
  } while (0)
#define KCHECK() CK(cudaGetLastError())

/* ------------------------------------------------------------------------------------------ */
/* kernels                                                                                    */

static inline unsigned nblk(size_t n, int t = 256) {
  size_t b = (n + t - 1) / t;
  return (unsigned)(b > 65535u * 8 ? 65535u * 8 : (b ? b : 1));
}
#define GRID_LOOP(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__global__ void k_relu(float *out, const float *in, size_t n) {
  GRID_LOOP(i, n) out[i] = in[i] > 0.f ? in[i] : 0.f;
}
/* din (+)= out > 0 ? dout : 0 */
__global__ void k_relu_bwd(float *din, const float *dout, const float *out, size_t n, int acc) {
  GRID_LOOP(i, n) {
    float d = out[i] > 0.f ? dout[i] : 0.f;
    din[i] = acc ? din[i] + d : d;
  }
}
__global__ void k_mask(float *d, const float *out, size_t n) {
  GRID_LOOP(i, n) if (!(out[i] > 0.f)) d[i] = 0.f;
}
__global__ void k_add(float *out, const float *a, const float *b, size_t n, int relu) {
  GRID_LOOP(i, n) {
    float v = a[i] + b[i];
    out[i] = relu ? (v > 0.f ? v : 0.f) : v;
  }
}
__global__ void k_add_bwd(float *da, int acc_a, float *db, int acc_b, const float *dout,
                          const float *relu_out, size_t n) {
  GRID_LOOP(i, n) {
    float d = relu_out && !(relu_out[i] > 0.f) ? 0.f : dout[i];
    if (da) da[i] = acc_a ? da[i] + d : d;
    if (db) db[i] = acc_b ? db[i] + d : d;
  }
}
__global__ void k_accum(float *dst, const float *src, size_t n) {
  GRID_LOOP(i, n) dst[i] += src[i];
}
/* option-A shortcut, NCHW: out (N,K,OH,OW) */
__global__ void k_padsub(float *out, const float *in, int N, int C, int H, int W, int K, int s) {
  int OH = (H - 1) / s + 1, OW = (W - 1) / s + 1, lo = (K - C) / 2;
  size_t tot = (size_t)N * K * OH * OW;
  GRID_LOOP(i, tot) {
    int ow = (int)(i % OW);
    size_t r = i / OW;
    int oh = (int)(r % OH);
    r /= OH;
    int k = (int)(r % K);
    int n = (int)(r / K);
    int c = k - lo;
    out[i] = (c >= 0 && c < C) ? in[(((size_t)n * C + c) * H + (size_t)oh * s) * W + (size_t)ow * s] : 0.f;
  }
}
/* din (zeroed or accumulating) += the subsampled positions */
__global__ void k_padsub_bwd(float *din, const float *dout, int N, int C, int H, int W, int K, int s) {
  int OH = (H - 1) / s + 1, OW = (W - 1) / s + 1, lo = (K - C) / 2;
  size_t tot = (size_t)N * C * OH * OW;
  GRID_LOOP(i, tot) {
    int ow = (int)(i % OW);
    size_t r = i / OW;
    int oh = (int)(r % OH);
    r /= OH;
    int c = (int)(r % C);
    int n = (int)(r / C);
    din[(((size_t)n * C + c) * H + (size_t)oh * s) * W + (size_t)ow * s] +=
        dout[(((size_t)n * K + c + lo) * OH + oh) * OW + ow];
  }
}
/* global average pooling: one warp per (n,c) plane */
__global__ void k_gap(float *out, const float *in, int NC, int HW) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (warp >= NC) return;
  const float *x = in + (size_t)warp * HW;
  float acc = 0.f;
  for (int i = lane; i < HW; i += 32) acc += x[i];
  for (int o = 16; o; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (!lane) out[warp] = acc / (float)HW;
}
__global__ void k_gap_bwd(float *din, const float *dout, int NC, int HW, int acc) {
  size_t tot = (size_t)NC * HW;
  GRID_LOOP(i, tot) {
    float g = dout[i / HW] / (float)HW;
    din[i] = acc ? din[i] + g : g;
  }
}
/* out (N,O) += b (O) */
__global__ void k_bias(float *out, const float *b, int N, int O) {
  size_t tot = (size_t)N * O;
  GRID_LOOP(i, tot) out[i] += b[i % O];
}

/* softmax cross-entropy, logits (N,K) row-major; one block per sample */
__global__ void k_softmax_ce(float *probs, double *rowloss, int *rowtop, const float *logits,
                             const int *labels, int N, int K) {
  int n = blockIdx.x;
  if (n >= N) return;
  const float *x = logits + (size_t)n * K;
  __shared__ float smax[32];
  __shared__ double ssum[32];
  __shared__ int scnt[32];
  int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  float mx = -INFINITY;
  for (int k = threadIdx.x; k < K; k += blockDim.x) mx = fmaxf(mx, x[k]);
  for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_down_sync(0xffffffffu, mx, o));
  if (!lane) smax[wid] = mx;
  __syncthreads();
  if (threadIdx.x == 0) {
    float v = smax[0];
    for (int w = 1; w < nw; w++) v = fmaxf(v, smax[w]);
    smax[0] = v;
  }
  __syncthreads();
  mx = smax[0];
  int y = labels[n];
  float ly = x[y];
  double z = 0;
  int above = 0;
  for (int k = threadIdx.x; k < K; k += blockDim.x) {
    z += exp((double)x[k] - mx);
    if (k != y && x[k] >= ly) above++;
  }
  for (int o = 16; o; o >>= 1) {
    z += __shfl_down_sync(0xffffffffu, z, o);
    above += __shfl_down_sync(0xffffffffu, above, o);
  }
  __syncthreads();
  if (!lane) { ssum[wid] = z; scnt[wid] = above; }
  __syncthreads();
  if (threadIdx.x == 0) {
    double zz = 0;
    int a = 0;
    for (int w = 0; w < nw; w++) { zz += ssum[w]; a += scnt[w]; }
    ssum[0] = zz;
    rowloss[n] = log(zz) + mx - ly;
    rowtop[2 * n] = a < 1;
    rowtop[2 * n + 1] = a < 5;
  }
  __syncthreads();
  z = ssum[0];
  for (int k = threadIdx.x; k < K; k += blockDim.x) probs[(size_t)n * K + k] = (float)(exp((double)x[k] - mx) / z);
}
/* sums per-sample results in a fixed order (deterministic) */
__global__ void k_finish(res_t *res, const double *rowloss, const int *rowtop, int N, double div) {
  __shared__ double sl[256];
  __shared__ int s1[256], s5[256];
  double l = 0;
  int a = 0, b = 0;
  for (int n = threadIdx.x; n < N; n += blockDim.x) {
    l += rowloss[n];
    if (rowtop) { a += rowtop[2 * n]; b += rowtop[2 * n + 1]; }
  }
  sl[threadIdx.x] = l; s1[threadIdx.x] = a; s5[threadIdx.x] = b;
  __syncthreads();
  for (int s = blockDim.x / 2; s; s >>= 1) {
    if ((int)threadIdx.x < s) {
      sl[threadIdx.x] += sl[threadIdx.x + s];
      s1[threadIdx.x] += s1[threadIdx.x + s];
      s5[threadIdx.x] += s5[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) { res->loss = sl[0] / div; res->top1 = s1[0]; res->top5 = s5[0]; }
}
__global__ void k_softmax_ce_bwd(float *dlogits, const float *probs, const int *labels, int N, int K,
                                 float s, int acc) {
  size_t tot = (size_t)N * K;
  GRID_LOOP(i, tot) {
    int k = (int)(i % K), n = (int)(i / K);
    float d = s * (probs[i] - (labels[n] == k ? 1.f : 0.f));
    dlogits[i] = acc ? dlogits[i] + d : d;
  }
}
/* MSE: y (N,K) row-major, target (N,K); per-row sums of squares in double */
__global__ void k_mse_rows(double *rowloss, const float *y, const float *t, int N, int K) {
  int n = blockIdx.x;
  if (n >= N) return;
  __shared__ double s[256];
  double a = 0;
  for (int k = threadIdx.x; k < K; k += blockDim.x) {
    double d = (double)y[(size_t)n * K + k] - t[(size_t)n * K + k];
    a += d * d;
  }
  s[threadIdx.x] = a;
  __syncthreads();
  for (int h = blockDim.x / 2; h; h >>= 1) {
    if ((int)threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
    __syncthreads();
  }
  if (!threadIdx.x) rowloss[n] = s[0];
}
__global__ void k_mse_bwd(float *dy, const float *y, const float *t, size_t n, float s, int acc) {
  GRID_LOOP(i, n) {
    float d = s * (y[i] - t[i]);
    dy[i] = acc ? dy[i] + d : d;
  }
}
/* SGD momentum, PyTorch formulation (as trainer/nn/optim.c) */
__global__ void k_sgd(float *w, float *v, const float *g, const uint8_t *decay, size_t n, float lr,
                      float mu, float wd, int wd_all, int nesterov) {
  GRID_LOOP(i, n) {
    float wdi = (wd_all || decay[i]) ? wd : 0.f;
    float wi = w[i];
    if (nesterov) {
      float gi = g[i] + wdi * wi;
      float vi = mu * v[i] + gi;
      v[i] = vi;
      w[i] = wi - lr * (gi + mu * vi);
    } else {
      float vi = mu * v[i] + g[i] + wdi * wi;
      v[i] = vi;
      w[i] = wi - lr * vi;
    }
  }
}
__global__ void k_first_bad(unsigned long long *bad, const float *g, size_t n) {
  GRID_LOOP(i, n) if (!isfinite(g[i])) atomicMin(bad, (unsigned long long)i);
}
__global__ void k_fill(float *p, float v, size_t n) {
  GRID_LOOP(i, n) p[i] = v;
}

/* ------------------------------------------------------------------------------------------ */
/* helpers                                                                                    */

static const float ONE = 1.f, ZERO = 0.f;

static int Ndesc4(nn_cuda_model_t *m, cudnnTensorDescriptor_t d, int N, const struct nn_slot *s) {
  DNN(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, s->c, s->h, s->w));
  return NN_OK;
}

static float *ACT(nn_cuda_model_t *m, int s) { return m->acts + m->soff[s]; }
static float *DACT(nn_cuda_model_t *m, int s) { return m->dacts + m->soff[s]; }
static float *PAR(nn_cuda_model_t *m, int t) { return m->params + m->pt[t].off; }
static float *GRD(nn_cuda_model_t *m, int t) { return m->grads + m->pt[t].off; }
static size_t slot_n(const struct nn_slot *s) { return (size_t)s->c * s->h * s->w; }

/* activation gradient of slot s for an accumulating writer: zeroed on first use */
static int dslot_acc(nn_cuda_model_t *m, int s, float **p) {
  if (!m->dinit[s]) {
    CK(cudaMemsetAsync(DACT(m, s), 0, sizeof(float) * slot_n(&m->slots[s]) * m->N, m->st));
    m->dinit[s] = 1;
  }
  *p = DACT(m, s);
  return NN_OK;
}
/* for a writer that can overwrite: returns whether to accumulate (0 on first use) */
static int dslot_ow(nn_cuda_model_t *m, int s, float **p) {
  int acc = m->dinit[s];
  m->dinit[s] = 1;
  *p = DACT(m, s);
  return acc;
}

static int grow_ws(nn_cuda_model_t *m, size_t need) {
  if (need <= m->ws_size) return NN_OK;
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  CK(cudaStreamIsCapturing(m->st, &cs));
  if (cs != cudaStreamCaptureStatusNone) {
    seterr(m, "internal: workspace growth to %zu bytes during graph capture", need);
    return NN_CUDA_ERR;
  }
  CK(cudaStreamSynchronize(m->st));
  if (m->ws) CK(cudaFree(m->ws));
  m->ws = NULL;
  m->ws_size = 0;
  size_t sz = need + (need >> 3);
  CK(cudaMalloc(&m->ws, sz));
  m->ws_size = sz;
  return NN_OK;
}

static cudnnMathType_t conv_math(const nn_cuda_model_t *m) {
  return (m->tf32 & NN_CUDA_TF32_CUDNN) ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}
/* strict fp32: refuse algorithms that report tensor-op math; run every algorithm with FMA math */
static int math_ok(const nn_cuda_model_t *m, cudnnMathType_t t) {
  return (m->tf32 & NN_CUDA_TF32_CUDNN) || (t != CUDNN_TENSOR_OP_MATH && t != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}
static cudnnMathType_t run_math(const nn_cuda_model_t *m, cudnnMathType_t t) {
  return (m->tf32 & NN_CUDA_TF32_CUDNN) ? t : CUDNN_FMA_MATH;
}

/* descriptors of layer li for batch N */
static int set_descs(nn_cuda_model_t *m, int li, int N) {
  gl_t *g = &m->gl[li];
  nn_layer_t *l = &m->layers[li];
  if (g->descN == N) return NN_OK;
  if (g->xd && l->in >= 0) TRY(Ndesc4(m, g->xd, N, &m->slots[l->in]));
  if (g->yd && l->out >= 0) TRY(Ndesc4(m, g->yd, N, &m->slots[l->out]));
  if (l->type == L_BN) DNN(cudnnDeriveBNTensorDescriptor(g->bnd, g->xd, CUDNN_BATCHNORM_SPATIAL));
  g->descN = N;
  return NN_OK;
}

static algo_t *find_algo(nn_cuda_model_t *m, int li, int N) {
  gl_t *g = &m->gl[li];
  for (int i = 0; i < g->nalgo; i++)
    if (g->algo[i].N == N) return &g->algo[i];
  algo_t *a;
  if (g->nalgo < MAX_ALGO_N) a = &g->algo[g->nalgo++];
  else { a = &g->algo[g->next_algo]; g->next_algo = (g->next_algo + 1) % MAX_ALGO_N; }
  memset(a, 0, sizeof *a);
  a->N = N;
  return a;
}

/* ------------------------------------------------------------------------------------------ */
/* convolution                                                                                */

static int conv_fwd(nn_cuda_model_t *m, int li) {
  nn_layer_t *l = &m->layers[li];
  gl_t *g = &m->gl[li];
  algo_t *a = find_algo(m, li, m->N);
  if (!a->have_f) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int ret = 0;
    DNN(cudnnSetConvolutionMathType(g->cd, conv_math(m)));
    CK(cudaStreamSynchronize(m->st));
    DNN(cudnnFindConvolutionForwardAlgorithm(m->dnn, g->xd, g->wd, g->cd, g->yd,
                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &ret, perf));
    int k = 0;
    while (k < ret && (perf[k].status != CUDNN_STATUS_SUCCESS || !math_ok(m, perf[k].mathType))) k++;
    if (k == ret) { seterr(m, "%s: no usable cuDNN forward algorithm (N=%d)", l->name, m->N); return NN_CUDA_ERR; }
    a->f = perf[k].algo; a->fm = run_math(m, perf[k].mathType); a->fws = perf[k].memory; a->have_f = 1;
    TRY(grow_ws(m, a->fws));
  }
  DNN(cudnnSetConvolutionMathType(g->cd, a->fm));
  float *out = ACT(m, l->out);
  DNN(cudnnConvolutionForward(m->dnn, &ONE, g->xd, ACT(m, l->in), g->wd, PAR(m, l->p), g->cd, a->f,
                              m->ws, m->ws_size, &ZERO, g->yd, out));
  if (l->bias) DNN(cudnnAddTensor(m->dnn, &ONE, g->biasd, PAR(m, l->p + 1), &ONE, g->yd, out));
  return NN_OK;
}

static int conv_bwd(nn_cuda_model_t *m, int li, const float *dout) {
  nn_layer_t *l = &m->layers[li];
  gl_t *g = &m->gl[li];
  algo_t *a = find_algo(m, li, m->N);
  if (!a->have_w || (l->need_din && !a->have_d)) {
    CK(cudaStreamSynchronize(m->st));
    DNN(cudnnSetConvolutionMathType(g->cd, conv_math(m)));
    if (!a->have_w) {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      int ret = 0;
      DNN(cudnnFindConvolutionBackwardFilterAlgorithm(m->dnn, g->xd, g->yd, g->cd, g->wd,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &ret, perf));
      int k = 0;
      while (k < ret && (perf[k].status != CUDNN_STATUS_SUCCESS || !math_ok(m, perf[k].mathType))) k++;
      if (k == ret) { seterr(m, "%s: no usable cuDNN backward-filter algorithm (N=%d)", l->name, m->N); return NN_CUDA_ERR; }
      a->w = perf[k].algo; a->wm = run_math(m, perf[k].mathType); a->wws = perf[k].memory; a->have_w = 1;
      TRY(grow_ws(m, a->wws));
    }
    if (l->need_din && !a->have_d) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      int ret = 0;
      DNN(cudnnFindConvolutionBackwardDataAlgorithm(m->dnn, g->wd, g->yd, g->cd, g->xd,
                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &ret, perf));
      int k = 0;
      while (k < ret && (perf[k].status != CUDNN_STATUS_SUCCESS || !math_ok(m, perf[k].mathType))) k++;
      if (k == ret) { seterr(m, "%s: no usable cuDNN backward-data algorithm (N=%d)", l->name, m->N); return NN_CUDA_ERR; }
      a->d = perf[k].algo; a->dm = run_math(m, perf[k].mathType); a->dws = perf[k].memory; a->have_d = 1;
      TRY(grow_ws(m, a->dws));
    }
  }
  DNN(cudnnSetConvolutionMathType(g->cd, a->wm));
  DNN(cudnnConvolutionBackwardFilter(m->dnn, &ONE, g->xd, ACT(m, l->in), g->yd, dout, g->cd, a->w,
                                     m->ws, m->ws_size, &ONE, g->wd, GRD(m, l->p)));
  if (l->bias) DNN(cudnnConvolutionBackwardBias(m->dnn, &ONE, g->yd, dout, &ONE, g->biasd, GRD(m, l->p + 1)));
  if (l->need_din) {
    float *din;
    int acc = dslot_ow(m, l->in, &din);
    DNN(cudnnSetConvolutionMathType(g->cd, a->dm));
    DNN(cudnnConvolutionBackwardData(m->dnn, &ONE, g->wd, PAR(m, l->p), g->yd, dout, g->cd, a->d,
                                     m->ws, m->ws_size, acc ? &ONE : &ZERO, g->xd, din));
  }
  return NN_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* LSTM (cuDNN RNN API v8)                                                                    */

static int rnn_set_desc(nn_cuda_model_t *m, nn_layer_t *l, rnn_t *r) {
  cudnnMathType_t mt = (m->tf32 & NN_CUDA_TF32_CUDNN) ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  DNN(cudnnSetRNNDescriptor_v8(r->desc, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
                               CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
                               CUDNN_DATA_FLOAT, mt, l->lstm_d, l->lstm_h, l->lstm_h, 1, r->drop,
                               CUDNN_RNN_PADDED_IO_ENABLED));
  return NN_OK;
}

static int rnn_data_descs(nn_cuda_model_t *m, nn_layer_t *l, rnn_t *r, int N, int T, const int *lens) {
  float fill = 0.f;
  DNN(cudnnSetRNNDataDescriptor(r->xd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, T,
                                N, l->lstm_d, lens, &fill));
  DNN(cudnnSetRNNDataDescriptor(r->yd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, T,
                                N, l->lstm_h, lens, &fill));
  int dims[3] = {1, N, l->lstm_h}, strides[3] = {N * l->lstm_h, l->lstm_h, 1};
  DNN(cudnnSetTensorNdDescriptor(r->hd, CUDNN_DATA_FLOAT, 3, dims, strides));
  return NN_OK;
}

static int rnn_reserve(nn_cuda_model_t *m, rnn_t *r) {
  size_t wsz = 0, rsz = 0;
  DNN(cudnnGetRNNTempSpaceSizes(m->dnn, r->desc, CUDNN_FWD_MODE_TRAINING, r->xd, &wsz, &rsz));
  TRY(grow_ws(m, wsz));
  if (rsz > r->reserve_size) {
    CK(cudaStreamSynchronize(m->st));
    if (r->reserve) CK(cudaFree(r->reserve));
    r->reserve = NULL;
    r->reserve_size = 0;
    CK(cudaMalloc(&r->reserve, rsz));
    r->reserve_size = rsz;
  }
  return NN_OK;
}

static int rnn_setup(nn_cuda_model_t *m, int li) {
  nn_layer_t *l = &m->layers[li];
  rnn_t *r = (rnn_t *)calloc(1, sizeof(rnn_t));
  if (!r) { seterr(m, "out of memory"); return NN_ERR_NOMEM; }
  m->gl[li].rnn = r;
  int D = l->lstm_d, H = l->lstm_h, T = l->lstm_t, MB = m->max_batch;
  DNN(cudnnCreateRNNDescriptor(&r->desc));
  DNN(cudnnCreateDropoutDescriptor(&r->drop));
  DNN(cudnnDropoutGetStatesSize(m->dnn, &r->drop_size));
  CK(cudaMalloc(&r->drop_states, r->drop_size ? r->drop_size : 1));
  DNN(cudnnSetDropoutDescriptor(r->drop, m->dnn, 0.f, r->drop_states, r->drop_size, 0ull));
  DNN(cudnnCreateRNNDataDescriptor(&r->xd));
  DNN(cudnnCreateRNNDataDescriptor(&r->yd));
  DNN(cudnnCreateTensorDescriptor(&r->hd));
  TRY(rnn_set_desc(m, l, r));
  DNN(cudnnGetRNNWeightSpaceSize(m->dnn, r->desc, &r->wsize));
  /* where cuDNN keeps each gate matrix/bias inside a weight space: compare with PyTorch's layout
   * (weight_ih (4H,D), weight_hh (4H,H), bias_ih (4H), bias_hh (4H), gates i,f,g,o = cuDNN's
   * linLayerID 0-3 (input) and 4-7 (recurrent)); if equal, the parameter buffer IS the weight
   * space (no copies); else gather/scatter per step. */
  float *base = PAR(m, l->p);
  size_t expect_m[8], expect_b[8];
  for (int id = 0; id < 8; id++) {
    expect_m[id] = id < 4 ? (size_t)id * H * D : (size_t)4 * H * D + (size_t)(id - 4) * H * H;
    expect_b[id] = (size_t)4 * H * D + (size_t)4 * H * H + (size_t)id * H;
  }
  cudnnTensorDescriptor_t md, bd;
  DNN(cudnnCreateTensorDescriptor(&md));
  DNN(cudnnCreateTensorDescriptor(&bd));
  int same = r->wsize == sizeof(float) * ((size_t)4 * H * (D + H) + (size_t)8 * H) &&
             ((uintptr_t)base % 256) == 0;
  for (int id = 0; id < 8; id++) {
    void *ma = NULL, *ba = NULL;
    cudnnStatus_t s = cudnnGetRNNWeightParams(m->dnn, r->desc, 0, r->wsize, base, id, md, &ma, bd, &ba);
    if (s != CUDNN_STATUS_SUCCESS || !ma || !ba) {
      cudnnDestroyTensorDescriptor(md);
      cudnnDestroyTensorDescriptor(bd);
      seterr(m, "%s: cudnnGetRNNWeightParams(linLayerID %d): %s", l->name, id, cudnnGetErrorString(s));
      return NN_CUDA_ERR;
    }
    r->moff[id] = (size_t)((float *)ma - base);
    r->boff[id] = (size_t)((float *)ba - base);
    same &= r->moff[id] == expect_m[id] && r->boff[id] == expect_b[id];
  }
  cudnnDestroyTensorDescriptor(md);
  cudnnDestroyTensorDescriptor(bd);
  r->alias = same;
  if (same) {
    r->wspace = base;
    r->dwspace = GRD(m, l->p);
  } else {
    CK(cudaMalloc(&r->wspace, r->wsize));
    CK(cudaMalloc(&r->dwspace, r->wsize));
  }
  CK(cudaMalloc(&r->y, sizeof(float) * (size_t)MB * T * H));
  CK(cudaMalloc(&r->dy, sizeof(float) * (size_t)MB * T * H));
  CK(cudaMemset(r->dy, 0, sizeof(float) * (size_t)MB * T * H));
  CK(cudaMalloc(&r->dx, sizeof(float) * (size_t)MB * T * D));
  CK(cudaMalloc(&r->dlens, sizeof(int32_t) * MB));
  int *lens = (int *)malloc(sizeof(int) * MB);
  if (!lens) { seterr(m, "out of memory"); return NN_ERR_NOMEM; }
  for (int i = 0; i < MB; i++) lens[i] = T;
  int rc = rnn_data_descs(m, l, r, MB, T, lens);
  free(lens);
  TRY(rc);
  return rnn_reserve(m, r);
}

/* parameter buffer <-> cuDNN weight space when they are not the same memory */
static int rnn_gather(nn_cuda_model_t *m, nn_layer_t *l, rnn_t *r) {
  int H = l->lstm_h, D = l->lstm_d;
  const float *wih = PAR(m, l->p), *whh = PAR(m, l->p + 1), *bih = PAR(m, l->p + 2), *bhh = PAR(m, l->p + 3);
  for (int id = 0; id < 8; id++) {
    const float *src = id < 4 ? wih + (size_t)id * H * D : whh + (size_t)(id - 4) * H * H;
    size_t n = id < 4 ? (size_t)H * D : (size_t)H * H;
    CK(cudaMemcpyAsync(r->wspace + r->moff[id], src, n * sizeof(float), cudaMemcpyDeviceToDevice, m->st));
    const float *bs = id < 4 ? bih + (size_t)id * H : bhh + (size_t)(id - 4) * H;
    CK(cudaMemcpyAsync(r->wspace + r->boff[id], bs, H * sizeof(float), cudaMemcpyDeviceToDevice, m->st));
  }
  return NN_OK;
}
static int rnn_scatter_grads(nn_cuda_model_t *m, nn_layer_t *l, rnn_t *r) {
  int H = l->lstm_h, D = l->lstm_d;
  float *gih = GRD(m, l->p), *ghh = GRD(m, l->p + 1), *gbi = GRD(m, l->p + 2), *gbh = GRD(m, l->p + 3);
  for (int id = 0; id < 8; id++) {
    float *dst = id < 4 ? gih + (size_t)id * H * D : ghh + (size_t)(id - 4) * H * H;
    size_t n = id < 4 ? (size_t)H * D : (size_t)H * H;
    k_accum<<<nblk(n), 256, 0, m->st>>>(dst, r->dwspace + r->moff[id], n);
    float *bd = id < 4 ? gbi + (size_t)id * H : gbh + (size_t)(id - 4) * H;
    k_accum<<<nblk(H), 256, 0, m->st>>>(bd, r->dwspace + r->boff[id], H);
  }
  KCHECK();
  return NN_OK;
}

static int lstm_fwd(nn_cuda_model_t *m, int li) {
  nn_layer_t *l = &m->layers[li];
  rnn_t *r = m->gl[li].rnn;
  TRY(rnn_data_descs(m, l, r, m->N, m->T, m->lens_h));
  TRY(rnn_reserve(m, r));
  CK(cudaMemcpyAsync(r->dlens, m->lens_h, sizeof(int32_t) * m->N, cudaMemcpyHostToDevice, m->st));
  if (!r->alias) TRY(rnn_gather(m, l, r));
  DNN(cudnnRNNForward(m->dnn, r->desc, CUDNN_FWD_MODE_TRAINING, r->dlens, r->xd, ACT(m, l->in), r->yd,
                      r->y, r->hd, NULL, ACT(m, l->out), r->hd, NULL, NULL, r->wsize, r->wspace,
                      m->ws_size, m->ws, r->reserve_size, r->reserve));
  return NN_OK;
}

static int lstm_bwd(nn_cuda_model_t *m, int li, const float *dout) {
  nn_layer_t *l = &m->layers[li];
  rnn_t *r = m->gl[li].rnn;
  DNN(cudnnRNNBackwardData_v8(m->dnn, r->desc, r->dlens, r->yd, r->y, r->dy, r->xd, r->dx, r->hd, NULL,
                              dout, NULL, r->hd, NULL, NULL, NULL, r->wsize, r->wspace, m->ws_size,
                              m->ws, r->reserve_size, r->reserve));
  if (!r->alias) CK(cudaMemsetAsync(r->dwspace, 0, r->wsize, m->st));
  DNN(cudnnRNNBackwardWeights_v8(m->dnn, r->desc, CUDNN_WGRAD_MODE_ADD, r->dlens, r->xd, ACT(m, l->in),
                                 r->hd, NULL, r->yd, r->y, r->wsize, r->dwspace, m->ws_size, m->ws,
                                 r->reserve_size, r->reserve));
  if (!r->alias) TRY(rnn_scatter_grads(m, l, r));
  if (l->need_din) {
    float *din;
    TRY(dslot_acc(m, l->in, &din));
    size_t n = (size_t)m->N * m->T * l->lstm_d;
    k_accum<<<nblk(n), 256, 0, m->st>>>(din, r->dx, n);
    KCHECK();
  }
  return NN_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* forward / backward drivers                                                                 */

static int fc_fwd(nn_cuda_model_t *m, nn_layer_t *l) {
  int N = m->N, I = m->slots[l->in].c, O = m->slots[l->out].c;
  float *out = ACT(m, l->out);
  /* row-major out (N,O) = in (N,I) w^T; column-major: out^T (O,N) = w^T^T (O,I) in^T (I,N) */
  BL(cublasSgemm(m->blas, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, &ONE, PAR(m, l->p), I, ACT(m, l->in), I,
                 &ZERO, out, O));
  if (l->bias) {
    k_bias<<<nblk((size_t)N * O), 256, 0, m->st>>>(out, PAR(m, l->p + 1), N, O);
    KCHECK();
  }
  return NN_OK;
}

static int fc_bwd(nn_cuda_model_t *m, nn_layer_t *l, const float *dout) {
  int N = m->N, I = m->slots[l->in].c, O = m->slots[l->out].c;
  /* dw (O,I) row-major += dout^T (O,N) in (N,I); column-major dw^T (I,O) += in^T (I,N) dout (N,O) */
  BL(cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, &ONE, ACT(m, l->in), I, dout, O, &ONE,
                 GRD(m, l->p), I));
  if (l->bias)  /* db (O) += dout^T (O,N) * ones (N) */
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

/* forward of layers [from, nlayers) for batch m->N (input already on the device) */
static int run_forward(nn_cuda_model_t *m, int from) {
  int N = m->N;
  for (int li = from; li < m->nlayers; li++) {
    nn_layer_t *l = &m->layers[li];
    gl_t *g = &m->gl[li];
    struct nn_slot *si = l->in >= 0 ? &m->slots[l->in] : NULL;
    size_t cnt = si ? slot_n(si) * N : 0;
    TRY(set_descs(m, li, N));
    switch (l->type) {
    case L_INPUT: break;
    case L_CONV: TRY(conv_fwd(m, li)); break;
    case L_BN: {
      float *rs = m->bn_stats + m->bns[l->bn].off, *out = ACT(m, l->out);
      int C = si->c;
      if (m->training)
        DNN(cudnnBatchNormalizationForwardTraining(m->dnn, CUDNN_BATCHNORM_SPATIAL, &ONE, &ZERO, g->xd,
                                                   ACT(m, l->in), g->yd, out, g->bnd, PAR(m, l->p),
                                                   PAR(m, l->p + 1), (double)m->bn_momentum, rs, rs + C,
                                                   (double)m->bn_eps, g->saved, g->saved + C));
      else
        DNN(cudnnBatchNormalizationForwardInference(m->dnn, CUDNN_BATCHNORM_SPATIAL, &ONE, &ZERO, g->xd,
                                                    ACT(m, l->in), g->yd, out, g->bnd, PAR(m, l->p),
                                                    PAR(m, l->p + 1), rs, rs + C, (double)m->bn_eps));
      if (l->relu) { k_relu<<<nblk(cnt), 256, 0, m->st>>>(out, out, cnt); KCHECK(); }
      break;
    }
    case L_RELU: k_relu<<<nblk(cnt), 256, 0, m->st>>>(ACT(m, l->out), ACT(m, l->in), cnt); KCHECK(); break;
    case L_ADD:
      k_add<<<nblk(cnt), 256, 0, m->st>>>(ACT(m, l->out), ACT(m, l->in), ACT(m, l->in2), cnt, l->relu);
      KCHECK();
      break;
    case L_PADSUB: {
      struct nn_slot *so = &m->slots[l->out];
      size_t on = slot_n(so) * N;
      k_padsub<<<nblk(on), 256, 0, m->st>>>(ACT(m, l->out), ACT(m, l->in), N, si->c, si->h, si->w, so->c, l->s);
      KCHECK();
      break;
    }
    case L_MAXPOOL:
    case L_AVGPOOL:
      DNN(cudnnPoolingForward(m->dnn, g->pd, &ONE, g->xd, ACT(m, l->in), &ZERO, g->yd, ACT(m, l->out)));
      break;
    case L_GAP: {
      int NC = N * si->c, HW = si->h * si->w;
      k_gap<<<(unsigned)(((size_t)NC * 32 + 255) / 256), 256, 0, m->st>>>(ACT(m, l->out), ACT(m, l->in), NC, HW);
      KCHECK();
      break;
    }
    case L_FC: TRY(fc_fwd(m, l)); break;
    case L_LSTM: TRY(lstm_fwd(m, li)); break;
    case L_SOFTMAX_CE:
      k_softmax_ce<<<N, 128, 0, m->st>>>(m->probs, m->rowloss, m->rowtop, ACT(m, l->in), m->labels_d, N, si->c);
      k_finish<<<1, 256, 0, m->st>>>(m->res_d, m->rowloss, m->rowtop, N, (double)N);
      KCHECK();
      break;
    case L_MSE:
      k_mse_rows<<<N, 256, 0, m->st>>>(m->rowloss, ACT(m, l->in), m->targets_d, N, si->c);
      k_finish<<<1, 256, 0, m->st>>>(m->res_d, m->rowloss, NULL, N, (double)N * si->c);
      KCHECK();
      break;
    }
  }
  CK(cudaMemcpyAsync(m->res_h, m->res_d, sizeof(res_t), cudaMemcpyDeviceToHost, m->st));
  return NN_OK;
}

static int run_backward(nn_cuda_model_t *m) {
  int N = m->N;
  memset(m->dinit, 0, (size_t)m->nslots);
  for (int li = m->nlayers - 1; li >= 0; li--) {
    nn_layer_t *l = &m->layers[li];
    if (l->type == L_INPUT) continue;
    gl_t *g = &m->gl[li];
    struct nn_slot *si = &m->slots[l->in];
    struct nn_slot *so = l->out >= 0 ? &m->slots[l->out] : NULL;
    float *dout = NULL;
    if (so) TRY(dslot_acc(m, l->out, &dout)); /* zeroed if nothing wrote it (unused output) */
    size_t cnt = slot_n(si) * N;
    TRY(set_descs(m, li, N));
    switch (l->type) {
    case L_INPUT: break;
    case L_CONV: TRY(conv_bwd(m, li, dout)); break;
    case L_BN: {
      int C = si->c;
      if (l->relu) { k_mask<<<nblk(cnt), 256, 0, m->st>>>(dout, ACT(m, l->out), cnt); KCHECK(); }
      float *din;
      int acc = 0;
      if (l->need_din) acc = dslot_ow(m, l->in, &din);
      else { /* BN on the raw input: cuDNN still writes dx; send it to the workspace */
        TRY(grow_ws(m, cnt * sizeof(float)));
        din = (float *)m->ws;
      }
      DNN(cudnnBatchNormalizationBackward(m->dnn, CUDNN_BATCHNORM_SPATIAL, &ONE, acc ? &ONE : &ZERO, &ONE,
                                          &ONE, g->xd, ACT(m, l->in), g->yd, dout, g->xd, din, g->bnd,
                                          PAR(m, l->p), GRD(m, l->p), GRD(m, l->p + 1), (double)m->bn_eps,
                                          g->saved, g->saved + C));
      break;
    }
    case L_RELU:
      if (l->need_din) {
        float *din;
        int acc = dslot_ow(m, l->in, &din);
        k_relu_bwd<<<nblk(cnt), 256, 0, m->st>>>(din, dout, ACT(m, l->out), cnt, acc);
        KCHECK();
      }
      break;
    case L_ADD: {
      const float *ro = l->relu ? ACT(m, l->out) : NULL;
      float *da = NULL, *db = NULL;
      int aa = 0, ab = 0;
      if (l->in2 == l->in) { /* x + x: both gradients go to the same slot */
        if (l->need_din) {
          TRY(dslot_acc(m, l->in, &da));
          k_add_bwd<<<nblk(cnt), 256, 0, m->st>>>(da, 1, da, 1, dout, ro, cnt);
          KCHECK();
        }
        break;
      }
      if (l->need_din) aa = dslot_ow(m, l->in, &da);
      if (l->in2 != 0) ab = dslot_ow(m, l->in2, &db);
      if (da || db) {
        k_add_bwd<<<nblk(cnt), 256, 0, m->st>>>(da, aa, db, ab, dout, ro, cnt);
        KCHECK();
      }
      break;
    }
    case L_PADSUB:
      if (l->need_din) {
        float *din;
        TRY(dslot_acc(m, l->in, &din));
        size_t on = (size_t)N * si->c * slot_n(so) / so->c;
        k_padsub_bwd<<<nblk(on), 256, 0, m->st>>>(din, dout, N, si->c, si->h, si->w, so->c, l->s);
        KCHECK();
      }
      break;
    case L_MAXPOOL:
    case L_AVGPOOL:
      if (l->need_din) {
        float *din;
        int acc = dslot_ow(m, l->in, &din);
        DNN(cudnnPoolingBackward(m->dnn, g->pd, &ONE, g->yd, ACT(m, l->out), g->yd, dout, g->xd,
                                 ACT(m, l->in), acc ? &ONE : &ZERO, g->xd, din));
      }
      break;
    case L_GAP:
      if (l->need_din) {
        float *din;
        int acc = dslot_ow(m, l->in, &din);
        k_gap_bwd<<<nblk(cnt), 256, 0, m->st>>>(din, dout, N * si->c, si->h * si->w, acc);
        KCHECK();
      }
      break;
    case L_FC: TRY(fc_bwd(m, l, dout)); break;
    case L_LSTM: TRY(lstm_bwd(m, li, dout)); break;
    case L_SOFTMAX_CE:
      if (l->need_din) {
        float *din;
        int acc = dslot_ow(m, l->in, &din);
        k_softmax_ce_bwd<<<nblk(cnt), 256, 0, m->st>>>(din, m->probs, m->labels_d, N, si->c, 1.f / (float)N, acc);
        KCHECK();
      }
      break;
    case L_MSE:
      if (l->need_din) {
        float *din;
        int acc = dslot_ow(m, l->in, &din);
        k_mse_bwd<<<nblk(cnt), 256, 0, m->st>>>(din, ACT(m, l->in), m->targets_d, cnt, 2.f / ((float)N * si->c), acc);
        KCHECK();
      }
      break;
    }
  }
  return NN_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* batch checks (as nn_forward) and input staging                                             */

static void shape_str(char *b, size_t n, int nd, const int *s) {
  int k = 0;
  b[0] = 0;
  for (int i = 0; i < nd && k < (int)n; i++) k += snprintf(b + k, n - k, i ? "x%d" : "%d", s[i]);
}

static int check_batch(nn_cuda_model_t *m, const nn_batch_t *b, int *Tout) {
  int N = b->n;
  if (N < 1 || N > m->max_batch) {
    seterr(m, "batch size %d outside 1..%d (max_batch of the GPU model)", N, m->max_batch);
    return NN_ERR_SHAPE;
  }
  int T = m->in_ndim == 2 ? m->in_shape[0] : 0;
  if (b->ndim) {
    int ok = b->ndim == m->in_ndim;
    for (int i = 0; ok && i < b->ndim; i++)
      ok = m->in_ndim == 2 && i == 0 ? (b->shape[0] >= 1 && b->shape[0] <= m->in_shape[0])
                                     : b->shape[i] == m->in_shape[i];
    if (!ok) {
      char s1[64], s2[64];
      shape_str(s1, sizeof s1, b->ndim, b->shape);
      shape_str(s2, sizeof s2, m->in_ndim, m->in_shape);
      seterr(m, "input shape %s does not match the model's %s%s (\"%s\")", s1, s2,
             m->in_ndim == 2 ? " (steps up to the first)" : "", m->desc);
      return NN_ERR_SHAPE;
    }
    if (m->in_ndim == 2) T = b->shape[0];
  }
  if (!b->x || (m->task == NN_TASK_CLASSIFY && !b->labels) || (m->task == NN_TASK_REGRESS && !b->targets) ||
      (m->in_ndim == 2 && !b->lengths)) {
    seterr(m, "batch lacks x, %s", m->task == NN_TASK_CLASSIFY ? "labels" : "targets");
    if (m->in_ndim == 2 && !b->lengths) seterr(m, "sequence batch lacks lengths");
    return NN_ERR_ARG;
  }
  if (m->task == NN_TASK_CLASSIFY)
    for (int n = 0; n < N; n++)
      if (b->labels[n] < 0 || b->labels[n] >= m->nout) {
        seterr(m, "label %d of sample %d outside 0..%d", b->labels[n], n, m->nout - 1);
        return NN_ERR_ARG;
      }
  if (m->in_ndim == 2)
    for (int n = 0; n < N; n++)
      if (b->lengths[n] < 1 || b->lengths[n] > T) {
        seterr(m, "sequence length %d of sample %d outside 1..%d", b->lengths[n], n, T);
        return NN_ERR_SHAPE;
      }
  *Tout = T;
  return NN_OK;
}

/* host batch -> pinned staging -> device (enqueued) */
static int stage_batch(nn_cuda_model_t *m, const nn_batch_t *b, int T) {
  int N = b->n;
  size_t nx = m->in_ndim == 2 ? (size_t)N * T * m->in_shape[1] : (size_t)N * m->in_per;
  CK(cudaStreamSynchronize(m->st)); /* the staging buffers may still be read by a previous copy */
  memcpy(m->stage, b->x, nx * sizeof(float));
  CK(cudaMemcpyAsync(ACT(m, 0), m->stage, nx * sizeof(float), cudaMemcpyHostToDevice, m->st));
  if (m->task == NN_TASK_CLASSIFY) {
    memcpy(m->stage_lab, b->labels, sizeof(int) * N);
    CK(cudaMemcpyAsync(m->labels_d, m->stage_lab, sizeof(int) * N, cudaMemcpyHostToDevice, m->st));
  } else {
    memcpy(m->stage_tgt, b->targets, sizeof(float) * N * m->nout);
    CK(cudaMemcpyAsync(m->targets_d, m->stage_tgt, sizeof(float) * N * m->nout, cudaMemcpyHostToDevice, m->st));
  }
  if (m->in_ndim == 2) memcpy(m->lens_h, b->lengths, sizeof(int) * N);
  m->N = N;
  m->T = T;
  return NN_OK;
}

static int finish_results(nn_cuda_model_t *m) {
  CK(cudaStreamSynchronize(m->st));
  m->loss = m->res_h->loss;
  m->top1 = m->task == NN_TASK_CLASSIFY ? m->res_h->top1 : 0;
  m->top5 = m->task == NN_TASK_CLASSIFY ? m->res_h->top5 : 0;
  m->have_fwd = 1;
  return NN_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* public API                                                                                 */

extern "C" {

int nn_cuda_available(char *why, size_t n) {
  int cnt = 0;
  cudaError_t e = cudaGetDeviceCount(&cnt);
  if (e != cudaSuccess) {
    if (why) snprintf(why, n, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
    cudaGetLastError();
    return 0;
  }
  if (cnt < 1) {
    if (why) snprintf(why, n, "cudaGetDeviceCount: 0 devices");
    return 0;
  }
  if (why && n) why[0] = 0;
  return cnt;
}

int nn_cuda_select_device(int local_rank, char *why, size_t n) {
  int cnt = nn_cuda_available(why, n);
  if (cnt < 1) return -1;
  int d = (local_rank < 0 ? 0 : local_rank) % cnt;
  cudaError_t e = cudaSetDevice(d);
  if (e != cudaSuccess) {
    if (why) snprintf(why, n, "cudaSetDevice(%d): %s", d, cudaGetErrorString(e));
    return -1;
  }
  return d;
}

void nn_cuda_describe(char *buf, size_t n) {
  int d = 0, rt = 0, drv = 0;
  cudaDeviceProp p;
  memset(&p, 0, sizeof p);
  if (cudaGetDevice(&d) != cudaSuccess || cudaGetDeviceProperties(&p, d) != cudaSuccess) {
    cudaGetLastError();
    snprintf(buf, n, "no CUDA device");
    return;
  }
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  snprintf(buf, n, "%s (sm_%d%d, %.1f GiB), CUDA runtime %d.%d driver %d.%d, cuDNN %zu, cuBLAS %d",
           p.name, p.major, p.minor, p.totalGlobalMem / 1073741824.0, rt / 1000, rt % 1000 / 10,
           drv / 1000, drv % 1000 / 10, cudnnGetVersion(), CUBLAS_VERSION);
}

const char *nn_cuda_error(const nn_cuda_model_t *m) { return m ? m->err : "no model"; }
double nn_cuda_loss(const nn_cuda_model_t *m) { return m->loss; }
int nn_cuda_top1(const nn_cuda_model_t *m) { return m->top1; }
int nn_cuda_top5(const nn_cuda_model_t *m) { return m->top5; }
int nn_cuda_batch(const nn_cuda_model_t *m) { return m->N; }
size_t nn_cuda_nparams(const nn_cuda_model_t *m) { return m->nparams; }
float *nn_cuda_params(nn_cuda_model_t *m) { return m->params; }
float *nn_cuda_grads(nn_cuda_model_t *m) { return m->grads; }
float *nn_cuda_momentum(nn_cuda_model_t *m) { return m->mom; }
float *nn_cuda_bn_stats(nn_cuda_model_t *m) { return m->bn_stats; }
size_t nn_cuda_nbn_stats(const nn_cuda_model_t *m) { return m->nbn; }
void *nn_cuda_stream(nn_cuda_model_t *m) { return (void *)m->st; }
void nn_cuda_set_training(nn_cuda_model_t *m, int training) { m->training = training ? 1 : 0; }

int nn_cuda_sync(nn_cuda_model_t *m) {
  CK(cudaStreamSynchronize(m->st));
  return NN_OK;
}

static void drop_graph(nn_cuda_model_t *m) {
  if (m->gexec) cudaGraphExecDestroy(m->gexec);
  if (m->graph) cudaGraphDestroy(m->graph);
  m->gexec = NULL;
  m->graph = NULL;
  m->gN = 0;
  m->warmN = 0;
}

void nn_cuda_model_free(nn_cuda_model_t *m) {
  if (!m) return;
  if (m->st) cudaStreamSynchronize(m->st);
  drop_graph(m);
  for (int li = 0; m->gl && li < m->nlayers; li++) {
    gl_t *g = &m->gl[li];
    if (g->xd) cudnnDestroyTensorDescriptor(g->xd);
    if (g->yd) cudnnDestroyTensorDescriptor(g->yd);
    if (g->bnd) cudnnDestroyTensorDescriptor(g->bnd);
    if (g->biasd) cudnnDestroyTensorDescriptor(g->biasd);
    if (g->wd) cudnnDestroyFilterDescriptor(g->wd);
    if (g->cd) cudnnDestroyConvolutionDescriptor(g->cd);
    if (g->pd) cudnnDestroyPoolingDescriptor(g->pd);
    cudaFree(g->saved);
    if (g->rnn) {
      rnn_t *r = g->rnn;
      if (r->desc) cudnnDestroyRNNDescriptor(r->desc);
      if (r->drop) cudnnDestroyDropoutDescriptor(r->drop);
      if (r->xd) cudnnDestroyRNNDataDescriptor(r->xd);
      if (r->yd) cudnnDestroyRNNDataDescriptor(r->yd);
      if (r->hd) cudnnDestroyTensorDescriptor(r->hd);
      cudaFree(r->drop_states);
      if (!r->alias) { cudaFree(r->wspace); cudaFree(r->dwspace); }
      cudaFree(r->y); cudaFree(r->dy); cudaFree(r->dx); cudaFree(r->reserve); cudaFree(r->dlens);
      free(r);
    }
  }
  cudaFree(m->params); cudaFree(m->grads); cudaFree(m->mom); cudaFree(m->bn_stats);
  cudaFree(m->decay); cudaFree(m->acts); cudaFree(m->dacts); cudaFree(m->ws); cudaFree(m->ones);
  cudaFree(m->probs); cudaFree(m->rowloss); cudaFree(m->rowtop); cudaFree(m->res_d);
  cudaFree(m->labels_d); cudaFree(m->targets_d); cudaFree(m->bad_d); cudaFree(m->blas_ws);
  cudaFreeHost(m->res_h); cudaFreeHost(m->stage); cudaFreeHost(m->stage_lab);
  cudaFreeHost(m->stage_tgt); cudaFreeHost(m->bad_h); cudaFreeHost(m->lens_h);
  if (m->blas) cublasDestroy(m->blas);
  if (m->dnn) cudnnDestroy(m->dnn);
  if (m->st) cudaStreamDestroy(m->st);
  free(m->layers); free(m->slots); free(m->pt); free(m->bns); free(m->soff); free(m->gl);
  free(m->dinit);
  free(m);
}

static int apply_math(nn_cuda_model_t *m) {
  BL(cublasSetMathMode(m->blas, (m->tf32 & NN_CUDA_TF32_CUBLAS) ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  for (int li = 0; li < m->nlayers; li++) {
    gl_t *g = &m->gl[li];
    g->nalgo = 0;
    g->next_algo = 0;
    if (g->rnn) TRY(rnn_set_desc(m, &m->layers[li], g->rnn));
  }
  return NN_OK;
}

int nn_cuda_set_tf32(nn_cuda_model_t *m, int tf32) {
  CK(cudaStreamSynchronize(m->st));
  drop_graph(m);
  m->graph_off = 0;
  m->tf32 = tf32 & NN_CUDA_TF32_ALL;
  return apply_math(m);
}

static int build(nn_cuda_model_t *m, const nn_model_t *c) {
  /* copy the graph */
  m->nlayers = c->nlayers; m->nslots = c->nslots; m->npt = c->nptensors; m->nbns = c->nbns;
  m->layers = (nn_layer_t *)malloc(sizeof(nn_layer_t) * (m->nlayers ? m->nlayers : 1));
  m->slots = (struct nn_slot *)malloc(sizeof(struct nn_slot) * (m->nslots ? m->nslots : 1));
  m->pt = (nn_param_t *)malloc(sizeof(nn_param_t) * (m->npt ? m->npt : 1));
  m->bns = (nn_bnstat_t *)malloc(sizeof(nn_bnstat_t) * (m->nbns ? m->nbns : 1));
  m->soff = (size_t *)malloc(sizeof(size_t) * (m->nslots ? m->nslots : 1));
  m->gl = (gl_t *)calloc(m->nlayers ? m->nlayers : 1, sizeof(gl_t));
  m->dinit = (unsigned char *)calloc((size_t)m->nslots + 1, 1);
  if (!m->layers || !m->slots || !m->pt || !m->bns || !m->soff || !m->gl || !m->dinit) {
    seterr(m, "out of memory");
    return NN_ERR_NOMEM;
  }
  memcpy(m->layers, c->layers, sizeof(nn_layer_t) * m->nlayers);
  memcpy(m->slots, c->slots, sizeof(struct nn_slot) * m->nslots);
  memcpy(m->pt, c->ptensors, sizeof(nn_param_t) * m->npt);
  if (m->nbns) memcpy(m->bns, c->bns, sizeof(nn_bnstat_t) * m->nbns);
  m->nparams = c->nparams; m->nbn = c->nbn_stats;
  m->bn_momentum = c->bn_momentum; m->bn_eps = c->bn_eps;
  m->task = c->task; m->nout = c->nout; m->in_ndim = c->in_ndim;
  memcpy(m->in_shape, c->in_shape, sizeof m->in_shape);
  snprintf(m->desc, sizeof m->desc, "%s", c->desc);
  m->in_per = slot_n(&m->slots[0]);
  /* device activation layout: slots only (saved state lives with the layers), 256-byte aligned */
  size_t off = 0;
  for (int s = 0; s < m->nslots; s++) {
    m->soff[s] = off;
    off += slot_n(&m->slots[s]) * (size_t)m->max_batch;
    off = (off + 63) & ~(size_t)63;
  }
  m->nacts = off ? off : 64;
  CK(cudaGetDevice(&m->device));
  CK(cudaStreamCreateWithFlags(&m->st, cudaStreamNonBlocking));
  DNN(cudnnCreate(&m->dnn));
  DNN(cudnnSetStream(m->dnn, m->st));
  BL(cublasCreate(&m->blas));
  BL(cublasSetStream(m->blas, m->st));
  size_t bws = (size_t)32 << 20;
  CK(cudaMalloc(&m->blas_ws, bws));
  BL(cublasSetWorkspace(m->blas, m->blas_ws, bws)); /* no allocation inside graph capture */
  size_t np = m->nparams ? m->nparams : 1, nb = m->nbn ? m->nbn : 1;
  CK(cudaMalloc(&m->params, np * sizeof(float)));
  CK(cudaMalloc(&m->grads, np * sizeof(float)));
  CK(cudaMalloc(&m->mom, np * sizeof(float)));
  CK(cudaMalloc(&m->bn_stats, nb * sizeof(float)));
  CK(cudaMalloc(&m->decay, np));
  CK(cudaMemset(m->grads, 0, np * sizeof(float)));
  CK(cudaMalloc(&m->acts, m->nacts * sizeof(float)));
  CK(cudaMalloc(&m->dacts, m->nacts * sizeof(float)));
  CK(cudaMemset(m->acts, 0, m->nacts * sizeof(float)));
  int MB = m->max_batch, K = m->nout > 0 ? m->nout : 1;
  CK(cudaMalloc(&m->ones, sizeof(float) * MB));
  k_fill<<<nblk(MB), 256, 0, m->st>>>(m->ones, 1.f, MB);
  KCHECK();
  CK(cudaMalloc(&m->probs, sizeof(float) * (size_t)MB * K));
  CK(cudaMalloc(&m->rowloss, sizeof(double) * MB));
  CK(cudaMalloc(&m->rowtop, sizeof(int) * 2 * MB));
  CK(cudaMalloc(&m->res_d, sizeof(res_t)));
  CK(cudaMemset(m->res_d, 0, sizeof(res_t)));
  CK(cudaMalloc(&m->labels_d, sizeof(int) * MB));
  CK(cudaMalloc(&m->targets_d, sizeof(float) * (size_t)MB * K));
  CK(cudaMalloc(&m->bad_d, sizeof(unsigned long long)));
  CK(cudaMallocHost(&m->res_h, sizeof(res_t)));
  CK(cudaMallocHost(&m->stage, sizeof(float) * m->in_per * MB));
  CK(cudaMallocHost(&m->stage_lab, sizeof(int) * MB));
  CK(cudaMallocHost(&m->stage_tgt, sizeof(float) * (size_t)MB * K));
  CK(cudaMallocHost(&m->bad_h, sizeof(unsigned long long)));
  CK(cudaMallocHost(&m->lens_h, sizeof(int) * MB));
  /* weight-decay flags per element (one kernel for the whole SGD step) */
  uint8_t *dh = (uint8_t *)calloc(np, 1);
  if (!dh) { seterr(m, "out of memory"); return NN_ERR_NOMEM; }
  for (int t = 0; t < m->npt; t++) memset(dh + m->pt[t].off, m->pt[t].decay ? 1 : 0, m->pt[t].n);
  cudaError_t e = cudaMemcpy(m->decay, dh, np, cudaMemcpyHostToDevice);
  free(dh);
  CK(e);
  /* parameters, momentum, BN statistics from the CPU model */
  CK(cudaMemcpy(m->params, c->params, m->nparams * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(m->mom, c->mom, m->nparams * sizeof(float), cudaMemcpyHostToDevice));
  if (m->nbn) CK(cudaMemcpy(m->bn_stats, c->bn_stats, m->nbn * sizeof(float), cudaMemcpyHostToDevice));
  TRY(grow_ws(m, (size_t)16 << 20));
  /* per-layer descriptors */
  for (int li = 0; li < m->nlayers; li++) {
    nn_layer_t *l = &m->layers[li];
    gl_t *g = &m->gl[li];
    switch (l->type) {
    case L_CONV: {
      struct nn_slot *si = &m->slots[l->in], *so = &m->slots[l->out];
      DNN(cudnnCreateTensorDescriptor(&g->xd));
      DNN(cudnnCreateTensorDescriptor(&g->yd));
      DNN(cudnnCreateFilterDescriptor(&g->wd));
      DNN(cudnnSetFilter4dDescriptor(g->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, so->c, si->c, l->k, l->k));
      DNN(cudnnCreateConvolutionDescriptor(&g->cd));
      DNN(cudnnSetConvolution2dDescriptor(g->cd, l->pad, l->pad, l->s, l->s, 1, 1, CUDNN_CROSS_CORRELATION,
                                          CUDNN_DATA_FLOAT));
      if (l->bias) {
        DNN(cudnnCreateTensorDescriptor(&g->biasd));
        DNN(cudnnSetTensor4dDescriptor(g->biasd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, so->c, 1, 1));
      }
      break;
    }
    case L_BN:
      DNN(cudnnCreateTensorDescriptor(&g->xd));
      DNN(cudnnCreateTensorDescriptor(&g->yd));
      DNN(cudnnCreateTensorDescriptor(&g->bnd));
      CK(cudaMalloc(&g->saved, sizeof(float) * 2 * m->slots[l->in].c));
      break;
    case L_MAXPOOL:
    case L_AVGPOOL:
      DNN(cudnnCreateTensorDescriptor(&g->xd));
      DNN(cudnnCreateTensorDescriptor(&g->yd));
      DNN(cudnnCreatePoolingDescriptor(&g->pd));
      /* max: gradient to one maximum per window, deterministically; average counts padding
       * (PyTorch's count_include_pad=True) */
      DNN(cudnnSetPooling2dDescriptor(g->pd, l->type == L_MAXPOOL ? CUDNN_POOLING_MAX_DETERMINISTIC
                                                                  : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                                      CUDNN_PROPAGATE_NAN, l->k, l->k, l->pad, l->pad, l->s, l->s));
      break;
    case L_LSTM: TRY(rnn_setup(m, li)); break;
    default: break;
    }
  }
  TRY(apply_math(m));
  CK(cudaStreamSynchronize(m->st));
  return NN_OK;
}

nn_cuda_model_t *nn_cuda_model_build(const nn_model_t *cpu, int max_batch, int tf32, char *err, size_t n) {
  if (!cpu || max_batch < 1) {
    if (err) snprintf(err, n, "nn_cuda_model_build: %s", !cpu ? "no CPU model" : "max_batch must be >= 1");
    return NULL;
  }
  char why[256];
  if (nn_cuda_available(why, sizeof why) < 1) {
    if (err) snprintf(err, n, "no CUDA device (%s)", why);
    return NULL;
  }
  nn_cuda_model_t *m = (nn_cuda_model_t *)calloc(1, sizeof *m);
  if (!m) {
    if (err) snprintf(err, n, "out of memory");
    return NULL;
  }
  m->max_batch = max_batch;
  m->tf32 = tf32 & NN_CUDA_TF32_ALL;
  m->training = 1;
  if (build(m, cpu) != NN_OK) {
    if (err) snprintf(err, n, "GPU model \"%s\": %s", cpu->desc, m->err[0] ? m->err : "failed");
    nn_cuda_model_free(m);
    return NULL;
  }
  return m;
}

void nn_cuda_zero_grad(nn_cuda_model_t *m) {
  cudaMemsetAsync(m->grads, 0, m->nparams * sizeof(float), m->st);
}

int nn_cuda_forward(nn_cuda_model_t *m, const nn_batch_t *b) {
  int T = 0;
  TRY(check_batch(m, b, &T));
  TRY(stage_batch(m, b, T));
  TRY(run_forward(m, 1));
  return finish_results(m);
}

int nn_cuda_backward(nn_cuda_model_t *m) {
  if (!m->have_fwd || m->N < 1) {
    seterr(m, "nn_cuda_backward without a forward");
    return NN_ERR_ARG;
  }
  if (!m->training)
    for (int li = 0; li < m->nlayers; li++)
      if (m->layers[li].type == L_BN) {
        seterr(m, "nn_cuda_backward in evaluation mode (BN uses running statistics); call "
                  "nn_cuda_set_training(m, 1)");
        return NN_ERR_ARG;
      }
  return run_backward(m);
}

int nn_cuda_step_graph(nn_cuda_model_t *m, const nn_batch_t *b) {
  int T = 0;
  TRY(check_batch(m, b, &T));
  int has_lstm = 0;
  for (int li = 0; li < m->nlayers; li++) has_lstm |= m->layers[li].type == L_LSTM;
  TRY(stage_batch(m, b, T));
  if (has_lstm || !m->training || m->graph_off || getenv("NN_CUDA_NO_GRAPH")) { /* eager */
    CK(cudaMemsetAsync(m->grads, 0, m->nparams * sizeof(float), m->st));
    TRY(run_forward(m, 1));
    TRY(finish_results(m));
    return run_backward(m);
  }
  if (m->gexec && m->gN == m->N) {
    CK(cudaGraphLaunch(m->gexec, m->st));
    return finish_results(m);
  }
  if (m->warmN != m->N) { /* first step at this batch size: eager, picks the algorithms */
    CK(cudaMemsetAsync(m->grads, 0, m->nparams * sizeof(float), m->st));
    TRY(run_forward(m, 1));
    TRY(run_backward(m));
    TRY(finish_results(m));
    m->warmN = m->N;
    return NN_OK;
  }
  /* second step: capture zero_grad + forward + backward, then replay it */
  int N = m->N;
  drop_graph(m);
  CK(cudaStreamSynchronize(m->st));
  CK(cudaStreamBeginCapture(m->st, cudaStreamCaptureModeThreadLocal));
  int rc = cudaMemsetAsync(m->grads, 0, m->nparams * sizeof(float), m->st) == cudaSuccess ? (int)NN_OK : (int)NN_CUDA_ERR;
  if (!rc) rc = run_forward(m, 1);
  if (!rc) rc = run_backward(m);
  cudaGraph_t gr = NULL;
  cudaError_t e = cudaStreamEndCapture(m->st, &gr);
  if (rc || e != cudaSuccess) { /* not capturable here: run this and later steps eagerly */
    if (gr) cudaGraphDestroy(gr);
    cudaGetLastError();
    fprintf(stderr, "nn_cuda: CUDA graph capture of the training step failed (%s); running eagerly\n",
            rc ? m->err : cudaGetErrorString(e));
    m->graph_off = 1;
    m->err[0] = 0;
    CK(cudaMemsetAsync(m->grads, 0, m->nparams * sizeof(float), m->st));
    TRY(run_forward(m, 1));
    TRY(finish_results(m));
    return run_backward(m);
  }
  m->graph = gr;
  CK(cudaGraphInstantiate(&m->gexec, m->graph, 0));
  m->gN = N;
  m->warmN = N;
  CK(cudaGraphLaunch(m->gexec, m->st));
  return finish_results(m);
}

int nn_cuda_output(nn_cuda_model_t *m, float *dst) {
  const nn_layer_t *l = &m->layers[m->nlayers - 1];
  int K = m->slots[l->in].c;
  CK(cudaStreamSynchronize(m->st));
  CK(cudaMemcpy(dst, ACT(m, l->in), sizeof(float) * (size_t)m->N * K, cudaMemcpyDeviceToHost));
  return NN_OK;
}

int nn_cuda_sgd_step_grad(nn_cuda_model_t *m, const float *dev_grad, const nn_sgd_t *o) {
  k_sgd<<<nblk(m->nparams), 256, 0, m->st>>>(m->params, m->mom, dev_grad, m->decay, m->nparams, o->lr,
                                              o->momentum, o->wd, o->wd_all, o->nesterov);
  KCHECK();
  return NN_OK;
}

int nn_cuda_sgd_step(nn_cuda_model_t *m, const nn_sgd_t *o) { return nn_cuda_sgd_step_grad(m, m->grads, o); }

int nn_cuda_check_finite(nn_cuda_model_t *m, long step, char *err, size_t n) {
  if (!isfinite(m->loss)) {
    if (err)
      snprintf(err, n, "step %ld: loss is %s; stopping (lower the learning rate or check the input data)", step,
               isnan(m->loss) ? "NaN" : "Inf");
    return NN_ERR_NONFINITE;
  }
  *m->bad_h = ~0ull;
  CK(cudaMemcpyAsync(m->bad_d, m->bad_h, sizeof *m->bad_h, cudaMemcpyHostToDevice, m->st));
  k_first_bad<<<nblk(m->nparams), 256, 0, m->st>>>(m->bad_d, m->grads, m->nparams);
  KCHECK();
  CK(cudaMemcpyAsync(m->bad_h, m->bad_d, sizeof *m->bad_h, cudaMemcpyDeviceToHost, m->st));
  CK(cudaStreamSynchronize(m->st));
  unsigned long long i = *m->bad_h;
  if (i == ~0ull) return NN_OK;
  float v = 0;
  CK(cudaMemcpy(&v, m->grads + i, sizeof v, cudaMemcpyDeviceToHost));
  for (int t = 0; t < m->npt; t++)
    if (i >= m->pt[t].off && i < m->pt[t].off + m->pt[t].n) {
      if (err)
        snprintf(err, n, "step %ld: %s in gradient of %s at index %zu; stopping (lower the learning rate or check the input data)",
                 step, isnan(v) ? "NaN" : "Inf", m->pt[t].name, (size_t)(i - m->pt[t].off));
      break;
    }
  return NN_ERR_NONFINITE;
}

int nn_cuda_copy_params_to_host(nn_cuda_model_t *m, nn_model_t *cpu) {
  if (cpu->nparams != m->nparams || cpu->nbn_stats != m->nbn) {
    seterr(m, "copy to host: CPU model \"%s\" has %zu parameters / %zu BN floats, GPU model %zu / %zu",
           cpu->desc, cpu->nparams, cpu->nbn_stats, m->nparams, m->nbn);
    return NN_ERR_ARG;
  }
  CK(cudaStreamSynchronize(m->st));
  CK(cudaMemcpy(cpu->params, m->params, m->nparams * sizeof(float), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(cpu->mom, m->mom, m->nparams * sizeof(float), cudaMemcpyDeviceToHost));
  if (m->nbn) CK(cudaMemcpy(cpu->bn_stats, m->bn_stats, m->nbn * sizeof(float), cudaMemcpyDeviceToHost));
  return NN_OK;
}

int nn_cuda_copy_params_from_host(nn_cuda_model_t *m, const nn_model_t *cpu) {
  if (cpu->nparams != m->nparams || cpu->nbn_stats != m->nbn) {
    seterr(m, "copy from host: CPU model \"%s\" has %zu parameters / %zu BN floats, GPU model %zu / %zu",
           cpu->desc, cpu->nparams, cpu->nbn_stats, m->nparams, m->nbn);
    return NN_ERR_ARG;
  }
  CK(cudaStreamSynchronize(m->st));
  CK(cudaMemcpy(m->params, cpu->params, m->nparams * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(m->mom, cpu->mom, m->nparams * sizeof(float), cudaMemcpyHostToDevice));
  if (m->nbn) CK(cudaMemcpy(m->bn_stats, cpu->bn_stats, m->nbn * sizeof(float), cudaMemcpyHostToDevice));
  return NN_OK;
}

int nn_cuda_grads_to_host(nn_cuda_model_t *m, float *dst) {
  CK(cudaStreamSynchronize(m->st));
  CK(cudaMemcpy(dst, m->grads, m->nparams * sizeof(float), cudaMemcpyDeviceToHost));
  return NN_OK;
}

int nn_cuda_bn_stats_to_host(nn_cuda_model_t *m, float *dst) {
  CK(cudaStreamSynchronize(m->st));
  if (m->nbn) CK(cudaMemcpy(dst, m->bn_stats, m->nbn * sizeof(float), cudaMemcpyDeviceToHost));
  return NN_OK;
}

int nn_cuda_bn_stats_from_host(nn_cuda_model_t *m, const float *src) {
  CK(cudaStreamSynchronize(m->st));
  if (m->nbn) CK(cudaMemcpy(m->bn_stats, src, m->nbn * sizeof(float), cudaMemcpyHostToDevice));
  return NN_OK;
}

}  // extern "C"
