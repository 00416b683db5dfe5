/* bench_cpu.c: step time (forward + backward + SGD update) of the paper's models on the CPU.
 * Usage: nn_bench_cpu [--profile JSON] [iters=5] [model ...]   models: resnet32 resnet50 lstm fmnist
 *        nn_bench_cpu --blas-coretype   prints nn_blas_coretype_hint() (nothing if none)
 * --profile: after each model's line, the step profile of its timed steps (time per kind of work:
 * conv 3x3 / 1x1 / stem, batch norm, LSTM gates, update, ...; nn_profile_print), and all models'
 * profiles as JSON in the file JSON.
 * Prints one line per model: "model batch median_ms min_ms cpu_ms" (median wall time of iters
 * after 2 warm-ups, the fastest, and the median process CPU time: on a shared machine the CPU
 * time is the steadier figure, since waiting for a core does not count).
 * The arguments, the synthetic batches and the timing loop are trainer/nn/bench_step.h's (shared
 * with nn_bench_gpu). */
#include "trainer/nn/bench_step.h"
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
    fprintf(f,
            "  {\"model\": \"%s\", \"batch\": %d, \"threads\": %d, \"steps\": %d, "
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

struct cpu_bench {
    FILE *pj; /* --profile: the JSON file, else NULL */
    int npj;  /* profiles written to it */
    nn_model_t *m;
    const bs_input_t *in;
};

static void cpu_step(void *ctx) {
    struct cpu_bench *c = ctx;
    nn_model_t *m = c->m;
    nn_zero_grad(m);
    nnCheck(nn_forward(m, &c->in->b), m->err, "forward");
    nnCheck(nn_backward(m), m->err, "backward");
    nn_sgd_step(m, &c->in->sgd);
}
static void cpu_profile_start(void *ctx) {
    nn_profile_reset();
    nn_profile_enable(1);
}

static int cpu_bench(void *ctx, nn_model_t *m, const bs_input_t *in) {
    struct cpu_bench *c = ctx;
    const char *name = in->model->name;
    int iters = in->iters, N = in->b.n;
    c->m = m;
    c->in = in;
    double *t = malloc(sizeof(double) * iters), *cpu = malloc(sizeof(double) * iters);
    bs_time_steps(2, iters, cpu_step, c->pj ? cpu_profile_start : NULL, c, t, cpu);
    printf("%s %d %.1f %.1f %.1f\n", name, N, t[iters / 2], t[0], cpu[iters / 2]);
    if (c->pj) {
        nn_profile_enable(0);
        nn_profile_print(stdout, name, iters);
        double med[2] = {t[iters / 2], cpu[iters / 2]};
        fprintf(c->pj, "%s", c->npj++ ? ",\n" : "");
        profile_json(c->pj, name, N, iters, nn_threads(), med);
    }
    fflush(stdout);
    free(t);
    free(cpu);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--blas-coretype")) { /* for bench_cpu.sh */
        const char *h = nn_blas_coretype_hint();
        if (h) printf("%s\n", h);
        return 0;
    }
    FILE *pj = NULL;
    int a0 = 1;
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
    const bs_model_t all[] = {
        {"resnet32", "resnet-cifar n=5 shortcut=A classes=10", 128},
        {"resnet50", "resnet50 classes=1000 in=3x224x224", 8},
        {"lstm", "lstm in=2048 hidden=512 steps=40 classes=101", 32},
        {"fmnist", "resnet-fmnist", 64},
    };
    struct cpu_bench c = {.pj = pj};
    if (bs_run_models(argc, argv, all, sizeof all / sizeof all[0], 5, 1, cpu_bench, &c)) return 1;
    if (pj) {
        fprintf(pj, "\n]\n");
        if (fclose(pj)) {
            fprintf(stderr, "nn_bench_cpu: error writing the profile file\n");
            return 1;
        }
    }
    return 0;
}
