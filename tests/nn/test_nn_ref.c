/* test_nn_ref.c: the C models (the CPU nn library) against PyTorch reference states
 * (trainer/ref/<model>.nntf, written by trainer/ref/make_ref.py in float64 from float32
 * parameters and inputs).  The checks and their tolerances are those of tests/nn/nn_ref_check.h
 * (shared with the CUDA test tests/cuda/test_cuda_ref.c); here the host model runs them at the
 * reference batch.  Usage: test_nn_ref [DIR]   (DIR: the reference files, default trainer/ref) */
#include "tests/nn/nn_ref_check.h"

static void *cpu_build(nn_model_t *m, int N, char *err, size_t errlen) { return m; }
static void cpu_forward(void *g, const nn_batch_t *b, const char *hint) {
    nn_model_t *m = g;
    nnCheck(nn_forward(m, b), m->err, hint);
}
static double cpu_loss(void *g) { return ((nn_model_t *)g)->loss; }
static void cpu_output(void *g, float *y) { nn_output(g, y); }
static void cpu_zero_grad(void *g) { nn_zero_grad(g); }
static void cpu_backward(void *g) {
    nn_model_t *m = g;
    nnCheck(nn_backward(m), m->err, "backward");
}
static const float *cpu_grads(void *g) { return ((nn_model_t *)g)->grads; }
static void cpu_check_finite(void *g, int step) {
    char err[512];
    nnCheck(nn_check_finite(g, step, err, sizeof err), err, "non-finite");
}
static void cpu_sgd_step(void *g, const nn_sgd_t *o) { nn_sgd_step(g, o); }
static void cpu_set_training(void *g, int training) { nn_set_training(g, training); }
static void cpu_free(void *g) {} /* the host model, freed by nt_ref_run */

int main(int argc, char **argv) {
    const nt_ref_backend_t cpu = {.host_batch = 1,
                                  .build = cpu_build,
                                  .forward = cpu_forward,
                                  .loss = cpu_loss,
                                  .output = cpu_output,
                                  .zero_grad = cpu_zero_grad,
                                  .backward = cpu_backward,
                                  .grads = cpu_grads,
                                  .check_finite = cpu_check_finite,
                                  .sgd_step = cpu_sgd_step,
                                  .set_training = cpu_set_training,
                                  .free = cpu_free};
    return nt_ref_main(argc, argv, &cpu);
}
