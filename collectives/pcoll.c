/* pcoll.c -- libpcoll application side: create (with cross-rank argument check), deposit,
 * wait, next, rules, records, stats, finalize, error strings. The engine is in engine.c. */
#include "collectives/pcoll_impl.h"
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double pcoll_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits on cv (mu held) for at most sec seconds. */
void pcoll_cond_wait_s(pthread_cond_t *cv, pthread_mutex_t *mu, double sec) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (long)((sec - (double)(long)sec) * 1e9);
    ts.tv_sec += (time_t)sec + ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

/* Sticky error of this rank (caller holds mu). The first one is kept: later errors are its
 * consequences, and every later call returns the first code with the first message. */
void pcoll_set_error(struct pcoll *h, int code, const char *fmt, ...) {
    if (h->err) return;
    h->err = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->errmsg, sizeof h->errmsg, fmt, ap);
    va_end(ap);
    pthread_cond_broadcast(&h->cv_app);
    pcoll_wake_engine(h);
}

/* Message of a call that failed without breaking the handle (caller holds mu). */
void pcoll_call_error(struct pcoll *h, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->callmsg, sizeof h->callmsg, fmt, ap);
    va_end(ap);
}

/* Every public call on a handle: enter() counts it in (0: the handle is closing, return
 * PCOLL_ERR_STATE without touching anything else), leave() / leave_locked() counts it out and
 * wakes pcoll_finalize, which waits for the count to reach 0 before it frees the handle. The
 * count is taken before the mutex, so finalize never frees a mutex a caller is waiting for. */
static int enter(struct pcoll *h) {
    __atomic_fetch_add(&h->inflight, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&h->closing, __ATOMIC_SEQ_CST)) return 1;
    __atomic_fetch_sub(&h->inflight, 1, __ATOMIC_SEQ_CST);
    return 0;
}
static void leave_locked(struct pcoll *h) {
    if (__atomic_sub_fetch(&h->inflight, 1, __ATOMIC_SEQ_CST) == 0 &&
        __atomic_load_n(&h->closing, __ATOMIC_SEQ_CST))
        pthread_cond_broadcast(&h->cv_app);
}
static void leave(struct pcoll *h) {
    pthread_mutex_lock(&h->mu);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
}

void pcoll_config_default(pcoll_config_t *c) {
    memset(c, 0, sizeof *c);
    c->rule.mode = PCOLL_SYNC;
    c->rule.quorum = 1;
    c->div = PCOLL_DIV_NONE;
    c->seed = 0x5EED;
    c->ring = 16;
    c->records = 4096;
    c->tau = 0;
    c->horizon = 0;
    c->poll_max_us = 200;
    c->spin_us = 50;
}

static int rule_copy(rule_ent_t *e, uint64_t from, const pcoll_rule_t *r) {
    e->from = from;
    e->mode = r->mode;
    e->quorum = r->quorum;
    e->nwait = 0;
    e->wait = NULL;
    if (r->nwait > 0) {
        e->wait = malloc((size_t)r->nwait * sizeof(int));
        if (!e->wait) return PCOLL_ERR_NOMEM;
        memcpy(e->wait, r->wait, (size_t)r->nwait * sizeof(int));
        e->nwait = r->nwait;
    }
    return PCOLL_OK;
}

static int rule_check(const pcoll_rule_t *r, int P, char *msg, size_t len) {
    if (r->mode < PCOLL_SYNC || r->mode > PCOLL_QUORUM)
        return snprintf(msg, len, "rule.mode %d is not a pcoll_mode_t", (int)r->mode), 0;
    if (r->mode == PCOLL_QUORUM && r->quorum < 1)
        return snprintf(msg, len, "rule.quorum %d: quorum mode needs Q >= 1", r->quorum), 0;
    if (r->nwait < 0 || (r->nwait > 0 && !r->wait))
        return snprintf(msg, len, "rule.nwait %d with wait=%p", r->nwait, (void *)r->wait), 0;
    for (int i = 0; i < r->nwait; i++)
        if (r->wait[i] < 0 || r->wait[i] >= P)
            return snprintf(msg, len, "rule.wait[%d] = %d is not a rank of a %d-rank communicator", i,
                            r->wait[i], P),
                   0;
    return 1;
}

/* The fields every rank must agree on, exchanged at creation. */
typedef struct {
    int64_t ok, n, mem, mode, quorum, div, ring, tau, horizon, nwait;
    uint64_t seed, waithash;
} agree_t;
static const char *agree_names[] = {"(local arguments)", "n",          "mem",  "rule.mode",
                                    "rule.quorum",       "div",        "ring", "tau",
                                    "horizon",           "rule.nwait", "seed", "rule.wait"};

/* Handles that pcoll_finalize freed: only the struct itself stays, marked closing, so that a
 * thread that calls the library after finalize returned (e.g. a controller stopped after
 * finalize) gets PCOLL_ERR_STATE instead of touching freed memory. Kept reachable from here. */
static struct pcoll *g_retired;
static pthread_mutex_t g_retired_mu = PTHREAD_MUTEX_INITIALIZER;

void pcoll_ring_free_buf(struct pcoll *h, float *b) {
#ifdef PCOLL_HAVE_NCCL
    if (h->mem == PCOLL_MEM_DEVICE) {
        pcoll_dev_free(b);
        return;
    }
#endif
    (void)h;
    free(b);
}

/* Frees everything the handle owns. comms: free the communicators too (only when no operation
 * can be pending on them). retire: keep the struct as a closed shell (see g_retired). */
static void destroy(struct pcoll *h, int comms, int retire) {
    if (!h) return;
    if (comms && h->ctl != MPI_COMM_NULL) MPI_Comm_free(&h->ctl);
    if (comms && h->data != MPI_COMM_NULL) MPI_Comm_free(&h->data);
    if (comms && h->hb != MPI_COMM_NULL) MPI_Comm_free(&h->hb);
    free(h->hb_req);
    free(h->hb_buf);
    free(h->hb_sent);
    free(h->hb_recv);
    free(h->peers);
    free(h->heard_at);
    free(h->left);
#ifdef PCOLL_HAVE_NCCL
    if (h->mem == PCOLL_MEM_DEVICE) { /* device buffers */
        pcoll_dev_free(h->dep[0]);
        pcoll_dev_free(h->dep[1]);
        pcoll_dev_free(h->zeros);
        pcoll_dev_free(h->scratch);
    } else
#endif
    {
        free(h->dep[0]);
        free(h->dep[1]);
        free(h->zeros);
        free(h->scratch);
    }
    if (h->ring)
        for (int i = 0; i < h->K; i++) {
            pcoll_ring_free_buf(h, h->ring[i].buf);
            pcoll_record_free(&h->ring[i].rec);
        }
#ifdef PCOLL_HAVE_NCCL
    if (h->mem == PCOLL_MEM_DEVICE) pcoll_dev_close(h->dev);
#endif
    free(h->ring);
    if (h->recs)
        for (int i = 0; i < h->R; i++) pcoll_record_free(&h->recs[i].r);
    free(h->recs);
    for (int i = 0; i < h->nrules; i++) free(h->rules[i].wait);
    free(h->rules);
    free(h->joined);
    free(h->streak);
    free(h->active);
    free(h->ready_round);
    free(h->cnt_round);
    free(h->cnt_val);
    free(h->sent_to);
    free(h->recv_from);
    free(h->plan.inwait);
    free(h->max_streak);
    if (retire) { /* keep the struct: closing stays set, mutex and conditions stay valid;
                       the fields are never written again (a late enter() only touches inflight) */
        pthread_mutex_lock(&g_retired_mu);
        h->retired_next = g_retired;
        g_retired = h;
        pthread_mutex_unlock(&g_retired_mu);
        return;
    }
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv_app);
    pthread_cond_destroy(&h->cv_eng);
    pthread_cond_destroy(&h->cv_live);
    free(h);
}

static char g_create_err[512]; /* message of a failed pcoll_create (no handle to hang it on) */

#ifdef PCOLL_HAVE_NCCL
/* MPI_Finalize deletes MPI_COMM_SELF's attributes first: there, every rank closes its cached
 * NCCL communicators together (ncclCommFinalize + ncclCommDestroy, pcoll_nccl.cu). */
static int dev_at_finalize(MPI_Comm c, int kv, void *attr, void *extra) {
    (void)c;
    (void)kv;
    (void)attr;
    (void)extra;
    pcoll_dev_shutdown();
    return MPI_SUCCESS;
}
static void dev_finalize_hook(void) {
    static int done;
    int kv;
    if (done || MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, dev_at_finalize, &kv, NULL) != MPI_SUCCESS)
        return;
    done = MPI_Comm_set_attr(MPI_COMM_SELF, kv, NULL) == MPI_SUCCESS;
}

/* Device data path, collective: NCCL when every rank has its own GPU, else STAGED (NCCL refuses
 * two ranks of a communicator on one GPU).  PCOLL_DEVICE_PATH=nccl|staged forces a path (if any
 * rank asks for staged, all use it).  Every rank returns the same code. */
static int dev_setup(struct pcoll *h, MPI_Comm comm, const char *key) {
    int P = h->P, me = h->me;
    char msg[400] = "";
    enum { KEY = 192 };
    char *keys = malloc((size_t)P * KEY);
    if (!keys) return PCOLL_ERR_NOMEM;
    char mine[KEY];
    memset(mine, 0, sizeof mine);
    snprintf(mine, sizeof mine, "%s", key);
    MPI_Allgather(mine, KEY, MPI_CHAR, keys, KEY, MPI_CHAR, comm);
    int dup = 0;
    for (int p = 0; p < P && !dup; p++)
        for (int q = p + 1; q < P && !dup; q++)
            dup = !strncmp(keys + (size_t)p * KEY, keys + (size_t)q * KEY, KEY);
    free(keys);
    const char *env = getenv("PCOLL_DEVICE_PATH");
    int want = env && !strcmp(env, "staged") ? 2 : env && !strcmp(env, "nccl") ? 1 : 0, any = 0;
    MPI_Allreduce(&want, &any, 1, MPI_INT, MPI_MAX, comm);
    int path = any == 2   ? PCOLL_DEVPATH_STAGED
               : any == 1 ? PCOLL_DEVPATH_NCCL
               : dup      ? PCOLL_DEVPATH_STAGED
                          : PCOLL_DEVPATH_NCCL;
    unsigned char id[256];
    memset(id, 0, sizeof id);
    size_t idn = pcoll_dev_id_bytes();
    int ok = idn <= sizeof id, all_ok = 0;
    int reuse = 0; /* NCCL once per run: the communicator rank 0 names, if every rank holds it */
    if (ok && path == PCOLL_DEVPATH_NCCL) {
        unsigned char cid[256] = {0};
        int have = pcoll_dev_cached_id(cid, P, me);
        if (me == 0) memcpy(id, cid, idn);
        MPI_Bcast(id, (int)idn, MPI_BYTE, 0, comm);
        have = have && !memcmp(id, cid, idn);
        MPI_Allreduce(&have, &reuse, 1, MPI_INT, MPI_LAND, comm);
        if (!reuse) dev_finalize_hook();
    }
    if (ok && path == PCOLL_DEVPATH_NCCL && !reuse) {
        if (me == 0) ok = pcoll_dev_nccl_id(id, msg, sizeof msg) == PCOLL_OK;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, comm);
        if (!all_ok) {
            snprintf(g_create_err, sizeof g_create_err, "pcoll_create: rank 0: %s", msg[0] ? msg : "NCCL id");
            return PCOLL_ERR_MPI;
        }
        MPI_Bcast(id, (int)idn, MPI_BYTE, 0, comm);
    }
    h->dev = pcoll_dev_open(path, P, me, id, h->nbuf, (size_t)META * (size_t)P, msg, sizeof msg);
    ok = h->dev != NULL;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, comm);
    if (!all_ok) {
        if (!ok)
            snprintf(g_create_err, sizeof g_create_err, "pcoll_create: rank %d: device data path (%s): %s",
                     me, path == PCOLL_DEVPATH_NCCL ? "NCCL" : "staged", msg);
        else
            snprintf(g_create_err, sizeof g_create_err,
                     "pcoll_create: another rank failed to set up the "
                     "device data path (see its message)");
        return PCOLL_ERR_MPI;
    }
    return PCOLL_OK;
}
#endif

int pcoll_create(MPI_Comm comm, size_t n, pcoll_mem_t mem, const pcoll_config_t *cfg_in, pcoll_t **out) {
    char msg[400] = "";
    g_create_err[0] = 0;
    if (!out) return PCOLL_ERR_ARG;
    *out = NULL;
    int inited = 0, level = 0, P = 0, me = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        snprintf(g_create_err, sizeof g_create_err, "pcoll_create: MPI is not initialised");
        return PCOLL_ERR_STATE;
    }
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE) {
        snprintf(g_create_err, sizeof g_create_err,
                 "pcoll_create: MPI thread level is %d, "
                 "libpcoll needs MPI_THREAD_MULTIPLE (%d): initialise MPI with "
                 "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, &provided) and check provided",
                 level, MPI_THREAD_MULTIPLE);
        return PCOLL_ERR_THREAD_LEVEL;
    }
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &me);
    pcoll_config_t cfg;
    if (cfg_in)
        cfg = *cfg_in;
    else
        pcoll_config_default(&cfg);

    int ok = 1, local_code = PCOLL_ERR_ARG;
#ifdef PCOLL_HAVE_NCCL
    int dev_id = -1;
    char dev_key[192] = "";
#endif
    if (P > PCOLL_MAX_RANKS)
        ok = 0, snprintf(msg, sizeof msg, "%d ranks > PCOLL_MAX_RANKS", P);
    else if (n == 0 || n > (size_t)INT32_MAX - (size_t)META * (size_t)P)
        ok = 0, snprintf(msg, sizeof msg, "n = %zu floats is out of range (1 .. 2^31-1-%d)", n, META * P);
#ifdef PCOLL_HAVE_NCCL
    else if (mem == PCOLL_MEM_DEVICE && !pcoll_dev_local(&dev_id, dev_key, sizeof dev_key, msg, sizeof msg))
        ok = 0, local_code = PCOLL_ERR_UNSUPPORTED;
#else
    else if (mem == PCOLL_MEM_DEVICE)
        ok = 0, local_code = PCOLL_ERR_UNSUPPORTED,
        snprintf(msg, sizeof msg,
                 "mem = device "
                 "needs the CUDA/NCCL build of libpcoll (this build has host memory only)");
#endif
    else if (mem != PCOLL_MEM_HOST && mem != PCOLL_MEM_DEVICE)
        ok = 0, snprintf(msg, sizeof msg, "mem = %d", (int)mem);
    else if (!rule_check(&cfg.rule, P, msg, sizeof msg))
        ok = 0;
    else if (cfg.div < PCOLL_DIV_NONE || cfg.div > PCOLL_DIV_FRESH)
        ok = 0, snprintf(msg, sizeof msg, "div = %d", (int)cfg.div);
    else if (cfg.ring < 1)
        ok = 0, snprintf(msg, sizeof msg, "ring = %d (need >= 1)", cfg.ring);
    else if (cfg.records < 1)
        ok = 0, snprintf(msg, sizeof msg, "records = %d", cfg.records);
    else if (cfg.tau < 0)
        ok = 0, snprintf(msg, sizeof msg, "tau = %d (need >= 0)", cfg.tau);
    else if (!(cfg.live_period_s >= 0 && cfg.live_period_s <= 3600))
        ok = 0,
        snprintf(msg, sizeof msg, "live_period_s = %g (need 0 .. 3600; 0: default)", cfg.live_period_s);
    if (ok && cfg.ring > (1 << 20)) ok = 0, snprintf(msg, sizeof msg, "ring = %d (need <= 2^20)", cfg.ring);
    if (cfg.live_period_s == 0) cfg.live_period_s = 0.1;
    if (cfg.poll_max_us < 1) cfg.poll_max_us = 1;
    if (cfg.spin_us < 0) cfg.spin_us = 0;

    agree_t a = {ok,
                 (int64_t)n,
                 mem,
                 cfg.rule.mode,
                 cfg.rule.mode == PCOLL_QUORUM ? cfg.rule.quorum : 0,
                 cfg.div,
                 cfg.ring,
                 cfg.tau,
                 cfg.horizon,
                 cfg.rule.nwait,
                 cfg.seed,
                 1469598103934665603ull};
    for (int i = 0; ok && i < cfg.rule.nwait; i++)
        a.waithash = (a.waithash ^ (uint64_t)cfg.rule.wait[i]) * 1099511628211ull;
    agree_t *all = malloc((size_t)P * sizeof *all);
    if (!all) return PCOLL_ERR_NOMEM;
    int rc = MPI_Allgather(&a, (int)sizeof a, MPI_BYTE, all, (int)sizeof a, MPI_BYTE, comm);
    if (rc != MPI_SUCCESS) {
        free(all);
        return PCOLL_ERR_MPI;
    }
    /* every rank runs the same comparison on the same data: the same verdict everywhere */
    int field = -1, bad = -1;
    for (int p = 0; p < P && field < 0; p++)
        if (!all[p].ok) field = 0, bad = p;
    const int64_t *v0 = &all[0].n;
    for (int p = 1; p < P && field < 0; p++) {
        const int64_t *vp = &all[p].n;
        for (int f = 0; f < 9 && field < 0; f++)
            if (vp[f] != v0[f]) field = f + 1, bad = p;
        if (field < 0 && all[p].seed != all[0].seed) field = 10, bad = p;
        if (field < 0 && all[p].waithash != all[0].waithash) field = 11, bad = p;
    }
    if (field == 0) {
        if (bad == me)
            snprintf(g_create_err, sizeof g_create_err, "pcoll_create: rank %d: %s", me, msg);
        else
            snprintf(g_create_err, sizeof g_create_err,
                     "pcoll_create: rank %d rejected its "
                     "arguments (see its message); no handle created on any rank",
                     bad);
        free(all);
        return bad == me ? local_code : PCOLL_ERR_ARG;
    }
    if (field > 0) {
        long long x0 = field <= 9 ? (long long)v0[field - 1] : field == 10 ? (long long)all[0].seed : 0;
        long long xb = field <= 9    ? (long long)(&all[bad].n)[field - 1]
                       : field == 10 ? (long long)all[bad].seed
                                     : 0;
        if (field == 11)
            snprintf(g_create_err, sizeof g_create_err,
                     "pcoll_create: argument mismatch: "
                     "rule.wait differs between rank 0 and rank %d",
                     bad);
        else
            snprintf(g_create_err, sizeof g_create_err,
                     "pcoll_create: argument mismatch: %s "
                     "is %lld on rank 0 but %lld on rank %d (every rank must pass the same)",
                     agree_names[field], x0, xb, bad);
        free(all);
        return PCOLL_ERR_MISMATCH;
    }
    free(all);

    struct pcoll *h = calloc(1, sizeof *h);
    if (!h) return PCOLL_ERR_NOMEM; /* allocation failures below are local; see note */
    h->ctl = h->data = h->hb = MPI_COMM_NULL;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv_app, NULL);
    pthread_cond_init(&h->cv_eng, NULL);
    pthread_cond_init(&h->cv_live, NULL);
    h->P = P;
    h->me = me;
    h->n = n;
    h->nbuf = n + (size_t)META * (size_t)P;
    h->mem = mem;
    h->cfg = cfg;
    h->K = cfg.ring + 1;
    h->R = cfg.records;
    h->peer_failed = -1;
    h->cfg.rule.wait = NULL;
    int nomem = 0;
    size_t bytes = h->nbuf * sizeof(float);
#ifdef PCOLL_HAVE_NCCL
    if (mem == PCOLL_MEM_DEVICE) { /* device memory, zeroed */
        nomem |= !(h->dep[0] = pcoll_dev_calloc(h->nbuf)) || !(h->dep[1] = pcoll_dev_calloc(h->nbuf));
        nomem |= !(h->zeros = pcoll_dev_calloc(h->nbuf)) || !(h->scratch = pcoll_dev_calloc(h->nbuf));
    } else
#endif
    {
        nomem |= !(h->dep[0] = calloc(1, bytes)) || !(h->dep[1] = calloc(1, bytes));
        nomem |= !(h->zeros = calloc(1, bytes)) || !(h->scratch = calloc(1, bytes));
    }
    /* ring slots: records now, result buffers when first used (engine.c: ring_slot) */
    nomem |= !(h->ring = calloc((size_t)h->K, sizeof *h->ring));
    for (int i = 0; !nomem && i < h->K; i++) nomem |= pcoll_record_init(&h->ring[i].rec, P) != 0;
    nomem |= !(h->recs = calloc((size_t)h->R, sizeof *h->recs));
    for (int i = 0; !nomem && i < h->R; i++) nomem |= pcoll_record_init(&h->recs[i].r, P) != 0;
    nomem |= !(h->rules = calloc(4, sizeof *h->rules));
    h->caprules = 4;
    nomem |= !(h->joined = calloc((size_t)P, 1)) || !(h->streak = calloc((size_t)P, 4));
    nomem |= !(h->active = calloc((size_t)P, sizeof(int)));
    nomem |= !(h->ready_round = calloc((size_t)P, 8));
    nomem |= !(h->cnt_round = calloc((size_t)P, 8)) || !(h->cnt_val = calloc((size_t)P, 8));
    nomem |= !(h->sent_to = calloc((size_t)P, 8)) || !(h->recv_from = calloc((size_t)P, 8));
    nomem |= !(h->plan.inwait = calloc((size_t)P, 1)) || !(h->max_streak = calloc((size_t)P, 4));
    nomem |=
        !(h->hb_req = calloc((size_t)P, sizeof(MPI_Request))) || !(h->hb_buf = calloc((size_t)P * HB_LEN, 8));
    nomem |= !(h->left = calloc((size_t)P, 1));
    nomem |= !(h->hb_sent = calloc((size_t)P, 8)) || !(h->hb_recv = calloc((size_t)P, 8));
    nomem |= !(h->peers = calloc((size_t)P, sizeof(pcoll_peer_t))) || !(h->heard_at = calloc((size_t)P, 8));
    for (int p = 0; !nomem && p < P; p++) {
        h->hb_req[p] = MPI_REQUEST_NULL;
        h->peers[p].heard_s = -1;
    }
    if (!nomem) {
        nomem |= rule_copy(&h->rules[0], 0, &cfg.rule) != 0;
        h->nrules = 1;
    }
    int anynomem = nomem; /* agree on memory failure too, so no rank is left alone */
    MPI_Allreduce(&nomem, &anynomem, 1, MPI_INT, MPI_LOR, comm);
    if (anynomem) {
        snprintf(g_create_err, sizeof g_create_err,
                 "pcoll_create: out of memory on %s "
                 "(buffers of %zu floats)",
                 nomem ? "this rank" : "another rank", h->nbuf);
        destroy(h, 1, 0);
        return PCOLL_ERR_NOMEM;
    }
#ifdef PCOLL_HAVE_NCCL
    if (mem == PCOLL_MEM_DEVICE) {
        int drc = dev_setup(h, comm, dev_key);
        if (drc) {
            destroy(h, 1, 0);
            return drc;
        }
    }
#endif
    for (int p = 0; p < P; p++) h->active[p] = p;
    h->nactive = P;
    if (MPI_Comm_dup(comm, &h->ctl) != MPI_SUCCESS || MPI_Comm_dup(comm, &h->data) != MPI_SUCCESS ||
        MPI_Comm_dup(comm, &h->hb) != MPI_SUCCESS) {
        destroy(h, 1, 0);
        return PCOLL_ERR_MPI;
    }
    MPI_Comm_set_errhandler(h->ctl, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(h->data, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(h->hb, MPI_ERRORS_RETURN);
    /* Every pair of ranks exchanges one message here, on this thread, before the engine and
     * liveness threads start: the transport's connections (TCP between nodes) are then set up
     * one at a time, not by two threads of each rank connecting to each other at once, which
     * Open MPI's TCP transport can fail ("connect() failed"). */
    int *wire = calloc((size_t)P * 2, sizeof *wire);
    int wrc = wire ? MPI_Alltoall(wire, 1, MPI_INT, wire + P, 1, MPI_INT, h->hb) : MPI_ERR_NO_MEM;
    free(wire);
    if (wrc != MPI_SUCCESS) {
        snprintf(g_create_err, sizeof g_create_err,
                 "pcoll_create: the first exchange between all ranks failed");
        destroy(h, 1, 0);
        return PCOLL_ERR_MPI;
    }
    h->t_last_dep = pcoll_now();
    if (pthread_create(&h->thread, NULL, pcoll_engine_main, h) != 0) {
        snprintf(g_create_err, sizeof g_create_err, "pcoll_create: cannot start the engine thread");
        destroy(h, 1, 0); /* other ranks' engines then stall: reported by their watchdog */
        return PCOLL_ERR_NOMEM;
    }
    h->thread_started = 1;
    if (pthread_create(&h->live_thread, NULL, pcoll_live_main, h) != 0) {
        pthread_mutex_lock(&h->mu);
        pcoll_set_error(h, PCOLL_ERR_NOMEM, "rank %d: cannot start the liveness thread", me);
        pthread_mutex_unlock(&h->mu); /* the engine goes on as a failed rank (zeros) */
    } else
        h->live_started = 1;
    *out = h;
    return PCOLL_OK;
}

/* pcoll_deposit and pcoll_lend: lend != NULL is the caller's buffer to reduce in place (g). */
static int deposit(pcoll_t *h, const float *g, float *lend, int flags) {
    if (!h || !g) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    pthread_mutex_lock(&h->mu);
    int rc = PCOLL_OK;
    if (h->err)
        rc = h->err;
    else if (h->join_req) {
        rc = PCOLL_ERR_STATE;
        pcoll_call_error(h, "rank %d: pcoll_deposit after pcoll_join/pcoll_finalize", h->me);
    } else if (h->pending && !(flags & PCOLL_ACCUMULATE)) {
        rc = PCOLL_ERR_PENDING;
        pcoll_call_error(h,
                         "rank %d: deposit while the previous one is still pending (call "
                         "pcoll_wait first, or pass PCOLL_ACCUMULATE)",
                         h->me);
    } else if (lend && h->mem != PCOLL_MEM_HOST) {
        rc = PCOLL_ERR_ARG;
        pcoll_call_error(
            h, "rank %d: pcoll_lend needs host memory (device deposits are copied on the copy stream)",
            h->me);
    }
    if (rc) {
        leave_locked(h);
        pthread_mutex_unlock(&h->mu);
        return rc;
    }
    /* the engine reads dep[dep_cur] only after taking it under mu in run_round, and swaps
     * dep_cur at that moment, so this buffer is ours until the engine takes it */
    float *d = h->dep[h->dep_cur];
#ifdef PCOLL_HAVE_NCCL
    if (h->mem == PCOLL_MEM_DEVICE) { /* device copy (or add) on the copy stream, completed here */
        char m[256] = "";
        rc = pcoll_dev_deposit(h->dev, h->dep_cur, d, g, h->n, h->pending > 0, m, sizeof m);
        if (rc) {
            pcoll_call_error(h, "rank %d: pcoll_deposit: %s", h->me, m);
            leave_locked(h);
            pthread_mutex_unlock(&h->mu);
            return rc;
        }
    }
#endif
    if (h->pending) {
        if (h->lent) { /* from now on the pending deposit is a sum in our own buffer */
            memcpy(d, h->lent, h->n * sizeof(float));
            h->lent = NULL;
        }
        if (h->mem == PCOLL_MEM_HOST)
            for (size_t i = 0; i < h->n; i++) d[i] += g[i];
        if (h->pending < 255) h->pending++;
        h->dep_cost += h->next_cost;
    } else {
        if (lend)
            h->lent = lend;
        else if (h->mem == PCOLL_MEM_HOST)
            memcpy(d, g, h->n * sizeof(float));
        h->pending = 1;
        h->dep_cost = h->next_cost;
        h->t_dep = pcoll_now();
        h->applied_at_dep = h->handed;
    }
    h->next_cost = 0;
    h->dep_seq++;
    h->t_last_dep = pcoll_now();
    h->events++;
    int wake = !(flags & PCOLL_WAIT_NEXT) || h->mem != PCOLL_MEM_HOST;
    h->wait_next = wake ? 0 : pcoll_now();
    pthread_mutex_unlock(&h->mu);
    /* after unlocking: the engine, woken, does not block at once on the mutex held here */
    if (wake) pthread_cond_signal(&h->cv_eng);
    leave(h);
    return PCOLL_OK;
}

int pcoll_deposit(pcoll_t *h, const float *g, int flags) { return deposit(h, g, NULL, flags); }

int pcoll_lend(pcoll_t *h, float *g, int flags) { return deposit(h, g, g, flags); }

size_t pcoll_lend_len(const pcoll_t *h) { return h ? h->nbuf : 0; }

int pcoll_set_cost(pcoll_t *h, double seconds) {
    if (!h) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    pthread_mutex_lock(&h->mu);
    int rc = PCOLL_OK;
    if (!(seconds >= 0 && seconds <= 1e9)) { /* also NaN */
        pcoll_call_error(h, "rank %d: pcoll_set_cost: %g s is not a step time (finite, >= 0)", h->me,
                         seconds);
        rc = PCOLL_ERR_ARG;
    } else
        h->next_cost = (float)seconds;
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static int abs_deadline(double timeout_s, struct timespec *ts) {
    if (timeout_s < 0) return 0;
    clock_gettime(CLOCK_REALTIME, ts);
    double t = (double)ts->tv_sec + 1e-9 * ts->tv_nsec + timeout_s;
    ts->tv_sec = (time_t)t;
    ts->tv_nsec = (long)((t - (double)ts->tv_sec) * 1e9);
    return 1;
}

static int peer_error(struct pcoll *h) {
    pcoll_call_error(h,
                     "rank %d: rank %d failed (its engine reported an error and left the "
                     "rounds); see its own message",
                     h->me, h->peer_failed);
    return PCOLL_ERR_PEER;
}

/* pcoll_finalize has set closing: a blocked call returns this (caller holds mu). */
static int closing_error(struct pcoll *h) {
    pcoll_call_error(h, "rank %d: the handle is being finalized", h->me);
    return PCOLL_ERR_STATE;
}

static int past(const struct timespec *ts) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec > ts->tv_sec || (t.tv_sec == ts->tv_sec && t.tv_nsec >= ts->tv_nsec);
}

static int wait_timeout(struct pcoll *h, double timeout_s) { /* caller holds mu */
    pcoll_call_error(h, "rank %d: pcoll_wait timed out after %.1f s (rounds completed: %llu)", h->me,
                     timeout_s, (unsigned long long)h->completed);
    return PCOLL_ERR_TIMEOUT;
}

/* An application thread gives the drive token back (caller holds mu); pass: its last
 * pcoll_drive result. Returns 1 if the engine must be woken (the caller signals cv_eng, after
 * unlocking if it can): unless only a local event can move the round on (then that event wakes
 * it), so after a synchronous round the engine is not woken at all. */
static int give_back(struct pcoll *h, int pass) {
    h->driver = DRV_NONE;
    if (pass == PASS_IDLE_LOCAL) return 0;
    h->events++;
    h->idle_remote = pass == PASS_IDLE_REMOTE;
    h->idle_events = h->events;
    return 1;
}

/* The waiting thread drives the rounds itself (engine.c: pcoll_drive) while it can (host memory),
 * instead of sleeping until the engine has done them: no thread hand-off in a round. If the
 * engine holds the token, it gives it up after its current step (app_want); this thread yields
 * meanwhile. It sleeps only when the round waits for a local event (another thread's deposit, a
 * horizon, pcoll_next), when every rank has joined, or after polling for other ranks' activation
 * messages for spin_us (as the engine does before it sleeps); the engine then drives, and this
 * thread drives again once woken. Every step is non-blocking, so the timeout and a peer's failure
 * are checked between steps. */
int pcoll_wait(pcoll_t *h, int how, double timeout_s, uint64_t *round) {
    if (!h || (how != PCOLL_WAIT_CONSUMED && how != PCOLL_WAIT_NEWER)) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    struct timespec ts;
    int timed = abs_deadline(timeout_s, &ts), rc = PCOLL_OK, counted = 0;
    int drove = 0, gave_up = 0, pass = 0, wake = 0;
    double t_idle = -1;
    pthread_mutex_lock(&h->mu);
    h->wait_next = 0; /* the reservation of a PCOLL_WAIT_NEXT deposit is used up */
    for (;;) {
        if (h->err) {
            rc = h->err;
            break;
        }
        if (h->peer_failed >= 0) {
            rc = peer_error(h);
            break;
        }
        if (__atomic_load_n(&h->closing, __ATOMIC_SEQ_CST)) {
            rc = closing_error(h);
            break;
        }
        if (how == PCOLL_WAIT_CONSUMED) {
            if (h->consumed_seq == h->dep_seq && h->completed > h->consumed_round) {
                if (round) *round = h->consumed_round;
                break;
            }
            if (!counted) { /* this thread cannot call pcoll_next now: the engine must not
                                hold back waiting for it (engine.c: ring_slot) */
                counted = 1;
                h->waiting_consumed++;
                if (h->held_back) pcoll_wake_engine(h);
            }
        } else if (h->completed > h->handed) {
            if (round) *round = h->completed - 1;
            break;
        }
        if (h->done) {
            rc = h->join_req ? PCOLL_DONE : PCOLL_ERR_STATE;
            break;
        }
        if (timed && past(&ts)) {
            rc = wait_timeout(h, timeout_s);
            break;
        }
        if (h->mem == PCOLL_MEM_HOST && !h->drive_end && !gave_up) {
            if (!drove && h->driver == DRV_NONE) {
                h->driver = DRV_APP;
                drove = 1;
            }
            if (drove) {
                pthread_mutex_unlock(&h->mu);
                pass = pcoll_drive(h);
                pthread_mutex_lock(&h->mu);
                if (pass < 0 || pass == PASS_ROUND || pass == PASS_INFLIGHT) {
                    t_idle = -1;
                    continue;
                }
                if (pass == PASS_IDLE_REMOTE && pcoll_spinning(h, &t_idle)) {
                    pthread_mutex_unlock(&h->mu);
                    sched_yield();
                    pthread_mutex_lock(&h->mu);
                    continue;
                }
                if (give_back(h, pass)) pthread_cond_signal(&h->cv_eng);
                drove = 0;
                gave_up = 1;
            } else if (h->driver == DRV_ENGINE) {
                h->app_want++;
                pthread_mutex_unlock(&h->mu);
                sched_yield();
                pthread_mutex_lock(&h->mu);
                h->app_want--;
                continue;
            }
        }
        h->wait_sleeps++;
        if (timed) {
            if (pthread_cond_timedwait(&h->cv_app, &h->mu, &ts) != 0) {
                rc = wait_timeout(h, timeout_s);
                break;
            }
        } else
            pthread_cond_wait(&h->cv_app, &h->mu);
        gave_up = 0;
        t_idle = -1;
    }
    if (drove) {
        if (rc == PCOLL_OK) { /* one more step: does the next round need the engine? */
            pthread_mutex_unlock(&h->mu);
            pass = pcoll_drive(h);
            pthread_mutex_lock(&h->mu);
        }
        wake = give_back(h, pass);
    }
    if (counted) h->waiting_consumed--;
    pthread_mutex_unlock(&h->mu);
    /* after unlocking: the engine, woken, does not block at once on the mutex held here */
    if (wake) pthread_cond_signal(&h->cv_eng);
    leave(h);
    return rc;
}

/* Copies a record into one the caller allocated for d->P >= s->P ranks; d->P becomes s->P. */
static void record_copy(pcoll_record_t *d, const pcoll_record_t *s) {
    uint8_t *f = d->fresh, *w = d->waited, *fl = d->flags;
    uint32_t *st = d->staleness, *sk = d->streak;
    float *c = d->cost;
    int P = s->P;
    *d = *s;
    d->fresh = f;
    d->waited = w;
    d->flags = fl;
    d->staleness = st;
    d->streak = sk;
    d->cost = c;
    memcpy(f, s->fresh, (size_t)P);
    memcpy(w, s->waited, (size_t)P);
    memcpy(fl, s->flags, (size_t)P);
    memcpy(st, s->staleness, (size_t)P * 4);
    memcpy(sk, s->streak, (size_t)P * 4);
    if (c) {
        if (s->cost)
            memcpy(c, s->cost, (size_t)P * sizeof *c);
        else
            memset(c, 0, (size_t)P * sizeof *c);
    }
}
void pcoll_record_copy(pcoll_record_t *d, const pcoll_record_t *s) { record_copy(d, s); }

static int record_too_small(struct pcoll *h, const pcoll_record_t *rec, const char *fn) {
    pthread_mutex_lock(&h->mu);
    pcoll_call_error(h,
                     "rank %d: %s: record allocated for %d ranks, the handle has %d "
                     "(pcoll_record_init(rec, pcoll_size(h)))",
                     h->me, fn, rec->P, h->P);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return PCOLL_ERR_ARG;
}

int pcoll_next(pcoll_t *h, uint64_t *round, const float **result, pcoll_record_t *rec) {
    if (!h) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    if (rec && (rec->P < h->P || !rec->fresh)) return record_too_small(h, rec, "pcoll_next");
    pthread_mutex_lock(&h->mu);
    int rc = PCOLL_OK;
    if (h->err)
        rc = h->err;
    else if (h->handed >= h->completed)
        rc = PCOLL_EMPTY;
    else {
        uint64_t r = h->handed;
        ring_slot_t *sl = &h->ring[r % (uint64_t)h->K];
        if (round) *round = r;
        if (result) *result = sl->buf;
        if (rec) record_copy(rec, &sl->rec);
        h->handed = r + 1;
        if (h->held_back) pcoll_wake_engine(h); /* it may go on */
    }
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int pcoll_set_rule(pcoll_t *h, uint64_t from, const pcoll_rule_t *rule) {
    if (!h || !rule) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    char msg[200];
    int rc = PCOLL_OK;
    int valid = rule_check(rule, h->P, msg, sizeof msg);
    pthread_mutex_lock(&h->mu);
    /* Only decisions every rank makes alike: the horizon is posted by the same program on every
     * rank, while how far the engine has got differs between ranks. */
    if (!valid) {
        rc = PCOLL_ERR_ARG;
        pcoll_call_error(h, "pcoll_set_rule: %s", msg);
    } else if (!h->cfg.horizon) {
        rc = PCOLL_ERR_STATE;
        pcoll_call_error(h,
                         "rank %d: pcoll_set_rule needs cfg.horizon = 1 (without a horizon "
                         "some ranks may already have started round %llu and others not); the "
                         "rule of a handle without a horizon is cfg.rule",
                         h->me, (unsigned long long)from);
    } else if (from < h->horizon) {
        rc = PCOLL_ERR_LATE;
        pcoll_call_error(h,
                         "rank %d: pcoll_set_rule: round %llu is below the horizon (rules of "
                         "rounds < %llu are final)",
                         h->me, (unsigned long long)from, (unsigned long long)h->horizon);
    } else {
        while (h->nrules > 1 && h->rules[h->nrules - 1].from >= from) free(h->rules[--h->nrules].wait);
        /* drop entries fully in the past: keep the last one in force at `resolved` */
        int keep = 0;
        for (int i = 0; i < h->nrules; i++)
            if (h->rules[i].from <= h->resolved) keep = i;
        if (keep > 0) {
            for (int i = 0; i < keep; i++) free(h->rules[i].wait);
            memmove(h->rules, h->rules + keep, (size_t)(h->nrules - keep) * sizeof *h->rules);
            h->nrules -= keep;
        }
        if (h->nrules == 1 && from == 0) {
            free(h->rules[0].wait);
            h->nrules = 0;
        }
        if (h->nrules == h->caprules) {
            rule_ent_t *q = realloc(h->rules, (size_t)h->caprules * 2 * sizeof *q);
            if (!q)
                rc = PCOLL_ERR_NOMEM;
            else {
                h->rules = q;
                h->caprules *= 2;
            }
        }
        if (!rc) rc = rule_copy(&h->rules[h->nrules], from, rule);
        if (!rc) h->nrules++;
    }
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int pcoll_set_horizon(pcoll_t *h, uint64_t through) {
    if (!h) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    pthread_mutex_lock(&h->mu);
    /* h->horizon = rounds below it are final; UINT64_MAX: all (no wrap to 0) */
    uint64_t hz = through == UINT64_MAX ? UINT64_MAX : through + 1;
    if (hz > h->horizon) h->horizon = hz;
    pcoll_wake_engine(h);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return PCOLL_OK;
}

int pcoll_record_init(pcoll_record_t *rec, int P) {
    memset(rec, 0, sizeof *rec);
    if (P < 1) return PCOLL_ERR_ARG;
    rec->P = P;
    rec->fresh = calloc((size_t)P, 1);
    rec->waited = calloc((size_t)P, 1);
    rec->flags = calloc((size_t)P, 1);
    rec->staleness = calloc((size_t)P, 4);
    rec->streak = calloc((size_t)P, 4);
    rec->cost = calloc((size_t)P, sizeof *rec->cost);
    if (!rec->fresh || !rec->waited || !rec->flags || !rec->staleness || !rec->streak || !rec->cost) {
        pcoll_record_free(rec);
        return PCOLL_ERR_NOMEM;
    }
    return PCOLL_OK;
}

void pcoll_record_free(pcoll_record_t *rec) {
    free(rec->fresh);
    free(rec->waited);
    free(rec->flags);
    free(rec->staleness);
    free(rec->streak);
    free(rec->cost);
    rec->fresh = rec->waited = rec->flags = NULL;
    rec->staleness = rec->streak = NULL;
    rec->cost = NULL;
    rec->P = 0;
}

int pcoll_record_get(pcoll_t *h, uint64_t round, pcoll_record_t *rec, double timeout_s) {
    if (!h || !rec) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    if (rec->P < h->P || !rec->fresh) return record_too_small(h, rec, "pcoll_record_get");
    struct timespec ts;
    int timed = abs_deadline(timeout_s, &ts), rc = PCOLL_OK;
    pthread_mutex_lock(&h->mu);
    while (h->completed <= round) {
        if (h->done || h->err) {
            rc = h->err ? h->err : PCOLL_ERR_STATE;
            break;
        }
        if (__atomic_load_n(&h->closing, __ATOMIC_SEQ_CST)) {
            rc = closing_error(h);
            break;
        }
        if (timed) {
            if (pthread_cond_timedwait(&h->cv_app, &h->mu, &ts) != 0) {
                rc = PCOLL_ERR_TIMEOUT;
                break;
            }
        } else
            pthread_cond_wait(&h->cv_app, &h->mu);
    }
    /* round + R is written into the same slot before `completed` passes it: check the slot */
    const pcoll_record_t *src = &h->recs[round % (uint64_t)h->R].r;
    if (!rc && (round + (uint64_t)h->R < h->started || src->round != round)) {
        rc = PCOLL_ERR_EVICTED;
        pcoll_call_error(h,
                         "rank %d: record of round %llu no longer kept (records = %d, round "
                         "%llu started)",
                         h->me, (unsigned long long)round, h->R, (unsigned long long)h->started);
    }
    if (!rc) record_copy(rec, src);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int pcoll_stats(pcoll_t *h, pcoll_stats_t *st) {
    if (!h || !st) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    pthread_mutex_lock(&h->mu);
    st->rounds = h->completed;
    st->applied = h->handed;
    st->deposits = h->dep_seq;
    st->fresh_total = h->fresh_total;
    st->max_streak_all = h->max_streak_all;
    st->max_staleness = h->max_staleness;
    st->mean_staleness = h->stale_count ? h->stale_sum / (double)h->stale_count : 0.0;
    st->driven = h->driven;
    st->wait_sleeps = h->wait_sleeps;
    st->engine_wakes = h->engine_wakes;
    st->engine_polls = h->engine_polls;
    st->result_buffers = h->result_buffers;
    st->lent = h->lent_rounds;
    if (st->max_streak) memcpy(st->max_streak, h->max_streak, (size_t)h->P * 4);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return PCOLL_OK;
}

int pcoll_size(const pcoll_t *h) { return h ? h->P : 0; }
int pcoll_rank(const pcoll_t *h) { return h ? h->me : -1; }
uint64_t pcoll_rounds(pcoll_t *h) {
    if (!h || !enter(h)) return 0;
    pthread_mutex_lock(&h->mu);
    uint64_t r = h->completed;
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return r;
}

/* The liveness thread (live.c) sends and reads the heartbeats; this call only checks the
 * handle, for callers written against the interface in which the application drove them. */
int pcoll_heartbeat(pcoll_t *h) {
    if (!h) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    leave(h);
    return PCOLL_OK;
}

int pcoll_peers(pcoll_t *h, pcoll_peer_t *out) {
    if (!h || !out) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    pthread_mutex_lock(&h->mu);
    double t = pcoll_now();
    for (int p = 0; p < h->P; p++) {
        out[p] = h->peers[p];
        out[p].heard_s = h->heard_at[p] > 0 ? t - h->heard_at[p] : -1;
        if (p == h->me) {
            out[p].heard_s = 0;
            out[p].pending = h->pending > 0;
            out[p].pending_s = t - (h->pending > 0 ? h->t_dep : h->t_last_dep);
            out[p].completed = h->completed;
            out[p].started = h->started;
        }
    }
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return PCOLL_OK;
}

/* Finalize: receive every heartbeat still in flight, so the communicator is empty when freed
 * (every rank is here: all of them joined; the liveness threads have ended). */
static void hb_drain(struct pcoll *h) {
    uint64_t *expect = calloc((size_t)h->P, 8);
    if (!expect) return;
    MPI_Alltoall(h->hb_sent, 1, MPI_UINT64_T, expect, 1, MPI_UINT64_T, h->hb);
    for (int p = 0; p < h->P; p++)
        while (h->hb_recv[p] < expect[p]) {
            double m[HB_LEN];
            MPI_Recv(m, HB_LEN, MPI_DOUBLE, p, 3, h->hb, MPI_STATUS_IGNORE);
            h->hb_recv[p]++;
        }
    free(expect);
}

int pcoll_join(pcoll_t *h) {
    if (!h) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    pthread_mutex_lock(&h->mu);
    h->join_req = 1;
    pcoll_wake_engine(h);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return PCOLL_OK;
}

/* Two phases. 1: join, drop the results not handed out, and wait until the engine has left its
 * loop (every rank joined) -- other threads may still call in (a controller posting rules).
 * 2: closing: every call now returns PCOLL_ERR_STATE; wait for those in progress to leave, end
 * the threads, drain, free. If the engine may be blocked in MPI for ever (a dead peer) or the
 * timeout passes, return the error and leave the handle as it is: the process must MPI_Abort. */
int pcoll_finalize(pcoll_t **hp, double timeout_s) {
    if (!hp || !*hp) return PCOLL_ERR_ARG;
    struct pcoll *h = *hp;
    if (!enter(h)) return PCOLL_ERR_STATE;
    struct timespec ts;
    int timed = abs_deadline(timeout_s, &ts), rc = PCOLL_OK;
    pthread_mutex_lock(&h->mu);
    h->join_req = 1;
    h->drop = 1; /* nobody will hand these out: the ring need not hold them */
    h->handed = h->completed;
    pcoll_wake_engine(h);
    while (!h->done && !h->peer_dead) {
        if (timed) {
            if (pthread_cond_timedwait(&h->cv_app, &h->mu, &ts) != 0) {
                rc = PCOLL_ERR_TIMEOUT;
                break;
            }
        } else
            pthread_cond_wait(&h->cv_app, &h->mu);
    }
    if (rc == PCOLL_ERR_TIMEOUT)
        pcoll_call_error(h,
                         "rank %d: pcoll_finalize timed out after %.1f s waiting for the other "
                         "ranks to join (round %llu); the engine is still running: end the job "
                         "with MPI_Abort",
                         h->me, timeout_s, (unsigned long long)h->completed);
    else if (!h->done)
        rc = h->err ? h->err : PCOLL_ERR_PEER; /* engine may be stuck in MPI */
    if (rc) {
        leave_locked(h);
        pthread_mutex_unlock(&h->mu);
        return rc;
    }
    int err = h->err, clean = h->clean;
    __atomic_store_n(&h->closing, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_sub(&h->inflight, 1, __ATOMIC_SEQ_CST); /* this call */
    pthread_cond_broadcast(&h->cv_app);
    while (__atomic_load_n(&h->inflight, __ATOMIC_SEQ_CST) > 0) pthread_cond_wait(&h->cv_app, &h->mu);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->thread, NULL);
    pcoll_live_stop(h);
    if (clean) hb_drain(h);
    destroy(h, clean, 1);
    *hp = NULL;
    return err ? err : PCOLL_OK;
}
const char *pcoll_strerror(int code) {
    switch (code) {
    case PCOLL_OK: return "success";
    case PCOLL_EMPTY: return "no completed round to hand out";
    case PCOLL_DONE: return "every rank has joined; all rounds handed out";
    case PCOLL_ERR_ARG: return "invalid argument";
    case PCOLL_ERR_MISMATCH: return "arguments differ across ranks";
    case PCOLL_ERR_THREAD_LEVEL: return "MPI thread level below MPI_THREAD_MULTIPLE";
    case PCOLL_ERR_MPI: return "MPI call failed";
    case PCOLL_ERR_NOMEM: return "out of memory";
    case PCOLL_ERR_PENDING: return "a deposit is already pending";
    case PCOLL_ERR_RING: return "rank fell more than K rounds behind (results ring full)";
    case PCOLL_ERR_LATE: return "rule change for a round already started";
    case PCOLL_ERR_TIMEOUT: return "timed out";
    case PCOLL_ERR_EVICTED: return "round record no longer kept";
    case PCOLL_ERR_PEER: return "another rank failed";
    case PCOLL_ERR_STATE: return "call not allowed in this state";
    case PCOLL_ERR_UNSUPPORTED: return "not supported by this build";
    default: return "unknown pcoll error";
    }
}

const char *pcoll_hint(int code) {
    switch (code) {
    case PCOLL_ERR_THREAD_LEVEL: return "call MPI_Init_thread with MPI_THREAD_MULTIPLE";
    case PCOLL_ERR_MISMATCH: return "pass the same n, mode, seed, ring, tau on every rank";
    case PCOLL_ERR_PENDING: return "call pcoll_wait between deposits";
    case PCOLL_ERR_RING: return "apply rounds with pcoll_next sooner, raise cfg.ring or set cfg.tau";
    case PCOLL_ERR_LATE: return "post rules ahead (cfg.horizon) so no rank has started the round";
    case PCOLL_ERR_PEER: return "read the failed rank's own error message";
    case PCOLL_ERR_UNSUPPORTED: return "rebuild with CUDA and NCCL, or use host memory";
    default: return "see pcoll_last_error() for the details";
    }
}

/* Copied into a buffer of the calling thread under the mutex: another thread's error cannot
 * change the string this thread is reading (until this thread's next call). */
static __thread char tl_err[512];
const char *pcoll_last_error(pcoll_t *h) {
    if (!h) {
        snprintf(tl_err, sizeof tl_err, "%s", g_create_err);
        return tl_err;
    }
    if (!enter(h)) {
        snprintf(tl_err, sizeof tl_err, "the handle is finalized");
        return tl_err;
    }
    pthread_mutex_lock(&h->mu);
    snprintf(tl_err, sizeof tl_err, "%s", h->err ? h->errmsg : h->callmsg);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return tl_err;
}

const char *pcoll_mode_name(pcoll_mode_t m) {
    switch (m) {
    case PCOLL_SYNC: return "sync";
    case PCOLL_SOLO: return "solo";
    case PCOLL_MAJORITY: return "majority";
    case PCOLL_QUORUM: return "quorum";
    default: return "?";
    }
}

int pcoll_parse_mode(const char *s, pcoll_rule_t *r) {
    memset(r, 0, sizeof *r);
    r->quorum = 1;
    if (!s) return PCOLL_ERR_ARG;
    if (!strcmp(s, "sync"))
        r->mode = PCOLL_SYNC;
    else if (!strcmp(s, "solo"))
        r->mode = PCOLL_SOLO;
    else if (!strcmp(s, "majority"))
        r->mode = PCOLL_MAJORITY;
    else if (!strncmp(s, "quorum:", 7)) {
        char *end;
        long q = strtol(s + 7, &end, 10);
        if (*end || end == s + 7 || q < 1 || q > PCOLL_MAX_RANKS) return PCOLL_ERR_ARG;
        r->mode = PCOLL_QUORUM;
        r->quorum = (int)q;
    } else
        return PCOLL_ERR_ARG;
    return PCOLL_OK;
}
