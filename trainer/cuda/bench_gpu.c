/* bench_gpu.c: step time (zero_grad + forward + backward + SGD update) of the paper's models on
 * the GPU, in strict fp32 and with TF32 (NN_CUDA_TF32_ALL: convolutions, LSTM and GEMMs).
 * Usage: nn_bench_gpu [--check] [iters=20] [model ...]   models: resnet32 resnet50 lstm
 *   --check: print the device (exit 0) or why there is none (exit 1), nothing else.
 * Prints one line per (model, precision): "model batch precision median_ms min_ms" (median of
 * iters after 3 warm-ups; the image models run through nn_cuda_step_graph, i.e. a CUDA graph
 * from the third step on, as the trainer does; the LSTM runs eagerly). */
#include "trainer/cuda/nn_cuda.h"
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    char why[256], dev[512];
    int check = argc > 1 && !strcmp(argv[1], "--check");
    if (nn_cuda_available(why, sizeof why) < 1 || nn_cuda_select_device(0, why, sizeof why) < 0) {
        fprintf(stderr, "nn_bench_gpu: no CUDA device (%s)\n", why);
        return 1;
    }
    nn_cuda_describe(dev, sizeof dev);
    if (check) {
        printf("%s\n", dev);
        return 0;
    }
    int iters = argc > 1 ? atoi(argv[1]) : 20;
    if (iters < 1) iters = 1;
    struct {
        const char *name, *desc;
        int batch;
    } all[] = {
        {"resnet32", "resnet-cifar n=5 shortcut=A classes=10", 128},
        {"resnet50", "resnet50 classes=1000 in=3x224x224", 64},
        {"lstm", "lstm in=2048 hidden=2048 steps=40 dense=512 classes=101", 32},
    };
    struct {
        const char *name;
        int tf32;
    } prec[] = {{"fp32", NN_CUDA_TF32_OFF}, {"tf32", NN_CUDA_TF32_ALL}};
    fprintf(stderr, "nn_bench_gpu: %s\n", dev);
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        int sel = argc <= 2;
        for (int a = 2; a < argc; a++) sel |= !strcmp(argv[a], all[k].name);
        if (!sel) continue;
        char err[512];
        nn_model_t *c = nn_model_build(all[k].desc, 1, 1, err, sizeof err); /* layout + init only */
        if (!c) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        int N = all[k].batch;
        size_t per = c->in_ndim == 3 ? (size_t)c->in_shape[0] * c->in_shape[1] * c->in_shape[2]
                                     : (size_t)c->in_shape[0] * (c->in_ndim == 2 ? c->in_shape[1] : 1);
        float *x = malloc(sizeof(float) * per * N);
        int *lab = malloc(sizeof(int) * N), *len = malloc(sizeof(int) * N);
        nn_rng_t r;
        nn_rng_seed(&r, 3);
        for (size_t i = 0; i < per * N; i++) x[i] = nn_rng_uniform(&r, -1, 1);
        for (int n = 0; n < N; n++) {
            lab[n] = (int)(nn_rng_u64(&r) % c->nout);
            len[n] = c->in_ndim == 2 ? c->in_shape[0] : 0;
        }
        nn_batch_t b = {.x = x, .labels = lab, .lengths = c->in_ndim == 2 ? len : NULL, .n = N};
        nn_sgd_t o = {.lr = 0.01f, .momentum = 0.9f, .wd = 1e-4f};
        double *t = malloc(sizeof(double) * iters);
        for (size_t p = 0; p < sizeof prec / sizeof prec[0]; p++) {
            nn_cuda_model_t *g = nn_cuda_model_build(c, N, prec[p].tf32, err, sizeof err);
            if (!g) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            for (int it = -3; it < iters; it++) {
                double t0 = now_ms();
                nnCheck(nn_cuda_step_graph(g, &b), nn_cuda_error(g), "training step");
                nnCheck(nn_cuda_sgd_step(g, &o), nn_cuda_error(g), "SGD step");
                nnCheck(nn_cuda_sync(g), nn_cuda_error(g), "sync");
                if (it >= 0) t[it] = now_ms() - t0;
            }
            qsort(t, iters, sizeof(double), cmp);
            printf("%s %d %s %.2f %.2f\n", all[k].name, N, prec[p].name, t[iters / 2], t[0]);
            fflush(stdout);
            nn_cuda_model_free(g);
        }
        free(t);
        free(x);
        free(lab);
        free(len);
        nn_model_free(c);
    }
    return 0;
}
