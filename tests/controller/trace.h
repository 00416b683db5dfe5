/* trace.h -- synthetic round-record generators shared by the controller tests (see test_policy.c).
 * Header-only (static functions) so each test binary is one translation unit. */
#ifndef CTL_TEST_TRACE_H
#define CTL_TEST_TRACE_H
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "common/hash.h"
#include "controller/controller.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks, verbose;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        checks++;                                                           \
        if (!(cond)) {                                                      \
            failures++;                                                     \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
        }                                                                   \
    } while (0)

static double u01(uint64_t seed, uint64_t a, uint64_t b) {
    return (double)(hash_splitmix64(seed ^ hash_splitmix64(a * 0x100000001b3ULL ^ hash_splitmix64(b + 7))) >>
                    11) *
           0x1.0p-53;
}

/* ------------------------------------------------------------------ rule schedule */

#define MAXP 64
typedef struct {
    uint64_t eff;
    pcoll_rule_t rule;
    int wait[MAXP];
} sched_ent_t;
typedef struct {
    sched_ent_t *e;
    int n, cap, pos;
    pcoll_rule_t cur;
    int cur_wait[MAXP];
} sched_t;

static void sched_init(sched_t *s, const pcoll_rule_t *init) {
    memset(s, 0, sizeof *s);
    s->cur = *init;
    s->cur.nwait = 0;
    s->cur.wait = s->cur_wait;
}
static void sched_push(sched_t *s, const ctl_decision_t *d) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->e = realloc(s->e, s->cap * sizeof *s->e);
    }
    sched_ent_t *x = &s->e[s->n++];
    x->eff = d->effective;
    x->rule = d->new_rule;
    for (int i = 0; i < d->new_rule.nwait; i++) x->wait[i] = d->new_rule.wait[i];
}
static const pcoll_rule_t *sched_at(sched_t *s, uint64_t r) {
    while (s->pos < s->n && s->e[s->pos].eff <= r) {
        sched_ent_t *x = &s->e[s->pos++];
        s->cur = x->rule;
        memcpy(s->cur_wait, x->wait, sizeof s->cur_wait);
        s->cur.wait = s->cur_wait;
    }
    return &s->cur;
}

/* ------------------------------------------------------------------ generators */

typedef double (*qfn_t)(void *arg, uint64_t r, int p);

typedef struct {
    int P;
    uint64_t seed, r;
    int lib_tau;    /* library-enforced tau in the generator (0: none) */
    int time_model; /* 0: probabilistic, 1: event time */
    qfn_t q;
    void *qarg; /* probabilistic: fresh probability */
    /* event time */
    double *period, jitter, lat, t_free, *ready;
    double *cur;               /* duration of the step in progress (reported with its deposit) */
    int cycle_costs;           /* report the wall time since the rank's previous deposit instead */
    double *last_dep;          /* time of each rank's previous deposit */
    double apply;              /* time a rank takes to apply one round (it applies every round) */
    double lognormal;          /* > 0: step times are period * exp(s z - s^2/2), z normal (mean period) */
    double rand_delay;         /* > 0: the paper's random straggler: each step of each rank waits
                          rand_delay periods more with probability 1/P (the trainer's random:k=1
                          draws one rank per step index; once ranks' step counts differ, as after
                          any partial round, that is an independent 1/P per rank and step) */
    double drift, drift_every; /* > 0: the machine's speed drifts: every step started in the same
                                  span of drift_every time units is scaled by one factor drawn
                                  uniformly from 1 +- drift (all ranks alike) */
    double now;                /* time at which the step being drawn starts */
    uint64_t *steps;
    pcoll_record_t rec;
    uint32_t streak[MAXP];
    sched_t sched;
    int joined[MAXP];
} gen_t;

static void gen_init(gen_t *g, int P, uint64_t seed, const pcoll_rule_t *init) {
    memset(g, 0, sizeof *g);
    g->P = P;
    g->seed = seed;
    g->rec.P = P;
    g->rec.fresh = calloc(P, 1);
    g->rec.waited = calloc(P, 1);
    g->rec.flags = calloc(P, 1);
    g->rec.staleness = calloc(P, sizeof(uint32_t));
    g->rec.streak = calloc(P, sizeof(uint32_t));
    g->period = calloc(P, sizeof(double));
    g->ready = calloc(P, sizeof(double));
    g->cur = calloc(P, sizeof(double));
    g->steps = calloc(P, sizeof(uint64_t));
    g->last_dep = calloc(P, sizeof(double));
    sched_init(&g->sched, init);
}
static void gen_free(gen_t *g) {
    free(g->rec.fresh);
    free(g->rec.waited);
    free(g->rec.flags);
    free(g->rec.staleness);
    free(g->rec.streak);
    free(g->period);
    free(g->ready);
    free(g->steps);
    free(g->sched.e);
    free(g->cur);
    free(g->rec.cost);
    free(g->rec.step);
    free(g->last_dep);
}

static double step_time(gen_t *g, int p) {
    double t, f = 1;
    if (g->lognormal > 0) { /* Box-Muller from two draws of (seed, step, rank) */
        double u1 = u01(g->seed, g->steps[p], 2000 + p), u2 = u01(g->seed, g->steps[p], 3000 + p);
        double z = sqrt(-2 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2), s = g->lognormal;
        t = g->period[p] * exp(s * z - s * s / 2);
    } else {
        double j = g->jitter * (2 * u01(g->seed, g->steps[p], 1000 + p) - 1);
        t = g->period[p] * (1 + j);
    }
    if (g->rand_delay > 0 && u01(g->seed, g->steps[p], 4000 + p) * g->P < 1)
        t += g->rand_delay * g->period[p];
    if (g->drift > 0) f = 1 + g->drift * (2 * u01(g->seed, (uint64_t)(g->now / g->drift_every), 5000) - 1);
    return t * f;
}

static void sim_start(gen_t *g, double jitter, double lat) {
    g->time_model = 1;
    g->jitter = jitter;
    g->lat = lat;
    for (int p = 0; p < g->P; p++) g->ready[p] = g->cur[p] = step_time(g, p);
}
/* event time: records carry each deposit's step time in rec.cost (as pcoll_set_cost does) */
static void sim_report_costs(gen_t *g) { g->rec.cost = calloc(g->P, sizeof(float)); }
/* ... or its cycle time: the wall time since the rank's previous deposit (what rule=rate reads),
 * with the step time beside it in rec.step (as the trainer reports both) */
static void sim_report_cycles(gen_t *g) {
    sim_report_costs(g);
    g->rec.step = calloc(g->P, sizeof(float));
    g->cycle_costs = 1;
}

static const pcoll_record_t *gen_next(gen_t *g) {
    const int P = g->P;
    const pcoll_rule_t *rule = sched_at(&g->sched, g->r);
    pcoll_record_t *rec = &g->rec;
    int nact = 0, act[MAXP];
    for (int p = 0; p < P; p++)
        if (!g->joined[p]) act[nact++] = p;
    uint8_t forced[MAXP] = {0};
    memset(rec->waited, 0, P);
    for (int k = 0; k < rule->nwait; k++) {
        forced[rule->wait[k]] = 1;
        rec->waited[rule->wait[k]] = 1;
    }
    if (g->lib_tau > 0)
        for (int p = 0; p < P; p++)
            if (g->streak[p] >= (uint32_t)g->lib_tau) {
                forced[p] = 1;
                rec->waited[p] = 1;
            }
    int init = -1;
    if (rule->mode == PCOLL_MAJORITY && nact) {
        init = act[hash_splitmix64(g->seed ^ hash_splitmix64(g->r)) % nact];
        forced[init] = 1;
    }
    int Q = rule->mode == PCOLL_SOLO ? 1 : rule->mode == PCOLL_QUORUM ? rule->quorum : 0;
    if (Q > nact) Q = nact;
    memset(rec->fresh, 0, P);
    if (!g->time_model) {
        int nf = 0;
        for (int p = 0; p < P; p++) {
            if (g->joined[p]) continue;
            int f = rule->mode == PCOLL_SYNC || forced[p] || u01(g->seed, g->r, p) < g->q(g->qarg, g->r, p);
            rec->fresh[p] = (uint8_t)f;
            nf += f;
        }
        /* quorum not met by the draws: the round starts when the next ranks become ready; take
         * the likeliest (highest q, ties broken by the draw), as the fastest rank would be */
        while (nf < Q) {
            int best = -1;
            double bq = -1, bu = 2;
            for (int k = 0; k < nact; k++) {
                int p = act[k];
                if (rec->fresh[p]) continue;
                double qq = g->q(g->qarg, g->r, p), uu = u01(g->seed, g->r, p);
                if (qq > bq || (qq == bq && uu < bu)) {
                    best = p;
                    bq = qq;
                    bu = uu;
                }
            }
            if (best < 0) break;
            rec->fresh[best] = 1;
            nf++;
        }
    } else {
        double t = g->t_free, srt[MAXP];
        for (int k = 0; k < nact; k++) srt[k] = g->ready[act[k]];
        for (int a = 1; a < nact; a++) /* insertion sort */
            for (int b = a; b > 0 && srt[b] < srt[b - 1]; b--) {
                double x = srt[b];
                srt[b] = srt[b - 1];
                srt[b - 1] = x;
            }
        double need = 0;
        if (rule->mode == PCOLL_SYNC)
            need = srt[nact - 1];
        else if (rule->mode == PCOLL_MAJORITY)
            need = g->ready[init];
        else
            need = srt[Q - 1];
        for (int p = 0; p < P; p++)
            if (forced[p] && !g->joined[p] && g->ready[p] > need) need = g->ready[p];
        if (need > t) t = need;
        double end = t + g->lat;
        for (int p = 0; p < P; p++) {
            if (rec->cost) rec->cost[p] = 0;
            if (rec->step) rec->step[p] = 0;
            if (g->joined[p] || g->ready[p] > t) continue;
            rec->fresh[p] = 1;
            if (rec->cost) rec->cost[p] = (float)(g->cycle_costs ? g->ready[p] - g->last_dep[p] : g->cur[p]);
            if (rec->step) rec->step[p] = (float)g->cur[p];
            g->last_dep[p] = g->ready[p];
            g->steps[p]++;
            g->now = end;
            g->cur[p] = step_time(g, p);
            g->ready[p] = end + g->apply * (g->streak[p] + 1) + g->cur[p];
        }
        g->t_free = end;
        rec->t_start = t;
        rec->t_end = end;
    }
    int nf = 0;
    for (int p = 0; p < P; p++) {
        rec->flags[p] = g->joined[p] ? PCOLL_F_JOINED : 0;
        if (rec->fresh[p]) {
            g->streak[p] = 0;
            nf++;
        } else if (!g->joined[p])
            g->streak[p]++;
        rec->streak[p] = g->streak[p];
    }
    rec->round = g->r++;
    rec->mode = rule->mode;
    rec->quorum = Q;
    rec->initiator = init;
    rec->nactive = nact;
    rec->nfresh = nf;
    return rec;
}

/* Runs N rounds closed-loop; stores decisions (copied) in *decs. */
typedef struct {
    uint64_t round, eff;
    int what;
    pcoll_mode_t from, to;
    int nwait, wait[MAXP];
    double L, A, F, T;
    char reason[224];
} dec_t;
typedef struct {
    dec_t *d;
    int n, cap;
    uint32_t max_streak;
} declog_t;

static void declog_add(declog_t *L, const ctl_decision_t *d) {
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 64;
        L->d = realloc(L->d, L->cap * sizeof *L->d);
    }
    dec_t *x = &L->d[L->n++];
    x->round = d->round;
    x->eff = d->effective;
    x->what = d->what;
    x->from = d->old_rule.mode;
    x->to = d->new_rule.mode;
    x->nwait = d->new_rule.nwait;
    for (int i = 0; i < d->new_rule.nwait; i++) x->wait[i] = d->new_rule.wait[i];
    x->L = d->L;
    x->A = d->A;
    x->F = d->F;
    x->T = d->T;
    snprintf(x->reason, sizeof x->reason, "%s", d->reason);
}

static void run_loop(gen_t *g, ctl_policy_t *pol, uint64_t N, declog_t *L) {
    for (uint64_t i = 0; i < N; i++) {
        const pcoll_record_t *rec = gen_next(g);
        for (int p = 0; p < g->P; p++)
            if (!(rec->flags[p] & PCOLL_F_JOINED) && rec->streak[p] > L->max_streak)
                L->max_streak = rec->streak[p];
        ctl_decision_t d;
        int k = ctl_policy_observe(pol, rec, &d);
        CHECK(k == 0 || k == 1, "observe returned %d at round %llu", k, (unsigned long long)rec->round);
        if (k == 1) {
            CHECK(d.effective == d.round + (uint64_t)ctl_policy_cfg(pol)->lag,
                  "effective %llu != round %llu + lag", (unsigned long long)d.effective,
                  (unsigned long long)d.round);
            sched_push(&g->sched, &d);
            declog_add(L, &d);
            if (verbose)
                printf("    r=%llu eff=%llu what=%d %s\n", (unsigned long long)d.round,
                       (unsigned long long)d.effective, d.what, d.reason);
        }
    }
}

static int count_mode(const declog_t *L) {
    int n = 0;
    for (int i = 0; i < L->n; i++) n += !!(L->d[i].what & CTL_DEC_MODE);
    return n;
}

static ctl_policy_t *mk(const char *spec, int P, ctl_policy_cfg_t *cfg_out) {
    ctl_policy_cfg_t c;
    char err[256];
    int rc = ctl_policy_parse(spec, &c, err, sizeof err);
    CHECK(rc == CTL_OK, "parse '%s': %s", spec, err);
    if (cfg_out) *cfg_out = c;
    ctl_policy_t *p = ctl_policy_new(&c, P);
    CHECK(p != NULL, "ctl_policy_new(%s, %d)", spec, P);
    return p;
}

/* ------------------------------------------------------------------ phases for q() */

typedef struct {
    uint64_t until;
    double q_all;
    int nslow;
    int slow[8];
    double q_slow;
} phase_t;
typedef struct {
    int n;
    phase_t ph[8];
} phases_t;
static double q_phases(void *arg, uint64_t r, int p) {
    phases_t *P = arg;
    for (int i = 0; i < P->n; i++) {
        if (r >= P->ph[i].until) continue;
        for (int k = 0; k < P->ph[i].nslow; k++)
            if (P->ph[i].slow[k] == p) return P->ph[i].q_slow;
        return P->ph[i].q_all;
    }
    return P->ph[P->n - 1].q_all;
}

/* Runs the policy `spec` closed-loop for N rounds of the phased participation model *ph (seed),
 * with the library enforcing lib_tau (0: none); the decisions go to *L (free L->d). Returns the
 * policy (free it) for its stats. */
static ctl_policy_t *run_phases_tau(const char *spec, int P, uint64_t seed, phases_t *ph, uint64_t N,
                                    int lib_tau, declog_t *L) {
    ctl_policy_t *pol = mk(spec, P, NULL);
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    gen_t g;
    gen_init(&g, P, seed, &init);
    g.q = q_phases;
    g.qarg = ph;
    g.lib_tau = lib_tau;
    run_loop(&g, pol, N, L);
    gen_free(&g);
    return pol;
}

static ctl_policy_t *run_phases(const char *spec, int P, uint64_t seed, phases_t *ph, uint64_t N,
                                declog_t *L) {
    return run_phases_tau(spec, P, seed, ph, N, 0, L);
}

/* ------------------------------------------------------------------ runner */

typedef struct {
    const char *name;
    void (*fn)(void);
} named_test_t;

/* Runs the tests (those whose name contains $CTL_TEST, if set), prints ok/FAIL per test and the
 * tally; returns the exit status. */
static int run_tests(const named_test_t *tests, size_t n) {
    const char *only = getenv("CTL_TEST");
    for (size_t i = 0; i < n; i++) {
        if (only && *only && !strstr(tests[i].name, only)) continue;
        int f0 = failures;
        tests[i].fn();
        printf("%s %s\n", failures == f0 ? "ok  " : "FAIL", tests[i].name);
    }
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}

#endif
