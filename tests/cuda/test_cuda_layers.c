/* test_cuda_layers.c: the CUDA backend against the CPU backend, one training step at a time from
 * identical state, with fixed bounds (tests/cuda/step_ref.h says how; docs/DESIGN.md#8-the-device-path).
 *
 * Every layer type of trainer/nn runs in at least one model below ("custom" covers conv with bias,
 * BN without fused ReLU, standalone ReLU, max pooling, average pooling with padding, option-A
 * shortcut, residual add, GAP, fc + ReLU + fc; the zoo models cover fused BN+ReLU, option-B
 * shortcuts, bottlenecks, the 7x7/s2 stem + max pool, the LSTM with variable lengths and fewer
 * steps than its maximum, MSE).  Per model and step, TF32 off: output, loss, top-1/top-5 counts,
 * every gradient tensor, the momentum and parameter update of SGD, the BN running statistics after
 * the step, and an eval forward from the same state; at step 0 also with TF32 on (<= 2e-2).  The
 * CPU half is computed on the build host (--make-ref, by `make build-all`) and carried in the
 * build folder; the GPU host only runs the GPU.  Then per model: the CUDA-graph step
 * (nn_cuda_step_graph: eager, capture, replay) must give the eager gradients (<= 1e-5: same
 * algorithms, atomics may reorder sums), SGD from a caller's buffer, and the NaN guard must name
 * the tensor.  Prints "SKIP: no CUDA device (...)" and exits 77 without a GPU. */
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/step_ref.h"
#include "trainer/nn/nn_impl.h"
#include <cuda_runtime.h>
#include <errno.h>

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
     * exact arithmetic, rounding noise in float (its n/a entry below says so) */
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

/* The backend under test, one step at a time: the GPU (nn_cuda_*) or, for --self-check, a second
 * CPU model (the comparison machinery must pass identical results and fail perturbed ones). */
typedef struct {
    nn_cuda_model_t *g; /* GPU, or NULL */
    nn_model_t *c;      /* CPU stand-in */
    double perturb;     /* CPU stand-in: the largest tensor's gradient times (1 + perturb) */
    int nudge;          /* CPU stand-in: every parameter times (1 +- 2^-24), random signs (what
                         * another summation order does, to measure what flips cost) */
    nn_model_t *after;  /* host copy of the state after the step */
} sr_dev_t;

static int dev_load(sr_dev_t *d, const nn_model_t *st) {
    if (d->g) return nn_cuda_copy_params_from_host(d->g, st);
    memcpy(d->c->params, st->params, sizeof(float) * st->nparams);
    if (d->nudge) {
        nn_rng_t r;
        nn_rng_seed(&r, 0x6e75646765ull);
        for (size_t i = 0; i < st->nparams; i++)
            d->c->params[i] *= (nn_rng_u64(&r) & 1) ? 1.f + 0x1p-24f : 1.f - 0x1p-24f;
    }
    memcpy(d->c->mom, st->mom, sizeof(float) * st->nparams);
    memcpy(d->c->bn_stats, st->bn_stats, sizeof(float) * st->nbn_stats);
    return 0;
}
#define DEV_TRY(d, call)                                                                        \
    do {                                                                                        \
        int rc_ = (call);                                                                       \
        if (rc_) {                                                                              \
            printf("FAIL %s: rc %d: %s\n", #call, rc_, d->g ? nn_cuda_error(d->g) : d->c->err); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)
/* training step from the loaded state: output, loss, counts, gradients (sampled), then SGD:
 * parameters and momentum (sampled) and BN statistics after */
static void dev_step(sr_dev_t *d, const nn_batch_t *b, const nn_sgd_t *o, sr_step_t *r, float *grads) {
    nn_model_t *m = d->after;
    if (d->g) {
        nn_cuda_set_training(d->g, 1);
        nn_cuda_zero_grad(d->g);
        DEV_TRY(d, nn_cuda_forward(d->g, b));
        DEV_TRY(d, nn_cuda_output(d->g, r->out));
        r->loss = (float)nn_cuda_loss(d->g);
        r->top1 = nn_cuda_top1(d->g);
        r->top5 = nn_cuda_top5(d->g);
        DEV_TRY(d, nn_cuda_backward(d->g));
        DEV_TRY(d, nn_cuda_grads_to_host(d->g, grads));
        DEV_TRY(d, nn_cuda_sgd_step(d->g, o));
        DEV_TRY(d, nn_cuda_copy_params_to_host(d->g, m));
    } else {
        nn_model_t *c = d->c;
        nn_set_training(c, 1);
        nn_zero_grad(c);
        DEV_TRY(d, nn_forward(c, b));
        nn_output(c, r->out);
        r->loss = (float)c->loss;
        r->top1 = c->top1;
        r->top5 = c->top5;
        DEV_TRY(d, nn_backward(c));
        if (d->perturb != 0) {
            int w = 0;
            for (int t = 1; t < c->nptensors; t++) w = c->ptensors[t].n > c->ptensors[w].n ? t : w;
            for (size_t i = 0; i < c->ptensors[w].n; i++)
                c->grads[c->ptensors[w].off + i] *= (float)(1 + d->perturb);
        }
        memcpy(grads, c->grads, sizeof(float) * c->nparams);
        nn_sgd_step(c, o);
        memcpy(m->params, c->params, sizeof(float) * c->nparams);
        memcpy(m->mom, c->mom, sizeof(float) * c->nparams);
        memcpy(m->bn_stats, c->bn_stats, sizeof(float) * c->nbn_stats);
    }
    sr_gather(m, grads, r->g);
    sr_gather(m, m->params, r->p);
    sr_gather(m, m->mom, r->mom);
    memcpy(r->bn, m->bn_stats, sizeof(float) * m->nbn_stats);
}
static void dev_eval(sr_dev_t *d, const nn_batch_t *b, float *out) {
    if (d->g) {
        nn_cuda_set_training(d->g, 0);
        DEV_TRY(d, nn_cuda_forward(d->g, b));
        DEV_TRY(d, nn_cuda_output(d->g, out));
        nn_cuda_set_training(d->g, 1);
    } else {
        nn_set_training(d->c, 0);
        DEV_TRY(d, nn_forward(d->c, b));
        nn_output(d->c, out);
        nn_set_training(d->c, 1);
    }
}

/* the models, with the bound of every fp32 check and the gradient tensors that may be n/a.  tol
 * 1e-4: one step of a model whose checks are well conditioned (the CPU-vs-PyTorch bound of
 * tests/nn/test_nn_ref.c); 1e-3: the deep models at batch 4-16 (18-50 layers of rounding in
 * another order, batch norm over 4-16 values per channel in the last stage), fixed before any
 * GPU run of this test */
static const sr_model_t all[] = {
    {"custom", 6, 0, 1, 1e-4, {{0}}},
    {"custom-bias-before-bn",
     6,
     0,
     1,
     1e-4,
     {{"conv1.bias", "a convolution bias before training-mode BN: its gradient is zero in exact arithmetic, "
                     "rounding noise in float"}}},
    {"resnet-fmnist", 8, 0, 0, 1e-4, {{0}}},
    {"resnet-cifar n=1 shortcut=A classes=10", 8, 0, 0, 1e-4, {{0}}},
    {"resnet18 classes=10 in=3x32x32", 4, 0, 0, 1e-3, {{0}}},
    {"resnet50 classes=10 in=3x64x64 width=8", 4, 0, 1, 1e-3, {{0}}},
    {"lstm in=20 hidden=16 steps=7 dense=12 classes=5", 6, 0, 0, 1e-4, {{0}}},
    {"lstm in=20 hidden=16 steps=7 classes=5", 5, 4, 0, 1e-4, {{0}}}, /* fewer steps than the maximum */
    {"hyperplane features=300 out=3", 8, 0, 0, 1e-4, {{0}}},
    {"resnet-cifar n=5 shortcut=A classes=10", 16, 0, 0, 1e-3, {{0}}},      /* ResNet-32 */
    {"lstm in=2048 hidden=512 steps=40 classes=101", 4, 0, 0, 1e-4, {{0}}}, /* UCF101's shape */
};
#define NMODELS ((int)(sizeof all / sizeof all[0]))
static nn_sgd_t sgd_of(const sr_model_t *d) {
    return (nn_sgd_t){.lr = 0.05f, .momentum = 0.9f, .wd = 1e-3f, .nesterov = d->nesterov};
}

/* ---- the reference file: per model its shapes, then per step the draw, hashes and results ---- */
static void wr(FILE *f, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, f) != n) {
        printf("FAIL writing the reference file\n");
        exit(1);
    }
}
static void rd(FILE *f, void *p, size_t n, const char *file) {
    if (n && fread(p, 1, n, f) != n) {
        printf("FAIL %s: truncated (rebuild it: make build-all)\n", file);
        exit(1);
    }
}
typedef struct {
    uint64_t nparams, nbn, nout, nsample, state[SR_STEPS], batch[SR_STEPS];
    int32_t N, nt, nrelu, draw[SR_STEPS];
} sr_head_t;

static void rec_io(FILE *f, int write, const char *file, sr_step_t *s, const sr_head_t *h) {
    size_t ny = h->N * h->nout;
#define IO(p, n) (write ? wr(f, p, n) : rd(f, p, n, file))
    IO(&s->loss, sizeof s->loss);
    IO(&s->top1, sizeof s->top1);
    IO(&s->top5, sizeof s->top5);
    IO(s->out, sizeof(float) * ny);
    IO(s->eval, sizeof(float) * ny);
    IO(s->bn, sizeof(float) * h->nbn);
    IO(s->g, sizeof(float) * h->nsample);
    IO(s->p, sizeof(float) * h->nsample);
    IO(s->mom, sizeof(float) * h->nsample);
    IO(s->na, (size_t)h->nt);
    IO(s->nz, sizeof(int32_t) * 2 * (size_t)h->nrelu);
#undef IO
}

/* the near-zero ReLU pre-activations of a draw, per layer (training / eval forward), on one line:
 * what a flipped unit can have moved when a check of a ReLU model fails */
static void sr_print_nz(const nn_model_t *m, int N, const int32_t *nz, int draw, int ndraws) {
    int nr = sr_relu_count(m), j = 0;
    long tot = 0;
    double *rel = malloc(sizeof(double) * (size_t)m->nlayers);
    sr_relu_margins(m, rel);
    for (int i = 0; i < 2 * nr; i++) tot += nz[i];
    printf("     draw %d (fewest of %d): %ld ReLU pre-activations within the fp32 margin of zero%s", draw,
           ndraws, tot, tot ? " (layer: training/eval, margin x max|x|):" : "");
    for (int li = 0; li < m->nlayers; li++) {
        if (!sr_is_relu(&m->layers[li])) continue;
        if (nz[j] || nz[nr + j]) printf(" %s %d/%d (%.1e)", m->layers[li].name, nz[j], nz[nr + j], rel[li]);
        j++;
    }
    printf("\n");
    free(rel);
}

/* --make-ref: the CPU half of every model (redraw: 0 tries draw 0 only; a near tie there fails) */
static void make_ref(FILE *f, const sr_model_t *d, int redraw) {
    char err[512], what[256];
    nn_model_t *c = mk(d->desc, d->N, err, sizeof err);
    if (!c) {
        printf("FAIL %s\n", err);
        exit(1);
    }
    printf("== %s, batch %d (CPU reference)\n", d->desc, d->N);
    sr_head_t h = {.nparams = c->nparams,
                   .nbn = c->nbn_stats,
                   .nout = c->nout,
                   .nsample = sr_sample_count(c),
                   .N = d->N,
                   .nt = c->nptensors,
                   .nrelu = sr_relu_count(c)};
    sr_step_t *st = calloc(SR_STEPS, sizeof *st);
    nn_sgd_t o = sgd_of(d);
    for (int s = 0; s < SR_STEPS; s++) {
        sr_step_alloc(&st[s], c, d->N);
        sr_batch_t bt;
        int nr = h.nrelu, ndraws = !redraw ? 1 : nr ? SR_RELU_DRAWS : SR_DRAWS, draw = -1, ties = 0;
        long fewest = -1;
        int32_t *nz = calloc(2 * (size_t)nr + 1, sizeof(int32_t));
        /* the draw: no near tie of the logits (redraw, never widened); among those, the fewest
         * ReLU pre-activations within the fp32 margin (a draw with none ends the search) */
        for (int k = 0; k < ndraws && fewest != 0; k++) {
            int te = 0, tt = 0;
            sr_batch(&bt, c, d->desc, d->N, d->T, s, k);
            sr_state(c, s);
            nn_set_training(c, 0);
            nnCheck(nn_forward(c, &bt.b), c->err, "CPU eval forward");
            long bad = sr_margin(c, d->N, nz + nr, &te, what, sizeof what);
            nn_set_training(c, 1);
            nnCheck(nn_forward(c, &bt.b), c->err, "CPU forward");
            bad += sr_margin(c, d->N, nz, &tt, te ? NULL : what, sizeof what);
            ties = te + tt;
            if (nr && redraw)
                printf("     step %d draw %2d: %ld near zero%s\n", s, k, bad, ties ? ", a near tie" : "");
            if (!ties && (fewest < 0 || bad < fewest)) {
                fewest = bad;
                draw = k;
                memcpy(st[s].nz, nz, sizeof(int32_t) * 2 * (size_t)nr);
            }
            sr_batch_free(&bt);
        }
        free(nz);
        char w[400];
        if (draw >= 0)
            snprintf(w, sizeof w, "step %d: draw %d of %d, no near tie of the logits (within %.0e)", s, draw,
                     ndraws, SR_TIE_K);
        else
            snprintf(w, sizeof w,
                     "step %d: none of %d draws without a near tie of the logits (within %.0e): %s", s,
                     ndraws, SR_TIE_K, what);
        nt_check(draw >= 0, w, (double)(draw < 0), 0);
        if (draw < 0) draw = 0;
        if (nr) sr_print_nz(c, d->N, st[s].nz, draw, ndraws);
        /* the kept draw again: its eval output, then the training forward the step continues */
        sr_batch(&bt, c, d->desc, d->N, d->T, s, draw);
        h.state[s] = sr_state(c, s);
        nn_set_training(c, 0);
        nnCheck(nn_forward(c, &bt.b), c->err, "CPU eval forward");
        nn_output(c, st[s].eval);
        nn_set_training(c, 1);
        nn_zero_grad(c);
        nnCheck(nn_forward(c, &bt.b), c->err, "CPU forward");
        h.draw[s] = draw;
        h.batch[s] = bt.hash;
        nn_output(c, st[s].out);
        st[s].loss = (float)c->loss;
        st[s].top1 = c->top1;
        st[s].top5 = c->top5;
        nnCheck(nn_backward(c), c->err, "CPU backward");
        double all2 = 0;
        for (size_t i = 0; i < c->nparams; i++) all2 += (double)c->grads[i] * c->grads[i];
        double rms = sqrt(all2 / (double)c->nparams);
        for (int t = 0; t < c->nptensors; t++) {
            double s2 = 0;
            const float *gt = c->grads + c->ptensors[t].off;
            for (size_t i = 0; i < c->ptensors[t].n; i++) s2 += (double)gt[i] * gt[i];
            st[s].na[t] = sqrt(s2 / (double)c->ptensors[t].n) < SR_NA_RMS * rms;
        }
        sr_gather(c, c->grads, st[s].g);
        nn_sgd_step(c, &o);
        sr_gather(c, c->params, st[s].p);
        sr_gather(c, c->mom, st[s].mom);
        memcpy(st[s].bn, c->bn_stats, sizeof(float) * c->nbn_stats);
        sr_batch_free(&bt);
    }
    uint32_t len = (uint32_t)strlen(d->desc);
    wr(f, &len, sizeof len);
    wr(f, d->desc, len);
    wr(f, &h, sizeof h);
    for (int s = 0; s < SR_STEPS; s++) {
        rec_io(f, 1, NULL, &st[s], &h);
        sr_step_free(&st[s]);
    }
    free(st);
    nn_model_free(c);
}

/* per tensor norm-wise errors over the carried positions; prints the worst against tol; n/a
 * tensors are skipped when the model's list names them, a FAIL otherwise */
static void cmp_tensors(const char *what, const nn_model_t *m, const sr_model_t *d, const float *a,
                        const float *b, const unsigned char *na, double tol, int use_list) {
    size_t k = 0;
    double worst = -1;
    int wi = -1, nna = 0;
    char line[300];
    for (int t = 0; t < m->nptensors; t++) {
        size_t kt = sr_tensor_count(m, t);
        if (na && na[t]) {
            const char *why = NULL;
            for (int j = 0; use_list && j < 3 && d->na[j].tensor; j++)
                if (!strcmp(d->na[j].tensor, m->ptensors[t].name)) why = d->na[j].why;
            snprintf(line, sizeof line, "%s: %s n/a%s%s", what, m->ptensors[t].name,
                     why ? ": " : " and not in the model's list", why ? why : "");
            if (why)
                printf("n/a  %s\n", line);
            else
                nt_check(0, line, 0, 0);
            nna++;
        } else {
            double e = nt_relerr(a + k, b + k, kt, 1e-30);
            if (e > worst) worst = e, wi = t;
        }
        k += kt;
    }
    snprintf(line, sizeof line, "%s, %d tensors (worst %s)", what, m->nptensors - nna,
             wi >= 0 ? m->ptensors[wi].name : "-");
    nt_check(worst <= tol, line, worst, tol);
}

/* the update of the parameters, against its own size plus the float rounding of the result */
static void cmp_update(const nn_model_t *m, const float *pd, const float *pc, const float *p0, double tol) {
    size_t k = 0;
    double worst = -1;
    int wi = -1;
    for (int t = 0; t < m->nptensors; t++) {
        size_t kt = sr_tensor_count(m, t);
        double e2 = 0, u2 = 0, p2 = 0;
        for (size_t i = 0; i < kt; i++) {
            double e = (double)pd[k + i] - pc[k + i], u = (double)pc[k + i] - p0[k + i];
            e2 += e * e;
            u2 += u * u;
            p2 += (double)pc[k + i] * pc[k + i];
        }
        double lim = tol * sqrt(u2) + 0x1p-23 * sqrt(p2),
               r = lim > 0 ? sqrt(e2) / lim : (e2 > 0 ? INFINITY : 0);
        if (r > worst) worst = r, wi = t;
        k += kt;
    }
    char line[200];
    snprintf(line, sizeof line, "SGD update (error / (tol x update + rounding)), worst %s",
             wi >= 0 ? m->ptensors[wi].name : "-");
    nt_check(worst <= 1, line, worst, 1);
}

/* the device half of one model: every step from its state against the reference */
static void compare_model(FILE *f, const char *file, const sr_model_t *d, sr_dev_t *dv, nn_model_t *c,
                          int use_list) {
    sr_head_t h;
    rd(f, &h, sizeof h, file);
    if (h.nparams != c->nparams || h.nbn != c->nbn_stats || h.nout != (uint64_t)c->nout ||
        h.nsample != sr_sample_count(c) || h.N != d->N || h.nt != c->nptensors ||
        h.nrelu != sr_relu_count(c)) {
        printf("FAIL %s: %s: shapes differ from this binary's model (rebuild it: make build-all)\n", file,
               d->desc);
        exit(1);
    }
    nn_sgd_t o = sgd_of(d);
    float *grads = malloc(sizeof(float) * c->nparams), *p0 = malloc(sizeof(float) * h.nsample);
    char what[200];
    for (int s = 0; s < SR_STEPS; s++) {
        sr_step_t ref, got;
        sr_step_alloc(&ref, c, d->N);
        sr_step_alloc(&got, c, d->N);
        rec_io(f, 0, file, &ref, &h);
        uint64_t hs = sr_state(c, s);
        sr_batch_t bt;
        sr_batch(&bt, c, d->desc, d->N, d->T, s, h.draw[s]);
        snprintf(what, sizeof what, "step %d: state and batch (draw %d) as on the reference host", s,
                 h.draw[s]);
        nt_check(hs == h.state[s] && bt.hash == h.batch[s], what,
                 (double)(hs != h.state[s]) + (bt.hash != h.batch[s]), 0);
        sr_gather(c, c->params, p0);
        DEV_TRY(dv, dev_load(dv, c));
        dev_eval(dv, &bt.b, got.eval);
        DEV_TRY(dv, dev_load(dv, c));
        dev_step(dv, &bt.b, &o, &got, grads);
        size_t ny = (size_t)d->N * c->nout;
        printf("  step %d\n", s);
        if (h.nrelu) sr_print_nz(c, d->N, ref.nz, h.draw[s], SR_RELU_DRAWS);
        nt_check(nt_relerr(got.out, ref.out, ny, 1e-6) <= d->tol, "output",
                 nt_relerr(got.out, ref.out, ny, 1e-6), d->tol);
        double el = fabs((double)got.loss - ref.loss) / fmax(fabs(ref.loss), 1e-6);
        nt_check(el <= d->tol, "loss", el, d->tol);
        if (c->task == NN_TASK_CLASSIFY) {
            snprintf(what, sizeof what, "top-1 %d/%d, top-5 %d/%d (device/CPU)", got.top1, ref.top1, got.top5,
                     ref.top5);
            nt_check(got.top1 == ref.top1 && got.top5 == ref.top5, what,
                     abs(got.top1 - ref.top1) + abs(got.top5 - ref.top5), 0);
        }
        cmp_tensors("gradients", c, d, got.g, ref.g, ref.na, d->tol, use_list);
        cmp_tensors("momentum after SGD", c, d, got.mom, ref.mom, NULL, d->tol, use_list);
        cmp_update(c, got.p, ref.p, p0, d->tol);
        if (c->nbn_stats) {
            double e = nt_relerr(got.bn, ref.bn, c->nbn_stats, 1e-6);
            nt_check(e <= d->tol, "BN running statistics after the step", e, d->tol);
        }
        double ee = nt_relerr(got.eval, ref.eval, ny, 1e-6);
        nt_check(ee <= d->tol, "eval-mode output (the state's running statistics)", ee, d->tol);
        if (s == 0 && dv->g) { /* TF32 (10-bit mantissa products): output and gradients <= 2e-2 */
            CT_CHECK(nn_cuda_set_tf32(dv->g, NN_CUDA_TF32_ALL), dv->g);
            DEV_TRY(dv, dev_load(dv, c));
            dev_step(dv, &bt.b, &o, &got, grads);
            double e = nt_relerr(got.out, ref.out, ny, 1e-6);
            nt_check(e <= 2e-2, "tf32: output", e, 2e-2);
            cmp_tensors("tf32: gradients", c, d, got.g, ref.g, ref.na, 2e-2, use_list);
            CT_CHECK(nn_cuda_set_tf32(dv->g, NN_CUDA_TF32_OFF), dv->g);
        }
        sr_batch_free(&bt);
        sr_step_free(&ref);
        sr_step_free(&got);
    }
    free(grads);
    free(p0);
}

/* the GPU-only checks of a model (CUDA graph, SGD from a caller's buffer, NaN guard), at step 0's
 * state and batch */
static void gpu_extras(const sr_model_t *d, nn_model_t *c, nn_cuda_model_t *g, int draw) {
    char err[512];
    double e;
    nn_model_t *shadow = mk(d->desc, 1, err, sizeof err);
    nn_sgd_t o = sgd_of(d);
    sr_batch_t bt, small;
    sr_state(c, 0);
    CT_CHECK(nn_cuda_copy_params_from_host(g, c), g);
    sr_batch(&bt, c, d->desc, d->N, d->T, 0, draw);
    sr_batch(&small, c, d->desc, d->N > 2 ? d->N / 2 + 1 : d->N, d->T, 0, 1000);
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
        /* the batch left on the device (b == NULL, as bench-gpu's input-resident rows): the same step */
        long before = st.graph_steps;
        CT_CHECK(nn_cuda_step_graph(g, NULL), g);
        CT_CHECK(nn_cuda_grads_to_host(g, gr), g);
        e = nt_relerr(gr, ge, c->nparams, 1e-6);
        nt_check(e <= 1e-5, "CUDA-graph step on the batch left on the device (NULL) vs eager", e, 1e-5);
        nn_cuda_graph_stats(g, &st);
        nt_check(st.graph_steps == before + 1, "the NULL step replayed the graph",
                 (double)(st.graph_steps - before), 1);
        /* direct input (nn_cuda_set_direct_input): the same step from page-locked arrays
         * (nn_cuda_host_alloc, as the trainer's loader fills under NN_CUDA_DIRECT_INPUT=1) and from
         * the pageable ones */
        size_t xn = (size_t)c->in_shape[0] * c->in_shape[1] * c->in_shape[2] * bt.b.n;
        float *px = nn_cuda_host_alloc(g, xn * sizeof(float));
        int *pl = nn_cuda_host_alloc(g, sizeof(int) * bt.b.n);
        nt_check(px && pl, "nn_cuda_host_alloc", !(px && pl), 0);
        if (px && pl) {
            memcpy(px, bt.b.x, xn * sizeof(float));
            if (bt.b.labels) memcpy(pl, bt.b.labels, sizeof(int) * bt.b.n);
            nn_batch_t pb = bt.b;
            pb.x = px;
            if (bt.b.labels) pb.labels = pl;
            nn_cuda_set_direct_input(g, 1);
            const nn_batch_t *srcs[2] = {&pb, &bt.b};
            const char *what[2] = {"CUDA-graph step, direct input from page-locked arrays vs eager",
                                   "CUDA-graph step, direct input from pageable arrays vs eager"};
            for (int k = 0; k < 2; k++) {
                CT_CHECK(nn_cuda_step_graph(g, srcs[k]), g);
                CT_CHECK(nn_cuda_grads_to_host(g, gr), g);
                e = nt_relerr(gr, ge, c->nparams, 1e-6);
                nt_check(e <= 1e-5, what[k], e, 1e-5);
            }
            nn_cuda_set_direct_input(g, 0);
        }
        nn_cuda_host_free(g, px);
        nn_cuda_host_free(g, pl);
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

    sr_batch_free(&bt);
    sr_batch_free(&small);
    nn_model_free(shadow);
}

static const sr_model_t *find_model(const char *desc) {
    for (int i = 0; i < NMODELS; i++)
        if (!strcmp(all[i].desc, desc)) return &all[i];
    return NULL;
}

/* Modes (FILE: the reference file, made here by `make build-all`: $(B)/gpu-data/cuda_step.ref):
 *   --make-ref [--no-redraw] FILE [model]
 *                                     the CPU half (no GPU) of every model (whose description
 *                                     contains model); --no-redraw keeps every first draw
 *   --self-check FILE [--perturb X] [--nudge] [--no-na-list] [model]
 *                                     the device half with a second CPU model in the GPU's place
 *                                     (must pass; with --perturb X the largest tensor's gradient
 *                                     times 1 + X, or with the n/a lists ignored, must fail;
 *                                     --nudge: every parameter of the stand-in moved by one
 *                                     rounding, to measure what fp32-level differences cost)
 *   FILE [model]                      the GPU half (exit 77 without a GPU)
 * Without model, FILE must hold every model of the list; with it, the models whose description
 * contains it are compared and the others read past. */
int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr,
                "usage: %s [--make-ref [--no-redraw] | --self-check [--perturb X] [--nudge] [--no-na-list]] "
                "FILE [model]\n",
                argv[0]);
        return 2;
    }
    int make = 0, self = 0, redraw = 1, use_list = 1, nudge = 0;
    double perturb = 0;
    int a = 1;
    for (; a < argc && !strncmp(argv[a], "--", 2); a++) {
        if (!strcmp(argv[a], "--make-ref"))
            make = 1;
        else if (!strcmp(argv[a], "--self-check"))
            self = 1;
        else if (!strcmp(argv[a], "--no-redraw"))
            redraw = 0;
        else if (!strcmp(argv[a], "--no-na-list"))
            use_list = 0;
        else if (!strcmp(argv[a], "--nudge"))
            nudge = 1;
        else if (!strcmp(argv[a], "--perturb") && a + 1 < argc)
            perturb = atof(argv[++a]);
        else {
            fprintf(stderr, "%s: unknown option %s\n", argv[0], argv[a]);
            return 2;
        }
    }
    if (a >= argc) {
        fprintf(stderr, "%s: no reference file named\n", argv[0]);
        return 2;
    }
    const char *file = argv[a], *only = a + 1 < argc ? argv[a + 1] : NULL;
    uint64_t magic = SR_MAGIC;
    if (make) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", file);
        FILE *f = fopen(tmp, "wb");
        if (!f) {
            printf("FAIL %s: %s\n", tmp, strerror(errno));
            return 1;
        }
        int n = 0;
        for (int i = 0; i < NMODELS; i++) n += !only || strstr(all[i].desc, only) != NULL;
        wr(f, &magic, sizeof magic);
        wr(f, &n, sizeof n);
        for (int i = 0; i < NMODELS; i++)
            if (!only || strstr(all[i].desc, only)) make_ref(f, &all[i], redraw);
        if (fclose(f) || nt_fail || rename(tmp, file)) {
            printf("FAIL: %d failures; %s not written\n", nt_fail, file);
            remove(tmp);
            return 1;
        }
        printf("PASS: %s written\n", file);
        return 0;
    }
    if (!self) ct_require_gpu();
    FILE *f = fopen(file, "rb");
    if (!f) {
        printf("FAIL %s: %s (made by make build-all on the build host)\n", file, strerror(errno));
        return 1;
    }
    uint64_t mg;
    int n;
    rd(f, &mg, sizeof mg, file);
    rd(f, &n, sizeof n, file);
    if (mg != magic || n < 1 || n > NMODELS) {
        printf("FAIL %s: not this binary's reference file (rebuild it: make build-all)\n", file);
        return 1;
    }
    if (!only && n != NMODELS) {
        printf("FAIL %s: holds %d of the %d models (made for some only? rebuild it: make build-all)\n", file,
               n, NMODELS);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        char desc[256], err[512];
        uint32_t len;
        rd(f, &len, sizeof len, file);
        if (len >= sizeof desc) {
            printf("FAIL %s: corrupt\n", file);
            return 1;
        }
        rd(f, desc, len, file);
        desc[len] = 0;
        const sr_model_t *d = find_model(desc);
        if (!d) {
            printf("FAIL %s: model %s is not in this binary's list\n", file, desc);
            return 1;
        }
        nn_model_t *c = mk(d->desc, d->N, err, sizeof err);
        if (!c) {
            printf("FAIL %s\n", err);
            return 1;
        }
        int skip = only && !strstr(d->desc, only);
        if (skip) { /* read past it */
            sr_head_t h;
            rd(f, &h, sizeof h, file);
            for (int s = 0; s < SR_STEPS; s++) {
                sr_step_t r;
                sr_step_alloc(&r, c, d->N);
                rec_io(f, 0, file, &r, &h);
                sr_step_free(&r);
            }
            nn_model_free(c);
            continue;
        }
        printf("== %s, batch %d%s (%s)\n", d->desc, d->N, d->nesterov ? ", nesterov" : "",
               self ? "CPU in the GPU's place" : "GPU");
        sr_dev_t dv = {.perturb = perturb, .nudge = nudge};
        dv.after = mk(d->desc, 1, err, sizeof err);
        if (self)
            dv.c = mk(d->desc, d->N, err, sizeof err);
        else
            dv.g = nn_cuda_model_build(c, d->N, NN_CUDA_TF32_OFF, err, sizeof err);
        if (!dv.after || (!dv.c && !dv.g)) {
            printf("FAIL %s\n", err);
            return 1;
        }
        long pos = ftell(f);
        compare_model(f, file, d, &dv, c, use_list);
        if (dv.g) {
            fseek(f, pos, SEEK_SET); /* step 0's draw, from the header */
            sr_head_t h;
            rd(f, &h, sizeof h, file);
            gpu_extras(d, c, dv.g, h.draw[0]);
            for (int s = 0; s < SR_STEPS; s++) {
                sr_step_t r;
                sr_step_alloc(&r, c, d->N);
                rec_io(f, 0, file, &r, &h);
                sr_step_free(&r);
            }
            nn_cuda_model_free(dv.g);
        }
        nn_model_free(dv.c);
        nn_model_free(dv.after);
        nn_model_free(c);
    }
    fclose(f);
    printf("%s: %d failures\n", nt_fail ? "FAIL" : "PASS", nt_fail);
    return nt_fail ? 1 : 0;
}
