/* model.c: model graph (layers over activation slots), builder, forward/backward driver. */
#include "trainer/nn/nn_impl.h"
#include <stdarg.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int cur_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* the profile kind of a layer (prof.c); LSTM layers time their own parts */
static int layer_kind(const nn_layer_t *l) {
    switch (l->type) {
    case L_INPUT: return NP_INPUT;
    case L_CONV:
        if (l->k == 3) return l->s == 1 && l->pad == 1 ? NP_CONV3 : NP_CONV3S;
        if (l->k == 1) return l->s == 1 ? NP_CONV1 : NP_CONV1S;
        return l->k >= 7 ? NP_STEM : NP_CONVX;
    case L_BN: return l->relu ? NP_BNRELU : NP_BN;
    case L_RELU: return NP_RELU;
    case L_ADD: return NP_ADD;
    case L_PADSUB: return NP_SHORTCUT;
    case L_MAXPOOL: return NP_MAXPOOL;
    case L_AVGPOOL:
    case L_GAP: return NP_AVGPOOL;
    case L_FC: return NP_FC;
    case L_LSTM: return -1;
    case L_SOFTMAX_CE:
    case L_MSE: return NP_LOSS;
    }
    return -1;
}

/* multiply-adds x 2 of a convolution / fully connected layer's forward pass (backward: twice
 * that with the input gradient, once without) */
static double layer_flop(const nn_model_t *m, const nn_layer_t *l, int N) {
    const struct nn_slot *si = &m->slots[l->in], *so = &m->slots[l->out];
    if (l->type == L_CONV) return 2.0 * N * so->h * so->w * so->c * si->c * l->k * l->k;
    if (l->type == L_FC) return 2.0 * N * si->c * so->c;
    return 0;
}

static void seterr(nn_model_t *m, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
}

static int grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) return -1;
    memset((char *)q + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *p = q;
    *cap = nc;
    return 0;
}

/* Activation regions start on 64-byte boundaries (one cache line = one 16-float vector) in
 * 64-byte aligned buffers, so a kernel's vector loads at a region's start do not straddle two
 * cache lines. */
enum { ALIGN_FLOATS = 16 };
static size_t align_up(size_t n) { return (n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS; }
static float *alloc_aligned(size_t n) {
    void *p = NULL;
    return posix_memalign(&p, ALIGN_FLOATS * sizeof(float), (n ? n : 1) * sizeof(float)) ? NULL : p;
}

int nnb_slot(nn_model_t *m, int c, int h, int w) {
    if (grow((void **)&m->slots, &m->cap_slots, m->nslots + 1, sizeof(struct nn_slot))) return -1;
    struct nn_slot *s = &m->slots[m->nslots];
    s->c = c;
    s->h = h;
    s->w = w;
    m->nacts = align_up(m->nacts);
    s->off = m->nacts;
    m->nacts += (size_t)c * h * w * m->max_batch;
    return m->nslots++;
}

size_t nnb_saved(nn_model_t *m, size_t n) {
    m->nacts = align_up(m->nacts);
    size_t off = m->nacts;
    m->nacts += n;
    return off;
}

void nnb_scratch(nn_model_t *m, size_t n) {
    if (n > m->nws) m->nws = n;
}

nn_layer_t *nnb_layer(nn_model_t *m, nn_ltype_t t, const char *name, int in, int out) {
    if (grow((void **)&m->layers, &m->cap_layers, m->nlayers + 1, sizeof(nn_layer_t))) return NULL;
    nn_layer_t *l = &m->layers[m->nlayers++];
    memset(l, 0, sizeof *l);
    l->type = t;
    snprintf(l->name, sizeof l->name, "%s", name ? name : "");
    l->in = in;
    l->in2 = -1;
    l->out = out;
    l->p = -1;
    l->bn = -1;
    l->need_din = in >= 0 && in != 0; /* slot 0 is the model input */
    return l;
}

int nnb_param(nn_model_t *m, const char *name, int decay, int ndim, int d0, int d1, int d2, int d3) {
    if (grow((void **)&m->ptensors, &m->cap_ptensors, m->nptensors + 1, sizeof(nn_param_t))) return -1;
    nn_param_t *p = &m->ptensors[m->nptensors];
    snprintf(p->name, sizeof p->name, "%s", name);
    int d[4] = {d0, d1, d2, d3};
    p->ndim = ndim;
    p->n = 1;
    for (int i = 0; i < 4; i++) {
        p->shape[i] = i < ndim ? d[i] : 0;
        if (i < ndim) p->n *= (size_t)d[i];
    }
    p->decay = decay;
    p->off = m->nparams;
    m->nparams += p->n;
    return m->nptensors++;
}

static int chk(nn_model_t *m, int in) {
    if (in < 0 || in >= m->nslots) {
        if (!m->err[0]) seterr(m, "builder: bad input slot %d", in);
        return -1;
    }
    return 0;
}

static int conv_od(int x, int k, int s, int p) { return (x + 2 * p - k) / s + 1; }

int nnb_conv(nn_model_t *m, const char *name, int in, int cout, int k, int s, int p, int bias) {
    if (chk(m, in)) return -1;
    struct nn_slot si = m->slots[in];
    int oh = conv_od(si.h, k, s, p), ow = conv_od(si.w, k, s, p);
    if (oh < 1 || ow < 1) {
        seterr(m, "%s: kernel %d stride %d pad %d does not fit input %dx%dx%d", name, k, s, p, si.c, si.h,
               si.w);
        return -1;
    }
    int out = nnb_slot(m, cout, oh, ow);
    nn_layer_t *l = nnb_layer(m, L_CONV, name, in, out);
    char nm[96];
    snprintf(nm, sizeof nm, "%s.weight", name);
    l->p = nnb_param(m, nm, 1, 4, cout, si.c, k, k);
    if (bias) {
        snprintf(nm, sizeof nm, "%s.bias", name);
        nnb_param(m, nm, 0, 1, cout, 0, 0, 0);
    }
    l->k = k;
    l->s = s;
    l->pad = p;
    l->bias = bias;
    nnb_scratch(m, nn_conv_ws_size(m->max_batch, si.c, si.h, si.w, cout, k, k, s, p));
    return out;
}

int nnb_bn(nn_model_t *m, const char *name, int in, int relu) {
    if (chk(m, in)) return -1;
    struct nn_slot si = m->slots[in];
    int out = nnb_slot(m, si.c, si.h, si.w);
    nn_layer_t *l = nnb_layer(m, L_BN, name, in, out);
    char nm[96];
    snprintf(nm, sizeof nm, "%s.weight", name);
    l->p = nnb_param(m, nm, 0, 1, si.c, 0, 0, 0);
    snprintf(nm, sizeof nm, "%s.bias", name);
    nnb_param(m, nm, 0, 1, si.c, 0, 0, 0);
    l->ws = nnb_saved(m, 2 * (size_t)si.c);
    if (grow((void **)&m->bns, &m->cap_bns, m->nbns + 1, sizeof(nn_bnstat_t))) return -1;
    nn_bnstat_t *b = &m->bns[m->nbns];
    snprintf(b->name, sizeof b->name, "%s", name);
    b->c = si.c;
    b->off = m->nbn_stats;
    m->nbn_stats += 2 * (size_t)si.c;
    l->bn = m->nbns++;
    l->relu = relu;
    return out;
}

int nnb_relu(nn_model_t *m, int in) {
    if (chk(m, in)) return -1;
    struct nn_slot si = m->slots[in];
    int out = nnb_slot(m, si.c, si.h, si.w);
    return nnb_layer(m, L_RELU, "relu", in, out) ? out : -1;
}

int nnb_add(nn_model_t *m, int a, int b, int relu) {
    if (chk(m, a) || chk(m, b)) return -1;
    struct nn_slot sa = m->slots[a], sb = m->slots[b];
    if (sa.c != sb.c || sa.h != sb.h || sa.w != sb.w) {
        seterr(m, "residual add: shapes %dx%dx%d and %dx%dx%d differ", sa.c, sa.h, sa.w, sb.c, sb.h, sb.w);
        return -1;
    }
    int out = nnb_slot(m, sa.c, sa.h, sa.w);
    nn_layer_t *l = nnb_layer(m, L_ADD, "add", a, out);
    l->in2 = b;
    l->relu = relu;
    return out;
}

int nnb_padsub(nn_model_t *m, int in, int cout, int s) {
    if (chk(m, in)) return -1;
    struct nn_slot si = m->slots[in];
    int out = nnb_slot(m, cout, (si.h - 1) / s + 1, (si.w - 1) / s + 1);
    nn_layer_t *l = nnb_layer(m, L_PADSUB, "shortcutA", in, out);
    l->s = s;
    return out;
}

int nnb_pool(nn_model_t *m, nn_ltype_t t, int in, int k, int s, int p) {
    if (chk(m, in)) return -1;
    struct nn_slot si = m->slots[in];
    int oh = conv_od(si.h, k, s, p), ow = conv_od(si.w, k, s, p);
    if (oh < 1 || ow < 1) {
        seterr(m, "pool: kernel %d stride %d does not fit input %dx%dx%d", k, s, si.c, si.h, si.w);
        return -1;
    }
    int out = nnb_slot(m, si.c, oh, ow);
    nn_layer_t *l = nnb_layer(m, t, t == L_MAXPOOL ? "maxpool" : "avgpool", in, out);
    l->k = k;
    l->s = s;
    l->pad = p;
    return out;
}

int nnb_gap(nn_model_t *m, int in) {
    if (chk(m, in)) return -1;
    int out = nnb_slot(m, m->slots[in].c, 1, 1);
    return nnb_layer(m, L_GAP, "gap", in, out) ? out : -1;
}

int nnb_fc(nn_model_t *m, const char *name, int in, int nout, int bias) {
    if (chk(m, in)) return -1;
    struct nn_slot si = m->slots[in];
    if (si.h != 1 || si.w != 1) {
        seterr(m, "%s: fully connected input must be a vector, got %dx%dx%d (add a pooling layer)", name,
               si.c, si.h, si.w);
        return -1;
    }
    int out = nnb_slot(m, nout, 1, 1);
    nn_layer_t *l = nnb_layer(m, L_FC, name, in, out);
    char nm[96];
    snprintf(nm, sizeof nm, "%s.weight", name);
    l->p = nnb_param(m, nm, 1, 2, nout, si.c, 0, 0);
    if (bias) {
        snprintf(nm, sizeof nm, "%s.bias", name);
        nnb_param(m, nm, 0, 1, nout, 0, 0, 0);
    }
    l->bias = bias;
    return out;
}

int nnb_lstm(nn_model_t *m, const char *name, int in, int T, int D, int H) {
    if (chk(m, in)) return -1;
    int out = nnb_slot(m, H, 1, 1);
    nn_layer_t *l = nnb_layer(m, L_LSTM, name, in, out);
    char nm[96];
    snprintf(nm, sizeof nm, "%s.weight_ih_l0", name);
    l->p = nnb_param(m, nm, 1, 2, 4 * H, D, 0, 0);
    snprintf(nm, sizeof nm, "%s.weight_hh_l0", name);
    nnb_param(m, nm, 1, 2, 4 * H, H, 0, 0);
    snprintf(nm, sizeof nm, "%s.bias_ih_l0", name);
    nnb_param(m, nm, 0, 1, 4 * H, 0, 0, 0);
    snprintf(nm, sizeof nm, "%s.bias_hh_l0", name);
    nnb_param(m, nm, 0, 1, 4 * H, 0, 0, 0);
    l->lstm_t = T;
    l->lstm_d = D;
    l->lstm_h = H;
    size_t R = (size_t)m->max_batch * (T + 1);
    l->ws = nnb_saved(m, R * ((size_t)D + 4 * H + 2 * H)); /* xp, gates, cs, hs */
    nnb_scratch(m, R * 4 * H + (l->need_din ? R * D : 0) + 2 * (size_t)m->max_batch * H);
    return out;
}

int nnb_loss(nn_model_t *m, nn_ltype_t t, int in) {
    if (chk(m, in)) return -1;
    struct nn_slot si = m->slots[in];
    nn_layer_t *l = nnb_layer(m, t, t == L_MSE ? "mse" : "softmax_ce", in, -1);
    if (!l) return -1;
    if (t == L_SOFTMAX_CE) l->ws = nnb_saved(m, (size_t)si.c * m->max_batch);
    m->nout = si.c;
    m->task = t == L_MSE ? NN_TASK_REGRESS : NN_TASK_CLASSIFY;
    return 0;
}

int nnb_finish(nn_model_t *m) {
    m->ws_threads = cur_threads();
    size_t np = m->nparams ? m->nparams : 1;
    m->params = calloc(np, sizeof(float));
    m->grads = calloc(np, sizeof(float));
    m->mom = calloc(np, sizeof(float));
    m->bn_stats = calloc(m->nbn_stats ? m->nbn_stats : 1, sizeof(float));
    m->acts = alloc_aligned(m->nacts);
    m->dacts = alloc_aligned(m->nacts);
    m->ws = alloc_aligned(m->nws);
    m->lens = calloc((size_t)m->max_batch, sizeof(int));
    m->dinit = calloc((size_t)m->nslots + 1, 1);
    if (!m->params || !m->grads || !m->mom || !m->bn_stats || !m->acts || !m->dacts || !m->ws || !m->lens ||
        !m->dinit) {
        seterr(m, "out of memory: %zu parameters, %zu activation floats, %zu scratch floats", m->nparams,
               m->nacts, m->nws);
        return NN_ERR_NOMEM;
    }
    return NN_OK;
}

nn_model_t *nn_model_build(const char *desc, int max_batch, uint64_t seed, char *err, size_t errlen) {
    nn_model_t *m = calloc(1, sizeof *m);
    if (!m) {
        if (err) snprintf(err, errlen, "out of memory");
        return NULL;
    }
    nn_gemm_init();
    m->max_batch = max_batch;
    m->training = 1;
    m->bn_momentum = 0.1f;
    m->bn_eps = 1e-5f;
    snprintf(m->desc, sizeof m->desc, "%s", desc ? desc : "");
    int rc = NN_OK;
    if (max_batch < 1) {
        seterr(m, "max_batch must be >= 1 (got %d)", max_batch);
        rc = NN_ERR_ARG;
    }
    if (rc == NN_OK) rc = nn_zoo_build(m, m->desc);
    if (rc == NN_OK) rc = nnb_finish(m);
    if (rc != NN_OK) {
        if (err) snprintf(err, errlen, "model \"%s\": %s", m->desc, m->err[0] ? m->err : "failed");
        nn_model_free(m);
        return NULL;
    }
    nn_model_init(m, seed);
    return m;
}

void nn_model_free(nn_model_t *m) {
    if (!m) return;
    if (nn_prof_enabled > 0 && getenv("NN_PROFILE")) {
        nn_profile_print(stderr, m->desc, 1);
        nn_profile_reset();
    }
    free(m->params);
    free(m->grads);
    free(m->mom);
    free(m->bn_stats);
    free(m->acts);
    free(m->dacts);
    free(m->ws);
    free(m->lens);
    free(m->dinit);
    free(m->ptensors);
    free(m->bns);
    free(m->layers);
    free(m->slots);
    free(m);
}

void nn_model_init(nn_model_t *m, uint64_t seed) {
    nn_init_params(m, seed);
    memset(m->mom, 0, m->nparams * sizeof(float));
    memset(m->grads, 0, m->nparams * sizeof(float));
    for (int i = 0; i < m->nbns; i++) {
        float *rm = m->bn_stats + m->bns[i].off;
        for (int c = 0; c < m->bns[i].c; c++) {
            rm[c] = 0.f;
            rm[m->bns[i].c + c] = 1.f;
        }
    }
}

void nn_set_training(nn_model_t *m, int training) { m->training = training ? 1 : 0; }
void nn_zero_grad(nn_model_t *m) {
    nn_tick_t t0 = nn_prof_start();
    /* blocks of 64 Ki floats over the threads: one core's stores do not saturate the memory */
    const size_t blk = (size_t)1 << 16;
    long nb = (long)((m->nparams + blk - 1) / blk);
#pragma omp parallel for schedule(static) if (nb > 1)
    for (long b = 0; b < nb; b++) {
        size_t a = (size_t)b * blk, e = a + blk < m->nparams ? a + blk : m->nparams;
        memset(m->grads + a, 0, (e - a) * sizeof(float));
    }
    nn_prof_end(NP_ZERO_GRAD, 2, t0, 0);
}

const nn_param_t *nn_param_find(const nn_model_t *m, const char *name) {
    for (int i = 0; i < m->nptensors; i++)
        if (!strcmp(m->ptensors[i].name, name)) return &m->ptensors[i];
    return NULL;
}

void nn_model_summary(const nn_model_t *m, char *buf, size_t len) {
    snprintf(buf, len,
             "%s: %zu parameters in %d tensors, %d layers, %d BN layers, %.1f MB activations "
             "(x2 with gradients), %.1f MB scratch, max batch %d",
             m->desc, m->nparams, m->nptensors, m->nlayers, m->nbns, m->nacts * 4.0 / 1e6, m->nws * 4.0 / 1e6,
             m->max_batch);
}

static void shape_str(char *b, size_t n, int nd, const int *s) {
    int k = 0;
    b[0] = 0;
    for (int i = 0; i < nd && k < (int)n; i++) k += snprintf(b + k, n - k, i ? "x%d" : "%d", s[i]);
}

int nn_check_batch(const nn_batch_t *b, int max_batch, int in_ndim, const int *in_shape, nn_task_t task,
                   int nout, const char *desc, int *Tout, char *err, size_t n) {
    int N = b->n;
    if (N < 1 || N > max_batch) {
        snprintf(err, n, "batch size %d outside 1..%d (max_batch of the model)", N, max_batch);
        return NN_ERR_SHAPE;
    }
    int T = in_ndim == 2 ? in_shape[0] : 0;
    if (b->ndim) {
        int ok = b->ndim == in_ndim;
        for (int i = 0; ok && i < b->ndim; i++)
            ok = in_ndim == 2 && i == 0 ? (b->shape[0] >= 1 && b->shape[0] <= in_shape[0])
                                        : b->shape[i] == in_shape[i];
        if (!ok) {
            char s1[64], s2[64];
            shape_str(s1, sizeof s1, b->ndim, b->shape);
            shape_str(s2, sizeof s2, in_ndim, in_shape);
            snprintf(err, n, "input shape %s does not match the model's %s%s (\"%s\")", s1, s2,
                     in_ndim == 2 ? " (steps up to the first)" : "", desc);
            return NN_ERR_SHAPE;
        }
        if (in_ndim == 2) T = b->shape[0];
    }
    if (!b->x || (task == NN_TASK_CLASSIFY && !b->labels) || (task == NN_TASK_REGRESS && !b->targets) ||
        (in_ndim == 2 && !b->lengths)) {
        if (in_ndim == 2 && !b->lengths)
            snprintf(err, n, "sequence batch lacks lengths");
        else
            snprintf(err, n, "batch lacks x, %s", task == NN_TASK_CLASSIFY ? "labels" : "targets");
        return NN_ERR_ARG;
    }
    if (task == NN_TASK_CLASSIFY)
        for (int i = 0; i < N; i++)
            if (b->labels[i] < 0 || b->labels[i] >= nout) {
                snprintf(err, n, "label %d of sample %d outside 0..%d", b->labels[i], i, nout - 1);
                return NN_ERR_ARG;
            }
    if (in_ndim == 2)
        for (int i = 0; i < N; i++)
            if (b->lengths[i] < 1 || b->lengths[i] > T) {
                snprintf(err, n, "sequence length %d of sample %d outside 1..%d", b->lengths[i], i, T);
                return NN_ERR_SHAPE;
            }
    *Tout = T;
    return NN_OK;
}

/* the convolution workspace depends on the thread count: regrow it if that changed */
static int ensure_scratch(nn_model_t *m) {
    int T = cur_threads();
    if (T == m->ws_threads) return NN_OK;
    size_t need = m->nws;
    for (int li = 0; li < m->nlayers; li++) {
        nn_layer_t *l = &m->layers[li];
        if (l->type != L_CONV) continue;
        struct nn_slot *si = &m->slots[l->in];
        size_t n =
            nn_conv_ws_size(m->max_batch, si->c, si->h, si->w, m->slots[l->out].c, l->k, l->k, l->s, l->pad);
        if (n > need) need = n;
    }
    if (need > m->nws) {
        float *w = alloc_aligned(need); /* scratch: no contents to keep */
        if (!w) {
            seterr(m, "out of memory growing the workspace to %zu floats for %d threads", need, T);
            return NN_ERR_NOMEM;
        }
        free(m->ws);
        m->ws = w;
        m->nws = need;
    }
    m->ws_threads = T;
    return NN_OK;
}

int nn_forward(nn_model_t *m, const nn_batch_t *b) {
    int N = b->n;
    if (ensure_scratch(m)) return NN_ERR_NOMEM;
    int T = 0, rc = nn_check_batch(b, m->max_batch, m->in_ndim, m->in_shape, m->task, m->nout, m->desc, &T,
                                   m->err, sizeof m->err);
    if (rc) return rc;
    if (m->in_ndim == 2)
        for (int n = 0; n < N; n++) m->lens[n] = b->lengths[n];
    m->batch = N;
    m->steps = T;
    m->labels = b->labels;
    m->targets = b->targets;
    for (int li = 0; li < m->nlayers; li++) {
        nn_layer_t *l = &m->layers[li];
        struct nn_slot *si = l->in >= 0 ? &m->slots[l->in] : NULL;
        struct nn_slot *so = l->out >= 0 ? &m->slots[l->out] : NULL;
        float *out = so ? NN_ACT(m, l->out) : NULL;
        const float *in = si ? NN_ACT(m, l->in) : NULL;
        size_t HW = si ? (size_t)si->h * si->w : 0;
        nn_tick_t t0 = nn_prof_start();
        switch (l->type) {
        case L_INPUT: {
            size_t per = nn_slot_size(so);
            if (m->in_ndim == 2) {
                memcpy(out, b->x, sizeof(float) * N * T * m->in_shape[1]);
                break;
            }
            size_t hw = (size_t)so->h * so->w;
            for (int c = 0; c < so->c; c++)
                for (int n = 0; n < N; n++)
                    memcpy(out + ((size_t)c * N + n) * hw, b->x + (size_t)n * per + c * hw,
                           sizeof(float) * hw);
            break;
        }
        case L_CONV:
            nn_conv_forward(out, m->ws, in, NN_P(m, l->p), l->bias ? NN_P(m, l->p + 1) : NULL, N, si->c,
                            si->h, si->w, so->c, l->k, l->k, l->s, l->pad);
            break;
        case L_BN: {
            float *rs = m->bn_stats + m->bns[l->bn].off;
            nn_bn_forward(out, m->acts + l->ws, m->acts + l->ws + si->c, rs, rs + si->c, in, NN_P(m, l->p),
                          NN_P(m, l->p + 1), si->c, N * HW, m->bn_momentum, m->bn_eps, m->training, l->relu);
            break;
        }
        case L_RELU: nn_relu_forward(out, in, N * nn_slot_size(si)); break;
        case L_ADD: nn_add_forward(out, in, NN_ACT(m, l->in2), N * nn_slot_size(si), l->relu); break;
        case L_PADSUB: nn_padsub_forward(out, in, N, si->c, si->h, si->w, so->c, l->s); break;
        case L_MAXPOOL: nn_maxpool_forward(out, in, si->c * N, si->h, si->w, l->k, l->s, l->pad); break;
        case L_AVGPOOL: nn_avgpool_forward(out, in, si->c * N, si->h, si->w, l->k, l->s, l->pad); break;
        case L_GAP: nn_gap_forward(out, in, si->c * N, (int)HW); break;
        case L_FC:
            nn_fc_forward(out, in, NN_P(m, l->p), l->bias ? NN_P(m, l->p + 1) : NULL, N, si->c, so->c);
            break;
        case L_LSTM: {
            size_t R = (size_t)N * (T + 1);
            int D = l->lstm_d, H = l->lstm_h;
            float *xp = m->acts + l->ws, *g = xp + R * D, *cs = g + R * 4 * H, *hs = cs + R * H;
            nn_lstm_forward(out, xp, g, cs, hs, in, m->lens, NN_P(m, l->p), NN_P(m, l->p + 1),
                            NN_P(m, l->p + 2), NN_P(m, l->p + 3), N, T, D, H);
            break;
        }
        case L_SOFTMAX_CE:
            m->loss = nn_softmax_ce_forward(m->acts + l->ws, &m->top1, &m->top5, in, b->labels, N, si->c);
            break;
        case L_MSE:
            m->loss = nn_mse_forward(in, b->targets, N, si->c);
            m->top1 = m->top5 = 0;
            break;
        }
        nn_prof_end(layer_kind(l), 0, t0, l->type == L_CONV || l->type == L_FC ? layer_flop(m, l, N) : 0);
    }
    return NN_OK;
}

/* activation gradient of slot s, zeroed on first use in this backward unless the caller writes
 * it whole (*fresh = 1 then; fresh may be NULL) */
static float *dslot_w(nn_model_t *m, int s, int *fresh) {
    if (fresh) *fresh = !m->dinit[s];
    if (fresh && *fresh) {
        m->dinit[s] = 1;
        return NN_DACT(m, s);
    }
    if (!m->dinit[s]) {
        float *d = NN_DACT(m, s);
        size_t n = nn_slot_size(&m->slots[s]) * m->batch, blk = 1 << 16;
#pragma omp parallel for schedule(static) if (n > 4 * blk)
        for (size_t i = 0; i < n; i += blk) memset(d + i, 0, sizeof(float) * (n - i < blk ? n - i : blk));
        m->dinit[s] = 1;
    }
    return NN_DACT(m, s);
}
static float *dslot(nn_model_t *m, int s) { return dslot_w(m, s, NULL); }

int nn_backward(nn_model_t *m) {
    int N = m->batch, T = m->steps;
    if (N < 1) {
        seterr(m, "nn_backward without a forward");
        return NN_ERR_ARG;
    }
    if (!m->training) {
        for (int li = 0; li < m->nlayers; li++)
            if (m->layers[li].type == L_BN) {
                seterr(m, "nn_backward in evaluation mode (BN uses running statistics); call "
                          "nn_set_training(m, 1)");
                return NN_ERR_ARG;
            }
    }
    if (ensure_scratch(m)) return NN_ERR_NOMEM;
    memset(m->dinit, 0, (size_t)m->nslots);
    for (int li = m->nlayers - 1; li >= 0; li--) {
        nn_layer_t *l = &m->layers[li];
        if (l->type == L_INPUT) continue;
        struct nn_slot *si = &m->slots[l->in];
        struct nn_slot *so = l->out >= 0 ? &m->slots[l->out] : NULL;
        const float *in = NN_ACT(m, l->in);
        nn_tick_t t0 = nn_prof_start();
        const float *dout = so ? dslot(m, l->out) : NULL;
        /* convolutions, batch norm and residual adds write their input gradients whole: no
         * zeroing first */
        int fresh = 0, fresh2 = 0, sets = l->type == L_CONV || l->type == L_BN || l->type == L_ADD;
        float *din = l->need_din ? dslot_w(m, l->in, sets ? &fresh : NULL) : NULL;
        float *din2 = l->type == L_ADD && l->in2 != 0 ? dslot_w(m, l->in2, &fresh2) : NULL;
        nn_prof_end(NP_DZERO, 1, t0, 0);
        size_t HW = (size_t)si->h * si->w;
        t0 = nn_prof_start();
        switch (l->type) {
        case L_INPUT: break;
        case L_CONV:
            (fresh ? nn_conv_backward_set : nn_conv_backward)(
                din, NN_G(m, l->p), l->bias ? NN_G(m, l->p + 1) : NULL, m->ws, dout, in, NN_P(m, l->p), N,
                si->c, si->h, si->w, so->c, l->k, l->k, l->s, l->pad);
            break;
        case L_BN:
            (fresh ? nn_bn_backward_set : nn_bn_backward)(
                din, NN_G(m, l->p), NN_G(m, l->p + 1), dout, in, m->acts + l->ws, m->acts + l->ws + si->c,
                NN_P(m, l->p), si->c, N * HW, l->relu ? NN_ACT(m, l->out) : NULL);
            break;
        case L_RELU:
            if (din) nn_relu_backward(din, dout, NN_ACT(m, l->out), N * nn_slot_size(si));
            break;
        case L_ADD: {
            nn_add_backward_x(din, fresh, din2, fresh2, dout, N * nn_slot_size(si),
                              l->relu ? NN_ACT(m, l->out) : NULL);
            break;
        }
        case L_PADSUB:
            if (din) nn_padsub_backward(din, dout, N, si->c, si->h, si->w, so->c, l->s);
            break;
        case L_MAXPOOL:
            if (din) nn_maxpool_backward(din, dout, in, si->c * N, si->h, si->w, l->k, l->s, l->pad);
            break;
        case L_AVGPOOL:
            if (din) nn_avgpool_backward(din, dout, si->c * N, si->h, si->w, l->k, l->s, l->pad);
            break;
        case L_GAP:
            if (din) nn_gap_backward(din, dout, si->c * N, (int)HW);
            break;
        case L_FC:
            nn_fc_backward(din, NN_G(m, l->p), l->bias ? NN_G(m, l->p + 1) : NULL, dout, in, NN_P(m, l->p), N,
                           si->c, so->c);
            break;
        case L_LSTM: {
            size_t R = (size_t)N * (T + 1);
            int D = l->lstm_d, H = l->lstm_h;
            const float *xp = m->acts + l->ws, *g = xp + R * D, *cs = g + R * 4 * H, *hs = cs + R * H;
            float *dg = m->ws, *dxp = dg + R * 4 * H, *dh = dxp + (din ? R * D : 0), *dc = dh + (size_t)N * H;
            nn_lstm_backward(din, NN_G(m, l->p), NN_G(m, l->p + 1), NN_G(m, l->p + 2), NN_G(m, l->p + 3), dg,
                             dxp, dh, dc, dout, xp, g, cs, hs, m->lens, NN_P(m, l->p), NN_P(m, l->p + 1), N,
                             T, D, H);
            break;
        }
        case L_SOFTMAX_CE: nn_softmax_ce_backward(din, m->acts + l->ws, m->labels, N, si->c, 1.f); break;
        case L_MSE: nn_mse_backward(din, in, m->targets, N, si->c, 1.f); break;
        }
        nn_prof_end(layer_kind(l), 1, t0,
                    l->type == L_CONV || l->type == L_FC ? layer_flop(m, l, N) * (din ? 2 : 1) : 0);
    }
    return NN_OK;
}

void nn_output(const nn_model_t *m, float *dst) {
    const nn_layer_t *l = &m->layers[m->nlayers - 1];
    const float *y = NN_ACT(m, l->in);
    int K = m->slots[l->in].c, N = m->batch;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) dst[(size_t)n * K + k] = y[(size_t)k * N + n];
}
