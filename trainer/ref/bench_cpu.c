/* bench_cpu.c: step time (forward + backward + SGD update) of the paper's models on the CPU.
 * Usage: nn_bench_cpu [iters=5] [model ...]   models: resnet32 resnet50 lstm fmnist
 *        nn_bench_cpu --blas-coretype   prints nn_blas_coretype_hint() (nothing if none)
 * Prints one line per model: "model batch median_ms min_ms cpu_ms" (median wall time of iters
 * after 2 warm-ups, the fastest, and the median process CPU time: on a shared machine the CPU
 * time is the steadier figure, since waiting for a core does not count). */
#include "trainer/nn/nn.h"
#include <string.h>
#include <time.h>

static double clock_ms(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--blas-coretype")) { /* for bench_cpu.sh */
        const char *h = nn_blas_coretype_hint();
        if (h) printf("%s\n", h);
        return 0;
    }
    int iters = argc > 1 ? atoi(argv[1]) : 5;
    if (iters < 1) iters = 1;
    struct {
        const char *name, *desc;
        int batch;
    } all[] = {
        {"resnet32", "resnet-cifar n=5 shortcut=A classes=10", 128},
        {"resnet50", "resnet50 classes=1000 in=3x224x224", 8},
        {"lstm", "lstm in=2048 hidden=512 steps=40 classes=101", 32},
        {"fmnist", "resnet-fmnist", 64},
    };
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        int sel = argc <= 2;
        for (int a = 2; a < argc; a++) sel |= !strcmp(argv[a], all[k].name);
        if (!sel) continue;
        char err[512];
        nn_model_t *m = nn_model_build(all[k].desc, all[k].batch, 1, err, sizeof err);
        if (!m) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        int N = all[k].batch;
        size_t per = m->in_ndim == 3 ? (size_t)m->in_shape[0] * m->in_shape[1] * m->in_shape[2]
                                     : (size_t)m->in_shape[0] * (m->in_ndim == 2 ? m->in_shape[1] : 1);
        float *x = malloc(sizeof(float) * per * N);
        int *lab = malloc(sizeof(int) * N), *len = malloc(sizeof(int) * N);
        nn_rng_t r;
        nn_rng_seed(&r, 3);
        for (size_t i = 0; i < per * N; i++) x[i] = nn_rng_uniform(&r, -1, 1);
        for (int n = 0; n < N; n++) {
            lab[n] = (int)(nn_rng_u64(&r) % m->nout);
            len[n] = m->in_ndim == 2 ? m->in_shape[0] : 0;
        }
        nn_batch_t b = {.x = x, .labels = lab, .lengths = m->in_ndim == 2 ? len : NULL, .n = N};
        nn_sgd_t o = {.lr = 0.01f, .momentum = 0.9f, .wd = 1e-4f};
        double *t = malloc(sizeof(double) * iters), *cpu = malloc(sizeof(double) * iters);
        for (int it = -2; it < iters; it++) {
            double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
            nn_zero_grad(m);
            nnCheck(nn_forward(m, &b), m->err, "forward");
            nnCheck(nn_backward(m), m->err, "backward");
            nn_sgd_step(m, &o);
            if (it >= 0) {
                t[it] = clock_ms(CLOCK_MONOTONIC) - t0;
                cpu[it] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
            }
        }
        qsort(t, iters, sizeof(double), cmp);
        qsort(cpu, iters, sizeof(double), cmp);
        printf("%s %d %.1f %.1f %.1f\n", all[k].name, N, t[iters / 2], t[0], cpu[iters / 2]);
        fflush(stdout);
        free(t);
        free(cpu);
        free(x);
        free(lab);
        free(len);
        nn_model_free(m);
    }
    return 0;
}
