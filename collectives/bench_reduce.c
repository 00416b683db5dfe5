/* bench_reduce.c -- what a libpcoll round's reduction costs against a blocking MPI_Allreduce, part
 * by part, measured side by side: every variant runs `iters` reductions in turn, and the whole set
 * runs `reps` times, so the variants of one repetition share the machine's state.
 *
 * Variants (n floats plus libpcoll's 4 x P metadata floats, as a round reduces):
 *   blocking       MPI_Allreduce (Open MPI: coll/tuned)
 *   nb             MPI_Iallreduce + MPI_Test until complete (Open MPI: coll/libnbc), as
 *                  pcoll_wait drives a round
 *   nb+copy        the same after copying the contribution into a deposit buffer (pcoll_deposit)
 *   nb+copy+cycle  ... and the result into one of 16 buffers taken in turn (a results ring that
 *                  does not reuse the buffer released last: cold, first touch on first use)
 *   nb:ALG         MPI_Iallreduce with libnbc's algorithm ALG (ring, binomial, rabenseifner,
 *                  recursive_doubling) set through MPI_T (coll_libnbc_iallreduce_algorithm);
 *                  skipped when the MPI library has no such control variable
 * Each latency is one rank's time from after a barrier to completion. Printed per size and
 * variant over all P x iters x reps latencies: 10th, 50th, 90th percentile and the ratio of the
 * median to the blocking one; the JSON has the same.
 *
 * usage: mpirun -np P bench_reduce [--sizes 8,4194304] [--iters 50] [--reps 3]
 *                                  [--json build/bench/reduce.json]
 */
#include "collectives/bench_stats.h"
#include <jansson.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCYCLE 16
static const char *algs[] = {"ring", "binomial", "rabenseifner", "recursive_doubling"};
enum { V_BLOCK, V_NB, V_COPY, V_CYCLE, V_ALG0, NVAR = V_ALG0 + 4 };

static int P, me, cvar_ok;
static MPI_T_cvar_handle cvar;

static void die(const char *what) {
    fprintf(stderr, "bench_reduce: rank %d: %s\n", me, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Finds libnbc's iallreduce algorithm control variable (Open MPI); 0 if there is none. */
static int find_cvar(void) {
    int n = 0, provided;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 0;
    MPI_T_cvar_get_num(&n);
    for (int i = 0; i < n; i++) {
        char name[256];
        int len = sizeof name, verb, bind, scope, count;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_cvar_get_info(i, name, &len, &verb, &dt, &en, NULL, NULL, &bind, &scope) != MPI_SUCCESS)
            continue;
        if (strcmp(name, "coll_libnbc_iallreduce_algorithm") != 0) continue;
        return MPI_T_cvar_handle_alloc(i, NULL, &cvar, &count) == MPI_SUCCESS;
    }
    return 0;
}
static void set_alg(int a) { /* 0: libnbc's own choice, 1..4: algs[a - 1] */
    if (cvar_ok && MPI_T_cvar_write(cvar, &a) != MPI_SUCCESS) die("MPI_T_cvar_write failed");
}

/* iters reductions of variant v over nbuf floats; appends each latency (s) to lat[*k...]. */
static void run(int v, size_t nbuf, int iters, float *g, float *dep, float *res, float **cycle, int *next,
                double *lat, int *k) {
    set_alg(v >= V_ALG0 ? v - V_ALG0 + 1 : 0);
    for (int it = 0; it < iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        const float *in = g;
        float *out = res;
        if (v == V_COPY || v == V_CYCLE) {
            memcpy(dep, g, nbuf * sizeof *g);
            in = dep;
        }
        if (v == V_CYCLE) {
            int s = (*next)++ % NCYCLE;
            if (!cycle[s] && !(cycle[s] = malloc(nbuf * sizeof(float)))) die("out of memory");
            out = cycle[s];
        }
        if (v == V_BLOCK) {
            if (MPI_Allreduce(in, out, (int)nbuf, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
                die("MPI_Allreduce failed");
        } else {
            MPI_Request rq;
            int done = 0;
            if (MPI_Iallreduce(in, out, (int)nbuf, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq) != MPI_SUCCESS)
                die("MPI_Iallreduce failed");
            while (!done) MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        }
        lat[(*k)++] = MPI_Wtime() - t0;
        if (out[0] != (float)(P * (P + 1) / 2)) die("wrong sum");
    }
    set_alg(0);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    const char *sizes = "8,4194304", *json = "build/bench/reduce.json";
    int iters = 50, reps = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--sizes"))
            sizes = v, i++;
        else if (!strcmp(a, "--iters"))
            iters = atoi(v), i++;
        else if (!strcmp(a, "--reps"))
            reps = atoi(v), i++;
        else if (!strcmp(a, "--json"))
            json = v, i++;
        else {
            if (!me)
                fprintf(stderr, "bench_reduce: unknown option '%s' (--sizes --iters --reps --json)\n", a);
            MPI_Finalize();
            return 2;
        }
    }
    if (iters < 1 || reps < 1) {
        if (!me) fprintf(stderr, "bench_reduce: --iters and --reps must be >= 1\n");
        MPI_Finalize();
        return 2;
    }
    cvar_ok = find_cvar();
    int nvar = cvar_ok ? NVAR : V_ALG0, per = iters * reps;
    const char *names[NVAR] = {"blocking", "nb", "nb+copy", "nb+copy+cycle"};
    char algname[4][40];
    for (int a = 0; a < 4; a++) {
        snprintf(algname[a], sizeof algname[a], "nb:%s", algs[a]);
        names[V_ALG0 + a] = algname[a];
    }
    if (!me)
        printf("# %d ranks; reduction of n + 4 x P floats; %d iterations x %d repetitions per variant%s\n"
               "%12s %22s %11s %11s %11s %9s\n",
               P, iters, reps, cvar_ok ? "" : " (no libnbc algorithm control variable: nb:ALG skipped)",
               "size(B)", "variant", "p10(us)", "median(us)", "p90(us)", "med/block");
    json_t *root = json_object(), *arr = json_array();
    char buf[256];
    snprintf(buf, sizeof buf, "%s", sizes);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        size_t n = (size_t)atol(tok) / 4 ? (size_t)atol(tok) / 4 : 1, nbuf = n + 4 * (size_t)P;
        float *g = malloc(nbuf * sizeof *g), *dep = malloc(nbuf * sizeof *dep),
              *res = malloc(nbuf * sizeof *res);
        float *cycle[NCYCLE] = {0};
        double *lat = malloc((size_t)nvar * per * sizeof *lat),
               *all = me ? NULL : malloc((size_t)per * P * sizeof *all);
        if (!g || !dep || !res || !lat || (!me && !all)) die("out of memory");
        for (size_t i = 0; i < nbuf; i++) g[i] = (float)(me + 1), dep[i] = res[i] = 0;
        int k[NVAR] = {0}, next = 0;
        for (int r = 0; r < reps; r++)
            for (int v = 0; v < nvar; v++)
                run(v, nbuf, iters, g, dep, res, cycle, &next, lat + (size_t)v * per, &k[v]);
        double block_p50 = 0;
        for (int v = 0; v < nvar; v++) {
            MPI_Gather(lat + (size_t)v * per, per, MPI_DOUBLE, all, per, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            if (me) continue;
            qsort(all, (size_t)per * P, sizeof *all, bench_cmp_double);
            double p10 = bench_quantile(all, per * P, 0.1) * 1e6,
                   p50 = bench_quantile(all, per * P, 0.5) * 1e6,
                   p90 = bench_quantile(all, per * P, 0.9) * 1e6;
            if (v == V_BLOCK) block_p50 = p50;
            printf("%12zu %22s %11.1f %11.1f %11.1f %9.2f\n", n * 4, names[v], p10, p50, p90,
                   p50 / block_p50);
            json_t *o = json_object();
            json_object_set_new(o, "bytes", json_integer((json_int_t)(n * 4)));
            json_object_set_new(o, "variant", json_string(names[v]));
            json_object_set_new(o, "p10_latency_us", json_real(p10));
            json_object_set_new(o, "median_latency_us", json_real(p50));
            json_object_set_new(o, "p90_latency_us", json_real(p90));
            json_object_set_new(o, "median_ratio_blocking", json_real(p50 / block_p50));
            json_array_append_new(arr, o);
        }
        for (int s = 0; s < NCYCLE; s++) free(cycle[s]);
        free(g), free(dep), free(res), free(lat), free(all);
    }
    if (!me) {
        json_object_set_new(root, "ranks", json_integer(P));
        json_object_set_new(root, "iterations", json_integer(iters));
        json_object_set_new(root, "repetitions", json_integer(reps));
        json_object_set_new(root, "results", arr);
        if (json_dump_file(root, json, JSON_INDENT(1)) != 0)
            fprintf(stderr, "bench_reduce: cannot write %s\n", json);
        else
            printf("# wrote %s\n", json);
    } else
        json_decref(arr);
    json_decref(root);
    if (cvar_ok) MPI_T_cvar_handle_free(&cvar);
    MPI_T_finalize();
    MPI_Finalize();
    return 0;
}
