/* nn_impl.h: private structures of the nn library (model graph, builder). */
#ifndef TRAINER_NN_IMPL_H
#define TRAINER_NN_IMPL_H

#include "trainer/nn/nn.h"
#include <cblas.h>
#include <string.h>

/* An activation slot: per-sample shape (c,h,w), region of c*h*w*max_batch floats in acts/dacts
 * at off.  Layout CNHW for the actual batch n: channel stride n*h*w. */
struct nn_slot {
    size_t off;
    int c, h, w;
};

typedef enum {
    L_INPUT,
    L_CONV,
    L_BN,
    L_RELU,
    L_ADD,
    L_PADSUB,
    L_MAXPOOL,
    L_AVGPOOL,
    L_GAP,
    L_FC,
    L_LSTM,
    L_SOFTMAX_CE,
    L_MSE
} nn_ltype_t;

struct nn_layer {
    nn_ltype_t type;
    char name[48];
    int in, in2, out;    /* slots (-1 = none) */
    int p;               /* first parameter tensor (-1 = none) */
    int bn;              /* BN stats index */
    int k, s, pad, bias; /* conv/pool geometry */
    int need_din;        /* input gradient needed */
    size_t ws;           /* offset into acts of saved state (BN mean/invstd, LSTM state, probs) */
    size_t ws2;          /* offset into m->ws scratch (LSTM backward) */
    int lstm_t, lstm_d, lstm_h;
    int relu; /* BN / add: fused ReLU on the output */
    int init; /* conv weight init: 0 torch default, 1 kaiming_normal fan_out (ResNets) */
};

static inline size_t nn_slot_size(const struct nn_slot *s) { return (size_t)s->c * s->h * s->w; }
#define NN_ACT(m, i)  ((m)->acts + (m)->slots[i].off)
#define NN_DACT(m, i) ((m)->dacts + (m)->slots[i].off)
#define NN_P(m, i)    ((m)->params + (m)->ptensors[i].off)
#define NN_G(m, i)    ((m)->grads + (m)->ptensors[i].off)

/* vectorizable expf/sigmoid/tanh (|rel err| < 2e-7 for exp on [-87, 88]) */
static inline float nn_vexp(float x) {
    x = x < -87.f ? -87.f : (x > 88.f ? 88.f : x);
    float n = __builtin_rintf(x * 1.44269504088896341f);
    float r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
    float p =
        1.f + r * (1.f + r * (0.5f + r * (0.16666667163372040f +
                                          r * (0.041666645556688f +
                                               r * (0.008333361148834229f +
                                                    r * (0.0013887310039252043f + r * 0.00019841270113f))))));
    union {
        int i;
        float f;
    } u;
    u.i = ((int)n + 127) << 23;
    return p * u.f;
}
static inline float nn_vsigmoid(float x) { return 1.f / (1.f + nn_vexp(-x)); }
static inline float nn_vtanh(float x) {
    float a = x < 0 ? -x : x, e = nn_vexp(-2.f * a), t = (1.f - e) / (1.f + e);
    return x < 0 ? -t : t;
}

/* builder (model.c) */
int nnb_slot(nn_model_t *m, int c, int h, int w);
nn_layer_t *nnb_layer(nn_model_t *m, nn_ltype_t t, const char *name, int in, int out);
int nnb_param(nn_model_t *m, const char *name, int decay, int ndim, int d0, int d1, int d2, int d3);
size_t nnb_saved(nn_model_t *m, size_t n); /* extra region in acts (x max_batch not applied) */
void nnb_scratch(nn_model_t *m, size_t n); /* grow scratch requirement */
int nnb_finish(nn_model_t *m);
/* convenience builders: return the output slot, or -1 (message in m->err) */
int nnb_conv(nn_model_t *m, const char *name, int in, int cout, int k, int s, int p, int bias);
int nnb_bn(nn_model_t *m, const char *name, int in, int relu); /* relu: fused ReLU */
int nnb_relu(nn_model_t *m, int in);
int nnb_add(nn_model_t *m, int a, int b, int relu);
int nnb_padsub(nn_model_t *m, int in, int cout, int s);
int nnb_pool(nn_model_t *m, nn_ltype_t t, int in, int k, int s, int p);
int nnb_gap(nn_model_t *m, int in);
int nnb_fc(nn_model_t *m, const char *name, int in, int out, int bias);
int nnb_lstm(nn_model_t *m, const char *name, int in, int T, int D, int H);
int nnb_loss(nn_model_t *m, nn_ltype_t t, int in);

/* sgemm split over OpenMP threads (gemm.c); ta/tb: transpose A/B; row-major */
void nn_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *C, int ldc);
void nn_gemm_init(void); /* OpenBLAS to one thread when OpenMP drives the parallelism */

/* direct 3x3 stride-1 pad-1 convolution (conv3.c; AVX-512 builds, else applies() is 0).
 * ws: nn_conv3_ws_size(N, C, H, W, K) floats (packed weights, the filter gradient's tap masks). */
int nn_conv3_applies(int kh, int kw, int s, int p);
size_t nn_conv3_ws_size(int N, int C, int H, int W, int K);
void nn_conv3_forward(float *out, float *ws, const float *in, const float *w, const float *b, int N, int C,
                      int H, int W, int K);
/* dw += filter gradient; din += data gradient (set: din = it) unless din is NULL */
void nn_conv3_backward(float *din, int set, float *dw, float *ws, const float *dout, const float *in,
                       const float *w, int N, int C, int H, int W, int K);

/* step profile (prof.c): kinds of work; phase 0 forward, 1 backward, 2 update.  Kinds from
 * NP_IM2COL on are parts of other kinds ("of which"), timed by thread 0 inside parallel loops. */
enum {
    NP_INPUT,
    NP_CONV3,
    NP_CONV3S,
    NP_CONV1,
    NP_CONV1S,
    NP_STEM,
    NP_CONVX,
    NP_BN,
    NP_BNRELU,
    NP_RELU,
    NP_ADD,
    NP_SHORTCUT,
    NP_MAXPOOL,
    NP_AVGPOOL,
    NP_FC,
    NP_LSTM_PROJ,
    NP_LSTM_REC,
    NP_LSTM_GATES,
    NP_LSTM_WGRAD,
    NP_LSTM_OTHER,
    NP_LOSS,
    NP_DZERO,
    NP_ZERO_GRAD,
    NP_UPDATE,
    NP_IM2COL,
    NP_WSUM,
    NP_NKINDS
};
typedef struct {
    double wall, cpu;
} nn_tick_t;
extern int nn_prof_enabled; /* -1 not yet read from NN_PROFILE, 0 off, 1 on */
nn_tick_t nn_prof_start(void);
void nn_prof_end(int kind, int phase, nn_tick_t t0, double flop);

/* nn_add_backward with each input gradient written (set_x = 1) or accumulated (act.c) */
void nn_add_backward_x(float *da, int set_a, float *db, int set_b, const float *dout, size_t n,
                       const float *relu_out);

/* model zoo (zoo.c) */
int nn_zoo_build(nn_model_t *m, const char *desc);
/* init (init.c) */
void nn_init_params(nn_model_t *m, uint64_t seed);

#endif
