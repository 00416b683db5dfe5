/* pcoll_impl.h -- libpcoll internals shared by pcoll.c (application side), engine.c (progress
 * engine) and trigger.c (pure rule logic). Not installed; callers use pcoll.h only.
 *
 * Threads: the application's threads (any number: e.g. a training loop and a controller), the
 * engine (engine.c) and the liveness thread (live.c). One mutex `mu` guards every field written
 * by more than one of them (marked [mu]); nobody holds it across an MPI call. The rounds are a
 * state machine (round_t, engine.c: pcoll_drive) run by whichever thread holds the drive token
 * (`driver`, taken and given back under mu, so each holder sees what the previous one wrote):
 * the engine, or an application thread blocked in pcoll_wait on a host-memory handle, which
 * drives its round itself instead of waiting to be woken (pcoll.c). The fields owned by the token
 * holder are marked [token]. Otherwise the application calls MPI through the library only in
 * pcoll_create and in pcoll_finalize's drain (after both threads have ended).
 *
 * Lifecycle: every public entry point counts itself in `inflight` (atomic, before it touches the
 * mutex) and returns PCOLL_ERR_STATE once `closing` is set; pcoll_finalize sets `closing` only
 * after the engine has left its loop, wakes every blocked caller and frees the handle once
 * `inflight` is back to 0.
 */
#ifndef PCOLL_IMPL_H
#define PCOLL_IMPL_H

#include "collectives/pcoll.h"
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

/* Per-rank metadata travels in the reduced buffer after the n data floats: META floats per rank,
 * each written by its owner only (every other rank adds +0.0f), so the sum carries it exactly:
 * integers < 2^24 in [0..2], and the float [3] bit for bit. */
#define META \
    7                      /* [0] deposits merged (0 = not fresh), [1] flags, [2] staleness,
                                [3] cost and [4] step time (s) reported with the deposit
                                (pcoll_set_cost), [5] its loss times its samples and [6] its
                                samples (pcoll_set_loss) */
#define META_MAX 16777215u /* 2^24 - 1: larger staleness saturates */

enum { TAG_READY = 1, TAG_ACT = 2, TAG_COUNT = 4 }; /* payload: uint64_t round, value */
#define NOT_ACTIVATED (-2)                          /* engine.c activate(): no ACT(r) received yet */
enum { PATH_SYNC, PATH_ANY, PATH_COORD };           /* how a round gets activated */

typedef struct {
    uint64_t from;
    pcoll_mode_t mode;
    int quorum;
    int nwait;
    int *wait;
} rule_ent_t;

/* Resolved plan for one round: the rule in force and how the engines activate it. */
typedef struct {
    pcoll_mode_t mode;
    int quorum;      /* effective Q */
    int initiator;   /* majority: i_r */
    int path;        /* PATH_* */
    int coord;       /* PATH_COORD: the rank that counts READY messages */
    int need_ready;  /* PATH_COORD: in the wait set: send READY to coord when ready */
    int count_up;    /* PATH_COORD, quorum: ready counts travel up the tree rooted at coord */
    uint8_t *inwait; /* [P] W_r (rule's wait set + tau-bound ranks), active ranks only */
    int nwait;
} plan_t;

typedef struct { /* stored copy of a record (agreed + local fields) */
    pcoll_record_t r;
} rec_slot_t;

/* One slot of the results ring: a completed round's result and its record. Rounds
 * [lent, completed) sit at slot q % K, where lent = max(handed, 1) - 1 is the round whose result
 * the application may still read (pcoll_next's pointer stays valid until the next call). */
typedef struct {
    float *buf;         /* nbuf floats, allocated on first use */
    pcoll_record_t rec; /* P = 0 until allocated */
} ring_slot_t;

/* Stages of a round (round_t.stage): plan (fix the rule; wait for the horizon), activate,
 * start (contribute, MPI_Iallreduce), reduce (MPI_Test until complete), publish; END once every
 * rank has joined, FAILED after an error of this rank's own MPI calls or memory. */
enum { ST_PLAN, ST_ACT, ST_START, ST_REDUCE, ST_PUBLISH, ST_END, ST_FAILED };
/* What one pcoll_drive call did, or why it stopped (errors are < 0). */
enum { PASS_ROUND = 1, PASS_INFLIGHT, PASS_IDLE_LOCAL, PASS_IDLE_REMOTE, PASS_END };
/* Who holds the drive token. */
enum { DRV_NONE = 0, DRV_ENGINE = 1, DRV_APP = 2 };

/* A recursive-doubling reduction in flight (rd.c). */
enum { RD_PRE = -1, RD_POST = -2 };
typedef struct {
    float *buf, *tmp;
    int n, P, me, P2, steps;
    int phase; /* RD_PRE, doubling step 0..steps-1, RD_POST */
    MPI_Comm comm;
    MPI_Request rq[2];
    int nrq;
} pcoll_rd_t;
int pcoll_rd_start(pcoll_rd_t *d, float *buf, float *tmp, int n, MPI_Comm comm, int P, int me);
int pcoll_rd_test(pcoll_rd_t *d, int *done);
/* The round's buffers are reduced by recursive doubling (rd.c) up to this size (n + META x P
 * floats), by MPI_Iallreduce above: MPICH's short-message limit for its own recursive doubling
 * (MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE); below it a reduction is a few message latencies. */
#define PCOLL_RD_MAX_BYTES 2048

/* The round in progress [token]. */
typedef struct {
    uint64_t r;         /* the round */
    int stage;          /* ST_* */
    int rc;             /* ST_FAILED: the error */
    int act_from;       /* ST_ACT: sender of ACT(r), or NOT_ACTIVATED */
    int sent_ready;     /* ST_ACT: READY(r) sent to the coordinator */
    uint64_t sent_cnt;  /* ST_ACT: last COUNT(r) sent up the tree */
    ring_slot_t *slot;  /* result slot (NULL: results dropped) */
    float *send, *recv; /* contribution (deposit or zeros) and result buffer */
    int failed;         /* this rank had failed when the round started: contributes zeros */
    double t_dep;       /* when the contributed deposit was made (0: none) */
    double t_start, t_end;
    const float *rm; /* ST_PUBLISH: the reduced metadata (host memory) */
    MPI_Request req; /* ST_REDUCE: the round's MPI_Iallreduce */
    pcoll_rd_t rd;   /* ST_REDUCE: or its recursive doubling (h->rd) */
} round_t;

/* Heartbeat message of the liveness thread (doubles): sequence number, pending, pending_s,
 * completed, started, state (LIVE_*). */
#define HB_LEN 6
enum { LIVE_OK = 0, LIVE_FAILED = 1, LIVE_LEAVING = 2 };

struct pcoll {
    MPI_Comm ctl, data;
    int P, me;
    size_t n, nbuf;                  /* nbuf = n + META*P */
    const struct pcoll_datapath *dp; /* the data path of the handle's memory kind */
    struct pcoll_dev *dev;           /* dp's own state (device: pcoll_nccl.cu), NULL for host */
    pcoll_config_t cfg;
    int K; /* [mu] results ring slots (grows, see hold_back in engine.c) */

    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_app; /* engine -> application: round completed, error */
    pthread_cond_t cv_eng; /* application -> engine: deposit, join, horizon */

    /* deposits [mu] */
    float *dep[2];
    int dep_cur;                /* the application writes dep[dep_cur] */
    int pending;                /* deposits merged into dep[dep_cur] (0: none pending) */
    float *lent;                /* pcoll_lend: the pending deposit is the caller's buffer, not
                                dep[dep_cur] (NULL: none lent) */
    double t_dep;               /* when the oldest pending deposit was made */
    float next_cost, next_step; /* pcoll_set_cost: go with the next deposit */
    float dep_cost, dep_step;   /* cost and step time of the pending deposit (sums over merged ones) */
    float next_loss, next_smp;  /* pcoll_set_loss: loss x samples, samples of the next deposit */
    float dep_loss, dep_smp;    /* ... of the pending deposit (sums over merged ones) */
    uint64_t applied_at_dep;    /* rounds handed out when the oldest pending deposit was made */
    uint64_t dep_seq;           /* deposits made */
    uint64_t consumed_seq;      /* deposits consumed by started rounds */
    uint64_t consumed_round;    /* round that consumed the latest consumed deposit */
    int join_req;               /* pcoll_join or pcoll_finalize called */
    int drop;                   /* [mu] pcoll_finalize: results are no longer handed out */
    int waiting_consumed;       /* [mu] application threads blocked in pcoll_wait(CONSUMED) */
    int closing;                /* atomic: finalize is freeing the handle; calls get ERR_STATE */
    int inflight;               /* atomic: public calls in progress */

    float *zeros;       /* nbuf, data part all zero: the contribution of a non-fresh rank */
    ring_slot_t *ring;  /* [mu] K slots (see ring_slot_t) */
    float *scratch;     /* receive buffer once this rank has failed */
    int rd;             /* 1: rounds reduce by recursive doubling (rd.c; cfg.reduce) */
    float *rd_tmp;      /* its scratch: nbuf floats (host memory) */
    uint64_t completed; /* [mu] rounds completed */
    uint64_t started;   /* [mu] rounds whose reduction this engine has entered */
    uint64_t handed;    /* [mu] rounds handed out by pcoll_next */
    uint64_t resolved;  /* [mu] rounds whose rule is fixed (engine started them) */
    uint64_t horizon;   /* [mu] cfg.horizon: rules of rounds < horizon are final */

    rule_ent_t *rules; /* [mu] sorted by from; rules[0].from == 0 */
    int nrules, caprules;

    rec_slot_t *recs; /* [mu] R records, round r at r % R */
    int R;

    /* the drive token and the round in progress */
    int driver;           /* [mu] DRV_*: who runs pcoll_drive now */
    int app_want;         /* [mu] application threads waiting for the engine to give the token up */
    int eng_parked;       /* [mu] the engine waits while an application thread drives */
    int drive_end;        /* [mu] the state machine has ended (ST_END or ST_FAILED) */
    int held_back;        /* [mu] the round waits for pcoll_next to free a ring slot (engine.c) */
    int idle_remote;      /* [mu] an application thread gave the token back with the round
                             waiting for other ranks' messages (PASS_IDLE_REMOTE) ... */
    uint64_t idle_events; /* [mu] ... when events was this: the engine polls before driving */
    double wait_next;     /* [mu] pcoll_deposit(PCOLL_WAIT_NEXT) time: the token is kept for the
                             pcoll_wait that follows (engine.c: reserved); 0: none */
    /* An application that comes back to pcoll_wait within spin_us of leaving it (the engine would
     * still be spinning had it been woken) needs no engine to watch in between: the engine then
     * parks for at most park_max while the application drives, and a pcoll_wait that ends need
     * not signal it when that park ends within park_max anyway (pcoll.c: pcoll_wait). */
    double t_back;     /* [mu] when the latest pcoll_wait that drove returned; 0: none since */
    double away[2];    /* [mu] the application's two latest times away from pcoll_wait (s) */
    int quick;         /* [mu] both under spin_us */
    int cores_each;    /* each rank of this node may run on a processor of its own (ranks
                          sharing memory <= processors this process may use), and not
                          cfg.wake_always: else a short park only delays the engine (its timed
                          wake-up waits for a processor) */
    int oversub;       /* more ranks share this node than this process has processors */
    double park_until; /* [mu] while eng_parked: when the engine's park times out */
    int park_short;    /* [mu] while eng_parked: the park is a short one (park_max) */
    uint64_t events;   /* [mu] local events that may unblock a round (deposit, join, horizon,
                             pcoll_next, error, token given back): counted, then cv_eng signalled */
    round_t cur;       /* [token] */

    /* state of the token holder (agreed, from the records) [token] */
    uint8_t *joined;  /* [P] */
    uint32_t *streak; /* [P] */
    int *active;      /* [nactive] ranks not joined, ascending */
    int nactive;
    uint64_t *ready_round;         /* [P] coordinator: last round each rank said READY for (+1) */
    uint64_t *cnt_round;           /* [P] last round (+1) each child reported a COUNT for ... */
    uint64_t *cnt_val;             /* [P] ... and the ready ranks in its subtree */
    uint64_t *sent_to, *recv_from; /* [P] control messages, for the final drain */
    uint64_t drained;              /* 1 + the last round whose activation received messages */
    plan_t plan;

    /* liveness (live.c): heartbeats on the private communicator hb, sent and read by the
     * liveness thread only; pcoll_peers reads the result under mu */
    MPI_Comm hb;
    pthread_t live_thread;
    int live_started;
    int live_stop; /* [mu] finalize: send LIVE_LEAVING and end */
    pthread_cond_t cv_live;
    MPI_Request *hb_req; /* [P] */
    double *hb_buf;      /* [P][HB_LEN] */
    uint64_t *hb_sent, *hb_recv;
    pcoll_peer_t *peers; /* [P] [mu] */
    double *heard_at;    /* [P] [mu] local time of the last heartbeat from p */
    uint8_t *left;       /* [P] [mu] p sent LIVE_LEAVING (its handle is being freed) */
    double t_last_dep;   /* [mu] when this rank last deposited */

    /* status [mu] */
    int err;                    /* sticky error of this rank (the first one is kept) */
    int peer_failed;            /* first failed peer rank, or -1 */
    int peer_dead;              /* the liveness thread found a peer silent: the engine may be
                                  blocked in MPI for ever; finalize must not wait for it */
    int done;                   /* engine left its loop (every rank joined, or error) */
    int clean;                  /* ... after every rank joined, control messages drained */
    struct pcoll *retired_next; /* pcoll.c: list of finalized handles (closed shells) */
    char errmsg[512];           /* message of the sticky error err */
    char callmsg[512];          /* message of the last failed call that did not set err */

    /* stats [mu] */
    uint64_t fresh_total, stale_count;
    double stale_sum;
    uint32_t max_streak_all, max_staleness;
    uint32_t *max_streak; /* [P] */
    uint64_t driven;      /* rounds an application thread published itself (in pcoll_wait) */
    uint64_t wait_sleeps; /* times pcoll_wait slept until another thread made progress */
    uint64_t engine_wakes, engine_polls, result_buffers; /* pcoll_stats_t */
    uint64_t engine_signals; /* pcoll_wait woke the parked engine to watch for other ranks */
    uint64_t lent_rounds;    /* rounds that reduced a lent buffer in place of a copy */
};

/* ---- the data path: where a handle's buffers live and how a round's data is reduced --------
 * One table per memory kind, chosen once by pcoll_create (create.c: datapath_of) and used through
 * h->dp only, so the round engine has no branch on the memory kind:
 *   pcoll_dp_host    host memory (dp_host.c): MPI_Iallreduce, or recursive doubling (rd.c)
 *   pcoll_dp_device  device memory (dp_nccl.c over pcoll_nccl.cu: NCCL, or staged through pinned
 *                    host memory when ranks share a GPU); NULL in libpcoll.a (dp_none.c)
 * Returns: PCOLL_OK (0) or a PCOLL_ERR_* code unless said otherwise. An op given h that fails sets
 * the handle's sticky error itself ("rank R: ..."), except deposit (msg, the handle stays usable)
 * and the create-time ops (pcoll_create_err or msg). */
typedef struct pcoll_datapath {
    const char *name; /* "host" | "device" */
    /* pcoll_data_path's answer once setup succeeded; NULL: name. */
    const char *(*path)(const struct pcoll *h);
    /* 1: start runs the round to its end (device): only the engine drives rounds, an application
     * thread in pcoll_wait sleeps, and every deposit wakes the engine. 0: start and test never
     * block, so pcoll_wait drives its round itself. */
    int blocking;
    int lend; /* 1: pcoll_lend may hand the caller's buffer to the reduction (host memory) */
    /* pcoll_create, local, before the arguments are agreed: 1 if this rank can use the memory,
     * with key naming its device (ranks with equal keys share one; "" for host memory); else 0
     * with the reason in msg. Any thread. */
    int (*usable)(char *key, size_t klen, char *msg, size_t mlen);
    /* nfloats zeroed floats in this memory, or NULL when out of memory; free(NULL) does nothing.
     * The creating thread, or the token holder (the ring's buffers, allocated on first use). */
    float *(*alloc)(size_t nfloats);
    void (*free)(float *p);
    /* pcoll_create, local, after the buffers: what the reductions need besides them (host: the
     * choice of recursive doubling, h->rd, and its scratch h->rd_tmp). PCOLL_ERR_NOMEM or OK. */
    int (*open)(struct pcoll *h);
    /* pcoll_create, collective over comm after open on every rank (key: usable's): the
     * reduction's resources (device: the path agreed, CUDA streams, NCCL communicator). Every rank
     * returns the same code; on error pcoll_create_err says why. */
    int (*setup)(struct pcoll *h, MPI_Comm comm, const char *key);
    /* pcoll_destroy, after the buffers are freed: frees what open and setup made (h->dev may be
     * NULL). broken: the handle failed, so a shared resource (NCCL communicator) is not kept. */
    void (*close)(struct pcoll *h, int broken);
    /* The engine thread, once before its first round (device: makes the application's GPU
     * current). Error: sticky, the engine ends. */
    int (*thread_init)(struct pcoll *h);
    /* An application thread, mu held: dst (deposit buffer `slot` of h->dep) = g, or += g with
     * accumulate; g (n floats) may be reused once it returns. Error: the reason in msg. */
    int (*deposit)(struct pcoll *h, int slot, float *dst, const float *g, int accumulate, char *msg,
                   size_t mlen);
    /* The token holder, stage ST_START: writes the round's metadata (zeros, this rank's META
     * floats `mine` at META*me, pcoll_put_meta) after the n data floats of c->send and starts the
     * sum of the nbuf floats of c->send over the ranks into c->recv; send_slot: c->send is
     * h->dep[send_slot] (its deposit may still be in flight), -1 otherwise. Sets c->t_start.
     * Returns 0: in flight (call test), 1: complete (c->rm: the reduced metadata in host memory,
     * c->t_end set), < 0: an error. */
    int (*start)(struct pcoll *h, round_t *c, int send_slot, const float *mine);
    /* The token holder, stage ST_REDUCE, only after start returned 0: 0 still in flight, 1
     * complete (c->rm, c->t_end set), < 0 an error. Never blocks. */
    int (*test)(struct pcoll *h, round_t *c);
    /* The token holder: recv[0..n) *= s, done when it returns. */
    int (*scale)(struct pcoll *h, float *recv, float s);
} pcoll_datapath_t;
extern const pcoll_datapath_t pcoll_dp_host;
extern const pcoll_datapath_t *const pcoll_dp_device;

/* Writes the META*P metadata floats of a round at meta: zeros, except this rank's own META slots
 * (mine). Every rank adds +0.0f to the others' slots, so the sum carries each slot exactly. */
static inline void pcoll_put_meta(const struct pcoll *h, float *meta, const float *mine) {
    memset(meta, 0, (size_t)META * (size_t)h->P * sizeof(float));
    memcpy(meta + META * h->me, mine, META * sizeof(float));
}
/* An MPI call of the data path failed: sets the sticky error PCOLL_ERR_MPI naming `what` and
 * MPI's message (takes mu) and returns PCOLL_ERR_MPI. base.c. */
int pcoll_mpi_fail(struct pcoll *h, int rc, const char *what);

/* trigger.c */
const rule_ent_t *rule_at(const struct pcoll *h, uint64_t r);
void plan_round(struct pcoll *h, uint64_t r, plan_t *pl);
int plan_satisfied(const struct pcoll *h, const plan_t *pl, uint64_t r, int self_ready, uint64_t tree_cnt);

/* create.c */
/* Checks rule r for a P-rank communicator: 1, or 0 with the reason in msg. */
int pcoll_rule_check(const pcoll_rule_t *r, int P, char *msg, size_t len);
/* Copies rule r (its wait set too) into e, in force from round `from`. */
int pcoll_rule_copy(rule_ent_t *e, uint64_t from, const pcoll_rule_t *r);
/* Frees what h owns. comms: the communicators too (only when nothing can be pending on them).
 * retire: h itself stays, closed, so that a late call gets PCOLL_ERR_STATE. */
void pcoll_destroy(struct pcoll *h, int comms, int retire);
extern char pcoll_create_err[512]; /* message of the latest failed pcoll_create (no handle) */

/* base.c: used by every file, calls no other libpcoll file */
/* Sticky error of this rank (caller holds mu): the first one is kept; wakes every waiter. */
void pcoll_set_error(struct pcoll *h, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Message of a call that failed without breaking the handle (caller holds mu). */
void pcoll_call_error(struct pcoll *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double pcoll_now(void);                                                      /* CLOCK_MONOTONIC, seconds */
void pcoll_cond_wait_s(pthread_cond_t *cv, pthread_mutex_t *mu, double sec); /* cv: pcoll_cond_init */
void pcoll_cond_init(pthread_cond_t *cv); /* its timed waits count CLOCK_MONOTONIC */
/* A local event that may unblock a round (caller holds mu): counts it and wakes the engine. */
void pcoll_wake_engine(struct pcoll *h);

/* record.c (pcoll_record_init/free are public) */
/* Copies a record into one allocated for d->P >= s->P ranks; d->P becomes s->P. */
void pcoll_record_copy(pcoll_record_t *d, const pcoll_record_t *s);

/* engine.c */
void *pcoll_engine_main(void *arg);
int pcoll_drive(struct pcoll *h);
/* The longest an engine that was not signalled stays blind to rounds other ranks start:
 * min(spin_us, poll_max_us), the gap an idle engine leaves between its polls anyway. */
static inline double pcoll_park_max(const struct pcoll *h) {
    int u = h->cfg.spin_us < h->cfg.poll_max_us ? h->cfg.spin_us : h->cfg.poll_max_us;
    return u * 1e-6;
}
/* Whether a thread idle since *t_idle (< 0: sets it to now) is still within cfg.spin_us of polling
 * with sched_yield before it sleeps (the engine, and pcoll_wait before it gives a round back). */
int pcoll_spinning(const struct pcoll *h, double *t_idle);

/* A round's reduction is in flight (PASS_INFLIGHT) and the driving thread tests it again: on an
 * oversubscribed node it first gives up its processor (and mu), so the peers it waits for can run.
 * The MPI library's own test may not (MPICH's spins; Open MPI yields with mpi_yield_when_idle).
 * Caller holds mu; elsewhere nothing is done. */
static inline void pcoll_inflight_yield(struct pcoll *h) {
    if (!h->oversub) return;
    pthread_mutex_unlock(&h->mu);
    sched_yield();
    pthread_mutex_lock(&h->mu);
}

/* live.c: heartbeats, peer failure detection (started by pcoll_create, stopped by finalize) */
void *pcoll_live_main(void *arg);
void pcoll_live_stop(struct pcoll *h);

#endif
