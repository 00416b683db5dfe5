/* bench_cpu.c: step time (forward + backward + SGD update) of the paper's models on the CPU.
 * Usage: nn_bench_cpu [--profile JSON] [iters=5] [model ...]   models: resnet32 resnet50 lstm fmnist
 *        nn_bench_cpu --blas-coretype   prints nn_blas_coretype_hint() (nothing if none)
 * --profile: after each model's line, the step profile of its timed steps (time per kind of work:
 * conv 3x3 / 1x1 / stem, batch norm, LSTM gates, update, ...; nn_profile_print), and all models'
 * profiles as JSON in the file JSON.
 * Prints one line per model: "model batch median_ms min_ms cpu_ms" (median wall time of iters
 * after 2 warm-ups, the fastest, and the median process CPU time: on a shared machine the CPU
 * time is the steadier figure, since waiting for a core does not count). */
#include "trainer/nn/nn.h"
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int nn_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* one model's profile as a JSON object (rows in ms per step) */
static void profile_json(FILE *f, const char *name, int batch, int steps, int threads, const double *ms) {
    nn_prof_row_t rows[64];
    int n = nn_profile_rows(rows, 64);
    if (n > 64) n = 64;
    fprintf(f, "  {\"model\": \"%s\", \"batch\": %d, \"threads\": %d, \"steps\": %d, "
               "\"median_ms\": %.2f, \"median_cpu_ms\": %.2f, \"rows\": [\n",
            name, batch, threads, steps, ms[0], ms[1]);
    for (int i = 0; i < n; i++) {
        const nn_prof_row_t *r = &rows[i];
        const char *k = r->kind;
        while (*k == ' ') k++;
        fprintf(f,
                "    {\"kind\": \"%s\", \"nested\": %s, \"forward_ms\": %.3f, \"backward_ms\": %.3f, "
                "\"update_ms\": %.3f, \"cpu_ms\": %.3f, \"gflop\": %.4f}%s\n",
                k, r->nested ? "true" : "false", r->wall[0] / steps * 1e3, r->wall[1] / steps * 1e3,
                r->wall[2] / steps * 1e3, (r->cpu[0] + r->cpu[1] + r->cpu[2]) / steps * 1e3,
                (r->flop[0] + r->flop[1] + r->flop[2]) / steps * 1e-9, i + 1 < n ? "," : "");
    }
    fprintf(f, "  ]}");
}

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
    FILE *pj = NULL;
    int a0 = 1, npj = 0;
    if (argc > 2 && !strcmp(argv[1], "--profile")) {
        pj = fopen(argv[2], "w");
        if (!pj) {
            fprintf(stderr, "nn_bench_cpu: cannot write the profile file %s\n", argv[2]);
            return 1;
        }
        fprintf(pj, "[\n");
        a0 = 3;
    }
    argc -= a0 - 1;
    argv += a0 - 1;
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
            if (pj && it == 0) {
                nn_profile_reset();
                nn_profile_enable(1);
            }
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
        if (pj) {
            nn_profile_enable(0);
            nn_profile_print(stdout, all[k].name, iters);
            double med[2] = {t[iters / 2], cpu[iters / 2]};
            fprintf(pj, "%s", npj++ ? ",\n" : "");
            profile_json(pj, all[k].name, N, iters, nn_threads(), med);
        }
        fflush(stdout);
        free(t);
        free(cpu);
        free(x);
        free(lab);
        free(len);
        nn_model_free(m);
    }
    if (pj) {
        fprintf(pj, "\n]\n");
        if (fclose(pj)) {
            fprintf(stderr, "nn_bench_cpu: error writing the profile file\n");
            return 1;
        }
    }
    return 0;
}
