/* nn_cuda_impl.h: internal types and helpers of the CUDA backend (the .cu files of trainer/cuda), shared by
 * its translation units; not part of the API (that is nn_cuda.h).
 * Activations are NCHW on the device: slot s of the CPU model (per-sample shape c,h,w) is a
 * region of max_batch*c*h*w floats; for the actual batch N it holds (N,c,h,w) row-major.
 * Every device operation runs on the model's non-blocking stream m->st (never the legacy default
 * stream, which is not ordered with it); a synchronous result is an async call on m->st followed
 * by a wait on m->st (copy_sync). */
#ifndef TRAINER_CUDA_NN_CUDA_IMPL_H
#define TRAINER_CUDA_NN_CUDA_IMPL_H
#include "trainer/cuda/nn_cuda.h"
#include "trainer/cuda/replay_algo.h"
#include "trainer/nn/nn_impl.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

/* batch sizes whose convolution algorithms are kept per layer: training, the two evaluation sizes
 * (full and last partial batch) and spares; the entry of the captured graph is never evicted */
#define MAX_ALGO_N 8

namespace nncu {

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
    size_t wsize;   /* weight space bytes */
    float *wspace;  /* alias into params (alias=1) or own copy */
    float *dwspace; /* alias into grads or own */
    int alias;
    size_t moff[8], boff[8]; /* float offsets of the 8 matrices / biases inside the weight space */
    float *y, *dy, *dx;      /* y (N,T,H); dy zeros; dx (N,T,D) scratch */
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

} // namespace nncu
using namespace nncu;

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
    float *stage; /* pinned staging of the input (unless direct_in) */
    int *stage_lab;
    float *stage_tgt;
    size_t in_per; /* floats per sample of the input */
    unsigned long long *bad_d, *bad_h;
    gl_t *gl;
    unsigned char *dinit;
    /* batch */
    int N, T, have_fwd, fwd_training; /* fwd_training: m->training of the latest forward */
    double loss;
    int top1, top5;
    unsigned long long ws_gen; /* +1 per workspace reallocation (a captured graph holds the old one) */
    int warmed;                /* nn_cuda_warmup has run: a search or growth from now on is late */
    long searches, late_searches, grows, late_grows; /* nn_cuda_warm_stats */
    cudaEvent_t sgd_ev;    /* nn_cuda_sgd_step_grad: its kernel has read the caller's buffer */
    int debug;             /* NN_CUDA_DEBUG=1: wait for every kernel (asynchronous faults by name) */
    const char *cur_layer; /* layer being run (debug messages), NULL between passes */
    int sticky;            /* a failure of a void call (nn_cuda_zero_grad), returned by the next call */
    /* graph */
    cudaGraph_t graph;
    cudaGraphExec_t gexec;
    nn_cuda_graph_key_t gkey; /* what the captured graph depends on (replay_algo.h) */
    int warmN, graph_off;
    int dev;       /* the device the model lives on */
    int direct_in; /* 1: batches are copied straight from the caller's arrays (nn_cuda_set_direct_input) */
    nn_cuda_graph_stats_t gstats;
    char err[512];
};

namespace nncu {

void seterr(nn_cuda_model_t *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int kcheck(nn_cuda_model_t *m, const char *what, const char *file, int line);

#define CK(call)                                                                           \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            seterr(m, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            return NN_CUDA_ERR;                                                            \
        }                                                                                  \
    } while (0)
#define DNN(call)                                                                           \
    do {                                                                                    \
        cudnnStatus_t s_ = (call);                                                          \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                   \
            seterr(m, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudnnGetErrorString(s_)); \
            return NN_CUDA_ERR;                                                             \
        }                                                                                   \
    } while (0)
#define BL(call)                                                                          \
    do {                                                                                  \
        cublasStatus_t s_ = (call);                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                \
            seterr(m, "%s:%d: %s: cuBLAS status %d", __FILE__, __LINE__, #call, (int)s_); \
            return NN_CUDA_ERR;                                                           \
        }                                                                                 \
    } while (0)
#define TRY(x)             \
    do {                   \
        int r_ = (x);      \
        if (r_) return r_; \
    } while (0)
/* after a kernel launch: launch errors always; with m->debug also asynchronous faults, by name */
#define KCHECK(what) TRY(kcheck(m, what, __FILE__, __LINE__))

#define GRID_LOOP(i, n)                                                     \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)
static inline unsigned nblk(size_t n, int t = 256) {
    size_t b = (n + t - 1) / t;
    return (unsigned)(b > 65535u * 8 ? 65535u * 8 : (b ? b : 1));
}

static const float ONE = 1.f, ZERO = 0.f;
static inline float *ACT(nn_cuda_model_t *m, int s) { return m->acts + m->soff[s]; }
static inline float *DACT(nn_cuda_model_t *m, int s) { return m->dacts + m->soff[s]; }
static inline float *PAR(nn_cuda_model_t *m, int t) { return m->params + m->pt[t].off; }
static inline float *GRD(nn_cuda_model_t *m, int t) { return m->grads + m->pt[t].off; }
static inline size_t slot_n(const struct nn_slot *s) { return (size_t)s->c * s->h * s->w; }

/* ---- kernels.cu ---- */
__global__ void k_relu(float *out, const float *in, size_t n);
__global__ void k_relu_bwd(float *din, const float *dout, const float *out, size_t n, int acc);
__global__ void k_mask(float *d, const float *out, size_t n);
__global__ void k_add(float *out, const float *a, const float *b, size_t n, int relu);
__global__ void k_add_bwd(float *da, int acc_a, float *db, int acc_b, const float *dout,
                          const float *relu_out, size_t n);
__global__ void k_accum(float *dst, const float *src, size_t n);
__global__ void k_padsub(float *out, const float *in, int N, int C, int H, int W, int K, int s);
__global__ void k_padsub_bwd(float *din, const float *dout, int N, int C, int H, int W, int K, int s);
__global__ void k_gap(float *out, const float *in, int NC, int HW);
__global__ void k_gap_bwd(float *din, const float *dout, int NC, int HW, int acc);
__global__ void k_bias(float *out, const float *b, int N, int O);
__global__ void k_softmax_ce(float *probs, double *rowloss, int *rowtop, const float *logits,
                             const int *labels, int N, int K);
__global__ void k_finish(res_t *res, const double *rowloss, const int *rowtop, int N, double div);
__global__ void k_softmax_ce_bwd(float *dlogits, const float *probs, const int *labels, int N, int K, float s,
                                 int acc);
__global__ void k_mse_rows(double *rowloss, const float *y, const float *t, int N, int K);
__global__ void k_mse_bwd(float *dy, const float *y, const float *t, size_t n, float s, int acc);
__global__ void k_sgd(float *w, float *v, const float *g, const uint8_t *decay, size_t n, float lr, float mu,
                      float wd, int wd_all, int nesterov, float gs);
__global__ void k_first_bad(unsigned long long *bad, const float *g, size_t n);
__global__ void k_fill(float *p, float v, size_t n);

/* ---- layers.cu: workspace, descriptors, algorithms, convolution, fully connected ---- */
/* the shared cuDNN workspace to >= need bytes for `who` (a layer's name), stream-ordered; a
 * reallocation makes a captured graph stale (ws_gen) */
int grow_ws(nn_cuda_model_t *m, size_t need, const char *who);
/* *p (*size bytes) to >= need bytes, stream-ordered (cudaFreeAsync + cudaMallocAsync on m->st: no
 * device-wide synchronisation); after the warm-up one line on stderr names who, what and the
 * sizes (what: "cuDNN workspace", "LSTM reserve") */
int grow_async(nn_cuda_model_t *m, void **p, size_t *size, size_t need, const char *who, const char *what);
int set_descs(nn_cuda_model_t *m, int li, int N);    /* descriptors of layer li for batch N */
int dslot_acc(nn_cuda_model_t *m, int s, float **p); /* d(slot) for an accumulating writer */
int dslot_ow(nn_cuda_model_t *m, int s, float **p);  /* d(slot) for an overwriting writer: acc? */
int conv_fwd(nn_cuda_model_t *m, int li);
int conv_bwd(nn_cuda_model_t *m, int li, const float *dout);
int fc_fwd(nn_cuda_model_t *m, nn_layer_t *l);
int fc_bwd(nn_cuda_model_t *m, nn_layer_t *l, const float *dout);
/* ---- lstm.cu ---- */
int rnn_set_desc(nn_cuda_model_t *m, nn_layer_t *l, rnn_t *r);
int rnn_setup(nn_cuda_model_t *m, int li);
void rnn_free(rnn_t *r);
int lstm_fwd(nn_cuda_model_t *m, int li);
int lstm_bwd(nn_cuda_model_t *m, int li, const float *dout);
/* ---- drivers.cu ---- */
int run_forward(nn_cuda_model_t *m, int from); /* layers [from, nlayers), input on the device */
int run_backward(nn_cuda_model_t *m);
/* ---- staging.cu ---- */
int check_batch(nn_cuda_model_t *m, const nn_batch_t *b, int *T);
int stage_batch(nn_cuda_model_t *m, const nn_batch_t *b, int T);
int finish_results(nn_cuda_model_t *m);
/* bytes dst <- src on m->st, returns when done (the one way to copy synchronously) */
int copy_sync(nn_cuda_model_t *m, void *dst, const void *src, size_t bytes);
/* ---- step.cu / setup.cu ---- */
void drop_graph(nn_cuda_model_t *m);

} // namespace nncu
#endif
