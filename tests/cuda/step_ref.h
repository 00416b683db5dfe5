/* step_ref.h: one training step at a time from identical state, the CPU backend's results carried
 * to the GPU host in a reference file (test_cuda_layers.c; docs/DESIGN.md#8-the-device-path).
 *
 * For each model of the list and each of SR_STEPS steps s:
 *   state   sr_state(): the model's parameters from nn_model_init(seed 100 + s), momentum and BN
 *           running statistics drawn from seed 7000 + s.  Made by the same code on both hosts and
 *           checked by its hash (a host whose libm rounds an initialiser differently is a FAIL,
 *           not a silent difference), so the reference file need not carry 2 x nparams floats.
 *   batch   sr_batch(): drawn from (model, step, draw).  Two rules (docs/DESIGN.md#gpu-correctness):
 *           no sample's logits within SR_TIE_K (1e-4) x its max |logit| of a tie at the top-1 or
 *           top-5 boundary (the counts are compared exactly): redraw, at most SR_DRAWS draws,
 *           then a FAIL (the margin is never widened).  A model without ReLU layers (the LSTMs,
 *           the hyperplane model) keeps its first such draw.  A model with ReLU layers keeps,
 *           of SR_RELU_DRAWS draws, the first with the fewest ReLU pre-activations within the
 *           fp32 margin of zero (sr_relu_margins: what another summation order can move them;
 *           a 1e-4 margin cannot be met, a layer of M values has about 2 x 1e-4 x M that close),
 *           and the reference carries that count per layer, training and eval forward: a unit
 *           that flips moves the output by at most the margin and adds or removes one term of
 *           the back-propagated gradient, and the device half prints the counts so that a
 *           failure of the model's fixed bound can be read.
 *   CPU     (here, --make-ref) training forward (output, loss, top-1/5), backward (gradients),
 *           SGD (parameters and momentum after), the BN statistics after, and an eval forward
 *           from the same state s.  Gradient tensors, parameters and momentum are carried at
 *           SR_SAMPLE elements per tensor at most (all of a smaller tensor; otherwise positions
 *           drawn from the tensor's index: the norm-wise error over 2048 positions estimates the
 *           whole tensor's within a few per cent, and a layer that is wrong is wrong everywhere;
 *           2048 keeps the file near 6 MB of the 64 MiB the build folder may carry).
 *   device  (the GPU host) loads state s, runs the same step and compares each quantity with a
 *           fixed bound (the model's tol: 1e-4 for the conditioned models).  A gradient tensor
 *           is n/a where the CPU's own is rounding noise (rms below SR_NA_RMS x the whole
 *           gradient's rms: zero in exact arithmetic); every n/a must be in the model's named
 *           list with its reason, any other is a FAIL.
 * The parameter update is judged against its own size: ||p_dev - p_cpu|| <= tol x ||p_cpu -
 * p_before|| + 2^-23 x ||p_cpu|| (the last term: the float rounding of the stored result, which
 * is not the backend's error). */
#ifndef STEP_REF_H
#define STEP_REF_H
#include "common/hash.h"
#include "tests/nn/nn_test_util.h"
#include "trainer/nn/nn_impl.h"
#include <stdint.h>
#include <stdlib.h>

#define SR_STEPS      2
#define SR_TIE_K      sr_tie_k()
#define SR_SIGMAS     4.0
#define SR_DRAWS      64
#define SR_RELU_DRAWS 16
#define SR_SAMPLE     2048
#define SR_NA_RMS     1e-5
#define SR_MAGIC      0x3266657270657473ull /* "stepref2" */

/* SR_MARGIN_K in the environment overrides the conditioned margin of the logits' near ties (to
 * measure what a margin costs in draws, and to show a draw that cannot clear failing) */
static double sr_tie_k(void) {
    const char *e = getenv("SR_MARGIN_K");
    return e ? atof(e) : 1e-4;
}
typedef struct {
    const char *tensor, *why;
} sr_na_t;
typedef struct {
    const char *desc;
    int N, T, nesterov;
    double tol;    /* fp32 bound of every check of the model */
    sr_na_t na[3]; /* the gradient tensors that may be n/a, each with its reason */
} sr_model_t;

/* what one step of one backend gives (g, p, mom: the sampled positions, tensor after tensor) */
typedef struct {
    float loss;
    int top1, top5;
    float *out, *eval, *bn, *g, *p, *mom;
    unsigned char *na; /* per tensor (reference only) */
    int32_t *nz;       /* per ReLU layer, training forward then eval forward: how many
                        * pre-activations within the fp32 margin of zero (reference only) */
} sr_step_t;

/* a layer with a ReLU on its output (standalone, fused into BN, fused into add) */
static int sr_is_relu(const nn_layer_t *l) {
    return l->type == L_RELU || ((l->type == L_BN || l->type == L_ADD) && l->relu);
}
static int sr_relu_count(const nn_model_t *m) {
    int n = 0;
    for (int li = 0; li < m->nlayers; li++) n += sr_is_relu(&m->layers[li]);
    return n;
}

static size_t sr_tensor_count(const nn_model_t *m, int t) {
    size_t n = m->ptensors[t].n;
    return n < SR_SAMPLE ? n : SR_SAMPLE;
}
static size_t sr_sample_count(const nn_model_t *m) {
    size_t k = 0;
    for (int t = 0; t < m->nptensors; t++) k += sr_tensor_count(m, t);
    return k;
}
/* the positions carried of tensor t (offsets into the flat buffer) */
static void sr_positions(const nn_model_t *m, int t, size_t *pos) {
    size_t n = m->ptensors[t].n, k = sr_tensor_count(m, t);
    nn_rng_t r;
    nn_rng_seed(&r, 0x5eed0000ull + (uint64_t)t);
    for (size_t i = 0; i < k; i++) pos[i] = m->ptensors[t].off + (k == n ? i : nn_rng_u64(&r) % n);
}
/* src at the carried positions of every tensor into dst (sr_sample_count floats) */
static void sr_gather(const nn_model_t *m, const float *src, float *dst) {
    size_t *pos = malloc(sizeof(size_t) * SR_SAMPLE), k = 0;
    for (int t = 0; t < m->nptensors; t++) {
        size_t kt = sr_tensor_count(m, t);
        sr_positions(m, t, pos);
        for (size_t i = 0; i < kt; i++) dst[k++] = src[pos[i]];
    }
    free(pos);
}

static void sr_step_alloc(sr_step_t *s, const nn_model_t *m, int N) {
    size_t ny = (size_t)N * m->nout, k = sr_sample_count(m);
    memset(s, 0, sizeof *s);
    s->out = calloc(ny, sizeof(float));
    s->eval = calloc(ny, sizeof(float));
    s->bn = calloc(m->nbn_stats + 1, sizeof(float));
    s->g = calloc(k, sizeof(float));
    s->p = calloc(k, sizeof(float));
    s->mom = calloc(k, sizeof(float));
    s->na = calloc(m->nptensors, 1);
    s->nz = calloc(2 * (size_t)sr_relu_count(m) + 1, sizeof(int32_t));
}
static void sr_step_free(sr_step_t *s) {
    free(s->out);
    free(s->eval);
    free(s->bn);
    free(s->g);
    free(s->p);
    free(s->mom);
    free(s->na);
    free(s->nz);
}

/* The state before step s (see the header); returns its hash */
static uint64_t sr_state(nn_model_t *m, int s) {
    nn_model_init(m, 100 + (uint64_t)s);
    nn_rng_t r;
    nn_rng_seed(&r, 7000 + (uint64_t)s);
    nt_fill(&r, m->mom, m->nparams, -1e-2f, 1e-2f);
    for (int i = 0; i < m->nbns; i++) {
        float *rs = m->bn_stats + m->bns[i].off;
        nt_fill(&r, rs, m->bns[i].c, -0.2f, 0.2f);
        nt_fill(&r, rs + m->bns[i].c, m->bns[i].c, 0.5f, 1.5f);
    }
    uint64_t h = hash_fnv1a64(HASH_FNV1A64_BASIS, m->params, m->nparams * sizeof(float));
    h = hash_fnv1a64(h, m->mom, m->nparams * sizeof(float));
    return hash_fnv1a64(h, m->bn_stats, m->nbn_stats * sizeof(float));
}

typedef struct {
    float *x, *tg;
    int *lab, *len;
    nn_batch_t b;
    uint64_t hash;
} sr_batch_t;

/* draw `draw` of step s's batch for model desc (N samples; T: the LSTM's longest, 0: the model's) */
static void sr_batch(sr_batch_t *bt, const nn_model_t *m, const char *desc, int N, int T, int s, int draw) {
    nn_rng_t r;
    nn_rng_seed(&r,
                hash_fnv1a64(HASH_FNV1A64_BASIS, desc, strlen(desc)) ^ ((uint64_t)s << 32) ^ (uint64_t)draw);
    if (m->in_ndim == 2 && T <= 0) T = m->in_shape[0];
    size_t per = m->in_ndim == 3   ? (size_t)m->in_shape[0] * m->in_shape[1] * m->in_shape[2]
                 : m->in_ndim == 2 ? (size_t)T * m->in_shape[1]
                                   : (size_t)m->in_shape[0];
    bt->x = malloc(sizeof(float) * per * N);
    bt->tg = malloc(sizeof(float) * (size_t)N * m->nout);
    bt->lab = malloc(sizeof(int) * N);
    bt->len = malloc(sizeof(int) * N);
    nt_fill(&r, bt->x, per * N, -1, 1);
    nt_fill(&r, bt->tg, (size_t)N * m->nout, -1, 1);
    for (int n = 0; n < N; n++) {
        bt->lab[n] = (int)(nn_rng_u64(&r) % (uint64_t)m->nout);
        bt->len[n] = 1 + (int)(nn_rng_u64(&r) % (uint64_t)(T > 0 ? T : 1));
    }
    if (N > 1) bt->len[0] = T; /* at least one full-length sequence */
    memset(&bt->b, 0, sizeof bt->b);
    bt->b.x = bt->x;
    bt->b.n = N;
    if (m->task == NN_TASK_CLASSIFY)
        bt->b.labels = bt->lab;
    else
        bt->b.targets = bt->tg;
    if (m->in_ndim == 2) {
        bt->b.lengths = bt->len;
        bt->b.ndim = 2;
        bt->b.shape[0] = T;
        bt->b.shape[1] = m->in_shape[1];
    }
    uint64_t h = hash_fnv1a64(HASH_FNV1A64_BASIS, bt->x, sizeof(float) * per * N);
    h = hash_fnv1a64(h, bt->tg, sizeof(float) * N * m->nout);
    h = hash_fnv1a64(h, bt->lab, sizeof(int) * N);
    bt->hash = hash_fnv1a64(h, bt->len, sizeof(int) * N);
}
static void sr_batch_free(sr_batch_t *bt) {
    free(bt->x);
    free(bt->tg);
    free(bt->lab);
    free(bt->len);
}

/* The fp32 margin of every ReLU layer, relative to the layer's max |x| (rel[li]; 0 for the other
 * layers).  A sum of K float terms differs between two summation orders by about
 * sqrt(K) u |x|max (u = 2^-24; tests/nn/nn_ref_check.h's header), and the roundings of the layers
 * on the way to it are independent, so they add in quadrature: rel = SR_SIGMAS x sqrt(sum of the
 * fan-ins K on the longest path from the input) x u.  K: a convolution's k x k x C_in, an fc
 * layer's inputs, an average pool's window, global average pooling's H x W, an add 1, a BN 4 (its
 * batch mean over N x H x W values errs by about u |x|max: the sum's error is divided by the
 * count again), a max pool 0 (exact). */
static void sr_relu_margins(const nn_model_t *m, double *rel) {
    double *k2 = calloc((size_t)m->nslots, sizeof(double));
    for (int li = 0; li < m->nlayers; li++) {
        const nn_layer_t *l = &m->layers[li];
        rel[li] = 0;
        if (l->out < 0) continue;
        const struct nn_slot *si = l->in >= 0 ? &m->slots[l->in] : NULL;
        double in = l->in >= 0 ? k2[l->in] : 0, add = 0;
        switch (l->type) {
        case L_CONV: add = (double)l->k * l->k * si->c; break;
        case L_FC: add = (double)nn_slot_size(si); break;
        case L_BN: add = 4; break; /* the batch mean and variance err by ~u |x|max, not sqrt(N H W) u */
        case L_ADD:
            in = fmax(in, k2[l->in2]);
            add = 1;
            break;
        case L_AVGPOOL: add = (double)l->k * l->k; break;
        case L_GAP: add = (double)si->h * si->w; break;
        case L_LSTM: add = (double)l->lstm_d + l->lstm_h; break;
        default: break;
        }
        if (l->type == L_RELU) rel[li] = SR_SIGMAS * sqrt(in) * 0x1p-24;
        if (l->type != L_RELU && sr_is_relu(l)) rel[li] = SR_SIGMAS * sqrt(in + add) * 0x1p-24;
        k2[l->out] = in + add;
    }
    free(k2);
}

/* After a CPU forward at batch N: nz[j] (j: the model's j-th ReLU layer) = how many of its
 * pre-activations lie within its fp32 margin (sr_relu_margins) of zero, an exact zero excluded
 * (0 + 0 behind a zero-initialised BN is 0 on both hosts); returns their sum.  *ties (unless
 * NULL) = how many samples have logits closer than SR_TIE_K x the sample's max |logit| at the
 * top-1 or top-5 boundary (the counts are compared exactly), the first named in what. */
static long sr_margin(const nn_model_t *m, int N, int32_t *nz, int *ties, char *what, size_t n) {
    long bad = 0;
    int j = 0;
    double *rel = malloc(sizeof(double) * (size_t)m->nlayers);
    sr_relu_margins(m, rel);
    for (int li = 0; li < m->nlayers; li++) {
        const nn_layer_t *l = &m->layers[li];
        if (!sr_is_relu(l)) continue;
        const struct nn_slot *si = &m->slots[l->in];
        size_t M = (size_t)N * nn_slot_size(si), hw = (size_t)si->h * si->w;
        const float *x = NN_ACT(m, l->in), *x2 = l->type == L_ADD ? NN_ACT(m, l->in2) : NULL;
        const float *mean = l->type == L_BN ? m->acts + l->ws : NULL, *inv = mean ? mean + si->c : NULL;
        const float *gam = mean ? NN_P(m, l->p) : NULL, *bet = mean ? NN_P(m, l->p + 1) : NULL;
        double mx = 0;
        long cnt = 0;
        for (int pass = 0; pass < 2; pass++)
            for (size_t i = 0; i < M; i++) {
                float v = x[i];
                if (x2) v = x[i] + x2[i];
                if (mean) {
                    size_t c = i / ((size_t)N * hw);
                    float a = inv[c] * gam[c], b = bet[c] - mean[c] * a;
                    v = x[i] * a + b;
                }
                double av = fabs((double)v);
                if (pass == 0)
                    mx = av > mx ? av : mx;
                else
                    cnt += av > 0 && av < rel[li] * mx;
            }
        nz[j++] = (int32_t)cnt;
        bad += cnt;
    }
    free(rel);
    if (ties) *ties = 0;
    if (what) snprintf(what, n, "-");
    if (ties && m->task == NN_TASK_CLASSIFY) {
        int K = m->nout;
        float *y = malloc(sizeof(float) * (size_t)N * K), *s = malloc(sizeof(float) * K);
        nn_output(m, y);
        for (int i = 0; i < N; i++) {
            double mx = 0;
            for (int k = 0; k < K; k++) {
                s[k] = y[(size_t)i * K + k];
                mx = fabs(s[k]) > mx ? fabs(s[k]) : mx;
            }
            for (int a = 0; a < K; a++) /* sorted descending, K is small */
                for (int b = a + 1; b < K; b++)
                    if (s[b] > s[a]) {
                        float t = s[a];
                        s[a] = s[b];
                        s[b] = t;
                    }
            for (int k = 1; k < K && k <= 5; k++)
                if ((k == 1 || k == 5) && s[k - 1] - s[k] < SR_TIE_K * mx) {
                    if (!*ties && what)
                        snprintf(what, n, "logits of sample %d: a near tie at the top-%d boundary", i, k);
                    ++*ties;
                }
        }
        free(y);
        free(s);
    }
    return bad;
}
#endif
