/* sim.h -- a discrete-event model of libpcoll's rounds, to predict the collectives at scale.
 *
 * What it models: the Fig. 9 benchmark (collectives/bench_collectives.c) on P ranks. Each
 * iteration: a barrier; rank p's application waits delay(p, it) and deposits; sync waits for the
 * round holding its deposit (PCOLL_WAIT_CONSUMED), the partial rules for any round it has not
 * applied yet (PCOLL_WAIT_NEWER). Each rank's engine runs the rounds in order, as engine.c does:
 *
 *   plan r (trigger rules of trigger.c, tau wait set) -> activation -> enter the reduction
 *   -> all P entered: the reduction ends A(P, bytes) after the last entry -> publish, plan r+1
 *
 * Activation, per path:
 *   sync      a rank enters once it is ready (pending deposit); the reduction is the barrier.
 *   any       (solo) a ready rank that has not heard ACT(r) activates: it sends ACT(r) and enters;
 *             a rank that hears ACT(r) first enters at once.
 *   coord     (majority, quorum, tau wait sets) ranks that matter send READY(r) to the
 *             coordinator, which sends ACT(r) once the rule holds.
 * ACT travels either flat (the activator sends P-1 messages, one after another: O(P) at one
 * rank) or over a binomial tree, as libpcoll's trigger.c does: for `any` the tree is rooted at
 * r % P and every activated rank passes ACT(r) to its tree neighbours (parent and children)
 * except the one it heard it from, then enters, so simultaneous activators still reach every
 * rank; for `coord` ACT(r) goes down the tree rooted at the coordinator. O(log P) hops either
 * way. READY: flat, the coordinator receives them one at a time (o each); tree, a
 * readiness reaches the coordinator after depth x (o + L) with no serialisation (combined).
 *
 * Costs (microseconds): o = CPU overhead of sending or receiving one small message, L = wire
 * latency of one, allreduce A(P, b) = 2 ceil(log2 P) alpha + 2 (P-1)/P b beta, where b counts
 * the payload plus libpcoll's 5 metadata floats per rank; barrier = ceil(log2 P) (o + L).
 * Engines poll without delay here (libpcoll's idle back-off is not modelled), and a rank's
 * compute does not slow its engine (one core per rank).
 */
#ifndef PCOLL_SIM_H
#define PCOLL_SIM_H
#include <stddef.h>
#include <stdint.h>

typedef enum { SIM_SYNC, SIM_SOLO, SIM_MAJORITY, SIM_QUORUM } sim_rule_t;
typedef enum { SIM_ACT_FLAT, SIM_ACT_TREE } sim_act_t;

typedef struct {
    double o_us, L_us;        /* per-message overhead and latency */
    double alpha_us, beta_us; /* allreduce: per-step latency, per-byte cost */
} sim_cost_t;

/* Injected delay of rank p in iteration it, in ms (a pure function; see imbalance.h). */
typedef double (*sim_delay_fn)(void *arg, uint64_t it, int p, int P);

typedef struct {
    int P;
    sim_rule_t rule;
    int quorum; /* SIM_QUORUM: Q (1..P) */
    int tau;    /* 0: no bound; else ranks with streak >= tau are waited for */
    sim_act_t act;
    size_t bytes;      /* payload per rank */
    int iters, warmup; /* measured iterations after warmup ones */
    uint64_t seed;     /* majority's initiator hash */
    sim_delay_fn delay;
    void *delay_arg; /* NULL: no delay */
    /* loop 0: the benchmark's loop above (a barrier per iteration, then the delay and a deposit).
     * loop 1: the trainer's (trainer/epoch.c), no barrier: each rank on its own computes
     * compute_ms, waits its delay for its own step count, deposits and waits until a round has
     * consumed the deposit (PCOLL_WAIT_CONSUMED under every rule), then starts its next step.
     * The run ends after P x iters consumed steps in all (a global epoch: fast ranks take more
     * of them in partial rounds), measured after P x warmup. One core per rank.
     * go (loop 1): the trainer's --late go: wait only until a round this rank has not seen has
     * completed (PCOLL_WAIT_NEWER); a deposit while one is pending is merged into it. */
    int loop;
    double compute_ms;
    int go;
} sim_cfg_t;

typedef struct {
    double mean_us, p50_us, p90_us, p99_us, min_us, max_us; /* deposit-to-return, per rank */
    double fresh_frac; /* fresh contributions / (rounds x P), as bench_collectives */
    long rounds;
    uint32_t max_streak;
    long events;    /* simulation events processed (the model's own cost) */
    double step_us; /* loop 1: a rank's mean step time, compute + delay + wait (P x span / steps) */
} sim_result_t;

enum { SIM_OK = 0, SIM_ERR_ARG = -1, SIM_ERR_NOMEM = -2, SIM_ERR_DEADLOCK = -3 };

/* Runs the model. Returns SIM_OK and fills *out, SIM_ERR_DEADLOCK when no event can make
 * progress (the rule waits for a deposit that the barrier holds back), or an argument error. */
int sim_run(const sim_cfg_t *cfg, const sim_cost_t *cost, sim_result_t *out);

/* The allreduce time of the cost model for P ranks and b bytes per rank (payload + metadata). */
double sim_allreduce_us(const sim_cost_t *c, int P, size_t b);
/* Binomial tree over relative ranks 0..P-1: parent (-1 for 0) and the number of children. */
int sim_tree_parent(int v);
int sim_tree_children(int v, int P, int *child, int max);
const char *sim_rule_name(sim_rule_t r);

#endif
