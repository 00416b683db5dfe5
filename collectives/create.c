/* create.c -- libpcoll handles made and unmade: the default configuration, the arguments checked
 * locally and then agreed across ranks (every rank reaches the same verdict and names the same
 * field and rank), the buffers, the device data path, the communicators and the threads; and
 * pcoll_destroy, which frees what a handle owns (pcoll_finalize in pcoll.c decides when). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "collectives/pcoll_impl.h"
#include "common/hash.h"
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int pcoll_rule_copy(rule_ent_t *e, uint64_t from, const pcoll_rule_t *r) {
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

int pcoll_rule_check(const pcoll_rule_t *r, int P, char *msg, size_t len) {
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
    int64_t ok, n, mem, mode, quorum, div, ring, tau, horizon, nwait, reduce;
    uint64_t seed, waithash;
} agree_t;
enum { AGREE_INTS = 10 }; /* the int64 fields from n on */
static const char *agree_names[] = {
    "(local arguments)", "n",          "mem",    "rule.mode", "rule.quorum", "div", "ring", "tau",
    "horizon",           "rule.nwait", "reduce", "seed",      "rule.wait"};

/* Handles that pcoll_finalize freed: only the struct itself stays, marked closing, so that a
 * thread that calls the library after finalize returned (e.g. a controller stopped after
 * finalize) gets PCOLL_ERR_STATE instead of touching freed memory. Kept reachable from here. */
static struct pcoll *g_retired;
static pthread_mutex_t g_retired_mu = PTHREAD_MUTEX_INITIALIZER;

/* The data path of memory kind mem, chosen here once for the handle's life; NULL: none in this
 * build (device memory in libpcoll.a) or not a pcoll_mem_t. */
static const pcoll_datapath_t *datapath_of(pcoll_mem_t mem) {
    return mem == PCOLL_MEM_HOST ? &pcoll_dp_host : mem == PCOLL_MEM_DEVICE ? pcoll_dp_device : NULL;
}

/* Frees everything the handle owns. comms: free the communicators too (only when no operation
 * can be pending on them). retire: keep the struct as a closed shell (see g_retired). */
void pcoll_destroy(struct pcoll *h, int comms, int retire) {
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
    h->dp->free(h->dep[0]);
    h->dp->free(h->dep[1]);
    h->dp->free(h->zeros);
    h->dp->free(h->scratch);
    if (h->ring)
        for (int i = 0; i < h->K; i++) {
            h->dp->free(h->ring[i].buf);
            pcoll_record_free(&h->ring[i].rec);
        }
    h->dp->close(h, !comms); /* !comms: the handle failed */
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

char pcoll_create_err[512]; /* message of a failed pcoll_create (no handle to hang it on) */

/* The caller's own arguments: 1 if usable; else 0, with the reason in msg and the code this rank
 * returns in *code. Fills the defaults of *cfg (0: default) and, for device memory, this rank's
 * device (*dev_key: which GPU, to tell whether ranks share one). */
static int args_local(int P, size_t n, pcoll_mem_t mem, pcoll_config_t *cfg, char *dev_key, size_t keylen,
                      char *msg, size_t len, int *code) {
    int ok = 1;
    const pcoll_datapath_t *dp = datapath_of(mem);
    *code = PCOLL_ERR_ARG;
    if (P > PCOLL_MAX_RANKS)
        ok = 0, snprintf(msg, len, "%d ranks > PCOLL_MAX_RANKS", P);
    else if (n == 0 || n > (size_t)INT32_MAX - (size_t)META * (size_t)P)
        ok = 0, snprintf(msg, len, "n = %zu floats is out of range (1 .. 2^31-1-%d)", n, META * P);
    else if (!dp && mem == PCOLL_MEM_DEVICE)
        ok = 0, *code = PCOLL_ERR_UNSUPPORTED,
        snprintf(msg, len,
                 "mem = device needs the CUDA/NCCL build of libpcoll (this build has host memory only)");
    else if (!dp)
        ok = 0, snprintf(msg, len, "mem = %d", (int)mem);
    else if (!dp->usable(dev_key, keylen, msg, len))
        ok = 0, *code = PCOLL_ERR_UNSUPPORTED;
    else if (!pcoll_rule_check(&cfg->rule, P, msg, len))
        ok = 0;
    else if (cfg->reduce < PCOLL_REDUCE_AUTO || cfg->reduce > PCOLL_REDUCE_RD)
        ok = 0,
        snprintf(msg, len, "reduce = %d (need PCOLL_REDUCE_AUTO, _IALLREDUCE or _RD)", (int)cfg->reduce);
    else if (cfg->div < PCOLL_DIV_NONE || cfg->div > PCOLL_DIV_FRESH)
        ok = 0, snprintf(msg, len, "div = %d", (int)cfg->div);
    else if (cfg->ring < 1 || cfg->ring > (1 << 20))
        ok = 0, snprintf(msg, len, "ring = %d (need 1 .. 2^20)", cfg->ring);
    else if (cfg->records < 1)
        ok = 0, snprintf(msg, len, "records = %d", cfg->records);
    else if (cfg->tau < 0)
        ok = 0, snprintf(msg, len, "tau = %d (need >= 0)", cfg->tau);
    else if (!(cfg->live_period_s >= 0 && cfg->live_period_s <= 3600))
        ok = 0, snprintf(msg, len, "live_period_s = %g (need 0 .. 3600; 0: default)", cfg->live_period_s);
    if (cfg->live_period_s == 0) cfg->live_period_s = 0.1;
    if (cfg->poll_max_us < 1) cfg->poll_max_us = 1;
    if (cfg->spin_us < 0) cfg->spin_us = 0;
    return ok;
}

/* Every rank's verdict on its own arguments and the fields all must share, compared on every rank
 * (the same data, the same comparison: the same outcome everywhere). PCOLL_OK, or the error with
 * pcoll_create_err naming the field and the rank: a rank that refused its arguments returns
 * local_code with its own message, the others PCOLL_ERR_ARG pointing at it. */
static int args_agree(MPI_Comm comm, int P, int me, int ok, size_t n, pcoll_mem_t mem,
                      const pcoll_config_t *cfg, const char *msg, int local_code) {
    agree_t a = {ok,
                 (int64_t)n,
                 mem,
                 cfg->rule.mode,
                 cfg->rule.mode == PCOLL_QUORUM ? cfg->rule.quorum : 0,
                 cfg->div,
                 cfg->ring,
                 cfg->tau,
                 cfg->horizon,
                 cfg->rule.nwait,
                 cfg->reduce,
                 cfg->seed,
                 HASH_FNV1A64_INIT};
    for (int i = 0; ok && i < cfg->rule.nwait; i++)
        a.waithash = hash_fnv1a64_word(a.waithash, (uint64_t)cfg->rule.wait[i]);
    agree_t *all = malloc((size_t)P * sizeof *all);
    if (!all) return PCOLL_ERR_NOMEM;
    if (MPI_Allgather(&a, (int)sizeof a, MPI_BYTE, all, (int)sizeof a, MPI_BYTE, comm) != MPI_SUCCESS) {
        free(all);
        return PCOLL_ERR_MPI;
    }
    int field = -1, bad = -1, rc = PCOLL_OK;
    for (int p = 0; p < P && field < 0; p++)
        if (!all[p].ok) field = 0, bad = p;
    const int64_t *v0 = &all[0].n;
    for (int p = 1; p < P && field < 0; p++) {
        const int64_t *vp = &all[p].n;
        for (int f = 0; f < AGREE_INTS && field < 0; f++)
            if (vp[f] != v0[f]) field = f + 1, bad = p;
        if (field < 0 && all[p].seed != all[0].seed) field = AGREE_INTS + 1, bad = p;
        if (field < 0 && all[p].waithash != all[0].waithash) field = AGREE_INTS + 2, bad = p;
    }
    if (field == 0) {
        if (bad == me)
            snprintf(pcoll_create_err, sizeof pcoll_create_err, "pcoll_create: rank %d: %s", me, msg);
        else
            snprintf(pcoll_create_err, sizeof pcoll_create_err,
                     "pcoll_create: rank %d rejected its arguments (see its message); no handle created on "
                     "any rank",
                     bad);
        rc = bad == me ? local_code : PCOLL_ERR_ARG;
    } else if (field == AGREE_INTS + 2) {
        snprintf(pcoll_create_err, sizeof pcoll_create_err,
                 "pcoll_create: argument mismatch: rule.wait differs between rank 0 and rank %d", bad);
        rc = PCOLL_ERR_MISMATCH;
    } else if (field > 0) {
        long long x0 = field <= AGREE_INTS ? (long long)v0[field - 1] : (long long)all[0].seed;
        long long xb = field <= AGREE_INTS ? (long long)(&all[bad].n)[field - 1] : (long long)all[bad].seed;
        snprintf(pcoll_create_err, sizeof pcoll_create_err,
                 "pcoll_create: argument mismatch: %s is %lld on rank 0 but %lld on rank %d (every rank must "
                 "pass the same)",
                 agree_names[field], x0, xb, bad);
        rc = PCOLL_ERR_MISMATCH;
    }
    free(all);
    return rc;
}

/* The handle with its buffers, records and rule table, or NULL (*code says why). An allocation
 * failure on any rank fails every rank, so that none is left alone in the next collective. */
static struct pcoll *handle_alloc(MPI_Comm comm, int P, int me, size_t n, pcoll_mem_t mem,
                                  const pcoll_config_t *cfg, int *code) {
    struct pcoll *h = calloc(1, sizeof *h);
    int nomem = !h, anynomem = nomem;
    if (h) {
        h->ctl = h->data = h->hb = MPI_COMM_NULL;
        pthread_mutex_init(&h->mu, NULL);
        pthread_cond_init(&h->cv_app, NULL);
        pcoll_cond_init(&h->cv_eng);
        pcoll_cond_init(&h->cv_live);
        h->P = P;
        h->me = me;
        h->n = n;
        h->nbuf = n + (size_t)META * (size_t)P;
        h->dp = datapath_of(mem); /* not NULL: args_local accepted mem on every rank */
        h->cfg = *cfg;
        h->cfg.rule.wait = NULL;
        h->K = cfg->ring + 1;
        h->R = cfg->records;
        h->peer_failed = -1;
        const pcoll_datapath_t *dp = h->dp; /* buffers zeroed, in the handle's memory */
        nomem |= !(h->dep[0] = dp->alloc(h->nbuf)) || !(h->dep[1] = dp->alloc(h->nbuf));
        nomem |= !(h->zeros = dp->alloc(h->nbuf)) || !(h->scratch = dp->alloc(h->nbuf));
        nomem |= dp->open(h) != PCOLL_OK;
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
        nomem |= !(h->hb_req = calloc((size_t)P, sizeof(MPI_Request))) ||
                 !(h->hb_buf = calloc((size_t)P * HB_LEN, 8));
        nomem |= !(h->left = calloc((size_t)P, 1));
        nomem |= !(h->hb_sent = calloc((size_t)P, 8)) || !(h->hb_recv = calloc((size_t)P, 8));
        nomem |=
            !(h->peers = calloc((size_t)P, sizeof(pcoll_peer_t))) || !(h->heard_at = calloc((size_t)P, 8));
        for (int p = 0; !nomem && p < P; p++) {
            h->hb_req[p] = MPI_REQUEST_NULL;
            h->peers[p].heard_s = -1;
            h->active[p] = p;
        }
        h->nactive = P;
        if (!nomem) {
            nomem |= pcoll_rule_copy(&h->rules[0], 0, &cfg->rule) != 0;
            h->nrules = 1;
        }
    }
    MPI_Allreduce(&nomem, &anynomem, 1, MPI_INT, MPI_LOR, comm);
    if (!anynomem) return h;
    snprintf(pcoll_create_err, sizeof pcoll_create_err,
             "pcoll_create: out of memory on %s (buffers of %zu floats)",
             nomem ? "this rank" : "another rank", n + (size_t)META * (size_t)P);
    pcoll_destroy(h, 1, 0);
    *code = PCOLL_ERR_NOMEM;
    return NULL;
}

/* Collective: whether each rank on this node may run on a processor of its own (the ranks sharing
 * memory <= the processors this process may run on: its binding, its cpuset). */
static int processor_each(MPI_Comm comm) {
    MPI_Comm node;
    int local = 0;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
    }
    cpu_set_t mine;
    long cpus =
        sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : sysconf(_SC_NPROCESSORS_ONLN);
    return local > 0 && cpus >= local;
}

/* The handle's communicators, one first message between every pair of ranks, then the engine
 * and liveness threads. PCOLL_OK, or an error with the handle to be destroyed by the caller. */
static int handle_start(struct pcoll *h, MPI_Comm comm) {
    if (MPI_Comm_dup(comm, &h->ctl) != MPI_SUCCESS || MPI_Comm_dup(comm, &h->data) != MPI_SUCCESS ||
        MPI_Comm_dup(comm, &h->hb) != MPI_SUCCESS)
        return PCOLL_ERR_MPI;
    MPI_Comm_set_errhandler(h->ctl, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(h->data, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(h->hb, MPI_ERRORS_RETURN);
    /* Every pair of ranks exchanges one message here, on this thread, before the engine and
     * liveness threads start: the transport's connections (TCP between nodes) are then set up
     * one at a time, not by two threads of each rank connecting to each other at once, which
     * Open MPI's TCP transport can fail ("connect() failed"). */
    const int P = h->P;
    int *wire = calloc((size_t)P * 2, sizeof *wire);
    int wrc = wire ? MPI_Alltoall(wire, 1, MPI_INT, wire + P, 1, MPI_INT, h->hb) : MPI_ERR_NO_MEM;
    free(wire);
    if (wrc != MPI_SUCCESS) {
        snprintf(pcoll_create_err, sizeof pcoll_create_err,
                 "pcoll_create: the first exchange between all ranks failed");
        return PCOLL_ERR_MPI;
    }
    h->oversub = !processor_each(comm); /* collective: called on every rank */
    h->cores_each = !h->oversub && !h->cfg.wake_always;
    h->t_last_dep = pcoll_now();
    if (pthread_create(&h->thread, NULL, pcoll_engine_main, h) != 0) {
        snprintf(pcoll_create_err, sizeof pcoll_create_err, "pcoll_create: cannot start the engine thread");
        return PCOLL_ERR_NOMEM; /* other ranks' engines then stall: reported by their watchdog */
    }
    h->thread_started = 1;
    if (pthread_create(&h->live_thread, NULL, pcoll_live_main, h) != 0) {
        pthread_mutex_lock(&h->mu);
        pcoll_set_error(h, PCOLL_ERR_NOMEM, "rank %d: cannot start the liveness thread", h->me);
        pthread_mutex_unlock(&h->mu); /* the engine goes on as a failed rank (zeros) */
    } else
        h->live_started = 1;
    return PCOLL_OK;
}

/*   MPI ready? -> own arguments -> agreed across ranks -> buffers -> device path -> communicators,
 *   threads.  Each step that involves the other ranks fails on all of them or on none. */
const char *pcoll_data_path(const pcoll_t *h) {
    if (!h) return NULL;
    return h->dp->path ? h->dp->path(h) : h->dp->name;
}

int pcoll_create(MPI_Comm comm, size_t n, pcoll_mem_t mem, const pcoll_config_t *cfg_in, pcoll_t **out) {
    pcoll_create_err[0] = 0;
    if (!out) return PCOLL_ERR_ARG;
    *out = NULL;
    int inited = 0, level = 0, P = 0, me = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        snprintf(pcoll_create_err, sizeof pcoll_create_err, "pcoll_create: MPI is not initialised");
        return PCOLL_ERR_STATE;
    }
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE) {
        snprintf(
            pcoll_create_err, sizeof pcoll_create_err,
            "pcoll_create: MPI thread level is %d, libpcoll needs MPI_THREAD_MULTIPLE (%d): initialise MPI "
            "with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, &provided) and check provided",
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

    char msg[400] = "", dev_key[192] = "";
    int code = PCOLL_OK;
    int ok = args_local(P, n, mem, &cfg, dev_key, sizeof dev_key, msg, sizeof msg, &code);
    int rc = args_agree(comm, P, me, ok, n, mem, &cfg, msg, code);
    if (rc) return rc;
    struct pcoll *h = handle_alloc(comm, P, me, n, mem, &cfg, &rc);
    if (!h) return rc;
    rc = h->dp->setup(h, comm, dev_key);
    if (!rc) rc = handle_start(h, comm);
    if (rc) {
        pcoll_destroy(h, 1, 0);
        return rc;
    }
    *out = h;
    return PCOLL_OK;
}
