/* metrics.c -- pieces of the run's JSON (results/schema/run.schema.json): environment, PAPI
 * status, per-round aggregation, atomic file writes. Only rank 0 builds and writes the file. */
#include "trainer/metrics.h"
#include "common/cpu.h"
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_PAPI
#include <dlfcn.h>
#include <papi.h>
#endif

json_t *metrics_environment(int P, char **hosts, int argc, char **argv) {
    json_t *e = json_object(), *h = json_array();
    json_object_set_new(e, "ranks", json_integer(P));
    for (int i = 0; i < P; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= !strcmp(hosts[i], hosts[j]);
        if (!seen) json_array_append_new(h, json_string(hosts[i]));
    }
    json_object_set_new(e, "hosts", h);
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    char *nl = strchr(ver, '\n');
    if (nl) *nl = 0;
    json_object_set_new(e, "mpi", json_string(ver));
    /* this build is the CPU backend: no CUDA, cuDNN or NCCL in the process */
    json_object_set_new(e, "cuda", json_null());
    json_object_set_new(e, "cudnn", json_null());
    json_object_set_new(e, "nccl", json_null());
    const char *jid = getenv("SLURM_JOB_ID"), *nodes = getenv("SLURM_JOB_NODELIST");
    json_object_set_new(e, "slurm_job_id", jid ? json_string(jid) : json_null());
    json_object_set_new(e, "slurm_nodelist", nodes ? json_string(nodes) : json_null());
    char d[64];
    time_t t = time(NULL);
    strftime(d, sizeof d, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    json_object_set_new(e, "date", json_string(d));
    char cpu[400]; /* rank 0's (common/cpu.h) */
    json_object_set_new(e, "cpu", cpu_describe(cpu, sizeof cpu) ? json_string(cpu) : json_null());
    size_t cl = 1;
    for (int i = 0; i < argc; i++) cl += strlen(argv[i]) + 1;
    char *cmd = calloc(cl, 1);
    for (int i = 0; cmd && i < argc; i++) {
        strcat(cmd, argv[i]);
        if (i + 1 < argc) strcat(cmd, " ");
    }
    json_object_set_new(e, "command", json_string(cmd ? cmd : ""));
    free(cmd);
    return e;
}

/* PAPI: cycles, instructions and L2 cache misses of the training (application) thread, read and
 * reset once per epoch. Every rank tries; the counters are reported only if every rank has them.
 * libpapi is optional at run time: it is opened with dlopen (never a link-time dependency, so a
 * machine without it, or with another PAPI soname, still runs the trainer): $EAGER_PAPI_LIB
 * alone when set (a path or soname), else in order the soname of the papi.h this was built
 * with, libpapi.so and libpapi.so.MAJOR; PAPI_library_init then refuses a library whose version
 * differs from the header's. */
static int papi_on;
static char papi_why[300] = "built without PAPI (papi.h not found at build time; 'make deps' "
                            "installs libpapi-dev)";
#ifdef HAVE_PAPI
static int papi_es = PAPI_NULL;
static struct {
    int (*library_init)(int);
    int (*num_cmp_hwctrs)(int);
    int (*create_eventset)(int *);
    int (*add_event)(int, int);
    int (*start)(int);
    int (*read)(int, long long *);
    int (*reset)(int);
} papi;

/* dlopen + dlsym of the functions above; 0 with papi_why set when no usable libpapi is found */
static int papi_load(void) {
    char cand[4][128];
    int nc = 0;
    const char *env = getenv("EAGER_PAPI_LIB");
    if (env && *env)
        snprintf(cand[nc++], sizeof cand[0], "%s", env);
    else {
        snprintf(cand[nc++], sizeof cand[0], "libpapi.so.%d.%d", PAPI_VERSION_MAJOR(PAPI_VERSION),
                 PAPI_VERSION_MINOR(PAPI_VERSION));
        snprintf(cand[nc++], sizeof cand[0], "libpapi.so");
        snprintf(cand[nc++], sizeof cand[0], "libpapi.so.%d", PAPI_VERSION_MAJOR(PAPI_VERSION));
    }
    void *h = NULL;
    const char *first_err = NULL;
    char errbuf[160] = "";
    for (int i = 0; i < nc && !h; i++) {
        h = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL);
        if (!h && !first_err) {
            snprintf(errbuf, sizeof errbuf, "%s", dlerror());
            first_err = errbuf;
        }
    }
    if (!h) {
        snprintf(papi_why, sizeof papi_why, "unavailable (libpapi not found: %.150s%s)",
                 first_err ? first_err : "?",
                 nc > 1 ? "; also tried libpapi.so and libpapi.so.MAJOR; EAGER_PAPI_LIB may name it" : "");
        return 0;
    }
    struct {
        void **fn;
        const char *name;
    } sym[] = {{(void **)&papi.library_init, "PAPI_library_init"},
               {(void **)&papi.num_cmp_hwctrs, "PAPI_num_cmp_hwctrs"},
               {(void **)&papi.create_eventset, "PAPI_create_eventset"},
               {(void **)&papi.add_event, "PAPI_add_event"},
               {(void **)&papi.start, "PAPI_start"},
               {(void **)&papi.read, "PAPI_read"},
               {(void **)&papi.reset, "PAPI_reset"}};
    for (size_t i = 0; i < sizeof sym / sizeof sym[0]; i++)
        if (!(*sym[i].fn = dlsym(h, sym[i].name))) {
            snprintf(papi_why, sizeof papi_why, "unavailable (the libpapi found lacks %s)", sym[i].name);
            return 0;
        }
    return 1;
}
#endif

int metrics_papi_start(void) {
#ifdef HAVE_PAPI
    if (!papi_load()) return 0;
    int v = papi.library_init(PAPI_VER_CURRENT);
    if (v != PAPI_VER_CURRENT) {
        snprintf(papi_why, sizeof papi_why,
                 "unavailable (PAPI_library_init: %d; the libpapi found is not the "
                 "%d.%d this was built with, or failed)",
                 v, PAPI_VERSION_MAJOR(PAPI_VERSION), PAPI_VERSION_MINOR(PAPI_VERSION));
        return 0;
    }
    if (papi.num_cmp_hwctrs(0) <= 0) {
        snprintf(papi_why, sizeof papi_why,
                 "unavailable (PAPI %d.%d found no hardware counters on this machine: "
                 "a virtual machine without a PMU)",
                 PAPI_VERSION_MAJOR(v), PAPI_VERSION_MINOR(v));
        return 0;
    }
    int ev[3] = {PAPI_TOT_CYC, PAPI_TOT_INS, PAPI_L2_TCM};
    const char *evn[3] = {"PAPI_TOT_CYC", "PAPI_TOT_INS", "PAPI_L2_TCM"};
    if (papi.create_eventset(&papi_es) != PAPI_OK) {
        snprintf(papi_why, sizeof papi_why, "unavailable (PAPI_create_eventset failed)");
        return 0;
    }
    for (int i = 0; i < 3; i++)
        if (papi.add_event(papi_es, ev[i]) != PAPI_OK) {
            snprintf(papi_why, sizeof papi_why,
                     "unavailable (PAPI %d.%d cannot count %s on this machine: no "
                     "hardware counters, e.g. a virtual machine without a PMU)",
                     PAPI_VERSION_MAJOR(v), PAPI_VERSION_MINOR(v), evn[i]);
            return 0;
        }
    if (papi.start(papi_es) != PAPI_OK) {
        snprintf(papi_why, sizeof papi_why, "unavailable (PAPI_start failed)");
        return 0;
    }
    papi_on = 1;
    return 1;
#else
    return 0;
#endif
}

int metrics_papi_read(long long v[3]) {
    v[0] = v[1] = v[2] = 0;
#ifdef HAVE_PAPI
    if (papi_on && papi.read(papi_es, v) == PAPI_OK) {
        papi.reset(papi_es);
        return 1;
    }
#endif
    return 0;
}

json_t *metrics_papi(int available) {
    json_t *o = json_object();
    json_object_set_new(o, "available", json_boolean(available));
    json_object_set_new(
        o, "reason",
        available ? json_null()
                  : json_string(papi_on ? "unavailable (not every rank has hardware counters)" : papi_why));
    json_object_set_new(o, "per_rank", json_array());
    return o;
}

void ragg_reset(ragg_t *a) {
    memset(a, 0, sizeof *a);
    pcoll_agg_reset(&a->r);
}

void ragg_add(ragg_t *a, const pcoll_record_t *r, double lr, double wd) {
    if (!a->r.n) a->lr_first = lr;
    a->lr_last = lr;
    a->wd_sum += wd;
    pcoll_agg_add(&a->r, r);
}

json_t *ragg_json(const ragg_t *g, int epoch) {
    const pcoll_agg_t *a = &g->r;
    json_t *o = json_object();
    json_object_set_new(o, "epoch", json_integer(epoch));
    json_object_set_new(o, "from", json_integer((json_int_t)a->from));
    json_object_set_new(o, "to", json_integer((json_int_t)a->to));
    json_object_set_new(o, "mode", json_string(pcoll_mode_name(a->mode)));
    json_object_set_new(o, "mean_fresh", json_real(a->n ? a->fresh_sum / a->n : 0));
    json_object_set_new(o, "min_fresh", json_integer(a->n ? a->min_fresh : 0));
    json_object_set_new(o, "lr_first", json_real(g->lr_first));
    json_object_set_new(o, "lr_last", json_real(g->lr_last));
    json_object_set_new(o, "wd_sum", json_real(g->wd_sum));
    json_object_set_new(o, "mean_latency_ms", json_real(a->n ? a->lat_sum / a->n : 0));
    json_object_set_new(o, "max_streak", json_integer(a->max_streak));
    json_object_set_new(o, "max_staleness", json_integer(a->max_stale));
    json_object_set_new(o, "mean_staleness", json_real(a->stale_n ? a->stale_sum / a->stale_n : 0));
    return o;
}

int metrics_write(json_t *root, const char *path, char *err, size_t n) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return snprintf(err, n, "metrics: cannot write %s: %s", tmp, strerror(errno)), -1;
    int bad = json_dumpfd(root, fd, JSON_INDENT(1) | JSON_REAL_PRECISION(10)) != 0 || fsync(fd) != 0;
    int e = errno;
    if (close(fd) != 0 && !bad) bad = 1, e = errno;
    if (bad) {
        unlink(tmp);
        return snprintf(err, n, "metrics: cannot write %s: %s", tmp, strerror(e)), -1;
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return snprintf(err, n, "metrics: cannot rename %s to %s: %s", tmp, path, strerror(e)), -1;
    }
    char dir[1100]; /* the rename itself made durable: fsync of the folder (best effort) */
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        slash[slash == dir] = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 0;
}

#ifdef HAVE_NN_CUDA
json_t *metrics_cuda_graph(nn_cuda_model_t *G) {
    nn_cuda_graph_stats_t g;
    nn_cuda_graph_stats(G, &g);
    json_t *o = json_object();
    json_object_set_new(o, "graph", json_boolean(g.graph_steps > 0 && g.eager_steps == 0));
    json_object_set_new(o, "graph_steps", json_integer(g.graph_steps));
    json_object_set_new(o, "captures", json_integer(g.captures));
    json_object_set_new(o, "invalidations", json_integer(g.invalidations));
    json_object_set_new(o, "warm_steps", json_integer(g.warm_steps));
    json_object_set_new(o, "eager_steps", json_integer(g.eager_steps));
    json_object_set_new(o, "eager_why", g.eager_why[0] ? json_string(g.eager_why) : json_null());
    return o;
}
#endif
