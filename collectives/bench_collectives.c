/* bench_collectives.c -- the paper's Fig. 9 allreduce microbenchmark, nccl-tests style.
 *
 * P ranks; per iteration: MPI_Barrier, rank r sleeps r x unit ms (linear skew) or nothing,
 * then deposit -> wait (or plain MPI_Allreduce); latency = deposit to completion, per rank.
 * Rows (size, skew, mode) run in turn; with --reps R the whole set of rows runs R times, so the
 * rows of one repetition are measured side by side in time. Reported over all P x iters x R
 * latencies of a row: mean, min, median, 90th and 99th percentiles and max (one outlier can move
 * the mean of a short run far; the median cannot); the ratio of the mean and of the median to
 * plain MPI_Allreduce of the same size and skew (mean/mpi, med/mpi), and the range of the ratio
 * of the means over the repetitions (each repetition's own pair): the spread of the figure.
 * #wrong counts rounds whose result is not the sum of what the fresh ranks deposited (each rank
 * deposits all elements = rank + 1).
 * Modes: mpi_allreduce, sync, solo, majority, quorum (Q = P/2).
 * The JSON also names each rank's host (MPI_Get_processor_name), "hosts"[r] for rank r, and per
 * row each repetition's mean ("rep_mean_latency_us") and the ratios.
 * Wait semantics: sync waits until its own deposit's round completed. The partial modes use the
 * original eager-SGD semantics: a late rank does not wait for a round of its own
 * (PCOLL_WAIT_NEWER: it returns as soon as a round it has not applied yet is complete; its
 * deposit goes into a later round, accumulating with the next one if need be). Waiting for
 * consumption would deadlock majority and quorum against the per-iteration barrier: the next
 * round's initiator, or the ranks that would complete the quorum, are at that barrier.
 *
 * usage: mpirun -np P bench_collectives [--unit-ms 1] [--iters 64] [--reps 1] [--warmup 4]
 *                 [--sizes 8,4194304] [--json build/bench/collectives.json]
 *                 [--only mode,mode...] [--poll-us U] [--spin-us U] (libpcoll's cfg.poll_max_us,
 *                 cfg.spin_us) [--wake-always] (cfg.wake_always: the engine woken after every
 *                 partial round, even when the application comes back within spin_us)
 *                 [--reduce auto|iallreduce|rd] (cfg.reduce: the rounds' reduction algorithm)
 *        [--device]  device buffers (PCOLL_MEM_DEVICE: NCCL, or staged through the host when ranks
 *                    share a GPU); only in build/bench/bench_collectives_cuda (-DPCOLL_HAVE_NCCL);
 *                    rank r uses GPU (local rank % devices); mpi_allreduce stays a host baseline.
 *        [--copy]    deposit with pcoll_deposit (a copy of the n floats per deposit) instead of
 *                    lending the buffer (pcoll_lend: host memory, the default, since this program
 *                    never writes its contribution again); "deposit" in the JSON says which
 *        [--deposit-wakes]  deposit without PCOLL_WAIT_NEXT (the engine is woken for each deposit)
 */
#include "collectives/bench_stats.h"
#include "collectives/pcoll.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int P, me;
static int g_poll_us = 0, g_spin_us = -1, g_wake_always = 0, g_reduce = PCOLL_REDUCE_AUTO;
static const char *g_only = NULL;
static int g_device = 0;
static int g_wait_next = PCOLL_WAIT_NEXT;
static int g_lend = 1; /* host memory: pcoll_lend, not pcoll_deposit (--copy: the copy) */
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
    double mean, min, max, fresh_frac; /* mean over ranks and iterations (us) */
    long wrong;
    double wakes, polls; /* per rank and round: thread wake-ups (engine + pcoll_wait), engine polls */
} result_t;

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

/* One row's run on this rank: its buffers, its handle and the rounds it took. */
typedef struct {
    size_t n;               /* floats per deposit */
    int plain, newer, lend; /* mpi_allreduce; a partial mode (accumulate, PCOLL_WAIT_NEWER); lent */
    float *g, *r, *dep;     /* contribution (all me + 1), result buffer, what is deposited (g or a
                               device copy) */
    pcoll_t *h;             /* NULL when plain */
    pcoll_record_t rec;
    long rounds, fresh; /* rounds taken, and their fresh ranks */
} bench_run_t;

/* A handle for mode (a name; quorum gets Q = P/2) over n floats with the g_ settings; collective.
 * Errors: message and MPI_Abort (pcollCheck). */
static pcoll_t *create_handle(const char *mode, size_t n) {
    pcoll_t *h = NULL;
    pcoll_config_t cfg;
    pcoll_config_default(&cfg);
    /* with linear skew every rank's deposit may start its own round: up to P rounds complete
     * while the last rank sleeps, so the ring keeps P + 1 (buffers are allocated when first
     * used); a smaller ring would hold the fast ranks back (correct, but not Fig. 9) */
    cfg.ring = P + 1 > 16 ? P + 1 : 16;
    cfg.records = 1024;
    if (g_poll_us > 0) cfg.poll_max_us = g_poll_us;
    if (g_spin_us >= 0) cfg.spin_us = g_spin_us;
    cfg.wake_always = g_wake_always;
    cfg.reduce = g_reduce;
    char m[32];
    if (!strcmp(mode, pcoll_mode_name(PCOLL_QUORUM))) /* quorum: Q = P/2 */
        pcoll_format_mode(PCOLL_QUORUM, P / 2 > 0 ? P / 2 : 1, m, sizeof m);
    else
        snprintf(m, sizeof m, "%s", mode);
    pcollCheck(pcoll_parse_mode(m, &cfg.rule));
    pcollCheck(pcoll_create(MPI_COMM_WORLD, n, g_device ? PCOLL_MEM_DEVICE : PCOLL_MEM_HOST, &cfg, &h));
    return h;
}

/* Sets b up for mode over n floats: buffers (a device copy under --device), the handle unless
 * mpi_allreduce, g grown to pcoll_lend_len when lent; collective. Errors: message, MPI_Abort. */
static void setup_run(bench_run_t *b, const char *mode, size_t n) {
    memset(b, 0, sizeof *b);
    b->n = n;
    b->g = malloc(n * sizeof *b->g);
    b->r = malloc(n * sizeof *b->r);
    for (size_t i = 0; i < n; i++) b->g[i] = (float)(me + 1);
    b->dep = b->g;
#ifdef PCOLL_HAVE_NCCL
    if (g_device) {
        if (cudaMalloc((void **)&b->dep, n * sizeof *b->dep) != cudaSuccess ||
            cudaMemcpy(b->dep, b->g, n * sizeof *b->g, cudaMemcpyHostToDevice) != cudaSuccess) {
            fprintf(stderr, "rank %d: cannot allocate %zu floats on the GPU\n", me, n);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
#endif
    b->plain = !strcmp(mode, "mpi_allreduce");
    b->newer = strcmp(mode, "sync") != 0;
    pcoll_record_init(&b->rec, P);
    if (!b->plain) b->h = create_handle(mode, n);
    b->lend = !b->plain && g_lend && !g_device; /* g is never written again: it can be lent */
    if (b->lend) {
        float *gl = realloc(b->g, pcoll_lend_len(b->h) * sizeof *b->g);
        if (!gl) {
            fprintf(stderr, "rank %d: out of memory for a lent buffer of %zu floats\n", me,
                    pcoll_lend_len(b->h));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        b->g = b->dep = gl;
    }
}

/* Takes every completed round of b's handle (pcoll_next), counting rounds and fresh ranks;
 * returns how many were wrong (check_round). */
static long take_rounds(bench_run_t *b) {
    long wrong = 0;
    const float *res;
    while (pcoll_next(b->h, NULL, &res, &b->rec) == PCOLL_OK) {
        wrong += check_round(host_view(res, b->r, b->n), b->n, &b->rec);
        b->rounds++;
        b->fresh += b->rec.nfresh;
    }
    return wrong;
}

/* One iteration: barrier, the skew's sleep, then MPI_Allreduce (checked) or deposit and wait,
 * then the rounds completed; returns the latency (s) from deposit to completion and adds the
 * wrong results to *wrong. Collective. */
static double one_iteration(bench_run_t *b, int linear, double unit, long *wrong) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (linear) sleep_ms(me * unit);
    double t0 = now();
    if (b->plain) {
        MPI_Allreduce(b->g, b->r, (int)b->n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double want = P * (P + 1) / 2.0;
        for (size_t i = 0; i < b->n; i++)
            if (b->r[i] != (float)want) {
                (*wrong)++;
                break;
            }
    } else {
        const int fl = (b->newer ? PCOLL_ACCUMULATE : 0) | g_wait_next;
        handleCheck(b->h, b->lend ? pcoll_lend(b->h, b->dep, fl) : pcoll_deposit(b->h, b->dep, fl));
        handleCheck(b->h, pcoll_wait(b->h, b->newer ? PCOLL_WAIT_NEWER : PCOLL_WAIT_CONSUMED, 120, NULL));
    }
    double lat = now() - t0;
    if (!b->plain) *wrong += take_rounds(b);
    return lat;
}

/* Partial and sync modes: joins, takes the last rounds, sets out's wakes and polls per rank and
 * round (collective) and finalizes the handle. Errors: message and MPI_Abort. */
static void finish_handle(bench_run_t *b, result_t *out) {
    handleCheck(b->h, pcoll_join(b->h));
    int rc;
    while ((rc = pcoll_wait(b->h, PCOLL_WAIT_NEWER, 120, NULL)) == PCOLL_OK) out->wrong += take_rounds(b);
    if (rc != PCOLL_DONE) pcollCheck(rc);
    pcoll_stats_t st = {0};
    handleCheck(b->h, pcoll_stats(b->h, &st));
    double mine[2] = {(double)(st.engine_wakes + st.wait_sleeps), (double)st.engine_polls}, all[2];
    MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double per = st.rounds ? 1.0 / ((double)st.rounds * P) : 0;
    out->wakes = all[0] * per;
    out->polls = all[1] * per;
    pcollCheck(pcoll_finalize(&b->h, 120));
}

static void free_run(bench_run_t *b) {
    pcoll_record_free(&b->rec);
#ifdef PCOLL_HAVE_NCCL
    if (b->dep != b->g) cudaFree(b->dep);
#endif
    free(b->g);
    free(b->r);
}

/* Makes out (this rank's min, max, wrong; sum: its latencies' sum, s) the whole run's: mean over
 * ranks, min, max (us), wrong summed; gathers every rank's lats[iters] into pool[*npool...] on
 * rank 0. Collective. */
static void reduce_result(result_t *out, double sum, int iters, const double *lats, double *pool,
                          int *npool) {
    double m = sum / iters, gm, gmin, gmax;
    long gw;
    MPI_Allreduce(&m, &gm, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&out->min, &gmin, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&out->max, &gmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&out->wrong, &gw, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    out->mean = gm / P * 1e6;
    out->min = gmin * 1e6;
    out->max = gmax * 1e6;
    out->wrong = gw;
    MPI_Gather(lats, iters, MPI_DOUBLE, me ? NULL : pool + *npool, iters, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (!me) *npool += iters * P;
}

/* One row, one repetition: every rank's iters latencies; rank 0 appends all P x iters of them
 * (seconds) to pool[*npool...] (pool has room for them), for percentiles over repetitions. */
static result_t run(const char *mode, size_t n, int linear, double unit, int iters, int warm, double *pool,
                    int *npool) {
    result_t out = {0, 1e30, 0, 0, 0, 0, 0};
    double *lats = malloc((size_t)iters * sizeof *lats), sum = 0;
    bench_run_t b;
    setup_run(&b, mode, n);
    for (int it = 0; it < warm + iters; it++) {
        double lat = one_iteration(&b, linear, unit, &out.wrong);
        if (it >= warm) {
            lats[it - warm] = lat;
            sum += lat;
            if (lat < out.min) out.min = lat;
            if (lat > out.max) out.max = lat;
        }
    }
    if (!b.plain) finish_handle(&b, &out);
    reduce_result(&out, sum, iters, lats, pool, npool);
    free(lats);
    out.fresh_frac = b.rounds ? (double)b.fresh / ((double)b.rounds * P) : 1.0;
    free_run(&b);
    return out;
}

/* The rows' modes: 0 the MPI_Allreduce baseline, then libpcoll's modes by name (quorum: Q = P/2). */
#define NMODES 5
static const char *mode_of(int m) { return m ? pcoll_mode_name((pcoll_mode_t)(m - 1)) : "mpi_allreduce"; }

/* One row of the table (size, skew, mode) over the repetitions; pool and rep_mean on rank 0. */
typedef struct {
    double *pool; /* every latency (s) of every repetition */
    int npool, ran;
    double *rep_mean;           /* [reps] mean latency (us) of each repetition */
    double fresh, wakes, polls; /* averages over the repetitions */
    long wrong;
    double mean, min, max, p50, p90, p99; /* us, over the pool */
} row_t;

/* Statistics over the pooled latencies of a row (rank 0). */
static void summarize(row_t *w) {
    int n = w->npool;
    qsort(w->pool, (size_t)n, sizeof *w->pool, bench_cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += w->pool[i];
    w->mean = n ? sum / n * 1e6 : 0;
    w->min = n ? w->pool[0] * 1e6 : 0;
    w->max = n ? w->pool[n - 1] * 1e6 : 0;
    w->p50 = n ? bench_quantile(w->pool, n, 0.5) * 1e6 : 0;
    w->p90 = n ? bench_quantile(w->pool, n, 0.9) * 1e6 : 0;
    w->p99 = n ? bench_quantile(w->pool, n, 0.99) * 1e6 : 0;
}

/* Prints row w (size n floats, skew sk, mode m) of the table and returns its JSON object; base:
 * the plain MPI_Allreduce row of the same size and skew (NULL if it did not run), for the ratios
 * of the means and medians and the range of the per-repetition ratio of the means. */
static json_t *report_row(const row_t *w, const row_t *base, int reps, size_t n, int sk, int m) {
    int cmp = base && base->mean > 0;
    double rmin = 0, rmax = 0;
    for (int k = 0; cmp && k < reps; k++) {
        double q = w->rep_mean[k] / base->rep_mean[k];
        if (!k || q < rmin) rmin = q;
        if (!k || q > rmax) rmax = q;
    }
    char range[32] = "-";
    if (cmp) snprintf(range, sizeof range, "%.2f-%.2f", rmin, rmax);
    printf("%12zu %10zu %6s %14s %6s %11.1f %10.1f %11.1f %11.1f %11.1f %11.1f %6.2f %6ld %9.2f %9.2f %15s "
           "%7.2f %7.1f\n",
           n * 4, n, "float", mode_of(m), sk ? "linear" : "none", w->mean, w->min, w->p50, w->p90, w->p99,
           w->max, w->fresh, w->wrong, cmp ? w->mean / base->mean : NAN, cmp ? w->p50 / base->p50 : NAN,
           range, w->wakes, w->polls);
    fflush(stdout);
    json_t *o = json_object(), *rm = json_array();
    json_object_set_new(o, "mode", json_string(mode_of(m)));
    json_object_set_new(o, "skew", json_string(sk ? "linear" : "none"));
    json_object_set_new(o, "bytes", json_integer((json_int_t)(n * 4)));
    json_object_set_new(o, "count", json_integer((json_int_t)n));
    const char *names[] = {"mean_latency_us",   "min_latency_us", "max_latency_us",
                           "median_latency_us", "p90_latency_us", "p99_latency_us"};
    const double vals[] = {w->mean, w->min, w->max, w->p50, w->p90, w->p99};
    for (int i = 0; i < 6; i++) json_object_set_new(o, names[i], json_real(vals[i]));
    for (int k = 0; k < reps; k++) json_array_append_new(rm, json_real(w->rep_mean[k]));
    json_object_set_new(o, "rep_mean_latency_us", rm);
    if (cmp) {
        json_object_set_new(o, "mean_ratio_mpi", json_real(w->mean / base->mean));
        json_object_set_new(o, "median_ratio_mpi", json_real(w->p50 / base->p50));
        json_object_set_new(o, "rep_mean_ratio_mpi_min", json_real(rmin));
        json_object_set_new(o, "rep_mean_ratio_mpi_max", json_real(rmax));
    }
    json_object_set_new(o, "fresh_fraction", json_real(w->fresh));
    if (m > 0) { /* per rank and round, averaged over the repetitions (pcoll_stats) */
        json_object_set_new(o, "wakeups_per_round", json_real(w->wakes));
        json_object_set_new(o, "engine_polls_per_round", json_real(w->polls));
    }
    json_object_set_new(o, "wait", json_string(m >= 2 ? "newer" : m == 0 ? "blocking" : "consumed"));
    json_object_set_new(o, "wrong", json_integer(w->wrong));
    return o;
}

/* The command line beyond the g_ settings above. */
typedef struct {
    double unit;              /* --unit-ms: rank r sleeps r x unit ms under linear skew */
    int iters, warm, reps;    /* --iters, --warmup, --reps */
    const char *json, *sizes; /* --json output path, --sizes comma-separated bytes */
} args_t;

/* Parses argv into a (and the g_ settings). Returns 0, or exit code 2 after a message on rank 0
 * (an unknown option or a bad value of --reduce, or --iters/--reps < 1 or --unit-ms < 0). */
static int parse_args(int argc, char **argv, args_t *a) {
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(o, "--unit-ms"))
            a->unit = atof(v), i++;
        else if (!strcmp(o, "--reps"))
            a->reps = atoi(v), i++;
        else if (!strcmp(o, "--iters"))
            a->iters = atoi(v), i++;
        else if (!strcmp(o, "--warmup"))
            a->warm = atoi(v), i++;
        else if (!strcmp(o, "--sizes"))
            a->sizes = v, i++;
        else if (!strcmp(o, "--json"))
            a->json = v, i++;
        else if (!strcmp(o, "--poll-us"))
            g_poll_us = atoi(v), i++;
        else if (!strcmp(o, "--spin-us"))
            g_spin_us = atoi(v), i++;
        else if (!strcmp(o, "--only"))
            g_only = v, i++;
        else if (!strcmp(o, "--device"))
            g_device = 1;
        else if (!strcmp(o, "--deposit-wakes"))
            g_wait_next = 0;
        else if (!strcmp(o, "--copy"))
            g_lend = 0;
        else if (!strcmp(o, "--wake-always"))
            g_wake_always = 1;
        else if (!strcmp(o, "--reduce") && v &&
                 (!strcmp(v, "auto") || !strcmp(v, "iallreduce") || !strcmp(v, "rd")))
            g_reduce = !strcmp(v, "rd")           ? PCOLL_REDUCE_RD
                       : !strcmp(v, "iallreduce") ? PCOLL_REDUCE_IALLREDUCE
                                                  : PCOLL_REDUCE_AUTO,
            i++;
        else {
            if (!me)
                fprintf(stderr,
                        "bench_collectives: unknown option '%s' (options: --unit-ms "
                        "--iters --reps --warmup --sizes --json --only --poll-us --spin-us --device --copy\n"
                        "--deposit-wakes --wake-always --reduce auto|iallreduce|rd)\n",
                        o);
            return 2;
        }
    }
    if (a->iters < 1 || a->unit < 0 || a->reps < 1) {
        if (!me) fprintf(stderr, "bench_collectives: --iters and --reps must be >= 1 and --unit-ms >= 0\n");
        return 2;
    }
    return 0;
}

/* --device: rank r takes GPU (local rank % devices), collective. Returns 0, or the exit code
 * after a message on rank 0: 3 if some rank sees no CUDA device, 2 in a build without NCCL. */
static int select_device(void) {
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
        return 3;
    }
    cudaSetDevice(local % ndev);
    return 0;
#else
    if (!me)
        fprintf(stderr, "bench_collectives: --device needs build/bench/bench_collectives_cuda "
                        "(built when nvcc, cuDNN and NCCL are present)\n");
    return 2;
#endif
}

/* --sizes (comma-separated bytes, at most 16, the rest ignored) as float counts (>= 1) in szs;
 * returns how many. */
static size_t parse_sizes(const char *sizes, size_t szs[16]) {
    size_t nsz = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", sizes);
    for (char *tok = strtok(buf, ","); tok && nsz < 16; tok = strtok(NULL, ",")) {
        size_t bytes = (size_t)atol(tok);
        szs[nsz++] = bytes / 4 ? bytes / 4 : 1;
    }
    return nsz;
}

/* nrow rows, each with reps per-repetition means and (rank 0) a pool of per latencies; out of
 * memory: message and MPI_Abort. Free with free_rows. */
static row_t *alloc_rows(int nrow, int per, int reps) {
    row_t *rows = calloc((size_t)nrow, sizeof *rows);
    int nomem = !rows;
    for (int i = 0; !nomem && i < nrow; i++) {
        if (!me) nomem |= !(rows[i].pool = malloc((size_t)per * sizeof(double)));
        nomem |= !(rows[i].rep_mean = calloc((size_t)reps, sizeof(double)));
    }
    if (nomem) {
        fprintf(stderr, "bench_collectives: rank %d: out of memory for %d rows of %d latencies\n", me, nrow,
                per);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return rows;
}

static void free_rows(row_t *rows, int nrow) {
    for (int i = 0; i < nrow; i++) {
        free(rows[i].pool);
        free(rows[i].rep_mean);
    }
    free(rows);
}

/* The row of size index z, skew sk (0 none, 1 linear) and mode m (mode_of) in rows. */
static row_t *row_at(row_t *rows, size_t z, int sk, int m) { return &rows[((int)z * 2 + sk) * NMODES + m]; }

/* Every row (the modes --only allows) of every size and skew, repetitions outermost so that the
 * rows of one repetition run side by side in time; collective. */
static void run_rows(row_t *rows, const size_t *szs, size_t nsz, const args_t *a) {
    for (int rp = 0; rp < a->reps; rp++)
        for (size_t z = 0; z < nsz; z++)
            for (int sk = 0; sk < 2; sk++)
                for (int m = 0; m < NMODES; m++) {
                    if (g_only && !strstr(g_only, mode_of(m))) continue;
                    row_t *w = row_at(rows, z, sk, m);
                    result_t r = run(mode_of(m), szs[z], sk, a->unit, a->iters, a->warm, w->pool, &w->npool);
                    w->ran = 1;
                    w->rep_mean[rp] = r.mean;
                    w->fresh += r.fresh_frac / a->reps;
                    w->wakes += r.wakes / a->reps;
                    w->polls += r.polls / a->reps;
                    w->wrong += r.wrong;
                }
}

/* Rank 0: the table's header and every row that ran (report_row), their JSON objects appended
 * to arr; returns the number of wrong rounds over all rows. */
static long report_rows(row_t *rows, const size_t *szs, size_t nsz, int reps, json_t *arr) {
    long wrong_all = 0;
    printf("%12s %10s %6s %14s %6s %11s %10s %11s %11s %11s %11s %6s %6s %9s %9s %15s %7s %7s\n", "size(B)",
           "count", "type", "mode", "skew", "mean(us)", "min(us)", "median(us)", "p90(us)", "p99(us)",
           "max(us)", "fresh", "#wrong", "mean/mpi", "med/mpi", "mean/mpi range", "wake/r", "poll/r");
    for (int i = 0; i < (int)nsz * 2 * NMODES; i++)
        if (rows[i].ran) summarize(&rows[i]);
    for (size_t z = 0; z < nsz; z++)
        for (int sk = 0; sk < 2; sk++)
            for (int m = 0; m < NMODES; m++) {
                row_t *w = row_at(rows, z, sk, m), *base = row_at(rows, z, sk, 0);
                if (!w->ran) continue;
                wrong_all += w->wrong;
                json_array_append_new(arr, report_row(w, base->ran ? base : NULL, reps, szs[z], sk, m));
            }
    return wrong_all;
}

/* Rank 0: writes the settings, hosts (taken; may be NULL), the MPI library and the rows arr
 * (taken) to a->json, and says so on stdout (or that it could not, on stderr). */
static void write_json(const args_t *a, json_t *hosts, json_t *arr) {
    json_t *root = json_object();
    json_object_set_new(root, "ranks", json_integer(P));
    if (hosts) json_object_set_new(root, "hosts", hosts);
    json_object_set_new(root, "memory", json_string(g_device ? "device" : "host"));
    json_object_set_new(root, "deposit", json_string(g_lend && !g_device ? "lend" : "copy"));
    json_object_set_new(root, "wake_always", json_boolean(g_wake_always));
    json_object_set_new(root, "reduce",
                        json_string(g_reduce == PCOLL_REDUCE_RD           ? "rd"
                                    : g_reduce == PCOLL_REDUCE_IALLREDUCE ? "iallreduce"
                                                                          : "auto"));
    json_object_set_new(root, "unit_ms", json_real(a->unit));
    json_object_set_new(root, "iterations", json_integer(a->iters));
    json_object_set_new(root, "repetitions", json_integer(a->reps));
    json_object_set_new(root, "warmup", json_integer(a->warm));
    int vlen = 0;
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(ver, &vlen);
    char *nl = strchr(ver, '\n');
    if (nl) *nl = 0;
    json_object_set_new(root, "mpi", json_string(ver));
    json_object_set_new(root, "results", arr);
    if (json_dump_file(root, a->json, JSON_INDENT(1)) != 0)
        fprintf(stderr, "bench_collectives: cannot write %s\n", a->json);
    else
        printf("# wrote %s\n", a->json);
    json_decref(root);
}

/* Exit: 0 every round right; 1 some round wrong (or out of memory: MPI_Abort); 2 usage;
 * 3 --device without a CUDA device. */
int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    args_t a = {1.0, 64, 4, 1, "build/bench/collectives.json", "8,4194304"};
    int rc = parse_args(argc, argv, &a);
    if (!rc && g_device) rc = select_device();
    if (rc) {
        MPI_Finalize();
        return rc;
    }
    json_t *arr = json_array(), *hosts = gather_hosts();
    size_t szs[16], nsz = parse_sizes(a.sizes, szs);
    int nrow = (int)nsz * 2 * NMODES;
    row_t *rows = alloc_rows(nrow, a.iters * P * a.reps, a.reps);
    if (!me) {
        printf("# eager-SGD partial allreduce, %d ranks, rank r delayed r x %.3g ms (linear skew), "
               "%d iterations (+%d warm-up) x %d repetitions, deposit-to-completion latency of every "
               "rank and iteration, %s buffers\n",
               P, a.unit, a.iters, a.warm, a.reps, g_device ? "device" : "host");
        if (a.reps > 1) printf("# repetition 1..%d: every row in turn, then the next repetition\n", a.reps);
    }
    run_rows(rows, szs, nsz, &a);
    long wrong_all = me ? 0 : report_rows(rows, szs, nsz, a.reps, arr);
    free_rows(rows, nrow);
    if (!me)
        write_json(&a, hosts, arr);
    else
        json_decref(arr);
    MPI_Finalize();
    return wrong_all ? 1 : 0;
}
