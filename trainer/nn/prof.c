/* prof.c: the step profile: wall and process CPU seconds and floating-point operations of each
 * kind of work (direct 3x3 convolution, 1x1 convolution, stem, batch norm, LSTM gates, ...),
 * split into forward, backward and update.  Off unless nn_profile_enable(1) or NN_PROFILE=1 in
 * the environment; then each timed region costs two clock reads (~1 us), against layers of
 * 0.1-100 ms.  Counters are process-wide (one model profiled at a time). */
#include "trainer/nn/nn_impl.h"
#include <time.h>

static const char *kind_name[NP_NKINDS] = {
    [NP_INPUT] = "input copy (NCHW->CNHW)",
    [NP_CONV3] = "conv 3x3 s1 direct",
    [NP_CONV3S] = "conv 3x3 s2 im2col+GEMM",
    [NP_CONV1] = "conv 1x1 s1 GEMM",
    [NP_CONV1S] = "conv 1x1 s2 im2col+GEMM",
    [NP_STEM] = "conv 7x7 stem im2col+GEMM",
    [NP_CONVX] = "conv other im2col+GEMM",
    [NP_BN] = "batch norm",
    [NP_BNRELU] = "batch norm + ReLU",
    [NP_RELU] = "ReLU",
    [NP_ADD] = "residual add (+ReLU)",
    [NP_SHORTCUT] = "shortcut A (subsample+pad)",
    [NP_MAXPOOL] = "max pooling",
    [NP_AVGPOOL] = "avg / global avg pooling",
    [NP_FC] = "fully connected",
    [NP_LSTM_PROJ] = "LSTM input projection GEMM",
    [NP_LSTM_REC] = "LSTM recurrent GEMM (per step)",
    [NP_LSTM_GATES] = "LSTM gates (elementwise)",
    [NP_LSTM_WGRAD] = "LSTM weight/bias gradients",
    [NP_LSTM_OTHER] = "LSTM state copies",
    [NP_LOSS] = "loss",
    [NP_DZERO] = "zero activation gradients",
    [NP_ZERO_GRAD] = "zero parameter gradients",
    [NP_UPDATE] = "SGD momentum update",
    [NP_IM2COL] = "  of which im2col/col2im",
    [NP_WSUM] = "  of which weight-grad partial sums",
};

static double acc_wall[NP_NKINDS][3], acc_cpu[NP_NKINDS][3], acc_flop[NP_NKINDS][3];
int nn_prof_enabled = -1;

static double now(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

void nn_profile_enable(int on) { nn_prof_enabled = on ? 1 : 0; }

void nn_profile_reset(void) {
    memset(acc_wall, 0, sizeof acc_wall);
    memset(acc_cpu, 0, sizeof acc_cpu);
    memset(acc_flop, 0, sizeof acc_flop);
}

nn_tick_t nn_prof_start(void) {
    if (nn_prof_enabled < 0) nn_prof_enabled = getenv("NN_PROFILE") != NULL;
    nn_tick_t t = {0, 0};
    if (nn_prof_enabled > 0) {
        t.wall = now(CLOCK_MONOTONIC);
        t.cpu = now(CLOCK_PROCESS_CPUTIME_ID);
    }
    return t;
}

void nn_prof_end(int kind, int phase, nn_tick_t t0, double flop) {
    if (nn_prof_enabled <= 0 || kind < 0 || kind >= NP_NKINDS || phase < 0 || phase > 2) return;
    acc_wall[kind][phase] += now(CLOCK_MONOTONIC) - t0.wall;
    acc_cpu[kind][phase] += now(CLOCK_PROCESS_CPUTIME_ID) - t0.cpu;
    acc_flop[kind][phase] += flop;
}

int nn_profile_rows(nn_prof_row_t *rows, int max) {
    int n = 0;
    for (int k = 0; k < NP_NKINDS; k++) {
        double any = 0;
        for (int p = 0; p < 3; p++) any += acc_wall[k][p] + acc_cpu[k][p];
        if (any <= 0) continue;
        if (n < max) {
            nn_prof_row_t *r = &rows[n];
            r->kind = kind_name[k];
            r->nested = k >= NP_IM2COL;
            for (int p = 0; p < 3; p++) {
                r->wall[p] = acc_wall[k][p];
                r->cpu[p] = acc_cpu[k][p];
                r->flop[p] = acc_flop[k][p];
            }
        }
        n++;
    }
    return n;
}

/* Columns: wall ms per step of each phase, then the kind's share of the step and its GFLOP/s
 * per core, both from process CPU time (on a shared machine wall time also counts waiting for a
 * core; CPU time of several threads includes OpenMP barrier spinning) */
void nn_profile_print(FILE *f, const char *title, int steps) {
    nn_prof_row_t rows[NP_NKINDS];
    int n = nn_profile_rows(rows, NP_NKINDS);
    double s = steps > 0 ? steps : 1, tw[3] = {0}, tc = 0;
    for (int i = 0; i < n; i++)
        for (int p = 0; p < 3 && !rows[i].nested; p++) tw[p] += rows[i].wall[p], tc += rows[i].cpu[p];
    fprintf(f, "profile %s: per step over %d steps: wall ms forward / backward / update, CPU ms, %% of the CPU time, GFLOP/s per CPU second\n",
            title, steps);
    fprintf(f, "  %-36s %9s %9s %9s %9s %6s %8s\n", "kind", "forward", "backward", "update", "cpu", "%cpu",
            "GFLOP/s");
    for (int i = 0; i < n; i++) {
        const nn_prof_row_t *r = &rows[i];
        double c = r->cpu[0] + r->cpu[1] + r->cpu[2], fl = r->flop[0] + r->flop[1] + r->flop[2];
        char gf[16] = "";
        if (fl > 0 && c > 0) snprintf(gf, sizeof gf, "%.1f", fl / c * 1e-9);
        fprintf(f, "  %-36s %9.2f %9.2f %9.2f %9.2f %6.1f %8s\n", r->kind, r->wall[0] / s * 1e3,
                r->wall[1] / s * 1e3, r->wall[2] / s * 1e3, c / s * 1e3, tc > 0 ? 100 * c / tc : 0, gf);
    }
    fprintf(f, "  %-36s %9.2f %9.2f %9.2f %9.2f %6.1f\n", "total", tw[0] / s * 1e3, tw[1] / s * 1e3,
            tw[2] / s * 1e3, tc / s * 1e3, 100.0);
}
