/* bench_step.h: the step-benchmark harness shared by nn_bench_cpu (trainer/ref/bench_cpu.c) and
 * nn_bench_gpu (trainer/cuda/bench_gpu.c): the arguments "[iters] [model ...]", each selected
 * model with its synthetic batch (inputs uniform in [-1, 1], random labels, full sequence lengths;
 * seed 3) and SGD settings (lr 0.01, momentum 0.9, weight decay 1e-4), and the timing loop (warm-up
 * steps, then iters timed steps: wall time and, where asked, process CPU time; sorted, so the median
 * is t[iters / 2] and the fastest t[0]).  What differs stays with each program: its models and
 * batch sizes, which backend runs a step, its options and what it prints. */
#ifndef BENCH_STEP_H
#define BENCH_STEP_H
#include "trainer/nn/nn.h"
#include <string.h>
#include <time.h>

typedef struct {
    const char *name, *desc;
    int batch;
} bs_model_t;

/* one model's synthetic batch and the SGD settings of its steps */
typedef struct {
    const bs_model_t *model;
    int iters;
    nn_batch_t b;
    nn_sgd_t sgd;
    float *x;
    int *lab, *len;
    size_t per; /* floats of one sample in x */
} bs_input_t;

static inline double bs_clock_ms(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static inline int bs_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* warm steps, then iters timed ones: t[i] the wall time, cpu[i] (cpu non-NULL) the process CPU time
 * of timed step i in ms, each sorted ascending on return.  start (unless NULL) runs just before the
 * first timed step, outside its time. */
static inline void bs_time_steps(int warm, int iters, void (*step)(void *), void (*start)(void *), void *ctx,
                                 double *t, double *cpu) {
    for (int it = -warm; it < iters; it++) {
        if (start && it == 0) start(ctx);
        double t0 = bs_clock_ms(CLOCK_MONOTONIC), c0 = cpu ? bs_clock_ms(CLOCK_PROCESS_CPUTIME_ID) : 0;
        step(ctx);
        if (it >= 0) {
            t[it] = bs_clock_ms(CLOCK_MONOTONIC) - t0;
            if (cpu) cpu[it] = bs_clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        }
    }
    qsort(t, iters, sizeof(double), bs_cmp);
    if (cpu) qsort(cpu, iters, sizeof(double), bs_cmp);
}

/* argv[1] iters (default def_iters, at least 1), argv[2...] the names of the models of all[] to run
 * (all of them when none is named).  Per model, in all[]'s order: builds it (for its batch where
 * host_batch, else for batch 1: layout and initial parameters only), makes its input and calls
 * bench(ctx, m, in); returns 1 when a model does not build (its error on stderr) or bench returns
 * nonzero, else 0. */
static inline int bs_run_models(int argc, char **argv, const bs_model_t *all, size_t nall, int def_iters,
                                int host_batch, int (*bench)(void *ctx, nn_model_t *m, const bs_input_t *in),
                                void *ctx) {
    int iters = argc > 1 ? atoi(argv[1]) : def_iters;
    if (iters < 1) iters = 1;
    for (size_t k = 0; k < nall; k++) {
        int sel = argc <= 2;
        for (int a = 2; a < argc; a++) sel |= !strcmp(argv[a], all[k].name);
        if (!sel) continue;
        char err[512];
        int N = all[k].batch;
        nn_model_t *m = nn_model_build(all[k].desc, host_batch ? N : 1, 1, err, sizeof err);
        if (!m) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        size_t per = m->in_ndim == 3 ? (size_t)m->in_shape[0] * m->in_shape[1] * m->in_shape[2]
                                     : (size_t)m->in_shape[0] * (m->in_ndim == 2 ? m->in_shape[1] : 1);
        bs_input_t in = {.model = &all[k],
                         .iters = iters,
                         .sgd = {.lr = 0.01f, .momentum = 0.9f, .wd = 1e-4f},
                         .per = per};
        in.x = malloc(sizeof(float) * per * N);
        in.lab = malloc(sizeof(int) * N);
        in.len = malloc(sizeof(int) * N);
        nn_rng_t r;
        nn_rng_seed(&r, 3);
        for (size_t i = 0; i < per * N; i++) in.x[i] = nn_rng_uniform(&r, -1, 1);
        for (int n = 0; n < N; n++) {
            in.lab[n] = (int)(nn_rng_u64(&r) % m->nout);
            in.len[n] = m->in_ndim == 2 ? m->in_shape[0] : 0;
        }
        in.b = (nn_batch_t){.x = in.x, .labels = in.lab, .lengths = m->in_ndim == 2 ? in.len : NULL, .n = N};
        int rc = bench(ctx, m, &in);
        free(in.x);
        free(in.lab);
        free(in.len);
        nn_model_free(m);
        if (rc) return 1;
    }
    return 0;
}
#endif
