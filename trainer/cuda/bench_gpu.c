/* bench_gpu.c: step time (zero_grad + forward + backward + SGD update) of the paper's models on
 * the GPU, in strict fp32 and with TF32 (NN_CUDA_TF32_ALL: convolutions, LSTM and GEMMs), with
 * the input in three places:
 *   pageable  the batch starts in malloc'd host memory each step and is copied in through the
 *             model's page-locked staging buffers (the trainer's default path)
 *   pinned    the batch starts in page-locked host memory (nn_cuda_host_alloc) and is copied
 *             straight in (nn_cuda_set_direct_input: the trainer under NN_CUDA_DIRECT_INPUT=1)
 *   device    the batch is already on the device (nn_cuda_step_graph(m, NULL)): the model's step
 *             alone, as a benchmark that keeps its input tensor on the GPU measures it
 * Usage: nn_bench_gpu [--check] [iters=20] [model ...]   models: resnet32 resnet50 lstm
 *   --check: print the device (exit 0) or why there is none (exit 1), nothing else.
 *   NN_BENCH_SKIP: space-separated model/precision pairs not to run (e.g. "resnet50/fp32").
 * Prints one line per (model, precision, input): "model batch precision input median_ms min_ms"
 * (median of iters after 3 warm-ups; the image models run through nn_cuda_step_graph, i.e. a CUDA
 * graph from the third step on, as the trainer does; the LSTM runs eagerly).
 * The arguments, the synthetic batches and the timing loop are trainer/nn/bench_step.h's (shared
 * with nn_bench_cpu). */
#include "trainer/cuda/nn_cuda.h"
#include "trainer/nn/bench_step.h"

struct gpu_step {
    nn_cuda_model_t *g;
    const nn_batch_t *b; /* NULL: the batch stays on the device (placement "device") */
    const nn_sgd_t *sgd;
};

static void gpu_step(void *ctx) {
    struct gpu_step *s = ctx;
    nn_cuda_model_t *g = s->g;
    nnCheck(nn_cuda_step_graph(g, s->b), nn_cuda_error(g), "training step");
    nnCheck(nn_cuda_sgd_step(g, s->sgd), nn_cuda_error(g), "SGD step");
    nnCheck(nn_cuda_sync(g), nn_cuda_error(g), "sync");
}

/* "model/precision" is listed in NN_BENCH_SKIP */
static int skipped(const char *model, const char *prec) {
    const char *s = getenv("NN_BENCH_SKIP");
    char key[128];
    snprintf(key, sizeof key, "%s/%s", model, prec);
    size_t k = strlen(key);
    for (const char *p = s ? strstr(s, key) : NULL; p; p = strstr(p + 1, key))
        if ((p == s || p[-1] == ' ') && (p[k] == 0 || p[k] == ' ')) return 1;
    return 0;
}

/* the input batch copied into page-locked memory: x and labels (x, lab: to free); lengths and
 * targets stay where they are */
static int pin_batch(nn_cuda_model_t *g, const bs_input_t *in, nn_batch_t *dst, float **x, int **lab) {
    const nn_batch_t *src = &in->b;
    size_t xb = sizeof(float) * in->per * src->n;
    *x = nn_cuda_host_alloc(g, xb);
    *lab = nn_cuda_host_alloc(g, sizeof(int) * src->n);
    if (!*x || !*lab) return -1;
    memcpy(*x, src->x, xb);
    memcpy(*lab, src->labels, sizeof(int) * src->n);
    *dst = *src;
    dst->x = *x;
    dst->labels = *lab;
    return 0;
}

/* one model (c: its layout and initial parameters), in each precision and input placement */
static int gpu_bench(void *ctx, nn_model_t *c, const bs_input_t *in) {
    (void)ctx;
    struct {
        const char *name;
        int tf32;
    } prec[] = {{"fp32", NN_CUDA_TF32_OFF}, {"tf32", NN_CUDA_TF32_ALL}};
    const char *place[] = {"pageable", "pinned", "device"};
    int iters = in->iters, N = in->b.n;
    double *t = malloc(sizeof(double) * iters);
    for (size_t p = 0; p < sizeof prec / sizeof prec[0]; p++) {
        if (skipped(in->model->name, prec[p].name)) continue;
        char err[512];
        nn_batch_t pinned;
        float *px = NULL;
        int *pl = NULL;
        struct gpu_step s = {.g = nn_cuda_model_build(c, N, prec[p].tf32, err, sizeof err), .sgd = &in->sgd};
        if (!s.g || pin_batch(s.g, in, &pinned, &px, &pl)) {
            fprintf(stderr, "%s\n", s.g ? "nn_bench_gpu: no page-locked memory for the batch" : err);
            if (s.g) nn_cuda_host_free(s.g, px), nn_cuda_host_free(s.g, pl), nn_cuda_model_free(s.g);
            free(t);
            return 1;
        }
        for (int r = 0; r < 3; r++) { /* the device rows reuse the batch the pinned rows left there */
            s.b = r == 0 ? &in->b : r == 1 ? &pinned : NULL;
            nn_cuda_set_direct_input(s.g, r == 1);
            bs_time_steps(3, iters, gpu_step, NULL, &s, t, NULL);
            printf("%s %d %s %s %.2f %.2f\n", in->model->name, N, prec[p].name, place[r], t[iters / 2], t[0]);
            fflush(stdout);
        }
        nn_cuda_host_free(s.g, px);
        nn_cuda_host_free(s.g, pl);
        nn_cuda_model_free(s.g);
    }
    free(t);
    return 0;
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
    const bs_model_t all[] = {
        {"resnet32", "resnet-cifar n=5 shortcut=A classes=10", 128},
        {"resnet50", "resnet50 classes=1000 in=3x224x224", 64},
        {"lstm", "lstm in=2048 hidden=2048 steps=40 dense=512 classes=101", 32},
    };
    fprintf(stderr, "nn_bench_gpu: %s\n", dev);
    return bs_run_models(argc, argv, all, sizeof all / sizeof all[0], 20, 0, gpu_bench, NULL);
}
