/* test_cuda_ref.c: the CUDA backend against the PyTorch reference states trainer/ref/<model>.nntf
 * (float64 PyTorch from float32 parameters and inputs; see trainer/ref/make_ref.py), with TF32 off.
 * The same checks and tolerances as the CPU test tests/nn/test_nn_ref.c:
 *   norm-wise relative error <= 1e-4 for outputs, loss, gradients and the 5 step losses; <= 1e-3
 *   for parameters, BN running statistics and the eval output after the steps -- or 3x PyTorch's
 *   own fp32 error against the same reference (torch32_err), whichever is larger (ResNet-50).
 * Then the same forward/backward with TF32 on (NN_CUDA_TF32_ALL): outputs, loss, gradients
 *   <= max(2e-2, 3 x torch32_err).
 * Prints "SKIP: no CUDA device (...)" and exits 77 without a GPU. */
#include "tests/cuda/cuda_test_util.h"

static int run(const char *dir, const char *file) {
    char err[512];
    nt_ref_t R;
    if (nt_ref_open(&R, dir, file)) return 1;
    nn_tfile_t *f = R.f;
    const char *desc = R.desc;
    const nn_tensor_t *hy = R.hy, *sl = R.sl;
    int N = R.N;
    const double *tt = R.tt;
#define TOL(base, i) fmax(base, tt[i])
    printf("== %s: \"%s\", batch %d\n", file, desc, N);
    nn_model_t *m = nn_model_build(desc, 1, 1, err, sizeof err); /* layout, names, host copies */
    if (!m) {
        printf("FAIL %s\n", err);
        nt_ref_close(&R);
        return 1;
    }
    char sum[512];
    nn_model_summary(m, sum, sizeof sum);
    printf("   %s\n", sum);
    nt_ref_load_params(&R, m); /* parameter names, order and shapes */
    nn_cuda_model_t *g = nn_cuda_model_build(m, N, NN_CUDA_TF32_OFF, err, sizeof err);
    if (!g) {
        printf("FAIL %s\n", err);
        nt_fail++;
        nn_model_free(m);
        nt_ref_close(&R);
        return 1;
    }
    nn_batch_t b;
    nt_ref_batch(&R, &b);
    CT_CHECK(nn_cuda_forward(g, &b), g);
    const nn_tensor_t *out = nn_tfile_find(f, "out"), *loss = nn_tfile_find(f, "loss");
    float *y = malloc(sizeof(float) * N * m->nout), lf = (float)nn_cuda_loss(g);
    CT_CHECK(nn_cuda_output(g, y), g);
    char what[160];
    double e = nt_relerr(y, out->data, out->n, 1e-6);
    nt_check(e <= TOL(1e-4, 0), "output", e, TOL(1e-4, 0));
    e = nt_relerr(&lf, loss->data, 1, 1e-6);
    nt_check(e <= TOL(1e-4, 0), "loss", e, TOL(1e-4, 0));
    float *gh = malloc(sizeof(float) * m->nparams);
    nn_cuda_zero_grad(g);
    CT_CHECK(nn_cuda_backward(g), g);
    CT_CHECK(nn_cuda_grads_to_host(g, gh), g);
    double worst = 0;
    const char *wname = "";
    for (int t = 0; t < m->nptensors; t++) {
        snprintf(what, sizeof what, "grad.%s", m->ptensors[t].name);
        const nn_tensor_t *gt = nn_tfile_find(f, what);
        if (!gt) {
            printf("FAIL %s missing\n", what);
            nt_fail++;
            continue;
        }
        e = nt_relerr(gh + m->ptensors[t].off, gt->data, gt->n, 1e-6);
        if (e > TOL(1e-4, 1)) nt_check(0, what, e, TOL(1e-4, 1));
        if (e > worst) {
            worst = e;
            wname = m->ptensors[t].name;
        }
    }
    snprintf(what, sizeof what, "all %d gradients (worst %s)", m->nptensors, wname);
    nt_check(worst <= TOL(1e-4, 1), what, worst, TOL(1e-4, 1));
    /* SGD steps */
    nn_sgd_t o = {
        .lr = hy->data[0], .momentum = hy->data[1], .wd = hy->data[2], .nesterov = (int)hy->data[3]};
    int steps = (int)hy->data[4];
    float *ls = calloc(steps, sizeof(float));
    for (int s = 0; s < steps; s++) {
        nn_cuda_zero_grad(g);
        CT_CHECK(nn_cuda_forward(g, &b), g);
        ls[s] = (float)nn_cuda_loss(g);
        CT_CHECK(nn_cuda_backward(g), g);
        nnCheck(nn_cuda_check_finite(g, s, err, sizeof err), err, "non-finite");
        CT_CHECK(nn_cuda_sgd_step(g, &o), g);
    }
    CT_CHECK(nn_cuda_copy_params_to_host(g, m), g);
    e = nt_relerr(ls, sl->data, steps, 1e-6);
    snprintf(what, sizeof what, "losses of %d SGD steps (%s%s)", steps, o.nesterov ? "nesterov, " : "",
             "wd not on BN/bias");
    nt_check(e <= TOL(1e-4, 2), what, e, TOL(1e-4, 2));
    nt_check_final_state(m, f, TOL(1e-3, 3), TOL(1e-3, 4));
    nn_cuda_set_training(g, 0);
    CT_CHECK(nn_cuda_forward(g, &b), g);
    CT_CHECK(nn_cuda_output(g, y), g);
    const nn_tensor_t *eo = nn_tfile_find(f, "eval_out");
    e = nt_relerr(y, eo->data, eo->n, 1e-6);
    nt_check(e <= TOL(1e-3, 5), "eval-mode output (running statistics)", e, TOL(1e-3, 5));
    /* TF32: reload the reference parameters and BN statistics, one forward/backward */
    nt_ref_load_params(&R, m);
    memset(m->mom, 0, m->nparams * sizeof(float));
    for (int i = 0; i < m->nbns; i++)
        for (int c = 0; c < m->bns[i].c; c++) {
            m->bn_stats[m->bns[i].off + c] = 0.f;
            m->bn_stats[m->bns[i].off + m->bns[i].c + c] = 1.f;
        }
    CT_CHECK(nn_cuda_copy_params_from_host(g, m), g);
    CT_CHECK(nn_cuda_set_tf32(g, NN_CUDA_TF32_ALL), g);
    nn_cuda_set_training(g, 1);
    CT_CHECK(nn_cuda_forward(g, &b), g);
    CT_CHECK(nn_cuda_output(g, y), g);
    e = nt_relerr(y, out->data, out->n, 1e-6);
    nt_check(e <= TOL(2e-2, 0), "TF32: output", e, TOL(2e-2, 0));
    nn_cuda_zero_grad(g);
    CT_CHECK(nn_cuda_backward(g), g);
    CT_CHECK(nn_cuda_grads_to_host(g, gh), g);
    worst = 0;
    for (int t = 0; t < m->nptensors; t++) {
        snprintf(what, sizeof what, "grad.%s", m->ptensors[t].name);
        const nn_tensor_t *gt = nn_tfile_find(f, what);
        if (!gt) continue;
        e = nt_relerr(gh + m->ptensors[t].off, gt->data, gt->n, 1e-6);
        if (e > worst) worst = e;
    }
    nt_check(worst <= TOL(2e-2, 1), "TF32: all gradients (worst)", worst, TOL(2e-2, 1));
#undef TOL
    free(ls);
    free(y);
    free(gh);
    nn_cuda_model_free(g);
    nn_model_free(m);
    nt_ref_close(&R);
    return 0;
}

int main(int argc, char **argv) {
    ct_require_gpu();
    const char *dir = argc > 1 ? argv[1] : "trainer/ref";
    const char *files[] = {"hyperplane.nntf", "resnet_cifar.nntf", "resnet_fmnist.nntf", "lstm.nntf",
                           "resnet50.nntf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) run(dir, files[i]);
    printf("%s: %d failures\n", nt_fail ? "FAIL" : "PASS", nt_fail);
    return nt_fail ? 1 : 0;
}
