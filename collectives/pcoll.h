/*
 * pcoll.h -- libpcoll: persistent *partial* allreduce for eager-SGD, over MPI.
 *
 * A handle is created once over (communicator of P ranks, n floats, memory kind). Rounds
 * r = 0, 1, 2, ... each reduce (sum) one contribution per rank. Every rank takes part in every
 * round through its own progress engine (a thread), even while the application thread computes;
 * a second thread (liveness) exchanges heartbeats so that a dead or hung peer becomes an error.
 *
 *   application thread                     engine thread (one per rank)
 *   ------------------                     ---------------------------------------------
 *   pcoll_deposit(g)  --copy-->  pending   round r may start when its trigger rule holds:
 *   (pcoll_lend(g): g itself is pending)
 *   pcoll_wait()        <--signal--          sync     : every active rank has a deposit
 *   pcoll_next() x k    <--ring[r%K]--       quorum(Q): >= Q ranks have a deposit (solo: Q=1)
 *                                            majority : initiator hash(seed,r)%P has a deposit
 *                                            + wait set W_r: all of W_r have a deposit
 *                                          at start, contribution = pending deposit (fresh) or 0;
 *                                          MPI_Iallreduce on a private communicator, in round
 *                                          order (ncclAllReduce for device memory)
 *
 * Who runs a round: the engine, unless an application thread is blocked in pcoll_wait on a
 * host-memory handle; that thread then runs the round itself (activation, reduction, publishing)
 * instead of sleeping until the engine has done it, so a deposit followed by pcoll_wait costs no
 * thread hand-off (pcoll_stats: driven, wait_sleeps). It still returns on its timeout or a peer's
 * failure: the reduction is non-blocking and the engine takes it over.
 *
 * Guarantees (docs/DESIGN.md#2-the-six-invariants-and-their-tests, checked by tests/):
 *   agreement     every rank sees the same rounds, fresh sets and bitwise-equal results;
 *   conservation  every deposited gradient is in exactly one round (finalize flushes);
 *   trigger       the fresh set of a round satisfies its rule;
 *   staleness     with tau > 0, a rank whose rejection streak reaches tau is added to the wait set
 *                 of the next round, so no streak exceeds tau;
 *   liveness      any P >= 1, any delays; finalize returns once every rank has joined.
 * Round indices are 64-bit and travel in message payloads, never in tags: no wrap-around.
 *
 * A rank that falls behind never fails: its completed rounds wait in the results ring (cfg.ring)
 * for pcoll_next; when the ring is full, this rank's engine waits for the application, so the
 * other ranks wait for it in the next reduction (backpressure). The ring grows only while an
 * application thread is blocked in pcoll_wait(PCOLL_WAIT_CONSUMED), which could not otherwise
 * make progress. A rank that has joined never fails for rounds it no longer needs.
 *
 * Failures: a rank whose engine fails (an MPI error, out of memory) tells the others (its
 * liveness thread sends LIVE_FAILED, and while it still takes part its rounds carry
 * PCOLL_F_FAILED); a rank that goes silent (killed, SIGSTOP, its node gone) is found by the
 * others' liveness threads once its silence exceeds 100 times the longest heartbeat gap seen so
 * far. Either way every other rank's next call returns PCOLL_ERR_PEER naming it, in bounded time.
 * The engine may then stay blocked in MPI (a reduction the dead rank never enters): the only
 * clean end is MPI_Abort (pcollCheck does that); do not call MPI_Finalize after an error.
 *
 * Threads: any number of application threads may call in concurrently. pcoll_finalize waits for
 * the calls in progress to leave; once it has begun to free the handle, every call returns
 * PCOLL_ERR_STATE, also after it has returned (the handle's struct is kept as a closed shell).
 * Safe order with a controller thread (controller/): pcoll_join; drain until pcoll_wait returns
 * PCOLL_DONE (the controller keeps posting rules and the horizon until every rank has joined);
 * ctl_stop (joins the controller thread); pcoll_finalize. The reverse order (pcoll_finalize,
 * then ctl_stop) no longer crashes -- the controller's calls return PCOLL_ERR_STATE -- but the
 * controller must still be running until every rank has joined, or a horizon handle stalls.
 *
 * Assumes MPI was initialised with MPI_THREAD_MULTIPLE (checked: PCOLL_ERR_THREAD_LEVEL).
 * The library never exits and never prints: every call returns a code; pcoll_strerror() names
 * the code and pcoll_last_error() gives the detailed message (naming the rank or field).
 */
#ifndef PCOLL_H
#define PCOLL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    PCOLL_OK = 0,
    PCOLL_EMPTY = 1,             /* pcoll_next: no completed round left to apply (not an error) */
    PCOLL_DONE = 2,              /* pcoll_wait after pcoll_join: every rank joined, all handed out */
    PCOLL_ERR_ARG = -1,          /* bad argument on this rank */
    PCOLL_ERR_MISMATCH = -2,     /* arguments differ across ranks (n, mode, seed, ...) */
    PCOLL_ERR_THREAD_LEVEL = -3, /* MPI not initialised with MPI_THREAD_MULTIPLE */
    PCOLL_ERR_MPI = -4,          /* an MPI call failed */
    PCOLL_ERR_NOMEM = -5,
    PCOLL_ERR_PENDING = -6,      /* deposit while the previous one is still pending */
    PCOLL_ERR_RING = -7,         /* not returned: a lagging rank is held back (kept for callers) */
    PCOLL_ERR_LATE = -8,         /* rule change for a round at or below the horizon (final) */
    PCOLL_ERR_TIMEOUT = -9,      /* a wait ran past its timeout */
    PCOLL_ERR_EVICTED = -10,     /* round record no longer kept */
    PCOLL_ERR_PEER = -11,        /* another rank failed (its engine reported an error) or went
                                   silent (dead or hung): the message names it */
    PCOLL_ERR_STATE = -12,       /* call not allowed now (e.g. the handle is being finalized) */
    PCOLL_ERR_UNSUPPORTED = -13, /* e.g. device memory in a build without CUDA/NCCL */
    PCOLL_ERR_UNRECEIVED = -14   /* pcoll_finalize found a message of its own that no receive
                                    matched (a libpcoll bug; the handle is freed all the same) */
};

typedef enum { PCOLL_MEM_HOST = 0, PCOLL_MEM_DEVICE = 1 } pcoll_mem_t;
typedef enum { PCOLL_SYNC = 0, PCOLL_SOLO = 1, PCOLL_MAJORITY = 2, PCOLL_QUORUM = 3 } pcoll_mode_t;
/* Division of a round's sum. PCOLL_DIV_FRESH divides by the number of deposits in the round:
 * the sum over fresh ranks of the deposits each merged (PCOLL_ACCUMULATE), so the result is the
 * mean of the gradients it holds; without merged deposits that is |F_r|, the fresh ranks. */
typedef enum { PCOLL_DIV_NONE = 0, PCOLL_DIV_P = 1, PCOLL_DIV_FRESH = 2 } pcoll_div_t;

/* How a round's buffer (n + 4 x P floats, host memory) is reduced: AUTO (default) recursive
 * doubling over point-to-point messages up to 2 KiB, MPI_Iallreduce above; or either always. */
typedef enum { PCOLL_REDUCE_AUTO = 0, PCOLL_REDUCE_IALLREDUCE = 1, PCOLL_REDUCE_RD = 2 } pcoll_reduce_t;

#define PCOLL_MAX_RANKS 4096

/* Trigger rule of a round. The wait set is copied by the library.
 * Ready = a pending deposit, or joining (pcoll_join/pcoll_finalize called: it must not block the
 * last rounds, and contributes nothing). A rank that joins in round r counts as ready for the
 * rule, is exempt from the wait set and is flagged PCOLL_F_JOINED in the record; so a round in
 * which some rank joins may have fewer than Q fresh ranks (quorum) or a joining initiator
 * (majority). In every other round the rule counts fresh ranks only. */
typedef struct {
    pcoll_mode_t mode;
    int quorum; /* PCOLL_QUORUM: Q >= 1 (capped at the number of active ranks) */
    int nwait;  /* ranks that must be fresh in the round */
    const int *wait;
} pcoll_rule_t;

typedef struct {
    pcoll_rule_t rule;     /* rule from round 0 on (default: sync) */
    pcoll_div_t div;       /* divide the sum by nothing, P, or the deposits in the round */
    uint64_t seed;         /* majority initiator draw; must match across ranks */
    int ring;              /* K: completed rounds kept for a rank that lags before it holds the
                           others back (default 16; result buffers are allocated when used) */
    int records;           /* round records kept for pcoll_record_get (default 4096); pcoll_next's
                           records travel with the results ring and do not depend on it */
    int tau;               /* staleness bound (0 = none): streak >= tau puts a rank in the wait set */
    int horizon;           /* 1: the engine starts round r only once pcoll_set_horizon(>= r) was
                           called, and pcoll_set_rule may change rules of rounds above the
                           horizon (a controller posts rules ahead); 0: cfg.rule for every round */
    int poll_max_us;       /* longest idle sleep of the engine between polls (default 200) */
    int spin_us;           /* the engine, and a thread driving in pcoll_wait, poll for other
                           ranks' activation messages (with sched_yield) this long before
                           sleeping (default 50) */
    double live_period_s;  /* heartbeat period of the liveness thread (0: 0.1 s). Detection of a
                           silent peer takes 100 x the longest gap seen, so at least 100 periods */
    pcoll_reduce_t reduce; /* the rounds' reduction algorithm (must match across ranks) */
    int wake_always;       /* 1: a pcoll_wait that ends after a partial round always wakes the
                           engine to watch for other ranks' rounds; 0 (default): not when the
                           application comes back within spin_us (pcoll_stats.engine_signals) */
} pcoll_config_t;

/* Flags of a rank in a round record. */
enum { PCOLL_F_JOINED = 1, PCOLL_F_FAILED = 2 };

/* One round, as every rank sees it (fields marked local differ between ranks). */
typedef struct {
    uint64_t round;
    pcoll_mode_t mode; /* rule in force */
    int quorum;        /* effective Q (quorum mode) */
    int initiator;     /* majority: i_r; else -1 */
    int nactive;       /* ranks not joined when the round started */
    int nfresh;        /* |F_r| */
    int P;
    uint8_t *fresh;        /* [P] number of deposits of rank p in this round (0: not fresh) */
    uint8_t *waited;       /* [P] 1 if p was in the wait set W_r */
    uint8_t *flags;        /* [P] PCOLL_F_* */
    uint32_t *staleness;   /* [P] r - rounds applied by p when it deposited (fresh ranks) */
    uint32_t *streak;      /* [P] rejection streak of p after this round */
    float *cost;           /* [P] cost (s) p reported with the deposit it contributed here
                                (pcoll_set_cost; 0: not fresh or not reported). Agreed: it
                                travels with the data. May be NULL in records a caller built. */
    float *step;           /* [P] step time (s) reported with it, likewise (may be NULL) */
    double t_start, t_end; /* local: MPI_Wtime when this rank entered / completed it */
    double t_deposit;      /* local: when this rank deposited what it contributed (0 if none) */
    float *loss;           /* [P] training loss p reported with the deposit it contributed here
                                (pcoll_set_loss): the mean over its samples, merged deposits
                                weighted by theirs (0: not fresh, or no samples reported). Agreed
                                like cost. May be NULL in records a caller built. */
    float *samples;        /* [P] the samples that loss is over (sum over merged deposits; 0: none
                                reported) */
} pcoll_record_t;

typedef struct {
    uint64_t rounds;         /* completed */
    uint64_t applied;        /* handed to the application by pcoll_next */
    uint64_t deposits;       /* by this rank */
    uint64_t fresh_total;    /* sum over rounds of |F_r| */
    uint32_t max_streak_all; /* over all ranks and rounds */
    uint32_t max_staleness;  /* over all ranks and rounds */
    double mean_staleness;   /* over all fresh contributions */
    uint64_t driven;         /* rounds an application thread of this rank completed itself
                                inside pcoll_wait (host memory): no thread hand-off */
    uint64_t wait_sleeps;    /* times pcoll_wait slept until another thread (the engine)
                                made progress: each costs a wake-up */
    uint64_t engine_wakes;   /* times the engine thread woke from a sleep (signalled or timed
                                out): thread wake-ups besides the application's */
    uint64_t result_buffers; /* result buffers allocated (at most cfg.ring, grown ring aside;
                                released ones are reused first, so usually two or three) */
    uint64_t engine_polls;   /* engine steps that found the round still waiting (for other
                                ranks' messages or a local event): each held the drive token */
    uint64_t lent;           /* rounds that reduced this rank's lent buffer itself (pcoll_lend) */
    uint64_t engine_signals; /* pcoll_wait woke the engine to watch for rounds other ranks start
                                while the application is away: not when the application came
                                back within cfg.spin_us the previous times and the engine, parked
                                for at most min(spin_us, poll_max_us), wakes by itself */
    uint32_t *max_streak;    /* [P] (caller-allocated, may be NULL) */
} pcoll_stats_t;

typedef struct pcoll pcoll_t;

void pcoll_config_default(pcoll_config_t *cfg);

/* Collective over comm. Checks the thread level and that n, mem, mode, quorum, seed, div, ring,
 * tau and horizon agree on every rank; on mismatch every rank gets PCOLL_ERR_MISMATCH and a
 * message naming the field and the ranks. */
int pcoll_create(MPI_Comm comm, size_t n, pcoll_mem_t mem, const pcoll_config_t *cfg, pcoll_t **out);

/* The data path the handle's rounds take, agreed by every rank at pcoll_create: "host" (host
 * memory), "nccl" (device memory, NCCL) or "staged" (device memory through pinned host buffers
 * and MPI: ranks share a GPU, or PCOLL_DEVICE_PATH=staged). A static string; NULL for NULL. */
const char *pcoll_data_path(const pcoll_t *h);

/* Copies g (n floats) into this rank's pending contribution. Never waits for other ranks.
 * flags: PCOLL_ACCUMULATE adds to a pending deposit instead of failing with PCOLL_ERR_PENDING.
 * PCOLL_WAIT_NEXT: the calling thread calls pcoll_wait next, without computing in between (as a
 * training step does: deposit, then wait). The engine is then not woken for this deposit, since
 * the waiting thread drives the round itself (host memory): one thread wake-up less per round.
 * Only a hint: if no pcoll_wait follows, the engine still starts the round, within its 50 ms
 * safety-net sleep instead of at once.
 * Device memory (PCOLL_MEM_DEVICE): g may be device or host memory; it is copied on the library's
 * own stream, which does not wait for the caller's streams: whatever writes g must have completed
 * (its stream synchronised) before the call. The call returns once the copy is done, switching to
 * this rank's GPU for it if the calling thread has another one current. */
enum { PCOLL_ACCUMULATE = 1, PCOLL_WAIT_NEXT = 2 };
int pcoll_deposit(pcoll_t *h, const float *g, int flags);

/* Deposits g without copying it (host memory): the round that takes the deposit reduces g itself,
 * which saves a copy of n floats per round (at 4 MiB and P = 8 about a fifth of the round:
 * collectives/README.md). g holds pcoll_lend_len(h) floats: the library writes the round's
 * metadata after the n gradient floats. The caller leaves g[0..n) unchanged, and g allocated,
 * until the round that consumed it has completed: until pcoll_wait(PCOLL_WAIT_CONSUMED) has
 * returned PCOLL_OK (with timeout 0 it tells whether that is so) or pcoll_finalize has returned;
 * after an error, until the process ends. flags as for pcoll_deposit; a deposit that accumulates
 * onto a lent one copies it into the library's buffer first, as a copied deposit would be.
 * Device memory: PCOLL_ERR_ARG (deposits are copied on the device's copy stream). */
int pcoll_lend(pcoll_t *h, float *g, int flags);
size_t pcoll_lend_len(const pcoll_t *h); /* n + the round's metadata floats (0 if h is NULL) */

/* Two times (seconds) that travel with the next deposit, so every rank reads them in the record
 * of the round that consumes it (rec->cost[p], rec->step[p]): an agreed view of every rank's
 * speed, e.g. for a controller to estimate what each rule would cost. cost: what the deposit cost
 * the caller (a controller's choice, e.g. the wall time since the previous deposit, waiting
 * included); step: how long the rank took to produce it (data, compute, any delay; not the wait
 * for a round). Deposits merged with PCOLL_ACCUMULATE add both. Not calling it reports 0
 * (unknown). Both finite, >= 0. */
int pcoll_set_cost(pcoll_t *h, double cost, double step);

/* The training loss of the next deposit, travelling like pcoll_set_cost's times, so every rank
 * reads it in the record of the round that consumes it (rec->loss[p], rec->samples[p]): e.g. for a
 * controller to measure how fast the loss falls under each rule. loss: the mean loss over the
 * `samples` samples the deposit's gradient was computed from; samples: 0 .. 2^24 (0: no loss
 * reported, the default; samples need not be integers: weights). Deposits merged with
 * PCOLL_ACCUMULATE add both loss x samples and samples (the record holds the merged mean). Refused
 * (PCOLL_ERR_ARG, the message naming this rank): a loss that is NaN, infinite or beyond
 * +-PCOLL_LOSS_MAX (it travels as a float times the samples), samples out of range or NaN; the
 * next deposit then carries what was set before, or nothing. */
#define PCOLL_LOSS_SAMPLES_MAX 16777216
#define PCOLL_LOSS_MAX         1e28 /* x 2^24 samples x 255 merged deposits stays a float */
int pcoll_set_loss(pcoll_t *h, double loss, double samples);

/* PCOLL_WAIT_CONSUMED: until the round that consumed the last deposit has completed.
 * PCOLL_WAIT_NEWER: until some completed round has not been handed out by pcoll_next yet
 * (the original eager-SGD semantics: a late rank does not wait; its deposit goes into a later
 * round). timeout_s < 0: no limit. *round (may be NULL): the consuming / newest round. */
enum { PCOLL_WAIT_CONSUMED = 0, PCOLL_WAIT_NEWER = 1 };
int pcoll_wait(pcoll_t *h, int how, double timeout_s, uint64_t *round);

/* Hands out the next completed round not yet handed out, in round order: *result points to its
 * n floats (valid until the next pcoll_next call; with PCOLL_MEM_DEVICE a device pointer, the
 * calling thread must have this rank's GPU current, and work the caller queued on its own streams
 * that reads the result must have completed before that next call, which hands the buffer to a
 * later round), rec (may be NULL; else initialised with
 * pcoll_record_init for >= pcoll_size(h) ranks, or PCOLL_ERR_ARG) gets its record. Returns
 * PCOLL_EMPTY when there is none. Never blocks. */
int pcoll_next(pcoll_t *h, uint64_t *round, const float **result, pcoll_record_t *rec);

/* Rule from round `from` on; needs cfg.horizon = 1 (else PCOLL_ERR_STATE: without a horizon some
 * ranks may already have started the round and others not). Every rank must post the same rule
 * for the same round, and every rank gets the same answer: PCOLL_ERR_LATE if from is at or below
 * the horizon already posted (those rules are final), else OK. */
int pcoll_set_rule(pcoll_t *h, uint64_t from, const pcoll_rule_t *rule);
/* With cfg.horizon: the rules of all rounds <= through are final; the engine may start them.
 * UINT64_MAX releases every round. */
int pcoll_set_horizon(pcoll_t *h, uint64_t through);

/* Record of a completed round; waits up to timeout_s (<0: no limit) for it to complete.
 * rec: initialised for >= pcoll_size(h) ranks (else PCOLL_ERR_ARG); rec->P becomes the handle's
 * P. PCOLL_ERR_EVICTED once `records` later rounds have overwritten it. */
int pcoll_record_init(pcoll_record_t *rec, int P);
void pcoll_record_free(pcoll_record_t *rec);
int pcoll_record_get(pcoll_t *h, uint64_t round, pcoll_record_t *rec, double timeout_s);

/* A summary of consecutive round records (a run file's rounds.records[] entry): the first and
 * last round, how many were added, the last one's mode, and sums, minimum and maxima of their
 * fresh counts, latencies (ms), staleness of the fresh contributions and streaks. Reset before the
 * first pcoll_agg_add; pure, no handle. */
typedef struct {
    uint64_t from, to;
    int n, min_fresh;
    pcoll_mode_t mode;
    double fresh_sum, lat_sum, stale_sum;
    long stale_n;
    uint32_t max_streak, max_stale;
} pcoll_agg_t;
void pcoll_agg_reset(pcoll_agg_t *a);
void pcoll_agg_add(pcoll_agg_t *a, const pcoll_record_t *r);

int pcoll_stats(pcoll_t *h, pcoll_stats_t *st);

/* Liveness of the peers, for a stall watchdog (like Horovod's stall inspector). The library's
 * liveness thread sends this rank's state to every peer every cfg.live_period_s and reads what
 * has arrived (and turns a silent peer into PCOLL_ERR_PEER, see above); pcoll_heartbeat only
 * checks the handle (kept for callers that drove the heartbeats themselves). pcoll_peers says,
 * per rank, how long ago it was last heard of and what it reported. */
typedef struct {
    double heard_s;     /* seconds since its last heartbeat arrived (-1: never; 0 for self) */
    int pending;        /* it had a deposit pending (waiting for a round) */
    double pending_s;   /* ... for this long (or, if not pending, since its last deposit) */
    uint64_t completed; /* rounds it had completed */
    uint64_t started;   /* rounds its engine had started (> completed: inside a reduction) */
} pcoll_peer_t;
int pcoll_heartbeat(pcoll_t *h);
int pcoll_peers(pcoll_t *h, pcoll_peer_t *out /* [P] */);
int pcoll_size(const pcoll_t *h);
int pcoll_rank(const pcoll_t *h);
/* Local: since when this rank's deposit is pending (MPI_Wtime) or 0; rounds completed so far. */
uint64_t pcoll_rounds(pcoll_t *h);

/* Joins: no more deposits from this rank; its pending deposit is flushed into a round. Its
 * engine keeps taking part until every rank has joined. Drain the rounds that still complete:
 *     pcoll_join(h);
 *     while (pcoll_wait(h, PCOLL_WAIT_NEWER, t, NULL) == PCOLL_OK)
 *         while (pcoll_next(h, &r, &res, &rec) == PCOLL_OK) apply(res);   -- ends with PCOLL_DONE
 * so a rank that finished its data early still ends with the same weights as the others. */
int pcoll_join(pcoll_t *h);

/* Joins (no more deposits from this rank), flushes the pending deposit into a round, keeps
 * taking part until every rank has joined, then frees the handle. Collective in the sense that
 * it returns once all ranks have called it. Completed rounds not yet handed out are dropped
 * (from the call on, results are not kept: this rank never holds the others back): drain them
 * with pcoll_next first if they matter. Waits for calls of other threads in progress to leave;
 * afterwards every call on the handle returns PCOLL_ERR_STATE. On PCOLL_ERR_TIMEOUT, or an
 * error with a peer dead (PCOLL_ERR_PEER), the handle is not freed: the engine may be inside
 * MPI, so end the process with MPI_Abort, not MPI_Finalize. Before it frees its communicators it
 * checks (MPI_Iprobe) that no message is left on them: PCOLL_ERR_UNRECEIVED otherwise. */
int pcoll_finalize(pcoll_t **h, double timeout_s);

/* Before MPI_Comm_free or MPI_Finalize, a check for any program: every message on communicator c
 * that no receive matched is received (at most 1000) and, unless each is NULL, passed to each
 * (its source, tag and size in bytes). Returns how many there were: 0 when c is clean. A message
 * left unreceived at MPI_Finalize is erroneous MPI (Open MPI drops it silently; MPICH over UCX
 * warns). pcoll_finalize uses it on its own communicators. */
int pcoll_unreceived(MPI_Comm c, void (*each)(void *arg, int source, int tag, int bytes), void *arg);

const char *pcoll_strerror(int code);
/* Detailed message of this handle's error: the first sticky error (engine, peer) if there is
 * one, else the last failed call's ("" if none). Copied into a buffer of the calling thread,
 * valid until its next pcoll_last_error call; other threads cannot change it. */
const char *pcoll_last_error(pcoll_t *h);
/* The mode's name: "sync", "solo", "majority", "quorum" (without Q); "?" if m is no mode. */
const char *pcoll_mode_name(pcoll_mode_t m);
/* "sync", "solo", "majority", "quorum:Q" (1 <= Q <= PCOLL_MAX_RANKS) -> rule (wait set empty):
 * PCOLL_OK, or PCOLL_ERR_ARG for anything else. */
int pcoll_parse_mode(const char *s, pcoll_rule_t *rule);
/* The inverse: mode (and quorum, for PCOLL_QUORUM only) as pcoll_parse_mode reads it, "sync",
 * "solo", "majority" or "quorum:Q", into buf (len bytes, cut short like snprintf); returns buf. */
const char *pcoll_format_mode(pcoll_mode_t mode, int quorum, char *buf, size_t len);
/* The staleness bound (pcoll_config_t.tau): with tau > 0 a rank whose rejection streak has
 * reached tau is in the wait set of the next round; tau <= 0: no bound. */
static inline int pcoll_must_wait(uint32_t streak, int tau) { return tau > 0 && streak >= (uint32_t)tau; }

/* Majority initiator of round r among the active ranks (pure; exposed for tests/controller). */
int pcoll_initiator(uint64_t seed, uint64_t round, int nactive);

/* pcollCheck(call): on error prints file:line, the code's name and the handle-less hint; aborts
 * the MPI job. For programs, not for the library itself. */
#define pcollCheck(call)                                                                          \
    do {                                                                                          \
        int pc_e_ = (call);                                                                       \
        if (pc_e_ < 0) {                                                                          \
            fprintf(stderr, "%s:%d: %s failed: %s (%d)\n  hint: %s\n", __FILE__, __LINE__, #call, \
                    pcoll_strerror(pc_e_), pc_e_, pcoll_hint(pc_e_));                             \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                         \
        }                                                                                         \
    } while (0)
const char *pcoll_hint(int code);

#ifdef __cplusplus
}
#endif
#endif
