/* bench_collectives.c -- the paper's Fig. 9 allreduce microbenchmark, nccl-tests style.
 *
 * P ranks; per iteration: MPI_Barrier, rank r sleeps r x unit ms (linear skew) or nothing,
 * then deposit -> wait (or plain MPI_Allreduce); latency = deposit to completion, per rank.
 * Reported: mean over ranks and iterations, min, median, 90th and 99th percentiles and max of
 * all P x iters latencies (one outlier can move the mean of a short run far; the median cannot);
 * #wrong counts rounds whose result is not the sum of what the fresh ranks deposited (each rank
 * deposits all elements = rank + 1).
 * Modes: mpi_allreduce, sync, solo, majority, quorum (Q = P/2).
 * The JSON also names each rank's host (MPI_Get_processor_name), "hosts"[r] for rank r.
 * Wait semantics: sync waits until its own deposit's round completed. The partial modes use the
 * original eager-SGD semantics: a late rank does not wait for a round of its own
 * (PCOLL_WAIT_NEWER: it returns as soon as a round it has not applied yet is complete; its
 * deposit goes into a later round, accumulating with the next one if need be). Waiting for
 * consumption would deadlock majority and quorum against the per-iteration barrier: the next
 * round's initiator, or the ranks that would complete the quorum, are at that barrier.
 *
 * usage: mpirun -np P bench_collectives [--unit-ms 1] [--iters 64] [--warmup 4]
 *                 [--sizes 8,4194304] [--json build/bench/collectives.json]
 *        [--device]  device buffers (PCOLL_MEM_DEVICE: NCCL, or staged through the host when ranks
 *                    share a GPU); only in build/bench/bench_collectives_cuda (-DPCOLL_HAVE_NCCL);
 *                    rank r uses GPU (local rank % devices); mpi_allreduce stays a host baseline.
 */
#include "collectives/pcoll.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int P, me;
static int g_poll_us = 0, g_spin_us = -1;
static const char *g_only = NULL;
static int g_device = 0;
#ifdef PCOLL_HAVE_NCCL
#include <cuda_runtime.h>
#endif

static double now(void) { return MPI_Wtime(); }

/* every rank's MPI_Get_processor_name, collective; returns on rank 0 a JSON array indexed by rank,
 * NULL on the others (out of memory on rank 0: message and MPI_Abort, as for the buffers) */
static json_t *gather_hosts(void) {
    char host[MPI_MAX_PROCESSOR_NAME] = "", *all = NULL;
    int len = 0;
    MPI_Get_processor_name(host, &len);
    if (!me && !(all = calloc((size_t)P, MPI_MAX_PROCESSOR_NAME))) {
        fprintf(stderr, "bench_collectives: rank 0: out of memory for %d host names\n", P);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    if (me) return NULL;
    json_t *hosts = json_array();
    for (int p = 0; p < P; p++) {
        char *h = all + (size_t)p * MPI_MAX_PROCESSOR_NAME;
        h[MPI_MAX_PROCESSOR_NAME - 1] = 0;
        json_array_append_new(hosts, json_string(h));
    }
    free(all);
    return hosts;
}

static void sleep_ms(double ms) {
    if (ms <= 0) return;
    struct timespec ts = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
    nanosleep(&ts, NULL);
}

/* pcollCheck, plus the handle's detailed message (which rank, which round) */
#define handleCheck(h, call)                                           \
    do {                                                               \
        int hc_e_ = (call);                                            \
        if (hc_e_ < 0) {                                               \
            fprintf(stderr, "rank %d: %s\n", me, pcoll_last_error(h)); \
            pcollCheck(hc_e_);                                         \
        }                                                              \
    } while (0)

typedef struct {
    double mean, min, max, p50, p90, p99, fresh_frac;
    long wrong;
} result_t;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
/* q-quantile of sorted v[n] (nearest rank) */
static double quantile(const double *v, int n, double q) {
    int i = (int)ceil(q * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* a result as host memory (device results are copied into buf) */
static const float *host_view(const float *res, float *buf, size_t n) {
#ifdef PCOLL_HAVE_NCCL
    if (g_device) {
        if (cudaMemcpy(buf, res, n * sizeof *buf, cudaMemcpyDeviceToHost) != cudaSuccess) {
            fprintf(stderr, "rank %d: cudaMemcpy of a result failed\n", me);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        return buf;
    }
#endif
    (void)buf;
    (void)n;
    return res;
}

static long check_round(const float *res, size_t n, const pcoll_record_t *rec) {
    double want = 0;
    for (int p = 0; p < P; p++) want += rec->fresh[p] * (double)(p + 1);
    for (size_t i = 0; i < n; i++)
        if (res[i] != (float)want) return 1;
    return 0;
}

static result_t run(const char *mode, size_t n, int linear, double unit, int iters, int warm) {
    result_t out = {0, 1e30, 0, 0, 0, 0, 0, 0};
    double *lats = malloc((size_t)iters * sizeof *lats);
    float *g = malloc(n * sizeof *g), *r = malloc(n * sizeof *r);
    for (size_t i = 0; i < n; i++) g[i] = (float)(me + 1);
    float *dep = g; /* what is deposited: host g, or its device copy */
#ifdef PCOLL_HAVE_NCCL
    if (g_device) {
        if (cudaMalloc((void **)&dep, n * sizeof *dep) != cudaSuccess ||
            cudaMemcpy(dep, g, n * sizeof *g, cudaMemcpyHostToDevice) != cudaSuccess) {
            fprintf(stderr, "rank %d: cannot allocate %zu floats on the GPU\n", me, n);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
#endif
    int plain = !strcmp(mode, "mpi_allreduce"), newer = strcmp(mode, "sync") != 0;
    pcoll_t *h = NULL;
    pcoll_record_t rec;
    pcoll_record_init(&rec, P);
    if (!plain) {
        pcoll_config_t cfg;
        pcoll_config_default(&cfg);
        /* with linear skew every rank's deposit may start its own round: up to P rounds complete
         * while the last rank sleeps, so the ring keeps P + 1 (buffers are allocated when first
         * used); a smaller ring would hold the fast ranks back (correct, but not Fig. 9) */
        cfg.ring = P + 1 > 16 ? P + 1 : 16;
        cfg.records = 1024;
        if (g_poll_us > 0) cfg.poll_max_us = g_poll_us;
        if (g_spin_us >= 0) cfg.spin_us = g_spin_us;
        char m[32];
        if (!strcmp(mode, "quorum"))
            snprintf(m, sizeof m, "quorum:%d", P / 2 > 0 ? P / 2 : 1);
        else
            snprintf(m, sizeof m, "%s", mode);
        pcollCheck(pcoll_parse_mode(m, &cfg.rule));
        pcollCheck(pcoll_create(MPI_COMM_WORLD, n, g_device ? PCOLL_MEM_DEVICE : PCOLL_MEM_HOST, &cfg, &h));
    }
    double sum = 0;
    long rounds = 0, fresh = 0;
    for (int it = 0; it < warm + iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (linear) sleep_ms(me * unit);
        double t0 = now();
        if (plain) {
            MPI_Allreduce(g, r, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double want = P * (P + 1) / 2.0;
            for (size_t i = 0; i < n; i++)
                if (r[i] != (float)want) {
                    out.wrong++;
                    break;
                }
        } else {
            handleCheck(h, pcoll_deposit(h, dep, newer ? PCOLL_ACCUMULATE : 0));
            handleCheck(h, pcoll_wait(h, newer ? PCOLL_WAIT_NEWER : PCOLL_WAIT_CONSUMED, 120, NULL));
        }
        double lat = now() - t0;
        if (!plain) {
            const float *res;
            while (pcoll_next(h, NULL, &res, &rec) == PCOLL_OK) {
                out.wrong += check_round(host_view(res, r, n), n, &rec);
                rounds++;
                fresh += rec.nfresh;
            }
        }
        if (it >= warm) {
            lats[it - warm] = lat;
            sum += lat;
            if (lat < out.min) out.min = lat;
            if (lat > out.max) out.max = lat;
        }
    }
    if (!plain) {
        handleCheck(h, pcoll_join(h));
        const float *res;
        int rc;
        while ((rc = pcoll_wait(h, PCOLL_WAIT_NEWER, 120, NULL)) == PCOLL_OK)
            while (pcoll_next(h, NULL, &res, &rec) == PCOLL_OK) {
                out.wrong += check_round(host_view(res, r, n), n, &rec);
                rounds++;
                fresh += rec.nfresh;
            }
        if (rc != PCOLL_DONE) pcollCheck(rc);
        pcollCheck(pcoll_finalize(&h, 120));
    }
    double m = sum / iters, gm, gmin, gmax;
    long gw;
    MPI_Allreduce(&m, &gm, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&out.min, &gmin, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&out.max, &gmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&out.wrong, &gw, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    out.mean = gm / P * 1e6;
    out.min = gmin * 1e6;
    out.max = gmax * 1e6;
    out.wrong = gw;
    double *all = me ? NULL : malloc((size_t)iters * (size_t)P * sizeof *all);
    MPI_Gather(lats, iters, MPI_DOUBLE, all, iters, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (!me) {
        int na = iters * P;
        qsort(all, (size_t)na, sizeof *all, cmp_double);
        out.p50 = quantile(all, na, 0.5) * 1e6;
        out.p90 = quantile(all, na, 0.9) * 1e6;
        out.p99 = quantile(all, na, 0.99) * 1e6;
    }
    free(all);
    free(lats);
    out.fresh_frac = rounds ? (double)fresh / ((double)rounds * P) : 1.0;
    pcoll_record_free(&rec);
#ifdef PCOLL_HAVE_NCCL
    if (dep != g) cudaFree(dep);
#endif
    free(g);
    free(r);
    return out;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    double unit = 1.0;
    int iters = 64, warm = 4;
    const char *json = "build/bench/collectives.json", *sizes = "8,4194304";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--unit-ms"))
            unit = atof(v), i++;
        else if (!strcmp(a, "--iters"))
            iters = atoi(v), i++;
        else if (!strcmp(a, "--warmup"))
            warm = atoi(v), i++;
        else if (!strcmp(a, "--sizes"))
            sizes = v, i++;
        else if (!strcmp(a, "--json"))
            json = v, i++;
        else if (!strcmp(a, "--poll-us"))
            g_poll_us = atoi(v), i++;
        else if (!strcmp(a, "--spin-us"))
            g_spin_us = atoi(v), i++;
        else if (!strcmp(a, "--only"))
            g_only = v, i++;
        else if (!strcmp(a, "--device"))
            g_device = 1;
        else {
            if (!me)
                fprintf(stderr,
                        "bench_collectives: unknown option '%s' (options: --unit-ms "
                        "--iters --warmup --sizes --json)\n",
                        a);
            MPI_Finalize();
            return 2;
        }
    }
    if (iters < 1 || unit < 0) {
        if (!me) fprintf(stderr, "bench_collectives: --iters must be >= 1 and --unit-ms >= 0\n");
        MPI_Finalize();
        return 2;
    }
    if (g_device) {
#ifdef PCOLL_HAVE_NCCL
        MPI_Comm node;
        int local = 0, ndev = 0, mindev = 0;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &local);
        MPI_Comm_free(&node);
        cudaError_t e = cudaGetDeviceCount(&ndev);
        if (e != cudaSuccess) ndev = 0;
        MPI_Allreduce(&ndev, &mindev, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (mindev < 1) {
            if (!me)
                fprintf(stderr, "bench_collectives: --device: no CUDA device (cudaGetDeviceCount: %s)\n",
                        e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
            MPI_Finalize();
            return 3;
        }
        cudaSetDevice(local % ndev);
#else
        if (!me)
            fprintf(stderr, "bench_collectives: --device needs build/bench/bench_collectives_cuda "
                            "(built when nvcc, cuDNN and NCCL are present)\n");
        MPI_Finalize();
        return 2;
#endif
    }
    const char *modes[] = {"mpi_allreduce", "sync", "solo", "majority", "quorum"};
    json_t *root = json_object(), *arr = json_array(), *hosts = gather_hosts();
    if (!me) {
        printf("# eager-SGD partial allreduce, %d ranks, rank r delayed r x %.3g ms (linear skew), "
               "%d iterations (+%d warm-up), mean over ranks of deposit-to-completion latency, "
               "%s buffers\n",
               P, unit, iters, warm, g_device ? "device" : "host");
        printf("%12s %10s %6s %14s %6s %11s %10s %11s %11s %11s %11s %6s %6s\n", "size(B)", "count", "type",
               "mode", "skew", "mean(us)", "min(us)", "median(us)", "p90(us)", "p99(us)", "max(us)", "fresh",
               "#wrong");
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", sizes);
    long wrong_all = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        size_t bytes = (size_t)atol(tok), n = bytes / 4 ? bytes / 4 : 1;
        for (int sk = 0; sk < 2; sk++)
            for (int m = 0; m < 5; m++) {
                if (g_only && !strstr(g_only, modes[m])) continue;
                result_t r = run(modes[m], n, sk, unit, iters, warm);
                wrong_all += r.wrong;
                if (me) continue;
                printf("%12zu %10zu %6s %14s %6s %11.1f %10.1f %11.1f %11.1f %11.1f %11.1f %6.2f "
                       "%6ld\n",
                       n * 4, n, "float", modes[m], sk ? "linear" : "none", r.mean, r.min, r.p50, r.p90,
                       r.p99, r.max, r.fresh_frac, r.wrong);
                fflush(stdout);
                json_t *o = json_object();
                json_object_set_new(o, "mode", json_string(modes[m]));
                json_object_set_new(o, "skew", json_string(sk ? "linear" : "none"));
                json_object_set_new(o, "bytes", json_integer((json_int_t)(n * 4)));
                json_object_set_new(o, "count", json_integer((json_int_t)n));
                json_object_set_new(o, "mean_latency_us", json_real(r.mean));
                json_object_set_new(o, "min_latency_us", json_real(r.min));
                json_object_set_new(o, "max_latency_us", json_real(r.max));
                json_object_set_new(o, "median_latency_us", json_real(r.p50));
                json_object_set_new(o, "p90_latency_us", json_real(r.p90));
                json_object_set_new(o, "p99_latency_us", json_real(r.p99));
                json_object_set_new(o, "fresh_fraction", json_real(r.fresh_frac));
                json_object_set_new(o, "wait",
                                    json_string(m >= 2   ? "newer"
                                                : m == 0 ? "blocking"
                                                         : "consumed"));
                json_object_set_new(o, "wrong", json_integer(r.wrong));
                json_array_append_new(arr, o);
            }
    }
    if (!me) {
        json_object_set_new(root, "ranks", json_integer(P));
        if (hosts) json_object_set_new(root, "hosts", hosts);
        json_object_set_new(root, "memory", json_string(g_device ? "device" : "host"));
        json_object_set_new(root, "unit_ms", json_real(unit));
        json_object_set_new(root, "iterations", json_integer(iters));
        json_object_set_new(root, "warmup", json_integer(warm));
        int vlen = 0;
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        MPI_Get_library_version(ver, &vlen);
        char *nl = strchr(ver, '\n');
        if (nl) *nl = 0;
        json_object_set_new(root, "mpi", json_string(ver));
        json_object_set_new(root, "results", arr);
        if (json_dump_file(root, json, JSON_INDENT(1)) != 0)
            fprintf(stderr, "bench_collectives: cannot write %s\n", json);
        else
            printf("# wrote %s\n", json);
    } else
        json_decref(arr);
    json_decref(root);
    MPI_Finalize();
    return wrong_all ? 1 : 0;
}
