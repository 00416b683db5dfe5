/* policy_impl.h -- internals of the controller policy shared by policy.c (config, observe),
 * state.c (the carried state: snapshot, resume, serialisation) and rate.c (the rate rule).
 * Not part of the API: controller.h is. */
#ifndef CONTROLLER_POLICY_IMPL_H
#define CONTROLLER_POLICY_IMPL_H

#include "controller/controller.h"

#define NONE UINT64_MAX

/* Measurement of the samples a mode delivers (rate rule, rate.c) over its latest deposits. */
typedef struct {
    uint32_t *n;    /* [P] deposits counted */
    double *d, *d2; /* [P] sum of their cycle times and of their squares (s, s^2) */
    double *l;      /* [P] sum of the lags (in sync steps) of those gradients */
    double *e, *e2; /* [P] sum of their worths (staleness key) and of the squares */
    double *x1,
        *w1; /* [P] p's previous counted cycle time per gradient and its worth (0: none since a skip) */
    double *dd, *ee; /* [P] sums of the products of consecutive ones (x_j x_{j-1}, w_j w_{j-1}) */
    uint32_t *np;    /* [P] consecutive pairs counted in dd and ee */
    uint8_t *skip;   /* [P] 1: p's next deposit is skipped (its cycle began in another mode) */
    uint32_t rounds; /* rounds counted */
    /* change=steps: the step times (pcoll_record_t.step, per gradient) of the deposits counted */
    uint32_t *yn;              /* [P] step times counted */
    double *y1, *y2, *y3, *y4; /* [P] sums of their logs and of the logs' 2nd, 3rd, 4th powers */
    /* worth=measured: the training losses (pcoll_record_t.loss) of the deposits counted, every
     * rank's together, as a regression of log loss y on x, the sync steps' worth of gradients
     * applied before the round that took it, less x0 (the first one's) */
    uint32_t ln;                       /* losses counted */
    double lx0, lx, ly, lxx, lxy, lyy; /* x0; sums of x, y, x^2, x y, y^2 (state version 9) */
} meas_t;

/* change=steps (rate.c): the statistics of the log step times of the settled measurements since
 * the level was chosen (the reference), and their spread between measurements. Statistic 0: the
 * ranks' mean log step (their common location; summed, not tested); 1: the log of the pooled
 * variance of a rank's log steps (their spread); 2: each rank's mean log step less the common one
 * (per rank, arrays). */
typedef struct {
    uint32_t k;               /* measurements in the reference */
    double x[2], xx[2], w[2]; /* statistics 0 and 1: sums of the values, their squares and their
                                 within-measurement variances */
    double *rx, *rxx, *rw;    /* [P] the same of statistic 2 */
    double bss[3];            /* sums of squares about their reference's mean of the references
                                 dropped (statistic 2: over the ranks) ... */
    uint32_t bdf[3];          /* ... and their degrees of freedom */
    int32_t beyond;           /* the previous measurement's tests beyond the limits: bit 2 j (above)
                                 or 2 j + 1 (below) for statistic j (0: inside; it is not in the
                                 reference) */
} steps_t;

/* The carried state (ctl_state_t): everything a policy learned that the next handle (epoch) or
 * a resumed run needs to continue with the same decisions. Round numbers are global: round r of
 * the current handle is base + r. Sums of the window ring are derived (recomputed on load). */
struct ctl_state {
    int P, window, cost_n; /* shape: must match the config the state is resumed under */
    uint64_t base;         /* rounds observed before the current handle */
    /* mode */
    int32_t level;      /* latest decided level */
    uint64_t mode_from; /* global effective round of the latest mode change */
    int32_t probe;      /* current probe interval, in sync rounds' worth of gradients */
    /* window over rounds >= mode_from (ring of per-round rows) */
    int32_t w_len, w_pos;
    uint32_t *w_max, *w_fresh, *w_active, *w_nmax, *w_nfresh, *w_nfree;
    uint8_t *w_tau;
    uint64_t s_max, s_fresh, s_active, s_nmax, s_nfresh, s_nfree, s_tau; /* derived */
    uint32_t *ns; /* [P] natural streak (rounds since fresh without being forced) */
    /* step times for the gain, kept across modes */
    float *cost; /* [P][cost_n] ring */
    int32_t *cost_cnt, *cost_pos;
    uint8_t *act;      /* [P] active in the latest record */
    int32_t cost_seen; /* some rank has reported a step time */
    /* rate rule (rate.c) */
    meas_t m;                 /* the measurement in progress (current level) */
    uint32_t *gsince;         /* [P] gradients applied since p was last fresh */
    double score[CTL_NLV];    /* score of each level pooled over its measurements since the run's
                                   conditions last changed (standard error: rate_se) */
    double se_in[CTL_NLV];    /* ... the within-measurement standard error of the pool */
    double pool_w[CTL_NLV];   /* ... the sum of the inverse within-variances pooled */
    uint64_t pool_n[CTL_NLV]; /* ... the gradients counted in the measurements pooled */
    uint32_t pool_k[CTL_NLV]; /* ... the measurements pooled */
    double pool_sx[CTL_NLV], pool_sxx[CTL_NLV]; /* ... the sum of the measurements and of their squares */
    double last_x[CTL_NLV];                     /* latest measurement of each level pooled (0: none) */
    double cv2_sum;      /* relative sum of squares (sum (x - mean)^2 / mean^2) of the pools
                                   dropped when the run's conditions changed ... */
    uint32_t cv2_n;      /* ... and its degrees of freedom */
    int32_t beyond;      /* settled: side (+1, -1) of the previous measurement that lay outside
                                   the pool's limits (0: it lay inside) */
    int32_t contest;     /* measurements of a rival taken again since the probe of every level */
    int32_t rival;       /* settled: the level an unresolved choice is measured against again
                                   when next_probe is due (-1: none, the next probe is of every level) */
    uint64_t probe_from; /* grads when the latest probe of every level began */
    double rate[CTL_NLV], lag[CTL_NLV]; /* latest measured rate and lag of each level (reasons, stats) */
    uint64_t scored_at[CTL_NLV];        /* global round of the latest measurement (NONE: never) */
    int32_t phase;                      /* 0: settled, 1: probing */
    int32_t queue[CTL_NLV], nqueue;     /* probing: levels still to measure, in order */
    int32_t incumbent;                  /* probing: the level chosen before the probe (-1: none) */
    uint64_t grads;                     /* gradients taken by all rounds observed */
    uint64_t next_probe;                /* settled: the next probe is due once grads reaches this */
    double ovh_sum;                     /* sum over sync rounds of a rank's mean cycle minus the round's
                                   largest step time: the round's own overhead (predict.c) ... */
    uint32_t ovh_n;                     /* ... and the rounds summed (since the levels were last forgotten) */
    int32_t screened;                   /* bit l: level l's probe skipped in the current probe (the screen) */
    double pred[CTL_NLV];               /* the latest replayed score of each level (0: none) */
    steps_t st;                         /* change=steps: the step times' reference (state version 8) */
};

struct ctl_policy {
    ctl_policy_cfg_t c;
    int P;
    struct ctl_state s; /* carried */
    /* per handle */
    uint64_t next;            /* next round expected (local) */
    uint64_t rule_from;       /* local effective round of the latest decision (0: none) */
    pcoll_rule_t light;       /* LIGHT level rule (solo or quorum) */
    int *wait, nwait;         /* latest decided wait set (sorted) */
    int *old_wait, old_nwait; /* copy handed out in the last decision's old_rule */
    int *tmp;                 /* scratch: wait set under construction */
    int *tau_next, ntau_next; /* library tau wait set of round `next` */
    uint64_t *last_wait;      /* tau_by=policy: last local round with p in a policy wait set */
    uint64_t hash;
    ctl_policy_stats_t st;
};

typedef struct {
    double L, A, F, T, gain;
} sig_t;

/* One round's row of the window (active ranks): largest streak, fresh and active ranks, largest
 * natural streak, unforced fresh and unforced ranks, whether tau forced a wait. */
typedef struct {
    uint32_t max, fresh, active, nmax, nfresh, nfree;
    uint8_t tau;
} wrow_t;

/* Outcome of a level evaluation: the level to switch to (== current: none), whether the switch is
 * a probe, and the reason. */
typedef struct {
    int to, probe;
    char why[200];
} verdict_t;

/* state.c */
int state_alloc(struct ctl_state *s, int P, int window, int cost_n);
void state_free(struct ctl_state *s);
void state_init(struct ctl_state *s, const ctl_policy_cfg_t *c);
int state_copy(struct ctl_state *dst, const struct ctl_state *src);
void window_reset(struct ctl_state *s);

/* rate.c: the rate rule */
void rate_observe(ctl_policy_t *p, const pcoll_record_t *rec, int nactive);
void rate_evaluate(ctl_policy_t *p, uint64_t rg, verdict_t *v);
void rate_switched(ctl_policy_t *p);
void rate_init(struct ctl_state *s, const ctl_policy_cfg_t *c);
void rate_start(struct ctl_state *s);
double rate_se(const struct ctl_state *s, int l);
/* predict.c: the score a partial level would have, replayed from the ranks' step times (0: too
 * little to replay) */
double rate_predict(const ctl_policy_t *p, int level, double overhead);
/* Every level's measurements, scores and pools forgotten (the spread between measurements kept). */
void rate_forget_levels(struct ctl_state *s);
void rate_probe_all(struct ctl_state *s);

/* options.c */
int policy_fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *rule_str(const pcoll_rule_t *r, char *b, size_t n);

/* signals.c: the window signals */
void window_push(struct ctl_state *s, const wrow_t *x);
sig_t signals(const struct ctl_state *s);

/* levels.c: shared by the files above */
/* The rule of level lv (CTL_LV_*) under p (a static policy: its one rule), wait set empty. */
void level_rule(const ctl_policy_t *p, int lv, pcoll_rule_t *r);
/* That rule's name ("sync", "solo", "quorum:3", ...) in b (n bytes); returns b. */
const char *level_name(const ctl_policy_t *p, int lv, char *b, size_t n);
/* The level (CTL_LV_*) whose rounds run mode m: solo and quorum are LIGHT. */
int level_of_mode(pcoll_mode_t m);
/* 1 if rank i is active in rec (neither joined nor failed). */
int rec_active(const pcoll_record_t *rec, int i);
/* The doubled probe interval: twice cur, at most cap. */
int backoff(int cur, int cap);
/* What a gradient lag sync steps old is worth relative to a fresh one under staleness key k:
 * linear 1 / (1 + lag), quadratic 1 / (1 + lag^2), bound 1. Why: docs/DESIGN.md#the-worth-of-a-gradient */
double gradient_worth(ctl_staleness_t k, double lag);

#endif
