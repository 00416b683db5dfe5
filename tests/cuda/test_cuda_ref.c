/* test_cuda_ref.c: the CUDA backend against the PyTorch reference states trainer/ref/<model>.nntf
 * (float64 PyTorch from float32 parameters and inputs; see trainer/ref/make_ref.py), with TF32 off.
 * The same checks and tolerances as the CPU test tests/nn/test_nn_ref.c (both run
 * tests/nn/nn_ref_check.h; the host model here holds only the layout, names and host copies):
 *   norm-wise relative error <= 1e-4 for outputs, loss, gradients and the 5 step losses; <= 1e-3
 *   for parameters, BN running statistics and the eval output after the steps -- or 3x PyTorch's
 *   own fp32 error against the same reference (torch32_err), whichever is larger (ResNet-50).
 * Then the same forward/backward with TF32 on (NN_CUDA_TF32_ALL): outputs and gradients
 *   <= max(2e-2, 3 x torch32_err) (the loss is not checked under TF32).
 * Prints "SKIP: no CUDA device (...)" and exits 77 without a GPU. */
#include "tests/cuda/cuda_test_util.h"
#include "tests/nn/nn_ref_check.h"

typedef struct {
    nn_cuda_model_t *g;
    nn_model_t *m;
    float *gh; /* the gradients on the host */
} ct_ref_t;

static void *cuda_build(nn_model_t *m, int N, char *err, size_t errlen) {
    nn_cuda_model_t *g = nn_cuda_model_build(m, N, NN_CUDA_TF32_OFF, err, errlen);
    if (!g) return NULL;
    ct_ref_t *c = malloc(sizeof *c);
    *c = (ct_ref_t){.g = g, .m = m, .gh = malloc(sizeof(float) * m->nparams)};
    return c;
}
static void cuda_forward(void *ctx, const nn_batch_t *b, const char *hint) {
    nn_cuda_model_t *g = ((ct_ref_t *)ctx)->g;
    CT_CHECK(nn_cuda_forward(g, b), g);
}
static double cuda_loss(void *ctx) { return nn_cuda_loss(((ct_ref_t *)ctx)->g); }
static void cuda_output(void *ctx, float *y) {
    nn_cuda_model_t *g = ((ct_ref_t *)ctx)->g;
    CT_CHECK(nn_cuda_output(g, y), g);
}
static void cuda_zero_grad(void *ctx) { nn_cuda_zero_grad(((ct_ref_t *)ctx)->g); }
static void cuda_backward(void *ctx) {
    nn_cuda_model_t *g = ((ct_ref_t *)ctx)->g;
    CT_CHECK(nn_cuda_backward(g), g);
}
static const float *cuda_grads(void *ctx) {
    ct_ref_t *c = ctx;
    CT_CHECK(nn_cuda_grads_to_host(c->g, c->gh), c->g);
    return c->gh;
}
static void cuda_check_finite(void *ctx, int step) {
    char err[512];
    nnCheck(nn_cuda_check_finite(((ct_ref_t *)ctx)->g, step, err, sizeof err), err, "non-finite");
}
static void cuda_sgd_step(void *ctx, const nn_sgd_t *o) {
    nn_cuda_model_t *g = ((ct_ref_t *)ctx)->g;
    CT_CHECK(nn_cuda_sgd_step(g, o), g);
}
static void cuda_params_to_host(void *ctx) {
    ct_ref_t *c = ctx;
    CT_CHECK(nn_cuda_copy_params_to_host(c->g, c->m), c->g);
}
static void cuda_set_training(void *ctx, int training) {
    nn_cuda_set_training(((ct_ref_t *)ctx)->g, training);
}
static void cuda_free(void *ctx) {
    ct_ref_t *c = ctx;
    free(c->gh);
    nn_cuda_model_free(c->g);
    free(c);
}

/* TF32: reload the reference parameters and BN statistics, one forward/backward */
static void cuda_tf32(void *ctx, nt_ref_t *r, nn_model_t *m, const nn_batch_t *b, float *y) {
    nn_cuda_model_t *g = ((ct_ref_t *)ctx)->g;
    nt_ref_load_params(r, m);
    memset(m->mom, 0, m->nparams * sizeof(float));
    for (int i = 0; i < m->nbns; i++)
        for (int c = 0; c < m->bns[i].c; c++) {
            m->bn_stats[m->bns[i].off + c] = 0.f;
            m->bn_stats[m->bns[i].off + m->bns[i].c + c] = 1.f;
        }
    CT_CHECK(nn_cuda_copy_params_from_host(g, m), g);
    CT_CHECK(nn_cuda_set_tf32(g, NN_CUDA_TF32_ALL), g);
    nn_cuda_set_training(g, 1);
    CT_CHECK(nn_cuda_forward(g, b), g);
    CT_CHECK(nn_cuda_output(g, y), g);
    const nn_tensor_t *out = nn_tfile_find(r->f, "out");
    double tol = nt_ref_tol(r, 2e-2, 0), e = nt_relerr(y, out->data, out->n, 1e-6);
    nt_check(e <= tol, "TF32: output", e, tol);
    nn_cuda_zero_grad(g);
    CT_CHECK(nn_cuda_backward(g), g);
    tol = nt_ref_tol(r, 2e-2, 1);
    double worst = nt_ref_grad_worst(m, r->f, cuda_grads(ctx), tol, 0, NULL);
    nt_check(worst <= tol, "TF32: all gradients (worst)", worst, tol);
}

int main(int argc, char **argv) {
    ct_require_gpu();
    const nt_ref_backend_t cuda = {.host_batch = 0,
                                   .build = cuda_build,
                                   .forward = cuda_forward,
                                   .loss = cuda_loss,
                                   .output = cuda_output,
                                   .zero_grad = cuda_zero_grad,
                                   .backward = cuda_backward,
                                   .grads = cuda_grads,
                                   .check_finite = cuda_check_finite,
                                   .sgd_step = cuda_sgd_step,
                                   .params_to_host = cuda_params_to_host,
                                   .set_training = cuda_set_training,
                                   .extra = cuda_tf32,
                                   .free = cuda_free};
    return nt_ref_main(argc, argv, &cuda);
}
