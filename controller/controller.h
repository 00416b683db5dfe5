/*
 * controller.h -- the eager-SGD controller: a deterministic policy that picks the trigger rule of
 * later libpcoll rounds from the history of round records (ctl_policy_*), the state it carries
 * across handles and checkpoints (ctl_state_*), and a controller thread with a stall watchdog that
 * drives a pcoll handle with it (ctl_start ...). The rules with their reasons and measurements:
 * docs/DESIGN.md#7-the-controller.
 *
 * Every policy keeps these contracts:
 *   determinism  a pure function of (config, P, the records fed to it): it reads only the record
 *                fields every rank agrees on (round, mode, initiator, fresh, waited, flags, streak,
 *                cost, step) and no clock, so ranks fed the same records decide bit-identically
 *                (ctl_policy_hash fingerprints the decisions).
 *   lag          a decision made observing round r applies from round r + lag (lag >= 1); rounds
 *                0 .. lag-1 of a handle run ctl_policy_initial's rule.
 *   levels       adaptive: CTL_LV_SYNC, CTL_LV_MAJORITY, CTL_LV_LIGHT (solo, or quorum:Q when the
 *                start rule is one), chosen by the rate rule (controller/rate.c,
 *                docs/DESIGN.md#the-rate-rule). Static (solo, majority, sync, quorum:Q): one rule
 *                for the whole run, only tau_by=policy wait sets change it.
 *   tau          (> 0) no active rank's streak exceeds tau. tau_by=library: libpcoll enforces it
 *                (handle created with cfg.tau = tau) and the policy mirrors it
 *                (ctl_policy_tau_wait). tau_by=policy (cfg.tau = 0): observing round r, rank p
 *                enters the wait set of round r + lag iff its streak >= tau - lag + 1 and it is in
 *                no wait set of a round in (r, r + lag); needs tau >= lag; never in sync.
 *                docs/DESIGN.md#4-the-staleness-bound-tau.
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
    CTL_ERR_PCOLL = -4,   /* a libpcoll call failed (thread) */
    CTL_ERR_STALL = -5,   /* the watchdog saw no round complete for t_abort seconds (thread) */
    CTL_ERR_TIMEOUT = -6, /* ctl_wait: the thread had not ended within the timeout */
    CTL_ERR_STATE = -7    /* ctl_state_continue: a sound state this policy does not continue */
};

typedef enum { CTL_STATIC = 0, CTL_ADAPTIVE = 1 } ctl_kind_t;
typedef enum { CTL_TAU_LIBRARY = 0, CTL_TAU_POLICY = 1 } ctl_tau_by_t;
typedef enum { CTL_STALE_QUADRATIC = 0, CTL_STALE_LINEAR = 1, CTL_STALE_BOUND = 2 } ctl_staleness_t;

/* The adaptive policy's levels, least partial first: the index of every per-level array (the stats
 * below, the carried state) and the order of the trainer's JSON "levels". LIGHT is solo, or quorum:Q
 * when the start rule is one. */
enum { CTL_LV_SYNC = 0, CTL_LV_MAJORITY = 1, CTL_LV_LIGHT = 2, CTL_NLV = 3 };

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
    int change; /* rule=rate: what reads a change of the run's conditions while settled: 0 `score`,
                   the chosen level's measurements against its pool; 1 `steps`, that and the ranks'
                   log step times against theirs (docs/DESIGN.md#7-the-controller, "Change
                   detection") [0] */
    int worth;  /* rule=rate: what a level's gradients are worth: 0 `assumed`, the staleness key's
                   model of a stale gradient against a fresh one; 1 `measured`, the fall of the
                   training loss the ranks report with their deposits (pcoll_set_loss) per second:
                   the score is the slope of the log loss against the gradients applied times the
                   gradients per second (staleness and the screen then unused; without losses the
                   rule cannot score and keeps the start level; docs/DESIGN.md#the-worth-of-a-gradient)
                   [0] */
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
    double L, A, F, T;     /* signals of the window at the decision (NAN if undefined;
                              docs/DESIGN.md#signals) */
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
    /* rule=rate: the latest measurement of each level, indexed CTL_LV_* (NAN: none) */
    double rate[CTL_NLV];        /* gradients per second the level delivered */
    double lag[CTL_NLV];         /* mean lag of its gradients, in sync steps */
    double score[CTL_NLV];       /* the rate in fresh-gradient equivalents: what the choice compares
                                (pooled over the level's measurements since the run's conditions
                                last changed) */
    double score_se[CTL_NLV];    /* ... its standard error */
    uint64_t samples[CTL_NLV];   /* gradients counted in the measurements behind score (0: the score
                                predates a detected change and awaits the level's next probe) */
    int probing;                 /* rule=rate: a probe of the levels is in progress */
    uint64_t lv_rounds[CTL_NLV]; /* rounds observed that ran each level (this handle), indexed
                                    CTL_LV_*: LIGHT counts solo and quorum rounds */
    uint64_t choices;            /* rule=rate: probes of every level completed (this handle) */
    uint64_t choice_changes;     /* ... that chose another level than the one before the probe */
    uint64_t screens;            /* rule=rate: probes of a level skipped by the screen (this handle) */
    double predicted[CTL_NLV];   /* rule=rate: the latest replayed score of each level, from the ranks'
                                step times (the screen; NAN: none) */
    int choice;                  /* the level (CTL_LV_*) the latest completed probe chose (-1: none yet) */
    int rival;                   /* settled on an unresolved choice: the level (CTL_LV_*) its contest
                                measures again (-1: none) */
    uint64_t tau_waits;          /* (rank, round) pairs that tau forced into a wait set */
    uint64_t tau_violations;     /* (rank, round) pairs with streak > tau in a record */
    uint64_t tau_misses;         /* tau_by=library: a rank the library had to wait for was not fresh */
    uint32_t max_streak;         /* over all observed records and active ranks */
} ctl_policy_stats_t;

typedef struct ctl_policy ctl_policy_t;
typedef struct ctl_state ctl_state_t; /* opaque: the carried state of an adaptive policy */

void ctl_policy_default(ctl_policy_cfg_t *c);
/* Resets *c to the defaults, then applies s = NAME[,key=value]..., NAME = adaptive | solo |
 * majority | sync | quorum:Q; keys (options.c's table): tau, tau_by (library|policy), lag, window,
 * probe (= sync_probe), probe_max, cost_n, staleness (linear|quadratic|bound), screen (on|off),
 * change (score|steps), worth (assumed|measured),
 * start (adaptive: solo|majority|sync|quorum:Q, default sync), rule (rate only). Example:
 * "adaptive,tau=8,window=64". Returns CTL_OK or CTL_ERR_ARG with a message in err naming the bad
 * option or value. Runs ctl_policy_check. */
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
/* ---- carried state (docs/DESIGN.md#across-epochs) ----------------------------------------------
 * Snapshot of everything the policy has learned (level, probe interval and schedule, window
 * statistics, step times, rate measurements), taken after the last observed record. Its round
 * numbers count over all handles: a policy resumed from it on a new handle makes the decisions the
 * uninterrupted policy would have made (a change decided in a handle's last lag rounds applies from
 * the next handle's round 0). NULL on no memory. Free with ctl_state_free. */
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
/* A checkpoint's state bytes (ctl_state_save of a run on saved_P ranks) as the state a policy of
 * config c on P ranks continues, the steps every resume takes:
 *
 *   bytes --ctl_state_load--> state --ctl_state_resize (saved_P != P; *resized = 1)--> state
 *         --ctl_policy_resume (checked, then dropped)--> *out
 *
 * Returns CTL_OK with *out set (ctl_state_free); else *out NULL and a message in err:
 * CTL_ERR_ARG, bad bytes (ctl_state_load's message); CTL_ERR_NOMEM; CTL_ERR_STATE, sound bytes c
 * does not continue (not adaptive, another window or cost_n: ctl_policy_resume's message). */
int ctl_state_continue(const void *buf, size_t len, int saved_P, const ctl_policy_cfg_t *c, int P,
                       ctl_state_t **out, int *resized, char *err, size_t n);

/* FNV-1a 64 over the decisions so far (round, effective, what, new mode, quorum, wait set). */
uint64_t ctl_policy_hash(const ctl_policy_t *p);

/* ---- controller thread (controller/thread.c; docs/DESIGN.md#the-thread) -------------------------
 * One per rank, every rank with the same policy config. Assumes h was created with cfg.horizon = 1
 * and, for tau_by=library, cfg.tau = tau. ctl_start posts the rule of round 0 and the horizon
 * lag - 1; the thread then loops over r = 0, 1, ...: pcoll_record_get(h, r, .., poll_s),
 * ctl_policy_observe, pcoll_set_rule(h, r + lag) on a change, pcoll_set_horizon(h, r + lag). It
 * ends by itself after a round in which every rank is joined (having released the horizon:
 * pcoll_set_horizon(h, UINT64_MAX)), when pcoll_record_get returns PCOLL_ERR_STATE (the handle is
 * closing), or on an error (CTL_ERR_PCOLL, CTL_ERR_STALL). A rank out of steps keeps its controller
 * running until every rank has joined (other ranks' rounds need its horizon and rules).
 * Shutdown order: pcoll_wait returned PCOLL_DONE, then ctl_wait, ctl_stop, pcoll_finalize (the
 * thread reads h until it ends). */
typedef struct {
    ctl_policy_cfg_t policy;
    double t_warn;    /* seconds of local wall time without a completed round before a warning line
                         to log (the round waited for, its rule, the active ranks not fresh in the
                         last completed round with their streaks), repeated every t_warn [10]
                         (0: never) */
    double t_abort;   /* ... before on_abort(abort_arg, message); if it returns, the thread ends
                         with CTL_ERR_STALL [60] (0: never). Both count from the first deposit of
                         any rank (this rank's, or a peer's in its heartbeat: pcoll_peers), then
                         from the last completed round: a slow first step (cuDNN searches, graph
                         capture, NCCL's connect, the first batch) is not a stall */
    double t_first;   /* before any rank has deposited: seconds from ctl_start to on_abort, the
                         bound on a first step that never ends on every rank (no other watchdog
                         judges then); max(t_first, t_abort) is used; warned about every t_abort
                         [600] (0, or t_abort 0: never) */
    double poll_s;    /* timeout slice of each pcoll_record_get [0.1] */
    FILE *log;        /* warnings and switches; NULL = silent [stderr] */
    int log_switches; /* print every mode switch to log [0] */
    void (*on_abort)(void *arg, const char *msg); /* [NULL: print to stderr, MPI_Abort(.., 3)] */
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
 * stats or state: until the thread ends it may be records behind the application, and a snapshot
 * then differs between ranks (docs/DESIGN.md#the-thread). */
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
