/* nn.h: the trainer's numerical core on the CPU (library "nn", build/libnn.a).
 * Layers (forward/backward pairs over flat float arrays), models built from a one-line
 * description, SGD with momentum, LR schedules, NaN/Inf guards, and a small tensor-file format.
 * Independent of MPI.  See trainer/nn/README.md for the model descriptions.
 *
 * Memory.  A model owns ONE contiguous buffer each for parameters (m->params), gradients
 * (m->grads, same layout), momentum (m->mom, same layout), BN running statistics (m->bn_stats),
 * activations (m->acts) and activation gradients (m->dacts).  So the whole gradient is one
 * pointer + one length (m->grads, m->nparams): a partial allreduce reduces it in one call.
 * m->ptensors[i] describes parameter tensor i (torch name, shape, offset, weight-decay flag), in
 * the order of PyTorch's named_parameters() for the equivalent module (trainer/ref/make_ref.py).
 *
 * Layouts.  User-facing tensors are row-major NCHW (images), (N,T,D) (sequences), (N,F)
 * (features) and (N,K) (outputs).  Inside the model activations are channel-major "CNHW"
 * (channel c of every image contiguous: [C][N][H][W]) so that a convolution over the whole batch
 * is ONE im2col + ONE sgemm and batch norm reads contiguous channels.  The layer kernels below
 * take and produce CNHW; the input layer converts.
 *
 * Conventions.  Outputs first in argument lists; backward ACCUMULATES (+=) into every gradient
 * buffer (weights and inputs), so callers zero them first (nn_zero_grad; the model zeroes its
 * activation gradients itself).  Library functions never exit(): they return NN_OK (0) or a
 * negative nn_err_t and write a one-line message into err (or m->err).
 *
 * Threads.  GEMM runs on OpenBLAS's threads; elementwise/im2col/BN/pooling loops use OpenMP when
 * built with it.  A model is used by one thread at a time.
 */
#ifndef TRAINER_NN_H
#define TRAINER_NN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    NN_OK = 0,
    NN_ERR_ARG = -1,   /* bad argument or description */
    NN_ERR_SHAPE = -2, /* input shape does not match the model description */
    NN_ERR_NOMEM = -3,
    NN_ERR_NONFINITE = -4, /* NaN or Inf in loss or gradient */
    NN_ERR_IO = -5,        /* file missing, truncated or corrupt */
} nn_err_t;

/* Program-side check: prints file:line, the message and a hint, then exits (library never does). */
#define nnCheck(expr, msg, hint)                                                                             \
    do {                                                                                                     \
        int nn_rc_ = (expr);                                                                                 \
        if (nn_rc_ != 0) {                                                                                   \
            const char *nn_msg_ = (msg);                                                                     \
            fprintf(stderr, "%s:%d: %s failed (rc %d): %s\n  hint: %s\n", __FILE__, __LINE__, #expr, nn_rc_, \
                    nn_msg_ ? nn_msg_ : "", hint);                                                           \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

/* ------------------------------------------------------------------------------------------ */
/* Layer kernels (CPU).  Shapes in comments; all activations CNHW.                             */

/* 2-D convolution, any kernel/stride/padding; b may be NULL (no bias).
 * out (K,N,OH,OW) = w (K,C,kh,kw) * in (C,N,H,W) + b (K); OH = (H+2p-kh)/s+1.
 * 3x3 stride-1 pad-1 convolutions run a direct kernel (conv3.c) where the build has AVX-512,
 * others im2col + sgemm; NN_CONV=gemm in the environment forces im2col for all.
 * ws: workspace of nn_conv_ws_size() floats (packed weights or per-thread im2col chunks, and
 * weight-gradient partials; depends on the OpenMP thread count at the time of the call). */
size_t nn_conv_ws_size(int N, int C, int H, int W, int K, int kh, int kw, int s, int p);
void nn_conv_forward(float *out, float *ws, const float *in, const float *w, const float *b, int N, int C,
                     int H, int W, int K, int kh, int kw, int s, int p);
/* din may be NULL (input gradient not needed); dw/db accumulate; db may be NULL. */
void nn_conv_backward(float *din, float *dw, float *db, float *ws, const float *dout, const float *in,
                      const float *w, int N, int C, int H, int W, int K, int kh, int kw, int s, int p);
/* as nn_conv_backward, but din is written (=), not accumulated: its first consumer in a
 * backward pass needs no zeroed buffer */
void nn_conv_backward_set(float *din, float *dw, float *db, float *ws, const float *dout, const float *in,
                          const float *w, int N, int C, int H, int W, int K, int kh, int kw, int s, int p);

/* Batch norm over (C, M=N*H*W).  Training: batch statistics (biased variance for the output,
 * unbiased for the running variance, as PyTorch), saves mean/invstd (C each) and updates
 * running mean/var with momentum (run_mean may be NULL); eval (training=0): running statistics.
 * relu=1 fuses a following ReLU: out = max(0, bn(in)); its backward then takes that out
 * (relu_out, else NULL) and masks dout with out > 0. */
void nn_bn_forward(float *out, float *mean, float *invstd, float *run_mean, float *run_var, const float *in,
                   const float *gamma, const float *beta, int C, size_t M, float momentum, float eps,
                   int training, int relu);
void nn_bn_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *in,
                    const float *mean, const float *invstd, const float *gamma, int C, size_t M,
                    const float *relu_out);
/* as nn_bn_backward, but din is written (=), not accumulated */
void nn_bn_backward_set(float *din, float *dgamma, float *dbeta, const float *dout, const float *in,
                        const float *mean, const float *invstd, const float *gamma, int C, size_t M,
                        const float *relu_out);

void nn_relu_forward(float *out, const float *in, size_t n);
void nn_relu_backward(float *din, const float *dout, const float *out, size_t n);
/* out = a + b (relu=1: max(0, a + b)); backward da += dout, db += dout (masked by relu_out > 0
 * when relu_out is not NULL); da or db may be NULL. */
void nn_add_forward(float *out, const float *a, const float *b, size_t n, int relu);
void nn_add_backward(float *da, float *db, const float *dout, size_t n, const float *relu_out);
/* ResNet option-A shortcut: out (K,N,H/s,W/s) = in (C,N,H,W) subsampled by s, channels placed
 * at [(K-C)/2, (K-C)/2+C), zeros elsewhere (F.pad(x[:,:,::2,::2], (0,0,0,0,p,p))). */
void nn_padsub_forward(float *out, const float *in, int N, int C, int H, int W, int K, int s);
void nn_padsub_backward(float *din, const float *dout, int N, int C, int H, int W, int K, int s);

/* Max / average pooling (kernel k, stride s, padding p; average counts padding, as PyTorch's
 * count_include_pad=True); global average pooling: out (C,N) = mean over H*W. */
void nn_maxpool_forward(float *out, const float *in, int NC, int H, int W, int k, int s, int p);
void nn_maxpool_backward(float *din, const float *dout, const float *in, int NC, int H, int W, int k, int s,
                         int p);
void nn_avgpool_forward(float *out, const float *in, int NC, int H, int W, int k, int s, int p);
void nn_avgpool_backward(float *din, const float *dout, int NC, int H, int W, int k, int s, int p);
void nn_gap_forward(float *out, const float *in, int NC, int HW);
void nn_gap_backward(float *din, const float *dout, int NC, int HW);

/* Fully connected: out (O,N) = w (O,I) in (I,N) + b (O); b may be NULL; din may be NULL. */
void nn_fc_forward(float *out, const float *in, const float *w, const float *b, int N, int In, int O);
void nn_fc_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                    int N, int In, int O);

/* LSTM over whole sequences, one layer, PyTorch gate order (i,f,g,o), variable lengths in one
 * batch: for t >= len[n] the state of sample n is frozen, so hlast (H,N) = h at len[n]-1.
 * State buffers use (N, T+1, .) with row 0 of each sample = the zero initial state:
 *   xp (N,T+1,D) (filled by forward from x (N,T,D)), gates (N,T+1,4H) (activated),
 *   cs (N,T+1,H), hs (N,T+1,H); lens[n] in 1..T.
 * Backward: dgates (N,T+1,4H) and dxp (N,T+1,D) are workspaces, dh/dc (N,H) too; dx (N,T,D)
 * may be NULL; dwih (4H,D), dwhh (4H,H), dbih, dbhh (4H) accumulate. */
void nn_lstm_forward(float *hlast, float *xp, float *gates, float *cs, float *hs, const float *x,
                     const int *lens, const float *wih, const float *whh, const float *bih, const float *bhh,
                     int N, int T, int D, int H);
void nn_lstm_backward(float *dx, float *dwih, float *dwhh, float *dbih, float *dbhh, float *dgates,
                      float *dxp, float *dh, float *dc, const float *dhlast, const float *xp,
                      const float *gates, const float *cs, const float *hs, const int *lens, const float *wih,
                      const float *whh, int N, int T, int D, int H);

/* Softmax cross-entropy, mean over the batch; logits (K,N); probs (K,N) saved for backward;
 * top1/top5 = number of samples whose label is the arg-max / among the 5 largest (ties count
 * against).  Returns the loss.  Backward: dlogits += scale * (probs - onehot) / N. */
double nn_softmax_ce_forward(float *probs, int *top1, int *top5, const float *logits, const int *labels,
                             int N, int K);
void nn_softmax_ce_backward(float *dlogits, const float *probs, const int *labels, int N, int K, float scale);
/* Mean squared error over all N*K elements (torch MSELoss 'mean'); y (K,N), target (N,K). */
double nn_mse_forward(const float *y, const float *target, int N, int K);
void nn_mse_backward(float *dy, const float *y, const float *target, int N, int K, float scale);

/* ------------------------------------------------------------------------------------------ */
/* Models                                                                                      */

typedef struct {
    char name[64]; /* PyTorch name, e.g. "layer1.0.conv1.weight" */
    size_t off, n; /* offset into params/grads/mom, element count */
    int ndim, shape[4];
    int decay; /* 1: weight decay applies (conv/fc/lstm weights); 0: BN weight/bias, biases */
} nn_param_t;

typedef struct {
    char name[64]; /* e.g. "bn1" (torch module name); running_mean then running_var */
    size_t off;    /* offset into bn_stats: mean at off, var at off + c */
    int c;
} nn_bnstat_t;

typedef enum { NN_TASK_CLASSIFY = 0, NN_TASK_REGRESS = 1 } nn_task_t;

typedef struct nn_layer nn_layer_t; /* private (nn_impl.h) */

typedef struct nn_model {
    /* parameters: one buffer each; layout described by ptensors */
    float *params, *grads, *mom;
    size_t nparams;
    nn_param_t *ptensors;
    int nptensors;
    /* BN running statistics (buffers, not parameters; differ between ranks: average them before
   * evaluation/checkpoints): per BN layer running_mean[c] then running_var[c], in layer order */
    float *bn_stats;
    size_t nbn_stats;
    nn_bnstat_t *bns;
    int nbns;
    float bn_momentum, bn_eps; /* 0.1, 1e-5 as PyTorch */
    /* activations and their gradients (sized for max_batch), scratch workspace */
    float *acts, *dacts, *ws;
    size_t nacts, nws;
    /* description */
    char desc[256];
    nn_task_t task;
    int nout;        /* classes (classify) or outputs (regress) */
    int in_ndim;     /* 3: images (C,H,W); 2: sequences (T,D); 1: features (F) */
    int in_shape[3]; /* per-sample input shape; for sequences in_shape[0] = max steps */
    int max_batch;
    int training; /* 1 (default): BN uses batch statistics; 0: running statistics */
    /* results of the last nn_forward */
    int batch, steps; /* batch size, sequence steps used */
    double loss;
    int top1, top5; /* counts over the batch (classification) */
    char err[256];  /* message of the last error */
    /* private */
    nn_layer_t *layers;
    int nlayers, cap_layers;
    struct nn_slot *slots;
    int nslots, cap_slots;
    int cap_ptensors, cap_bns;
    int *lens; /* sequence lengths of the current batch */
    const int *labels;
    const float *targets;
    unsigned char *dinit; /* per slot: activation gradient zeroed in this backward */
    int ws_threads;       /* OpenMP threads the workspace is sized for */
} nn_model_t;

/* The batch handed to nn_forward.  x is row-major: images (n,C,H,W), sequences (n,t,D) with
 * lengths[n] in 1..t, features (n,F).  labels (classification) or targets (n,nout) (regression).
 * shape[]/ndim: optional per-sample shape of x (ndim 0 = take the model's); a mismatch with the
 * model is an NN_ERR_SHAPE error naming both shapes.  For sequences shape = {t, D}: t (steps of
 * this batch) may be anything up to the model's max steps. */
typedef struct {
    const float *x;
    const int *labels;
    const float *targets;
    const int *lengths;
    int n;
    int ndim, shape[3];
} nn_batch_t;

/* Build a model from a one-line description (see README.md), e.g.
 *   "resnet-cifar n=5 shortcut=A classes=10"        "resnet50 classes=1000 in=3x224x224"
 *   "lstm in=2048 hidden=512 steps=40 classes=101"  "hyperplane features=8192"
 *   "resnet-fmnist"
 * max_batch sizes the activation buffers; parameters are initialised deterministically from
 * seed (PyTorch-default distributions).  Returns NULL and a message in err on failure. */
nn_model_t *nn_model_build(const char *desc, int max_batch, uint64_t seed, char *err, size_t errlen);
void nn_model_free(nn_model_t *m);
/* (Re)initialise parameters from seed; zero momentum; BN running mean 0 / var 1. */
void nn_model_init(nn_model_t *m, uint64_t seed);
void nn_set_training(nn_model_t *m, int training);
/* One-line summary (parameters, activations, layers) into buf. */
void nn_model_summary(const nn_model_t *m, char *buf, size_t len);

/* Forward over a batch: loss into m->loss (and m->top1/top5).  Returns NN_OK or an error. */
int nn_forward(nn_model_t *m, const nn_batch_t *b);
/* The batch checks of nn_forward against a model's input description (shared with the CUDA
 * backend, whose model keeps a copy of it): batch size 1..max_batch, input shape (sequences:
 * steps 1..in_shape[0]), x / labels / targets / lengths present, labels in 0..nout-1, lengths in
 * 1..steps.  Returns NN_OK with *T = the batch's steps (0 for non-sequence inputs), or
 * NN_ERR_SHAPE / NN_ERR_ARG with a one-line message (naming desc) in err. */
int nn_check_batch(const nn_batch_t *b, int max_batch, int in_ndim, const int *in_shape, nn_task_t task,
                   int nout, const char *desc, int *T, char *err, size_t n);
/* Backward of the last forward: ACCUMULATES d loss / d params into m->grads. */
int nn_backward(nn_model_t *m);
void nn_zero_grad(nn_model_t *m);
/* Model output of the last forward as row-major (batch, nout) (logits or regression outputs). */
void nn_output(const nn_model_t *m, float *dst);
/* Parameter tensor by torch name (NULL if none). */
const nn_param_t *nn_param_find(const nn_model_t *m, const char *name);

/* ------------------------------------------------------------------------------------------ */
/* Optimiser: SGD with momentum, PyTorch's formulation
 *   g = gscale*grad + wd*w (only tensors with decay=1 unless wd_all);  v = mu*v + g;
 *   w -= lr * (nesterov ? g + mu*v : v)
 * gscale 0 stands for 1 (PyTorch's step; designated initialisers leave it 0).                 */
typedef struct {
    float lr, momentum, wd;
    int nesterov;
    int wd_all;   /* 1: weight decay also on BN parameters and biases (plain torch SGD) */
    float gscale; /* factor on the gradient (0: 1); set by nn_sgd_share */
} nn_sgd_t;
/* The gradient factor of o, its 0 read as 1. */
static inline float nn_sgd_gscale(const nn_sgd_t *o) { return o->gscale != 0.f ? o->gscale : 1.f; }
void nn_sgd_step(nn_model_t *m, const nn_sgd_t *o);
/* Same with an external gradient buffer of m->nparams floats (e.g. the allreduce result). */
void nn_sgd_step_grad(nn_model_t *m, const float *grad, const nn_sgd_t *o);
/* The step `in` advanced by a share s in (0, 1] of a whole step, for a gradient buffer that
 * carries s of a step's gradients (a partial round: |F|/P of them, divided by P). The momentum
 * decays by mu^s, the step's gradient is the buffer / s (the mean of what it carries) weighted
 * c = (1 - mu^s) / (1 - mu), weight decay likewise, and the lr is lr x s:
 *     v = mu^s v + c (grad / s + wd w);   w -= lr s v
 * so that n rounds of share 1/n move the weights and the velocity about as one whole step of
 * their gradients does, and the velocity keeps its scale whatever the rounds' shares: with a
 * whole step per round (PyTorch's), v holds s of a step's gradients per round and a change of
 * the round size (sync to solo) makes the next rounds step with a velocity built from larger
 * ones. s = 1 (or outside (0, 1)) returns `in` unchanged; mu = 0 is plain SGD at lr x grad. */
void nn_sgd_share(const nn_sgd_t *in, double s, nn_sgd_t *out);

/* LR schedule: lr(epoch) with the linear scaling rule (peak = base_lr * global_batch /
 * base_batch), linear warm-up from warmup_start_lr (<0: base_lr unscaled) to the peak over
 * warmup_epochs, then multiplied by gamma (0.1) at each milestone epoch passed. */
typedef struct {
    double base_lr;
    int base_batch, global_batch; /* 0 = no scaling */
    double warmup_epochs, warmup_start_lr;
    double milestones[16];
    int nmilestones;
    double gamma;
} nn_lr_sched_t;
void nn_lr_sched_default(nn_lr_sched_t *s, double base_lr);
double nn_lr_at(const nn_lr_sched_t *s, double epoch); /* epoch may be fractional */

/* ------------------------------------------------------------------------------------------ */
/* Guards: NN_ERR_NONFINITE if the loss or any gradient is NaN/Inf; the message names the step
 * and the tensor (first bad one) and the first bad index. */
int nn_check_finite(const nn_model_t *m, long step, char *err, size_t errlen);
int nn_check_finite_buf(const float *g, size_t n, const char *what, long step, char *err, size_t errlen);

/* ------------------------------------------------------------------------------------------ */
/* Tensor file (reference states, checkpoints).  Little-endian:
 *   "NNTF0001" (8 bytes), u32 count, then count records:
 *   u32 name_len, name bytes (no NUL), u32 ndim, u32 dims[ndim], float32 data[prod(dims)]  */
typedef struct {
    char name[96];
    int ndim, shape[6];
    size_t n;
    float *data;
} nn_tensor_t;
typedef struct {
    int count;
    nn_tensor_t *t;
} nn_tfile_t;
nn_tfile_t *nn_tfile_load(const char *path, char *err, size_t errlen);
const nn_tensor_t *nn_tfile_find(const nn_tfile_t *f, const char *name);
void nn_tfile_free(nn_tfile_t *f);
int nn_tfile_write(const char *path, const nn_tensor_t *ts, int count, char *err, size_t errlen);
/* Save / load all parameters + momentum + BN statistics by name. */
int nn_model_save(const nn_model_t *m, const char *path, char *err, size_t errlen);
int nn_model_load(nn_model_t *m, const char *path, char *err, size_t errlen);

/* Deterministic RNG (splitmix64-seeded xoshiro-like); used for initialisation and tests. */
typedef struct {
    uint64_t s;
} nn_rng_t;
void nn_rng_seed(nn_rng_t *r, uint64_t seed);
uint64_t nn_rng_u64(nn_rng_t *r);
float nn_rng_uniform(nn_rng_t *r, float lo, float hi);
float nn_rng_normal(nn_rng_t *r);

/* OpenBLAS picks its kernels when it is loaded, from the CPU model; a model it does not know
 * gets a generic SSE3 kernel ("Prescott") even on an AVX-512 CPU, several times slower.  Returns
 * the OPENBLAS_CORETYPE value that matches the vector extensions this CPU reports (SkylakeX for
 * AVX-512, Haswell for AVX2+FMA, Sandybridge for AVX) when the loaded core is one without
 * them, else NULL (detection fine, or not x86).  Takes effect only in a process started with
 * it in the environment. */
const char *nn_blas_coretype_hint(void);

/* ------------------------------------------------------------------------------------------ */
/* Step profile: wall and process CPU seconds and FLOPs of each kind of work (conv 3x3 direct,
 * 1x1 GEMM, stem, batch norm, LSTM gates, SGD update, ...) in forward / backward / update,
 * accumulated process-wide while enabled (nn_profile_enable(1), or NN_PROFILE=1 in the
 * environment, which also prints the table at nn_model_free). */
typedef struct {
    const char *kind;
    int nested;                      /* part of the kind above it (not added to the total) */
    double wall[3], cpu[3], flop[3]; /* [forward, backward, update], seconds / operations */
} nn_prof_row_t;
void nn_profile_enable(int on);
void nn_profile_reset(void);
/* fills up to max rows (kinds with any time, in a fixed order); returns the number of such kinds */
int nn_profile_rows(nn_prof_row_t *rows, int max);
/* the table, in ms per step (totals divided by steps) */
void nn_profile_print(FILE *f, const char *title, int steps);

#ifdef __cplusplus
}
#endif
#endif
