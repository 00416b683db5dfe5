/* calibrate.c -- measures the costs that collectives/sim's model takes, on this machine's MPI.
 *
 *   mpirun -np P build/bench/pcoll-sim-calibrate [--reps 200] [--json build/bench/sim-cost.json]
 *
 * o:     a rank's cost of sending one 8-byte eager message (a burst of P-1 x 64 sends, averaged)
 * L:     half a ping-pong round trip of 8 bytes between ranks 0 and 1, minus o
 * alpha, beta: fitted to the median MPI_Allreduce time of 8 B and 4 MiB on P ranks, to the model
 *        A(P, b) = 2 ceil(log2 P) alpha + 2 (P-1)/P b beta
 * Medians, not means: one descheduled rank on a shared machine must not set the model.
 */
#include <jansson.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

static double allreduce_us(int count, int reps, double *t) {
    float *a = calloc((size_t)count, sizeof *a), *b = calloc((size_t)count, sizeof *b);
    for (int i = 0; i < reps; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double dt = MPI_Wtime() - t0, mx;
        MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t[i] = mx * 1e6;
    }
    free(a);
    free(b);
    return median(t, reps);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int P, me, reps = 200;
    const char *json = "build/bench/sim-cost.json";
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else {
            if (!me)
                fprintf(stderr, "pcoll-sim-calibrate: unknown option '%s' (--reps N, --json FILE)\n",
                        argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    if (P < 2 || reps < 5) {
        if (!me) fprintf(stderr, "pcoll-sim-calibrate: needs at least 2 ranks and --reps >= 5\n");
        MPI_Finalize();
        return 2;
    }
    double *t = calloc((size_t)reps, sizeof *t);
    uint64_t msg = 0;
    /* ping-pong 0 <-> 1 */
    for (int i = 0; i < reps; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (me == 0) {
            MPI_Send(&msg, 1, MPI_UINT64_T, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&msg, 1, MPI_UINT64_T, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (me == 1) {
            MPI_Recv(&msg, 1, MPI_UINT64_T, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&msg, 1, MPI_UINT64_T, 0, 0, MPI_COMM_WORLD);
        }
        t[i] = (MPI_Wtime() - t0) * 1e6 / 2;
    }
    double half_rtt = median(t, reps);
    MPI_Bcast(&half_rtt, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    /* send overhead: rank 0 sends a burst of 64 x (P-1) eager messages */
    const int burst = 64;
    for (int i = 0; i < reps; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (me == 0) {
            double t0 = MPI_Wtime();
            for (int j = 0; j < burst; j++)
                for (int p = 1; p < P; p++) MPI_Send(&msg, 1, MPI_UINT64_T, p, 1, MPI_COMM_WORLD);
            t[i] = (MPI_Wtime() - t0) * 1e6 / (burst * (P - 1));
        } else {
            for (int j = 0; j < burst; j++)
                MPI_Recv(&msg, 1, MPI_UINT64_T, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    double o = me == 0 ? median(t, reps) : 0;
    MPI_Bcast(&o, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double a8 = allreduce_us(2, reps, t);
    int big = 1 << 20; /* 4 MiB of floats */
    double a4m = allreduce_us(big, reps / 10 > 5 ? reps / 10 : 5, t);
    int lg = 0;
    while ((1 << lg) < P) lg++;
    double alpha = a8 / (2.0 * lg);
    double beta = (a4m - a8) / (2.0 * (P - 1) / P * (4.0 * big - 8));
    double L = half_rtt - o > 0 ? half_rtt - o : half_rtt / 2;
    if (me == 0) {
        printf("pcoll-sim-calibrate: P=%d o=%.2f us L=%.2f us alpha=%.2f us beta=%.3f ns/B "
               "(allreduce 8 B %.1f us, 4 MiB %.1f us)\n",
               P, o, L, alpha, beta * 1e3, a8, a4m);
        json_t *j =
            json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f}", "ranks", P, "o_us", o, "L_us", L, "alpha_us",
                      alpha, "beta_us", beta, "allreduce_8B_us", a8, "allreduce_4MiB_us", a4m);
        if (!j || json_dump_file(j, json, JSON_INDENT(1)) != 0) {
            fprintf(stderr, "pcoll-sim-calibrate: cannot write %s\n", json);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        json_decref(j);
    }
    free(t);
    MPI_Finalize();
    return 0;
}
