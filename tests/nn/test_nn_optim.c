/* test_nn_optim.c: SGD (plain/nesterov, weight-decay flags) against a hand computation, a round's
 * share of a step (nn_sgd_share), LR schedules, bit-identical replicas, NaN/Inf guards,
 * shape-mismatch and description errors, checkpoint round trip. */
#include "tests/nn/nn_test_util.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static void test_sgd(void) {
    char err[256];
    nn_model_t *m = nn_model_build("hyperplane features=3 out=2", 4, 3, err, sizeof err);
    nt_check(m != NULL, "build hyperplane features=3 out=2", 0, 0);
    /* tensors: fc.weight (2x3, decay) then fc.bias (2, no decay) */
    float w0[8], g[8], v[8] = {0}, w[8];
    for (int i = 0; i < 8; i++) {
        w0[i] = m->params[i];
        g[i] = 0.1f * (i + 1);
        m->grads[i] = g[i];
    }
    memcpy(w, w0, sizeof w);
    for (int nest = 0; nest < 2; nest++) {
        nn_sgd_t o = {.lr = 0.1f, .momentum = 0.9f, .wd = 0.01f, .nesterov = nest};
        for (int s = 0; s < 3; s++) {
            nn_sgd_step(m, &o);
            for (int i = 0; i < 8; i++) {
                float gi = g[i] + (i < 6 ? o.wd * w[i] : 0.f);
                v[i] = o.momentum * v[i] + gi;
                w[i] -= o.lr * (nest ? gi + o.momentum * v[i] : v[i]);
            }
        }
        double e = nt_relerr(m->params, w, 8, 1e-6), e2 = nt_relerr(m->mom, v, 8, 1e-6);
        nt_check(e < 1e-6 && e2 < 1e-6,
                 nest ? "SGD nesterov, wd on weights only (3 steps)"
                      : "SGD momentum, wd on weights only (3 steps)",
                 fmax(e, e2), 1e-6);
    }
    /* wd_all: bias decays too */
    memcpy(m->params, w0, sizeof w0);
    memset(m->mom, 0, sizeof v);
    memset(m->grads, 0, sizeof g);
    nn_sgd_t o = {.lr = 1.f, .momentum = 0.f, .wd = 0.5f, .wd_all = 1};
    nn_sgd_step(m, &o);
    nt_check(fabsf(m->params[7] - 0.5f * w0[7]) < 1e-7f, "SGD wd_all decays biases too", m->params[7], 0);
    nn_model_free(m);
}

static void test_lr(void) {
    nn_lr_sched_t s;
    nn_lr_sched_default(&s, 0.1);
    s.base_batch = 256;
    s.global_batch = 1024;
    s.warmup_epochs = 5;
    s.nmilestones = 4;
    s.milestones[0] = 30;
    s.milestones[1] = 60;
    s.milestones[2] = 80;
    s.milestones[3] = 90;
    double a = nn_lr_at(&s, 0), b = nn_lr_at(&s, 2.5), c = nn_lr_at(&s, 5), d = nn_lr_at(&s, 30),
           e = nn_lr_at(&s, 85);
    int ok = fabs(a - 0.1) < 1e-12 && fabs(b - 0.25) < 1e-12 && fabs(c - 0.4) < 1e-12 &&
             fabs(d - 0.04) < 1e-12 && fabs(e - 0.0004) < 1e-12;
    nt_check(ok, "LR: linear scaling x4, 5-epoch warm-up, x0.1 at 30/60/80/90", e, 0);
    nn_lr_sched_default(&s, 0.1);
    s.nmilestones = 3;
    s.milestones[0] = 81;
    s.milestones[1] = 122;
    s.milestones[2] = 164;
    ok = fabs(nn_lr_at(&s, 80.9) - 0.1) < 1e-12 && fabs(nn_lr_at(&s, 122) - 0.001) < 1e-12;
    nt_check(ok, "LR: CIFAR steps 81/122/164, no warm-up", nn_lr_at(&s, 122), 0);
}

static void test_guards(void) {
    char err[512];
    nn_model_t *m = nn_model_build("resnet-cifar n=1 width=4 classes=3 in=3x8x8", 2, 1, err, sizeof err);
    nt_check(m != NULL, "build small resnet", 0, 0);
    float x[2 * 3 * 8 * 8];
    int lab[2] = {0, 2};
    nn_rng_t r;
    nn_rng_seed(&r, 5);
    nt_fill(&r, x, sizeof x / sizeof x[0], -1, 1);
    nn_batch_t b = {.x = x, .labels = lab, .n = 2, .ndim = 3, .shape = {3, 8, 8}};
    nn_zero_grad(m);
    nt_check(nn_forward(m, &b) == 0 && nn_backward(m) == 0, "forward/backward", m->loss, 0);
    nt_check(nn_check_finite(m, 7, err, sizeof err) == 0, "finite gradients pass the guard", 0, 0);
    const nn_param_t *p = nn_param_find(m, "layer2.0.conv1.weight");
    m->grads[p->off + 3] = NAN;
    int rc = nn_check_finite(m, 7, err, sizeof err);
    printf("     guard says: %s\n", err);
    nt_check(rc == NN_ERR_NONFINITE && strstr(err, "step 7") && strstr(err, "layer2.0.conv1.weight") &&
                 strstr(err, "NaN"),
             "NaN gradient: error names step and tensor", rc, 0);
    m->loss = INFINITY;
    rc = nn_check_finite(m, 9, err, sizeof err);
    nt_check(rc == NN_ERR_NONFINITE && strstr(err, "step 9") && strstr(err, "loss"),
             "Inf loss: error names step and loss", rc, 0);
    b.shape[1] = 9;
    rc = nn_forward(m, &b);
    printf("     shape error says: %s\n", m->err);
    nt_check(rc == NN_ERR_SHAPE && strstr(m->err, "3x9x8") && strstr(m->err, "3x8x8"),
             "shape mismatch names both shapes", rc, 0);
    b.shape[1] = 8;
    b.n = 3;
    nt_check(nn_forward(m, &b) == NN_ERR_SHAPE, "batch above max_batch rejected", 0, 0);
    b.n = 2;
    lab[1] = 3;
    nt_check(nn_forward(m, &b) == NN_ERR_ARG, "label out of range rejected", 0, 0);
    lab[1] = 2;
    /* eval mode: no BN update, backward refused */
    float rs[64];
    size_t nb = m->nbn_stats < 64 ? m->nbn_stats : 64;
    memcpy(rs, m->bn_stats, nb * sizeof(float));
    nn_set_training(m, 0);
    nt_check(nn_forward(m, &b) == 0 && !memcmp(rs, m->bn_stats, nb * sizeof(float)),
             "eval forward leaves running stats", 0, 0);
    nt_check(nn_backward(m) == NN_ERR_ARG, "backward refused in eval mode", 0, 0);
    nn_set_training(m, 1);
    /* checkpoint round trip */
    const char *path = "/tmp/nn_optim_ckpt.nntf";
    rc = nn_model_save(m, path, err, sizeof err);
    nn_model_t *m2 = nn_model_build("resnet-cifar n=1 width=4 classes=3 in=3x8x8", 2, 99, err, sizeof err);
    rc |= nn_model_load(m2, path, err, sizeof err);
    nt_check(rc == 0 && !memcmp(m->params, m2->params, m->nparams * 4) &&
                 !memcmp(m->bn_stats, m2->bn_stats, m->nbn_stats * 4),
             "save/load round trip (params, momentum, BN stats)", rc, 0);
    remove(path);
    nn_model_free(m2);
    nn_model_free(m);
    /* description errors */
    const char *bad[] = {"resnet-cifar n=0", "resnet-cifar shortcut=C", "vgg16",
                         "lstm hidden=x",    "resnet50 in=3x8x8 foo=1", "resnet-cifar in=3x32"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nn_model_t *q = nn_model_build(bad[i], 2, 1, err, sizeof err);
        printf("     \"%s\": %s\n", bad[i], q ? "(built)" : err);
        nt_check(q == NULL && strlen(err) > 10, "bad description rejected with a message", 0, 0);
        nn_model_free(q);
    }
    /* the real models build, with the torch parameter counts */
    struct {
        const char *d;
        size_t n;
    } good[] = {
        {"resnet-cifar n=5", 464154}, {"resnet50", 25557032}, {"lstm", 5298789}, {"hyperplane", 8193}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        nn_model_t *q = nn_model_build(good[i].d, 1, 1, err, sizeof err);
        char what[96];
        snprintf(what, sizeof what, "%s: %zu parameters", good[i].d, good[i].n);
        nt_check(q && q->nparams == good[i].n, what, q ? (double)q->nparams : -1, 0);
        nn_model_free(q);
    }
}

/* Two replicas trained on the same batches end bit-identical: the kernels' sums must not depend
 * on thread timing (a sync run compares a hash of the weights across ranks and runs).  Channel
 * counts 16/32/64 fill the direct convolution's register blocks; 16 images of 16x16 give every
 * thread several of its position chunks.  Three threads where more than one is allowed: partial
 * sums of two threads would add up the same in either order. */
static void test_repeatable(void) {
    char err[512];
#ifdef _OPENMP
    int T0 = omp_get_max_threads();
    if (T0 > 1) omp_set_num_threads(3);
#endif
    const char *d = "resnet-cifar n=1 width=16 classes=10 in=3x16x16";
    nn_model_t *a = nn_model_build(d, 16, 3, err, sizeof err), *b = nn_model_build(d, 16, 3, err, sizeof err);
    nt_check(a && b, "build two replicas", 0, 0);
    if (!a || !b) return;
    size_t nx = 16 * 3 * 16 * 16;
    float *x = malloc(nx * sizeof(float));
    int lab[16];
    nn_rng_t r;
    nn_rng_seed(&r, 11);
    nn_sgd_t o = {.lr = 0.1f, .momentum = 0.9f, .wd = 1e-4f};
    int ok = 1;
    for (int step = 0; step < 3; step++) {
        nt_fill(&r, x, nx, -1, 1);
        for (int n = 0; n < 16; n++) lab[n] = (int)(nn_rng_u64(&r) % 10);
        nn_batch_t bt = {.x = x, .labels = lab, .n = 16};
        nn_model_t *ms[2] = {a, b};
        for (int i = 0; i < 2; i++) {
            nn_zero_grad(ms[i]);
            ok &= nn_forward(ms[i], &bt) == 0 && nn_backward(ms[i]) == 0;
            nn_sgd_step(ms[i], &o);
        }
    }
    ok &= !memcmp(a->params, b->params, a->nparams * sizeof(float)) &&
          !memcmp(a->bn_stats, b->bn_stats, a->nbn_stats * sizeof(float));
    nt_check(ok, "3 steps on two replicas: bit-identical weights", ok, 0);
    free(x);
    nn_model_free(a);
    nn_model_free(b);
#ifdef _OPENMP
    omp_set_num_threads(T0);
#endif
}

/* One weight under a constant gradient (one unit per whole step), rounds of whole steps, then
 * rounds of share s (each carrying s units, divided as a partial round is): returns the largest
 * displacement per round in the first 30 rounds after the change over the displacement per round
 * those rounds settle to. Coefficients from nn_sgd_share (per_sample) or the whole step each
 * round; the recurrence is nn_sgd_step_grad's: v = mu v + gscale g + wd w; w -= lr v. */
static double switch_overshoot(double s, int per_sample) {
    const nn_sgd_t whole = {.lr = 0.1f, .momentum = 0.9f};
    double v = 0, w = 0, peak = 0, last = 0;
    for (int k = 0; k < 400; k++) { /* whole steps: v settles at 1 / (1 - mu) */
        v = whole.momentum * v + 1.0;
        w -= whole.lr * v;
    }
    nn_sgd_t o = whole;
    if (per_sample) nn_sgd_share(&whole, s, &o);
    double gs = nn_sgd_gscale(&o);
    for (int k = 0; k < 4000; k++) {
        double w0 = w;
        v = o.momentum * v + gs * s;
        w -= o.lr * v;
        last = w0 - w;
        if (k < 30 && last > peak) peak = last;
    }
    return peak / last;
}

static void test_sgd_share(void) {
    nn_sgd_t in = {.lr = 0.1f, .momentum = 0.9f, .wd = 5e-4f, .nesterov = 1}, o;
    nn_sgd_share(&in, 1.0, &o);
    nt_check(!memcmp(&in, &o, sizeof in), "nn_sgd_share: a whole step (s = 1) is unchanged", 0, 0);
    /* n rounds of share 1/n settle to the whole step's velocity per step: v = c/(1-mu^s) x g/s = g/(1-mu) */
    nn_sgd_share(&in, 0.25, &o);
    double c = (1 - pow(0.9, 0.25)) / (1 - 0.9), vss = o.gscale * 0.25 / (1 - o.momentum);
    int ok = fabs(o.momentum - pow(0.9, 0.25)) < 1e-7 && fabs(o.lr - 0.025) < 1e-9 &&
             fabs(o.wd - 5e-4 * c) < 1e-9 && fabs(vss - 10.0) < 1e-4 && o.nesterov == 1;
    nt_check(ok, "nn_sgd_share: s = 1/4 keeps the whole step's velocity (10 for mu 0.9)", vss, 10.0);
    /* momentum 0: plain SGD, lr x the round's buffer, whatever the share */
    nn_sgd_t p0 = {.lr = 0.1f, .momentum = 0.f, .wd = 0.f};
    nn_sgd_share(&p0, 0.25, &o);
    ok = o.momentum == 0.f && fabs((double)o.lr * o.gscale - 0.1) < 1e-7;
    nt_check(ok, "nn_sgd_share: momentum 0 is plain SGD at lr x the round's buffer", o.lr * o.gscale, 0.1);
    /* the switch from whole steps to rounds of 1/4 (sync to solo at 4 ranks): per round, the
     * weight moves 1/4 of a step's distance from the first round on; a whole momentum step per
     * round moves it about 4x that until the velocity has decayed */
    double share = switch_overshoot(0.25, 1), round = switch_overshoot(0.25, 0);
    nt_check(share < 1.01, "nn_sgd_share: no overshoot after a switch to rounds of 1/4", share, 1.01);
    nt_check(round > 3.0, "a whole momentum step per round overshoots ~4x after that switch", round, 3.0);
    /* through nn_sgd_step_grad: a gradient factor 0.5 equals halving the gradient */
    char err[256];
    nn_model_t *a = nn_model_build("hyperplane features=3 out=2", 4, 1, err, sizeof err),
               *b = nn_model_build("hyperplane features=3 out=2", 4, 1, err, sizeof err);
    nt_check(a && b, "build two hyperplane models", 0, 0);
    float g[8], h[8];
    for (int i = 0; i < 8; i++) g[i] = 0.1f * (i + 1), h[i] = 0.5f * g[i];
    nn_sgd_t hs = {.lr = 0.1f, .momentum = 0.9f, .wd = 0.01f, .gscale = 0.5f}, one = hs;
    one.gscale = 0.f;
    for (int k = 0; k < 3; k++) nn_sgd_step_grad(a, g, &hs), nn_sgd_step_grad(b, h, &one);
    nt_check(!memcmp(a->params, b->params, 8 * sizeof(float)), "SGD gradient factor 0.5 = half the gradient",
             0, 0);
    nn_model_free(a);
    nn_model_free(b);
}

int main(void) {
    test_sgd();
    test_sgd_share();
    test_repeatable();
    test_lr();
    test_guards();
    printf("%s: %d failures\n", nt_fail ? "FAIL" : "PASS", nt_fail);
    return nt_fail ? 1 : 0;
}
