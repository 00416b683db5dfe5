/*
 * controller.h -- the eager-SGD controller: a deterministic policy that picks the trigger rule of
 * later libpcoll rounds from the history of round records, and a controller thread (with a stall
 * watchdog) that drives a pcoll handle with it. docs/DESIGN.md#7-the-controller.
 *
 * ----------------------------------------------------------------------------------------------
 * 1. Determinism
 * ----------------------------------------------------------------------------------------------
 * The policy is a pure function of (config, P, the sequence of round records fed to it). It reads
 * only the record fields that every rank agrees on: round, mode, initiator, fresh[], waited[],
 * flags[], streak[], cost[] (and P). It never reads t_start/t_end/t_deposit, staleness[] or any
 * clock: the step times it uses are the ones the ranks reported with their deposits
 * (pcoll_set_cost), which travel with the round data and so are bitwise equal on every rank.
 * Ranks running the same binary therefore make bit-identical decisions; ctl_policy_hash()
 * fingerprints the decision sequence so that a test or the trainer can compare it across ranks
 * (e.g. with MPI_Allgather). Window statistics are exact integer sums; the only floating point
 * is a few divisions and products per evaluation, identical on every rank.
 *
 * A decision made while observing round r takes effect at round r + lag (lag >= 1, default 2), so
 * that every rank's engine has the rule before it may start that round (the controller thread
 * posts it with pcoll_set_rule and then advances the horizon to r + lag). Rounds 0 .. lag-1 run
 * the initial rule (ctl_policy_initial).
 *
 * ----------------------------------------------------------------------------------------------
 * 2. Signals (computed over a sliding window of the last `window` rounds of the current mode;
 *    only ranks not joined/failed in a record count; records of rounds before the current mode
 *    took effect are never mixed in)
 * ----------------------------------------------------------------------------------------------
 *   F  fresh fraction      = sum_r |F_r| / sum_r nactive_r: how much gradient a round carries.
 *   L  natural streak load = mean_r (max_p ns_p(r)) * Fn, where ns_p is p's *natural* streak
 *                            (rounds since p was last fresh without being forced: a rank that is
 *                            fresh because the rule waited for it -- sync, majority initiator,
 *                            wait set incl. tau -- says nothing about its speed, so ns_p is left
 *                            unchanged; ns carries over mode changes) and Fn = unforced
 *                            fresh / unforced active rank-rounds, so 1/Fn is the mean number of
 *                            rounds between two fresh contributions of an average rank. L says for
 *                            how many "average periods" the most starved rank has been waiting:
 *                            about 1 with periodic balanced ranks in any mode (solo has long
 *                            streaks because rounds are frequent, but then 1/Fn is large too),
 *                            about 2-3 with balanced but memoryless (random) readiness at P=8, and
 *                            about k/2 with one rank k times slower. Because forced freshness does
 *                            not count, majority does not "cure" L for a permanently slow rank,
 *                            so the policy does not flap back to solo.
 *   A  actual streak load  = mean_r (max_p streak_p(r)) * F: the same with the streaks as they
 *                            are (what staleness the gradients really have in this mode).
 *   T  tau-wait rate       = fraction of rounds of the window in which the staleness bound forced
 *                            at least one rank to be waited for (only with tau > 0).
 *   gain  of partial rounds = S * sum_p (1/mean_p) / n_active over the step times c_p of the
 *         over sync           last cost_n [32] deposits of each active rank (not windowed: they
 *                             describe the ranks, not the mode), S = mean_i max_p c_p[i] (i-th
 *                             latest): the rate at which partial rounds take gradients over
 *                             sync's. 1 for equal ranks, about k(P-1)/P + 1/P for one rank k times
 *                             slower; the tail of random delays raises S. NAN until every rank has
 *                             reported cost_n/2 step times, and once a rank has joined (an epoch's
 *                             tail); the rules on it are off if no rank reports any.
 *
 * ----------------------------------------------------------------------------------------------
 * 3. Adaptive policy ("adaptive"): three levels  LIGHT (solo, or quorum:Q if the start rule is a
 *    quorum)  <->  MAJORITY  <->  SYNC, chosen by the rate rule (rule=thresholds was removed).
 * ----------------------------------------------------------------------------------------------
 * rule=rate (controller/rate.c): decide from what each level delivers on this run.
 *   Each rank reports with every deposit its cycle time, the wall time since its previous deposit
 *   (ctl_step_cost): computing, injected delay, waiting for rounds and applying them -- everything
 *   a level costs it, communication and CPU contention included. The cycle times travel with the
 *   deposits, so every rank scores every level from the same numbers. A measurement of the level
 *   in force (from the first deposit of each rank whose cycle lies wholly in it; restarted when a
 *   rank joins) closes once it holds `window` deposits, at least 2 of every rank and, in partial
 *   levels, `window` rounds (their random fresh sets must average out). It gives
 *       rate  R = sum_p n_p / d_p            gradients per second (n_p deposits in d_p seconds)
 *       lag   lambda of a gradient            gradients applied between its rank's previous round
 *                                             and the one taking it, over the active ranks: its
 *                                             age in sync steps (0 in sync; about (P-1)/P in solo
 *                                             with alike ranks)
 *       worth w(lambda)                       staleness=linear [default] 1/(1+lambda): staleness-
 *                                             aware SGD's step scaling, and what the training
 *                                             loss per sample reads at 4 and 8 ranks
 *                                             (docs/EXPERIMENTS.md); staleness=quadratic
 *                                             1/(1+lambda^2) (perturbed-iterate bounds of delayed
 *                                             SGD: kinder to small lags); staleness=bound 1 (tau
 *                                             trusted)
 *       score S = sum_p r_p mean_p(w)         fresh-gradient equivalents per second, each rank's
 *                                             worth weighted by its rate r_p = n_p / d_p
 *   Standard errors: the larger of the spread of the cycle times within a measurement and the
 *   spread between measurements of a level (a shared machine drifts on a longer scale than one
 *   measurement; estimated as one relative variance pooled over every level's repeated
 *   measurements since the start, with Student's t in place of Z while it has few degrees of
 *   freedom). Scores of a level are pooled (inverse-variance) until its conditions change.
 *   Probe: the run starts by measuring every level in turn (start level -- sync unless start= says
 *   otherwise --, then the others, least partial first) and keeps the highest score. While its
 *   lead over the next one is within 2 standard errors of their difference (Z), the choice runs
 *   and every level it does not beat (the rival, the best-scoring of them, first) is measured
 *   again once the choice has run for as many gradients as the probing since the probe began, or
 *   at once when the choice's own measurements put its pooled score below the rival's (a contest,
 *   at most CONTEST_MAX = 2 times, each keeping the highest score again). A later probe changes the choice only
 *   to a level that beats the incumbent by Z standard errors. A probe of a level already Z
 *   standard errors below the best one measured ends early (sync's also when below a partial
 *   level's replay: screen below); a probe measurement outside its
 *   level's pool limits replaces that pool. The next probe comes after `probe` [256] sync rounds'
 *   worth of gradients (P x probe), doubled up to probe_max [4096] each time a probe keeps the
 *   choice, reset when it changes it. While settled, every measurement of the chosen level is
 *   compared with its pool: two in a row more than Z standard errors away on the same side (a
 *   control chart's run rule) mean the conditions changed (a rank became slow or recovered): the
 *   pools are dropped and every level is probed at once. Measurements carry across epochs (an
 *   epoch's tail and the next epoch's first deposit of each rank are skipped, not restarted) and
 *   checkpoints (ctl_state_t).
 *   Screen [screen=on] (controller/predict.c): each rank also reports its step's own time (data,
 *   compute, delay: pcoll_set_cost's step). Before a partial level's probe, the ranks' last cost_n
 *   step times are replayed under the level's trigger, each round costing the overhead measured
 *   in sync rounds, and scored as a probe would be; while sync scores best of the levels measured, a level whose
 *   replayed score is Z standard errors (one measurement's, as sync's) below sync's is not probed
 *   and cannot be chosen in this probe. Sync is never screened, and the replay never decides
 *   between partial levels (on shared cores it reads them low). The partial levels still to probe
 *   are probed in the order of their replayed scores, highest first.
 *   No threshold of this rule depends on the machine: rates are in the run's own units, lambda is
 *   in sync steps, Z is a confidence level. Which worth function fits a model is the one modelling
 *   choice (key staleness); none has a constant to tune. Without step times the rule cannot
 *   measure and keeps the start rule.
 *
 * ----------------------------------------------------------------------------------------------
 * 4. Staleness bound tau (0 = none; the streak of a rank never exceeds tau)
 * ----------------------------------------------------------------------------------------------
 *   tau_by=library [default]: libpcoll enforces it (create the handle with pcoll cfg.tau = tau):
 *       a rank whose streak reaches tau after round r is in the wait set of round r+1. The policy
 *       mirrors that rule: after observing round r, ctl_policy_tau_wait() returns the wait set the
 *       library must apply to round r+1, and the next observation checks that those ranks were
 *       fresh (tau_misses) and that no streak exceeds tau (tau_violations). The policy does not
 *       put such ranks into its own rules: waiting for a permanently slow rank in every round
 *       would throttle everyone to it; waiting once every tau rounds is exactly the bound. A rank
 *       that keeps hitting tau raises T and so moves the policy to majority / sync.
 *   tau_by=policy: the library has no tau (cfg.tau = 0) and the policy enforces the bound through
 *       its rules despite the lag: observing round r, rank p enters the wait set of round e=r+lag
 *       iff streak_p(r) >= tau - lag + 1 and p is not already in the wait set of a round in
 *       (r, e). Since a streak grows by at most 1 per round, streak_p(e-1) <= tau, and p fresh in e
 *       keeps streak_p(e) <= tau. Needs tau >= lag (rounds 0..lag-1 cannot be steered; a streak
 *       there is at most lag). Each such wait set is its own decision (what = CTL_DEC_WAIT), and
 *       the next decision usually removes it. Not used in sync (everyone is waited for anyway).
 *
 * ----------------------------------------------------------------------------------------------
 * 5. Static policies: "solo", "majority", "sync", "quorum:Q" keep their rule for the whole run
 *    (only tau_by=policy wait sets change it).
 * ----------------------------------------------------------------------------------------------
 * Policy string (ctl_policy_parse): NAME[,key=value]...   NAME = adaptive | solo | majority |
 * sync | quorum:Q. Keys (one table in options.c): tau, tau_by (library|policy), lag, window,
 * probe (= sync_probe), probe_max, cost_n, staleness (linear|quadratic|bound), screen (on|off),
 * start (adaptive only: solo | majority | sync | quorum:Q; default sync). rule=rate is accepted (the
 * one adaptive rule). Example: "adaptive,tau=8,window=64".
 *
 * ----------------------------------------------------------------------------------------------
 * 6. Carried state (ctl_state_t, controller/state.c)
 * ----------------------------------------------------------------------------------------------
 * What the policy has learned -- the level and the round it took effect, the probe interval and
 * schedule, the window, natural streaks, step times, the rate rule's
 * measurement, pools and probe queue -- is one opaque state, not configuration. A trainer that
 * opens a handle per epoch carries it (ctl_state after ctl_wait, then ctl_config_t.resume), and a
 * checkpoint stores its bytes (ctl_state_save / ctl_state_load). Round numbers in it count over
 * all handles, so a policy resumed on a new handle makes the decisions one handle would have made
 * (except that a change decided in the last lag rounds of a handle applies from the next handle's
 * first round).
 */
#ifndef CONTROLLER_H
#define CONTROLLER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collectives/pcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    CTL_OK = 0,
    CTL_ERR_ARG = -1,   /* bad argument / config (message in err or ctl_last_error) */
    CTL_ERR_ORDER = -2, /* record fed out of order (round != next expected) or P differs */
    CTL_ERR_NOMEM = -3,
    CTL_ERR_PCOLL = -4,  /* a libpcoll call failed (thread) */
    CTL_ERR_STALL = -5,  /* the watchdog saw no round complete for t_abort seconds (thread) */
    CTL_ERR_TIMEOUT = -6 /* ctl_wait: the thread had not ended within the timeout */
};

typedef enum { CTL_STATIC = 0, CTL_ADAPTIVE = 1 } ctl_kind_t;
typedef enum { CTL_TAU_LIBRARY = 0, CTL_TAU_POLICY = 1 } ctl_tau_by_t;
typedef enum { CTL_STALE_QUADRATIC = 0, CTL_STALE_LINEAR = 1, CTL_STALE_BOUND = 2 } ctl_staleness_t;

typedef struct {
    ctl_kind_t kind;           /* [CTL_ADAPTIVE] */
    pcoll_rule_t base;         /* static: the rule. adaptive: the start rule; if it is solo or
                              quorum:Q it is also the LIGHT rule (else LIGHT = solo).
                              Must have an empty wait set. [ctl_policy_default: solo;
                              ctl_policy_parse: sync for rule=rate unless start= is given] */
    int tau;                   /* staleness bound, 0 = none [0] */
    ctl_tau_by_t tau_by;       /* who enforces tau [CTL_TAU_LIBRARY] */
    int lag;                   /* decision at round r takes effect at r + lag, >= 1 [2] */
    int window;                /* rounds per evaluation window, 1..65536 [32] */
    int sync_probe;            /* sync rounds' worth of gradients between probes [256] */
    int probe_max;             /* cap of the doubled probe interval [4096] */
    int cost_n;                /* step times kept per rank (the gain, the screen) [32] */
    ctl_staleness_t staleness; /* rule=rate: what a stale gradient is worth [CTL_STALE_LINEAR] */
    int screen; /* rule=rate: skip the probe of a partial level that the ranks' step times, replayed,
                   show cannot win (0 off, 1 on) [1] */
} ctl_policy_cfg_t;

/* Bits of ctl_decision_t.what */
enum {
    CTL_DEC_MODE = 1, /* the mode (or quorum) changes */
    CTL_DEC_WAIT = 2, /* the wait set changes (tau_by=policy) */
    CTL_DEC_PROBE = 4
}; /* the mode change is a sync -> majority probe */

typedef struct {
    uint64_t round;        /* observed round that produced the decision */
    uint64_t effective;    /* first round the new rule applies to: round + lag */
    int what;              /* CTL_DEC_* bits */
    pcoll_rule_t old_rule; /* rule in force at effective-1 per the schedule */
    pcoll_rule_t new_rule; /* rule from `effective` on. The wait arrays of old_rule/new_rule are
                              owned by the policy and valid until the next observe or free. */
    double L, A, F, T;     /* signals of the window at the decision (NAN if undefined) */
    double gain;           /* the step-time gain of partial rounds over sync (NAN if undefined) */
    char reason[224];      /* e.g. "sync 41.2/s lag 0.00 score 41.2+-1.3, ...: sync -> majority" */
} ctl_decision_t;

typedef struct {
    uint64_t rounds;        /* records observed */
    uint64_t decisions;     /* all decisions (mode and/or wait set) */
    uint64_t mode_switches; /* decisions with CTL_DEC_MODE (probes included) */
    uint64_t wait_changes;  /* decisions with CTL_DEC_WAIT */
    uint64_t probes;
    pcoll_mode_t mode; /* latest decided mode (may not be in effect yet) */
    int quorum;
    uint64_t mode_from;                  /* round from which `mode` is/will be in effect */
    int probe;                           /* current probe interval */
    int window_fill;                     /* rounds in the current window */
    double L, A, F, T, gain;             /* signals of the current window (NAN if undefined) */
    double gain_min, gain_max, gain_sum; /* the gain over the observed rounds where it was defined */
    uint64_t gain_n;                     /* ... how many (0: never; gain_min/gain_max are then NAN) */
    ctl_kind_t kind;                     /* the policy's kind (what the fields below apply to) */
    int light_quorum;                    /* adaptive: LIGHT is quorum:light_quorum, or solo when 0 */
    /* rule=rate: the latest measurement of each level, indexed sync, majority, light (NAN: none) */
    double rate[3];          /* gradients per second the level delivered */
    double lag[3];           /* mean lag of its gradients, in sync steps */
    double score[3];         /* the rate in fresh-gradient equivalents: what the choice compares
                                (pooled over the level's measurements since the run's conditions
                                last changed) */
    double score_se[3];      /* ... its standard error */
    uint64_t samples[3];     /* gradients counted in the measurements behind score (0: the score
                                predates a detected change and awaits the level's next probe) */
    int probing;             /* rule=rate: a probe of the levels is in progress */
    uint64_t lv_rounds[3];   /* rounds observed that ran each level (this handle), indexed as
                                rate[]: LIGHT counts solo and quorum rounds */
    uint64_t choices;        /* rule=rate: probes of every level completed (this handle) */
    uint64_t choice_changes; /* ... that chose another level than the one before the probe */
    uint64_t screens;        /* rule=rate: probes of a level skipped by the screen (this handle) */
    double predicted[3];     /* rule=rate: the latest replayed score of each level, from the ranks'
                                step times (the screen; NAN: none) */
    int choice;              /* the level the latest completed probe chose, as an index of rate[]
                                 (0 sync, 1 majority, 2 light; -1: none yet) */
    int rival;               /* settled on an unresolved choice: the level its contest measures
                                again, as an index of rate[] (-1: none) */
    uint64_t tau_waits;      /* (rank, round) pairs that tau forced into a wait set */
    uint64_t tau_violations; /* (rank, round) pairs with streak > tau in a record */
    uint64_t tau_misses;     /* tau_by=library: a rank the library had to wait for was not fresh */
    uint32_t max_streak;     /* over all observed records and active ranks */
} ctl_policy_stats_t;

typedef struct ctl_policy ctl_policy_t;
typedef struct ctl_state ctl_state_t; /* opaque: the carried state of an adaptive policy */

void ctl_policy_default(ctl_policy_cfg_t *c);
/* Resets *c to the defaults, then applies the string (section 5 above). Returns CTL_OK or
 * CTL_ERR_ARG with a message in err naming the bad option or value. Runs ctl_policy_check. */
int ctl_policy_parse(const char *s, ctl_policy_cfg_t *c, char *err, size_t n);
/* Validates ranges and consistency (tau >= lag with tau_by=policy, probe <= probe_max, ...). */
int ctl_policy_check(const ctl_policy_cfg_t *c, char *err, size_t n);
/* Canonical policy string of a config (parses back to the same config), for metrics JSON. */
const char *ctl_policy_format(const ctl_policy_cfg_t *c, char *buf, size_t n);

/* The step time a rank reports with each deposit (pcoll_set_cost) for policy c: cycle_s (the wall
 * time between the rank's consecutive deposits) for adaptive, which measures what each level
 * delivers; step_s (the step's own time) for static policies, whose gain it feeds. */
double ctl_step_cost(const ctl_policy_cfg_t *c, double step_s, double cycle_s);

/* NULL on a bad config (ctl_policy_check fails), P < 1 or P > PCOLL_MAX_RANKS, or no memory. */
ctl_policy_t *ctl_policy_new(const ctl_policy_cfg_t *c, int P);
void ctl_policy_free(ctl_policy_t *p);
const ctl_policy_cfg_t *ctl_policy_cfg(const ctl_policy_t *p);
/* Rule of rounds 0 .. lag-1 (wait set empty). */
void ctl_policy_initial(const ctl_policy_t *p, pcoll_rule_t *rule);
/* Latest decided rule and the round it applies from (0 before any decision). The wait array is
 * owned by the policy, valid until the next observe. */
uint64_t ctl_policy_rule(const ctl_policy_t *p, pcoll_rule_t *rule);

/* Feeds the record of round r; records must come in order 0, 1, 2, ... with rec->P == P.
 * Returns 1 and fills *out (may be NULL) when the rule changes from round r + lag on, 0 when it
 * does not, CTL_ERR_ARG / CTL_ERR_ORDER on a bad record (the policy state is then unchanged). */
int ctl_policy_observe(ctl_policy_t *p, const pcoll_record_t *rec, ctl_decision_t *out);

/* tau > 0: the tau wait set of the round after the last observed one, as the library computes it
 * (active ranks with streak >= tau). Writes up to max ranks (ascending) to ranks, sets *round to
 * that round, returns the set's size (0 with tau == 0 or before any observation). */
int ctl_policy_tau_wait(const ctl_policy_t *p, uint64_t *round, int *ranks, int max);

void ctl_policy_stats(const ctl_policy_t *p, ctl_policy_stats_t *st);
/* ---- carried state (section 6) ---------------------------------------------------------------
 * Snapshot of everything the policy has learned (level, probe interval and schedule, window
 * statistics, step times, rate measurements), taken after the last
 * observed record: a policy resumed from it on a new handle continues with the decisions the
 * uninterrupted policy would have made. NULL on no memory. Free with ctl_state_free. */
ctl_state_t *ctl_policy_state(const ctl_policy_t *p);
void ctl_state_free(ctl_state_t *s);
/* Rounds observed over all handles the state has been through. */
uint64_t ctl_state_rounds(const ctl_state_t *s);
/* A policy for a new handle (records from round 0 again) continuing s. c must be adaptive, with
 * the P, window and cost_n the state was made with (other keys may differ). The rounds 0 .. lag-1
 * of the handle run the state's latest decided rule (ctl_policy_initial). NULL with a message in
 * err on a mismatch or no memory. */
ctl_policy_t *ctl_policy_resume(const ctl_policy_cfg_t *c, int P, const ctl_state_t *s, char *err, size_t n);
/* The state s of a run on s's P ranks for a run on P ranks (an elastic resume on another world
 * size; P == s's P: a plain copy): the chosen level, its probe schedule and
 * the rounds kept; what was measured per rank or counted in ranks (window, streaks, step times, the
 * measurement in progress) restarted; the rate rule's pooled scores dropped and every level probed
 * again (state.c says why). NULL on no memory or P < 1. Free with ctl_state_free. */
ctl_state_t *ctl_state_resize(const ctl_state_t *s, int P);
/* Byte form of a state, for a checkpoint: versioned, little-endian, with a checksum. With buf
 * NULL sets *len to the size needed and returns CTL_OK; else writes *len bytes (CTL_ERR_ARG if
 * cap is smaller). */
int ctl_state_save(const ctl_state_t *s, void *buf, size_t cap, size_t *len);
/* Reads what ctl_state_save wrote. Checks the magic, version, shape, length, checksum and every
 * field's range: bad bytes give CTL_ERR_ARG and a message in err naming what is wrong, never a
 * crash. On success *out is a new state (ctl_state_free). */
int ctl_state_load(const void *buf, size_t len, ctl_state_t **out, char *err, size_t n);

/* FNV-1a 64 over the decisions so far (round, effective, what, new mode, quorum, wait set). */
uint64_t ctl_policy_hash(const ctl_policy_t *p);

/* ==============================================================================================
 * Controller thread (controller/thread.c): drives a pcoll handle with a policy, hosts the stall
 * watchdog. One per rank; every rank runs the same policy config.
 *
 * Protocol with libpcoll: the handle is created with cfg.horizon = 1 (the engine starts round r
 * only once the horizon is >= r) and, for tau_by=library, cfg.tau = policy tau. ctl_start posts
 * the initial rule for round 0 and the horizon lag-1; the thread then loops
 *     pcoll_record_get(h, r, &rec, poll_s)          (r = 0, 1, 2, ...)
 *     ctl_policy_observe(policy, &rec, &dec)        -> pcoll_set_rule(h, r + lag, &dec.new_rule)
 *     pcoll_set_horizon(h, r + lag)
 * A rank that has run out of steps must keep its controller running (other ranks' rounds need its
 * horizon and rules) until every rank has joined. The thread ends by itself when
 *   - it observed a round in which every rank is joined: it releases the horizon
 *     (pcoll_set_horizon(h, UINT64_MAX)) so the finalize flush can run, and stops touching h;
 *   - pcoll_record_get returns PCOLL_ERR_STATE (finalize started/handle closing);
 *   - a libpcoll call fails (CTL_ERR_PCOLL) or the watchdog aborts (CTL_ERR_STALL).
 * Shutdown order in the application: once pcoll_wait has returned PCOLL_DONE, ctl_wait (the thread
 * ends by itself after the all-joined round, having released the horizon), then ctl_stop (joins
 * and frees it), then pcoll_finalize. The thread reads the handle until it ends, so the handle
 * must not be finalized before: stop the controller first, finalize libpcoll second. On an error
 * path where the all-joined round never comes, ctl_stop still ends the thread within poll_s
 * (later rounds then have no rules: finalize only to release resources). A pcoll_record_get on a
 * handle that is closing returns PCOLL_ERR_STATE, which also ends the thread.
 *
 * Stall watchdog (local wall time, never used for decisions): if no round completes for t_warn
 * seconds, it prints one line to `log` naming the round waited for, its rule (initiator / wait
 * set) and the active ranks that were not fresh in the last completed round with their streaks
 * (the ranks that most likely have not deposited), and repeats every t_warn seconds. After
 * t_abort seconds without progress it calls on_abort(abort_arg, message) (default: prints the
 * message to stderr and MPI_Abort(MPI_COMM_WORLD, 3)); if on_abort returns, the thread ends with
 * CTL_ERR_STALL.
 * ============================================================================================ */
typedef struct {
    ctl_policy_cfg_t policy;
    double t_warn;    /* seconds without a completed round before a warning [10] (0: never) */
    double t_abort;   /* seconds without a completed round before aborting [60] (0: never) */
    double poll_s;    /* timeout slice of each pcoll_record_get [0.1] */
    FILE *log;        /* warnings and switches; NULL = silent [stderr] */
    int log_switches; /* print every mode switch to log [0] */
    void (*on_abort)(void *arg, const char *msg); /* [NULL = print + MPI_Abort] */
    void *abort_arg;
    const ctl_state_t *resume; /* adaptive: continue this state (ctl_policy_resume) instead of
                                  starting afresh [NULL]; copied by ctl_start */
} ctl_config_t;

/* One mode switch in the log (wait-set-only decisions are counted, not logged). */
typedef struct {
    uint64_t round, effective;
    int what; /* CTL_DEC_* */
    pcoll_mode_t old_mode, new_mode;
    int old_quorum, new_quorum;
    int new_nwait;
    double L, A, F, T;
    char reason[224];
} ctl_switch_t;

typedef struct ctl ctl_t;

void ctl_config_default(ctl_config_t *c);
/* Posts the initial rule and horizon, starts the thread. h must outlive the thread. */
int ctl_start(pcoll_t *h, const ctl_config_t *cfg, ctl_t **out);
/* Asks the thread to stop (at its next poll), joins it, frees *c, sets *c = NULL. Returns the
 * thread's final status: CTL_OK, CTL_ERR_PCOLL or CTL_ERR_STALL. Stopping a controller while
 * rounds still run leaves later rounds without rules/horizon: call ctl_wait first, and
 * pcoll_finalize only after ctl_stop. */
int ctl_stop(ctl_t **c);
/* Waits up to timeout_s (< 0: no limit) for the thread to end by itself: after the all-joined
 * round (then ctl_stats, the switch log and the hash cover every round, and every rank holds the
 * same), or on an error. Returns the thread's status (CTL_OK, CTL_ERR_PCOLL, CTL_ERR_STALL) or
 * CTL_ERR_TIMEOUT. Call it once pcoll_wait has returned PCOLL_DONE and before reading the final
 * stats: the thread may still be some records behind the application, and a snapshot taken then
 * differs between ranks (a trainer that carried such a snapshot into its next epoch's policy
 * posted different rules on different ranks and stalled). */
int ctl_wait(ctl_t *c, double timeout_s);
/* Copies up to max switches (oldest first) into out; returns the total number logged. Safe while
 * the thread runs. */
size_t ctl_switch_log(ctl_t *c, ctl_switch_t *out, size_t max);
/* Policy statistics and decision hash so far (thread-safe snapshot). */
int ctl_stats(ctl_t *c, ctl_policy_stats_t *st, uint64_t *hash);
/* The policy's carried state once the thread has ended (after ctl_wait returned CTL_OK it covers
 * every round and is the same on every rank): for the next handle's ctl_config_t.resume or a
 * checkpoint (ctl_state_save). NULL while the thread runs, or on no memory. */
ctl_state_t *ctl_state(ctl_t *c);
/* Message of the error that ended the thread ("" if none). */
const char *ctl_last_error(ctl_t *c);

#ifdef __cplusplus
}
#endif
#endif
