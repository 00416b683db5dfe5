/* test_cuda_layers.c: the CUDA backend against the CPU backend, layer by layer and model by model.
 *
 * Every layer type of trainer/nn runs in at least one model below ("custom" covers conv with bias,
 * BN without fused ReLU, standalone ReLU, max pooling, average pooling with padding, option-A
 * shortcut, residual add, GAP, fc + ReLU + fc; the zoo models cover fused BN+ReLU, option-B
 * shortcuts, bottlenecks, the 7x7/s2 stem + max pool, the LSTM with variable lengths and fewer
 * steps than its maximum, MSE).  Per model, with TF32 OFF (strict fp32 on both sides):
 *   output, loss, top-1/top-5 counts and every parameter gradient of one training-mode forward/
 *   backward, at the full batch and at a smaller one;  5 SGD-momentum steps (loss of each step,
 *   final parameters, momentum, BN running statistics);  the eval-mode output afterwards.
 * Tolerances (norm-wise relative error ||gpu - cpu|| / max(||cpu||, 1e-6)): the CPU-vs-PyTorch
 * bounds of tests/nn/test_nn_ref.c (<= 1e-4 outputs, loss, gradients, step losses; <= 1e-3
 * parameters, momentum, BN statistics after 5 steps, eval output; TF32 (NN_CUDA_TF32_ALL, 10-bit
 * mantissa products): outputs and gradients <= 2e-2), or SPREAD_K x the CPU's own spread under one
 * rounding of its parameters where that is larger (per tensor, per BN layer; cpu_spread.h says
 * why: the deep models at batch 4-16 are ill-conditioned after 5 steps).  Checks whose tolerance
 * would pass anything are listed as ill-conditioned, not counted; the models marked conditioned
 * below must have none.  `--spread [model]` runs the CPU spreads alone (no GPU: tests/cuda.tests).
 * Then: the CUDA-graph step (nn_cuda_step_graph: eager, capture, replay) must give the eager
 * gradients (<= 1e-5: same algorithms, atomics may reorder sums), and the NaN guard must name the
 * tensor.  Prints "SKIP: no CUDA device (...)" and exits 77 without a GPU. */
#include "tests/cuda/cpu_spread.h"
#include "tests/cuda/cuda_test_util.h"
#include "trainer/nn/nn_impl.h"
#include <cuda_runtime.h>

/* a graph with every layer type, through the builder (as zoo.c does) */
static nn_model_t *custom_model(int N, int bias_before_bn, char *err, size_t n) {
    nn_model_t *m = calloc(1, sizeof *m);
    nn_gemm_init();
    m->max_batch = N;
    m->training = 1;
    m->bn_momentum = 0.1f;
    m->bn_eps = 1e-5f;
    snprintf(m->desc, sizeof m->desc, "custom-every-layer");
    m->in_ndim = 3;
    m->in_shape[0] = 3;
    m->in_shape[1] = 16;
    m->in_shape[2] = 16;
    int x = nnb_slot(m, 3, 16, 16);
    nnb_layer(m, L_INPUT, "input", -1, x);
    int c1 = nnb_conv(m, "conv1", x, 8, 3, 1, 1, 1);
    /* conv1's bias straight into ReLU: before training-mode BN its gradient would be zero in
     * exact arithmetic, rounding noise in float (--spread checks that it is flagged) */
    int r1 = nnb_relu(m, bias_before_bn ? nnb_bn(m, "bn1", c1, 0) : c1);
    int p1 = nnb_pool(m, L_MAXPOOL, r1, 3, 2, 1); /* 8x8x8 */
    int c2 = nnb_conv(m, "conv2", p1, 8, 3, 1, 1, 0);
    int b2 = nnb_bn(m, "bn2", c2, 1);
    int a1 = nnb_add(m, b2, p1, 1);
    int sc = nnb_padsub(m, a1, 16, 2); /* 16x4x4 */
    int c3 = nnb_conv(m, "conv3", a1, 16, 3, 2, 1, 0);
    int b3 = nnb_bn(m, "bn3", c3, 0);
    int a2 = nnb_add(m, b3, sc, 1);
    int ap = nnb_pool(m, L_AVGPOOL, a2, 3, 1, 1); /* count_include_pad */
    int g = nnb_gap(m, ap);
    int f1 = nnb_fc(m, "fc1", g, 12, 1);
    int r2 = nnb_relu(m, f1);
    int f2 = nnb_fc(m, "fc2", r2, 10, 1);
    if (f2 < 0 || nnb_loss(m, L_SOFTMAX_CE, f2) || nnb_finish(m)) {
        snprintf(err, n, "custom model: %s", m->err);
        nn_model_free(m);
        return NULL;
    }
    nn_model_init(m, 1);
    return m;
}

static nn_model_t *mk(const char *desc, int N, char *err, size_t n) {
    if (!strcmp(desc, "custom")) return custom_model(N, 0, err, n);
    if (!strcmp(desc, "custom-bias-before-bn")) return custom_model(N, 1, err, n);
    return nn_model_build(desc, N, 1, err, n);
}

typedef struct {
    float *x, *tg;
    int *lab, *len;
    nn_batch_t b;
} batch_t;

static void make_batch(batch_t *bt, const nn_model_t *m, int N, int T, nn_rng_t *r) {
    size_t per = m->in_ndim == 3   ? (size_t)m->in_shape[0] * m->in_shape[1] * m->in_shape[2]
                 : m->in_ndim == 2 ? (size_t)T * m->in_shape[1]
                                   : (size_t)m->in_shape[0];
    bt->x = malloc(sizeof(float) * per * N);
    bt->tg = malloc(sizeof(float) * (size_t)N * m->nout);
    bt->lab = malloc(sizeof(int) * N);
    bt->len = malloc(sizeof(int) * N);
    nt_fill(r, bt->x, per * N, -1, 1);
    nt_fill(r, bt->tg, (size_t)N * m->nout, -1, 1);
    for (int n = 0; n < N; n++) {
        bt->lab[n] = (int)(nn_rng_u64(r) % (uint64_t)m->nout);
        bt->len[n] = 1 + (int)(nn_rng_u64(r) % (uint64_t)(T > 0 ? T : 1));
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
}
static void free_batch(batch_t *bt) {
    free(bt->x);
    free(bt->tg);
    free(bt->lab);
    free(bt->len);
}

/* one forward/backward on both backends; compares outputs, loss, counts and every gradient tensor,
 * each against max(the fixed bound, SPREAD_K x the CPU's own spread) (cpu_spread.h); i: 0 full
 * batch, 1 small; tf32: the TF32 spreads */
static void fwd_bwd_compare(const char *tag, nn_model_t *c, nn_cuda_model_t *g, const nn_batch_t *b,
                            const spread_t *sp, int i, int tf32, double tol_out, double tol_grad) {
    char what[200];
    int N = b->n;
    nn_zero_grad(c);
    nnCheck(nn_forward(c, b), c->err, "CPU forward");
    nnCheck(nn_backward(c), c->err, "CPU backward");
    nn_cuda_zero_grad(g);
    CT_CHECK(nn_cuda_forward(g, b), g);
    CT_CHECK(nn_cuda_backward(g), g);
    float *yc = malloc(sizeof(float) * N * c->nout), *yg = malloc(sizeof(float) * N * c->nout);
    float *gg = malloc(sizeof(float) * c->nparams);
    double *eg = calloc(c->nptensors, sizeof(double));
    nn_output(c, yc);
    CT_CHECK(nn_cuda_output(g, yg), g);
    CT_CHECK(nn_cuda_grads_to_host(g, gg), g);
    double e = nt_relerr(yg, yc, (size_t)N * c->nout, 1e-6);
    snprintf(what, sizeof what, "%s: output (batch %d)", tag, N);
    double k = tf32 ? SPREAD_K_TF32 : SPREAD_K;
    sp_check(what, e, tf32 ? sp->out32 : sp->out[i], k, tol_out);
    float lc = (float)c->loss, lg = (float)nn_cuda_loss(g);
    e = nt_relerr(&lg, &lc, 1, 1e-6);
    snprintf(what, sizeof what, "%s: loss", tag);
    sp_check(what, e, tf32 ? sp->loss32 : sp->loss[i], k, tol_out);
    if (c->task == NN_TASK_CLASSIFY) {
        snprintf(what, sizeof what, "%s: top-1 %d/%d, top-5 %d/%d (GPU/CPU)", tag, nn_cuda_top1(g), c->top1,
                 nn_cuda_top5(g), c->top5);
        int d = abs(nn_cuda_top1(g) - c->top1) + abs(nn_cuda_top5(g) - c->top5);
        nt_check(d <= (tol_out > 1e-3 ? 2 : 0), what, (double)d, tol_out > 1e-3 ? 2 : 0);
    }
    sp_tensors(c, gg, c->grads, eg);
    snprintf(what, sizeof what, "%s: %d gradients", tag, c->nptensors);
    sp_check_items(what, c->nptensors, eg, tf32 ? sp->grad32 : sp->grad[i], k, tol_grad, sp_tensor_name, c);
    free(yc);
    free(yg);
    free(gg);
    free(eg);
}

typedef struct {
    const char *desc;
    int N;
} mk_arg_t;
static nn_model_t *mk_spread(void *a) {
    char err[512];
    const mk_arg_t *m = a;
    nn_model_t *r = mk(m->desc, m->N, err, sizeof err);
    if (!r) {
        printf("FAIL %s\n", err);
        exit(1);
    }
    return r;
}

/* What the GPU run and --spread share: the full batch and the smaller one, the SGD settings of
 * the 5 steps and the CPU spreads of every check (c: the model, for its shapes) */
static void setup(const char *desc, const nn_model_t *c, int N, int T, int nesterov, batch_t *bt,
                  batch_t *small, nn_sgd_t *o, spread_t *sp) {
    nn_rng_t r;
    nn_rng_seed(&r, 42);
    if (c->in_ndim == 2 && T <= 0) T = c->in_shape[0];
    make_batch(bt, c, N, T, &r);
    make_batch(small, c, N > 2 ? N / 2 + 1 : N, T, &r);
    *o = (nn_sgd_t){.lr = 0.05f, .momentum = 0.9f, .wd = 1e-3f, .nesterov = nesterov};
    mk_arg_t ma = {desc, N};
    spread_measure(mk_spread, &ma, &bt->b, &small->b, o, sp);
}

static void run(const char *desc, int N, int T, int nesterov) {
    char err[512], tag[96];
    printf("== %s, batch %d%s\n", desc, N, nesterov ? ", nesterov" : "");
    nn_model_t *c = mk(desc, N, err, sizeof err);
    if (!c) {
        printf("FAIL %s\n", err);
        nt_fail++;
        return;
    }
    nn_model_t *shadow = mk(desc, 1, err, sizeof err);
    nn_cuda_model_t *g = nn_cuda_model_build(c, N, NN_CUDA_TF32_OFF, err, sizeof err);
    if (!g || !shadow) {
        printf("FAIL %s\n", err);
        nt_fail++;
        nn_model_free(c);
        nn_model_free(shadow);
        return;
    }
    batch_t bt, small;
    nn_sgd_t o;
    spread_t sp;
    setup(desc, c, N, T, nesterov, &bt, &small, &o, &sp);
    snprintf(tag, sizeof tag, "fp32");
    fwd_bwd_compare(tag, c, g, &bt.b, &sp, 0, 0, 1e-4, 1e-4);
    fwd_bwd_compare(tag, c, g, &small.b, &sp, 1, 0, 1e-4, 1e-4);

    /* 5 SGD steps on the full batch */
    float lc[5], lg[5];
    for (int s = 0; s < 5; s++) {
        nn_zero_grad(c);
        nnCheck(nn_forward(c, &bt.b), c->err, "CPU forward");
        lc[s] = (float)c->loss;
        nnCheck(nn_backward(c), c->err, "CPU backward");
        nn_sgd_step(c, &o);
        nn_cuda_zero_grad(g);
        CT_CHECK(nn_cuda_forward(g, &bt.b), g);
        lg[s] = (float)nn_cuda_loss(g);
        CT_CHECK(nn_cuda_backward(g), g);
        CT_CHECK(nn_cuda_check_finite(g, s, err, sizeof err), g);
        CT_CHECK(nn_cuda_sgd_step(g, &o), g);
    }
    double e = nt_relerr(lg, lc, 5, 1e-6);
    sp_check("losses of 5 SGD steps (wd on weights only)", e, sp.steps, SPREAD_K, 1e-4);
    CT_CHECK(nn_cuda_copy_params_to_host(g, shadow), g);
    double *ep = calloc(c->nptensors, sizeof(double)), *em = calloc(c->nptensors, sizeof(double));
    sp_tensors(c, shadow->params, c->params, ep);
    sp_tensors(c, shadow->mom, c->mom, em);
    sp_check_items("parameters after the steps", c->nptensors, ep, sp.params, SPREAD_K, 1e-3, sp_tensor_name,
                   c);
    sp_check_items("momentum after the steps", c->nptensors, em, sp.mom, SPREAD_K, 1e-3, sp_tensor_name, c);
    free(ep);
    free(em);
    if (c->nbns) {
        double *eb = calloc(c->nbns, sizeof(double));
        sp_bns(c, shadow->bn_stats, c->bn_stats, eb);
        sp_check_items("BN running mean/var after the steps", c->nbns, eb, sp.bn, SPREAD_K, 1e-3, sp_bn_name,
                       c);
        free(eb);
    }
    /* eval mode */
    nn_set_training(c, 0);
    nn_cuda_set_training(g, 0);
    nnCheck(nn_forward(c, &bt.b), c->err, "CPU eval forward");
    CT_CHECK(nn_cuda_forward(g, &bt.b), g);
    float *yc = malloc(sizeof(float) * N * c->nout), *yg = malloc(sizeof(float) * N * c->nout);
    nn_output(c, yc);
    CT_CHECK(nn_cuda_output(g, yg), g);
    e = nt_relerr(yg, yc, (size_t)N * c->nout, 1e-6);
    sp_check("eval-mode output (running statistics)", e, sp.eval, SPREAD_K, 1e-3);
    if (c->nbns) {
        int rc = nn_cuda_backward(g);
        nt_check(rc == NN_ERR_ARG, "backward in eval mode refused", (double)rc, 0);
    }
    nn_set_training(c, 1);
    nn_cuda_set_training(g, 1);

    /* CUDA graph step (image models): eager warm-up, capture, replay == eager gradients */
    if (c->in_ndim == 3) {
        float *ge = malloc(sizeof(float) * c->nparams), *gr = malloc(sizeof(float) * c->nparams);
        nn_cuda_zero_grad(g);
        CT_CHECK(nn_cuda_forward(g, &bt.b), g);
        CT_CHECK(nn_cuda_backward(g), g);
        CT_CHECK(nn_cuda_grads_to_host(g, ge), g);
        double le = nn_cuda_loss(g);
        for (int k = 0; k < 4; k++) CT_CHECK(nn_cuda_step_graph(g, &bt.b), g);
        CT_CHECK(nn_cuda_grads_to_host(g, gr), g);
        e = nt_relerr(gr, ge, c->nparams, 1e-6);
        nt_check(e <= 1e-5, "CUDA-graph step (replayed) gradients vs eager", e, 1e-5);
        nt_check(fabs(nn_cuda_loss(g) - le) <= 1e-5 * fabs(le), "CUDA-graph step loss vs eager",
                 fabs(nn_cuda_loss(g) - le), 1e-5 * fabs(le));
        /* the steps really ran as a graph: 1 warm-up, then capture + 3 replays, no eager fallback */
        nn_cuda_graph_stats_t st;
        nn_cuda_graph_stats(g, &st);
        printf("     graph: %ld replays, %ld captures, %ld warm, %ld eager%s%s\n", st.graph_steps,
               st.captures, st.warm_steps, st.eager_steps, st.eager_why[0] ? ": " : "", st.eager_why);
        nt_check(st.graph_steps == 3 && st.captures == 1 && st.eager_steps == 0,
                 "4 steps: 1 warm-up, 3 as a CUDA graph, none eager", (double)st.eager_steps, 0);
        /* an evaluation pass at other batch sizes (may grow the cuDNN workspace and evict algorithms),
     * then the next epoch's step: replays a graph that is valid (recaptured if it was not) */
        nn_cuda_set_training(g, 0);
        CT_CHECK(nn_cuda_forward(g, &small.b), g);
        nn_cuda_set_training(g, 1);
        CT_CHECK(nn_cuda_forward(g, &small.b), g);
        CT_CHECK(nn_cuda_backward(g), g);
        for (int k = 0; k < 3; k++) CT_CHECK(nn_cuda_step_graph(g, &bt.b), g);
        CT_CHECK(nn_cuda_grads_to_host(g, gr), g);
        e = nt_relerr(gr, ge, c->nparams, 1e-6);
        nt_check(e <= 1e-5, "CUDA-graph step after an evaluation at other batch sizes vs eager", e, 1e-5);
        nn_cuda_graph_stats(g, &st);
        printf("     graph after evaluation: %ld replays, %ld captures, %ld invalidations, %ld eager\n",
               st.graph_steps, st.captures, st.invalidations, st.eager_steps);
        nt_check(st.eager_steps == 0 && st.graph_steps >= 4, "steps after the evaluation ran as a graph",
                 (double)st.eager_steps, 0);
        free(ge);
        free(gr);
    }

    /* SGD from a caller's device buffer (a results-ring slot): the buffer may be overwritten as soon
   * as nn_cuda_sgd_step_grad returns, even with the model's stream still busy before it */
    {
        size_t np = c->nparams, bytes = np * sizeof(float);
        float *gh = malloc(bytes), *dbuf = NULL, *want_p = malloc(bytes), *want_m = malloc(bytes);
        cudaStream_t other;
        int ok = cudaMalloc((void **)&dbuf, bytes) == cudaSuccess &&
                 cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) == cudaSuccess;
        for (size_t i = 0; i < np; i++) gh[i] = 1e-3f * (float)((int)(i % 17) - 8);
        ok = ok && cudaMemcpyAsync(dbuf, gh, bytes, cudaMemcpyHostToDevice, other) == cudaSuccess &&
             cudaStreamSynchronize(other) == cudaSuccess;
        if (!ok) {
            nt_check(0, "SGD buffer test: CUDA set-up", 1, 0);
        } else {
            CT_CHECK(nn_cuda_copy_params_to_host(g, shadow), g);
            nn_sgd_step_grad(shadow, gh, &o); /* the expected update, on the CPU */
            memcpy(want_p, shadow->params, bytes);
            memcpy(want_m, shadow->mom, bytes);
            CT_CHECK(nn_cuda_forward(g, &bt.b), g);
            CT_CHECK(nn_cuda_backward(g), g); /* enqueued: the update queues behind it */
            CT_CHECK(nn_cuda_sgd_step_grad(g, dbuf, &o), g);
            ok = cudaMemsetAsync(dbuf, 0xff, bytes, other) == cudaSuccess &&
                 cudaStreamSynchronize(other) == cudaSuccess;
            CT_CHECK(nn_cuda_copy_params_to_host(g, shadow), g);
            double ep = nt_relerr(shadow->params, want_p, np, 1e-6),
                   em = nt_relerr(shadow->mom, want_m, np, 1e-6);
            nt_check(ok && ep <= 1e-5 && em <= 1e-5,
                     "SGD read the caller's buffer before returning (then overwritten)", ep > em ? ep : em,
                     1e-5);
            CT_CHECK(nn_cuda_copy_params_from_host(g, c), g);
            cudaStreamDestroy(other);
        }
        cudaFree(dbuf);
        free(gh);
        free(want_p);
        free(want_m);
    }

    /* NaN guard names the tensor */
    {
        const nn_param_t *p = &c->ptensors[c->nptensors - 1];
        float nanv = NAN;
        cudaStream_t st = (cudaStream_t)nn_cuda_stream(g); /* ordered with the model's kernels */
        if (cudaMemcpyAsync(nn_cuda_grads(g) + p->off, &nanv, sizeof nanv, cudaMemcpyHostToDevice, st) !=
                cudaSuccess ||
            cudaStreamSynchronize(st) != cudaSuccess)
            nt_check(0, "copy of the NaN onto the model's stream", 1, 0);
        int rc = nn_cuda_check_finite(g, 7, err, sizeof err);
        nt_check(rc == NN_ERR_NONFINITE && strstr(err, p->name) != NULL, "NaN guard names the tensor",
                 (double)rc, 0);
        printf("     (%s)\n", err);
    }

    /* TF32 (looser bound) */
    CT_CHECK(nn_cuda_copy_params_from_host(g, c), g);
    CT_CHECK(nn_cuda_set_tf32(g, NN_CUDA_TF32_ALL), g);
    fwd_bwd_compare("tf32", c, g, &bt.b, &sp, 0, 1, 2e-2, 2e-2);
    spread_free(&sp);

    free(yc);
    free(yg);
    free_batch(&bt);
    free_batch(&small);
    nn_cuda_model_free(g);
    nn_model_free(c);
    nn_model_free(shadow);
}

/* --spread: the CPU spreads alone (no GPU needed): every check of a model marked conditioned must
 * have a tolerance (not be ill-conditioned), and the custom model with its first convolution's bias
 * before training-mode BN (gradient zero in exact arithmetic) must be reported ill-conditioned */
static void spread_only(const char *desc, int N, int T, int nesterov, int conditioned) {
    char err[512];
    nn_model_t *c = mk(desc, N, err, sizeof err);
    nnCheck(c ? 0 : NN_ERR_ARG, err, "model");
    batch_t bt, small;
    nn_sgd_t o;
    spread_t sp;
    setup(desc, c, N, T, nesterov, &bt, &small, &o, &sp);
    double wg = 0, wp = 0, w32 = 0;
    int nill = 0;
    for (int t = 0; t < sp.nt; t++) {
        wg = sp_max(wg, sp_max(sp.grad[0][t], sp.grad[1][t]));
        w32 = sp_max(w32, sp.grad32[t]);
        wp = sp_max(wp, sp_max(sp.params[t], sp.mom[t]));
        nill += SPREAD_K * sp_max(sp.grad[0][t], sp.grad[1][t]) > SPREAD_CEIL;
    }
    printf(
        "     spread: out %.1e loss %.1e grad %.1e (%d tensors ill-conditioned) steps %.1e params/mom %.1e "
        "eval %.1e; tf32 grad %.1e\n",
        sp_max(sp.out[0], sp.out[1]), sp_max(sp.loss[0], sp.loss[1]), wg, nill, sp.steps, wp, sp.eval, w32);
    /* the largest tolerance any check of the model gets (fp32 and TF32), against SPREAD_CEIL */
    double wb = 0;
    for (int i = 0; i < sp.nbn; i++) wb = sp_max(wb, sp.bn[i]);
    double fp = sp_max(sp_max(sp_max(wg, wp), sp_max(sp.steps, sp.eval)),
                       sp_max(wb, sp_max(sp_max(sp.out[0], sp.out[1]), sp_max(sp.loss[0], sp.loss[1]))));
    double tf = sp_max(w32, sp_max(sp.out32, sp.loss32));
    double tol = sp_max(SPREAD_K * fp, SPREAD_K_TF32 * tf);
    char what[200];
    if (conditioned >= 0) {
        snprintf(what, sizeof what, "%s: every check %s", desc,
                 conditioned ? "has a tolerance (fp32 and TF32)" : "flagged (fp32 gradients)");
        if (conditioned)
            nt_check(tol <= SPREAD_CEIL, what, tol, SPREAD_CEIL);
        else
            nt_check(nill > 0, what, (double)nill, 1);
    }
    spread_free(&sp);
    free_batch(&bt);
    free_batch(&small);
    nn_model_free(c);
}

int main(int argc, char **argv) {
    int spread = argc > 1 && !strcmp(argv[1], "--spread");
    const char *only = argc > 1 + spread ? argv[1 + spread] : NULL;
    /* conditioned: 1 when every check must be compared (no ill-conditioned check), 0 for the
     * deep models at small batches whose steps amplify one rounding to O(1) (cpu_spread.h) */
    struct {
        const char *desc;
        int N, T, nesterov, conditioned;
    } all[] = {
        {"custom", 6, 0, 1, 1},
        {"resnet-fmnist", 8, 0, 0, 1},
        {"resnet-cifar n=1 shortcut=A classes=10", 8, 0, 0, 1},
        {"resnet18 classes=10 in=3x32x32", 4, 0, 0, 0},
        {"resnet50 classes=10 in=3x64x64 width=8", 4, 0, 1, 0},
        {"lstm in=20 hidden=16 steps=7 dense=12 classes=5", 6, 0, 0, 1},
        {"lstm in=20 hidden=16 steps=7 classes=5", 5, 4, 0, 1}, /* fewer steps than the maximum */
        {"hyperplane features=300 out=3", 8, 0, 0, 1},
        {"resnet-cifar n=5 shortcut=A classes=10", 16, 0, 0, 0}, /* ResNet-32 */
        {"lstm in=2048 hidden=512 steps=40 classes=101", 4, 0, 0, 1},
    };
    if (spread) {
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
            if (only && !strstr(all[i].desc, only)) continue;
            printf("== %s, batch %d (CPU spreads)\n", all[i].desc, all[i].N);
            spread_only(all[i].desc, all[i].N, all[i].T, all[i].nesterov, all[i].conditioned ? 1 : -1);
        }
        if (!only || strstr("custom-bias-before-bn", only)) {
            printf("== custom-bias-before-bn, batch 6 (CPU spreads)\n");
            spread_only("custom-bias-before-bn", 6, 0, 1, 0);
        }
        printf("%s: %d failures\n", nt_fail ? "FAIL" : "PASS", nt_fail);
        return nt_fail ? 1 : 0;
    }
    ct_require_gpu();
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (only && !strstr(all[i].desc, only)) continue;
        int ill = sp_ill;
        run(all[i].desc, all[i].N, all[i].T, all[i].nesterov);
        if (all[i].conditioned)
            nt_check(sp_ill == ill, "every check compared (none ill-conditioned)", sp_ill - ill, 0);
    }
    printf("%s: %d failures; %d ill-conditioned checks not compared\n", nt_fail ? "FAIL" : "PASS", nt_fail,
           sp_ill);
    return nt_fail ? 1 : 0;
}
