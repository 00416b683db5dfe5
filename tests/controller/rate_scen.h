/* rate_scen.h -- test_rate's harness (test_rate.c says what its tests check and why): a scenario
 * (scen_t: the ranks' step periods and noise, a round latency, a cost per round applied, an
 * optional change of rank 0's period) run on trace.h's event-time mock under a policy spec, its
 * ranks reporting cycle times; a run's outcome (time per level, switches, probes, the score it
 * delivered: gradients per unit of time, each at its worth under -w); the static rules' true scores
 * (truth); check_scen, the checks a stationary scenario must pass; alike ranks and the regimes of
 * the short-run table. Header-only (static functions) for test_rate.c's one translation unit. */
#ifndef CTL_TEST_RATE_SCEN_H
#define CTL_TEST_RATE_SCEN_H
#include "tests/controller/trace.h"

typedef struct {
    int P;
    double period[MAXP];
    double jitter, lognormal, lat, apply;
    double rand_delay, drift, drift_every; /* see gen_t */
    uint64_t N;
    uint64_t change_at; /* from this round on, rank 0's period is change_to (0: never) */
    double change_to;
    uint64_t seed;
    int tau;
} scen_t;

typedef struct {
    double time[CTL_NLV]; /* simulated time spent in each level (CTL_LV_*) */
    double total;
    int switches, probes;
    uint64_t choices, changes; /* completed probes of every level; those that changed the choice */
    double rate, lag, score;   /* what the run delivered (for the static runs: the truth) */
    pcoll_mode_t final_mode;
    int choice; /* the level chosen at the end (index as rate[]) */
    declog_t L;
} outcome_t;

static int mode_level(pcoll_mode_t m) {
    return m == PCOLL_SYNC ? CTL_LV_SYNC : m == PCOLL_MAJORITY ? CTL_LV_MAJORITY : CTL_LV_LIGHT;
}
static const char *lvname[CTL_NLV] = {
    [CTL_LV_SYNC] = "sync", [CTL_LV_MAJORITY] = "majority", [CTL_LV_LIGHT] = "solo"};

/* The event-time mock of the scenario for policy pol (from its initial rule), ranks reporting cycle
 * times. */
static void scen_gen(ctl_policy_t *pol, const scen_t *sc, gen_t *g) {
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    gen_init(g, sc->P, sc->seed, &init);
    for (int p = 0; p < sc->P; p++) g->period[p] = sc->period[p];
    g->lognormal = sc->lognormal;
    g->rand_delay = sc->rand_delay;
    g->drift = sc->drift;
    g->drift_every = sc->drift_every;
    g->apply = sc->apply;
    g->lib_tau = sc->tau;
    sim_start(g, sc->jitter, sc->lat);
    sim_report_cycles(g);
}

/* -w: the worth the truth counts and the adaptive policies are given (1: linear, the default) */
static int linear_worth = 1;

static double truth_worth(double lag) { return linear_worth ? 1 / (1 + lag) : 1 / (1 + lag * lag); }

/* spec, for an adaptive policy without its own staleness key given -w quadratic's */
static ctl_policy_t *mk_worth(const char *spec, int P, ctl_policy_cfg_t *cfg) {
    char s[256];
    int add = !linear_worth && !strncmp(spec, "adaptive", 8) && !strstr(spec, "staleness=");
    snprintf(s, sizeof s, "%s%s", spec, add ? ",staleness=quadratic" : "");
    return mk(s, P, cfg);
}

/* Counts round rec: if `counted`, each fresh gradient at its worth truth_worth(lag) into *worth
 * and its lag into *lag_sum, *lag_n (lag: the gradients applied since its rank's previous round,
 * in sync steps); always advances gsince[]. Returns the gradients the round took. */
static uint32_t count_round(const pcoll_record_t *rec, int P, uint32_t gsince[], int counted, double *worth,
                            double *lag_sum, uint64_t *lag_n) {
    uint32_t nf = 0;
    for (int p = 0; p < P; p++) nf += rec->fresh[p];
    for (int p = 0; p < P; p++) {
        if (counted && rec->fresh[p]) {
            double lag = (double)gsince[p] / P;
            *lag_sum += lag;
            *worth += truth_worth(lag);
            (*lag_n)++;
        }
        gsince[p] = rec->fresh[p] ? 0 : gsince[p] + nf;
    }
    return nf;
}

static ctl_policy_t *scen_start(const char *spec, const scen_t *sc, gen_t *g, ctl_policy_cfg_t *cfg) {
    ctl_policy_t *pol = mk_worth(spec, sc->P, cfg);
    scen_gen(pol, sc, g);
    return pol;
}

/* The next round's record, observed by the policy; its decision (if any, *decided = 1) is
 * scheduled in the mock. */
static const pcoll_record_t *scen_step(ctl_policy_t *pol, gen_t *g, ctl_decision_t *d, int *decided) {
    const pcoll_record_t *rec = gen_next(g);
    int k = ctl_policy_observe(pol, rec, d);
    CHECK(k == 0 || k == 1, "observe %d", k);
    if (k == 1) sched_push(&g->sched, d);
    *decided = k == 1;
    return rec;
}

/* Runs spec on the scenario; rounds before `from` are not counted in the outcome's time split. */
static void run_scen(const char *spec, const scen_t *sc, uint64_t from, outcome_t *o) {
    memset(o, 0, sizeof *o);
    gen_t g;
    ctl_policy_t *pol = scen_start(spec, sc, &g, NULL);
    uint32_t gsince[MAXP] = {0};
    double lag_sum = 0, worth = 0, t_prev = 0, t_from = 0;
    uint64_t grads = 0, lag_n = 0;
    for (uint64_t r = 0; r < sc->N; r++) {
        if (sc->change_at && r == sc->change_at) g.period[0] = sc->change_to;
        ctl_decision_t d;
        int k;
        const pcoll_record_t *rec = scen_step(pol, &g, &d, &k);
        if (k) {
            declog_add(&o->L, &d);
            if (d.what & CTL_DEC_MODE) o->switches++;
            if (d.what & CTL_DEC_PROBE) o->probes++;
            if (verbose > 1) printf("      r=%llu %s\n", (unsigned long long)d.round, d.reason);
        }
        if (r == from) t_from = rec->t_end;
        uint32_t nf = count_round(rec, sc->P, gsince, r >= from, &worth, &lag_sum, &lag_n);
        if (r >= from) {
            o->time[mode_level(rec->mode)] += rec->t_end - t_prev;
            grads += nf;
        }
        t_prev = rec->t_end;
    }
    o->total = t_prev - t_from;
    o->rate = grads / o->total;
    o->lag = lag_n ? lag_sum / lag_n : 0;
    o->score = worth / o->total;
    ctl_policy_stats_t st;
    ctl_policy_stats(pol, &st);
    o->final_mode = st.mode;
    o->choices = st.choices;
    o->choice = st.choice;
    o->changes = st.choice_changes;
    ctl_policy_free(pol);
    gen_free(&g);
}

/* The static rules' true scores over the rounds from `from` on; returns the best level. */
static int truth(const scen_t *sc, uint64_t from, double score[CTL_NLV]) {
    int best = 0;
    for (int l = 0; l < CTL_NLV; l++) {
        char spec[32];
        snprintf(spec, sizeof spec, "%s%s", lvname[l], sc->tau ? "" : "");
        outcome_t o;
        run_scen(spec, sc, from, &o);
        score[l] = o.score;
        if (score[l] > score[best]) best = l;
        free(o.L.d);
    }
    return best;
}

/* The level the adaptive run spent most time in, from round `from` on. */
static int main_level(const outcome_t *o) {
    int m = 0;
    for (int l = 1; l < CTL_NLV; l++)
        if (o->time[l] > o->time[m]) m = l;
    return m;
}

/* Runs adaptive and the statics; checks that the adaptive's main level and its final choice score
 * within 5% of the best static one, that levels scoring that well hold at least min_share of the
 * time (two such levels the noise cannot tell apart may share it),
 * that it delivered at least 90% of the best static score (probes of worse levels included), that
 * at most max_changes of its probes changed the choice (the first one included), and that probes
 * back off: no more of them than a doubling interval from `probe` (256) allows. Returns the main
 * level. */
static int check_scen(const char *name, const char *spec, const scen_t *sc, uint64_t from, double min_share,
                      int max_changes) {
    double sc3[CTL_NLV];
    int best = truth(sc, from, sc3);
    outcome_t o;
    run_scen(spec, sc, from, &o);
    int m = main_level(&o);
    double share = 0;
    for (int l = 0; l < 3; l++)
        if (sc3[l] >= 0.95 * sc3[best]) share += o.time[l] / o.total;
    if (verbose)
        printf("    %-28s truth sync %.3f maj %.3f solo %.3f (best %s) | adaptive %s %.0f%% of the time, %d "
               "switches, "
               "%llu choices (%llu changed), score %.3f\n",
               name, sc3[0], sc3[1], sc3[2], lvname[best], lvname[m], 100 * o.time[m] / o.total, o.switches,
               (unsigned long long)o.choices, (unsigned long long)o.changes, o.score);
    CHECK(sc3[m] >= 0.95 * sc3[best], "%s: adaptive mostly in %s (true score %.3f), best is %s (%.3f)", name,
          lvname[m], sc3[m], lvname[best], sc3[best]);
    CHECK(share >= min_share, "%s: only %.0f%% of the time in levels within 5%% of %s", name, 100 * share,
          lvname[best]);
    /* two levels whose true scores are within 1% are a tie: each contest keeps the higher point
     * estimate, so a choice between them may change at every contest without costing anything
     * (straggler P=8 k=4: majority 3.833, solo 3.829); the score delivered is checked below */
    int tie = 0;
    for (int l = 0; l < 3; l++) tie |= l != best && sc3[l] >= 0.99 * sc3[best];
    CHECK(tie || o.changes <= (uint64_t)max_changes, "%s: %llu probes changed the choice (at most %d)", name,
          (unsigned long long)o.changes, max_changes);
    /* rounds N allow about log2(N / 256) doubled intervals, plus a new start after each change */
    uint64_t allowed = 2 + (uint64_t)log2((double)sc->N / 256) + 2 * o.changes;
    CHECK(o.choices <= allowed, "%s: %llu probes of every level in %llu rounds (%llu allowed)", name,
          (unsigned long long)o.choices, (unsigned long long)sc->N, (unsigned long long)allowed);
    CHECK(o.score >= 0.9 * sc3[best], "%s: adaptive delivered a score of %.3f, the best static %.3f", name,
          o.score, sc3[best]);
    CHECK(o.choice >= 0 && sc3[o.choice] >= 0.95 * sc3[best],
          "%s: final choice %s (true score %.3f), best %s (%.3f)", name,
          o.choice >= 0 ? lvname[o.choice] : "none", o.choice >= 0 ? sc3[o.choice] : 0, lvname[best],
          sc3[best]);
    free(o.L.d);
    return m;
}

static scen_t alike(int P, double scale) {
    scen_t s;
    memset(&s, 0, sizeof s);
    s.P = P;
    for (int p = 0; p < P; p++) s.period[p] = scale;
    s.jitter = 0.1;
    s.lat = 0.01 * scale;
    s.apply = 0.005 * scale;
    s.N = 6000;
    s.seed = 17;
    return s;
}

/* The regimes of the short-run table, applied to alike ranks s (its P): one rank 4x slower, linear
 * skew (periods 1 .. P), log-normal noise sigma 0.8, the paper's random straggler (a rank's step
 * waits 3 more steps with probability 1/P), log-normal sigma 0.3 (the spread of the paper's cloud
 * step times: sync best). */
enum { R_ALIKE, R_STRAGGLER, R_SKEW, R_LN08, R_RANDOM, R_LN03 };
static void set_regime(scen_t *s, int kind) {
    if (kind == R_STRAGGLER) s->period[s->P - 1] = 4;
    if (kind == R_SKEW)
        for (int p = 0; p < s->P; p++) s->period[p] = 1 + p;
    if (kind == R_LN08) s->jitter = 0, s->lognormal = 0.8;
    if (kind == R_RANDOM) s->rand_delay = 3;
    if (kind == R_LN03) s->jitter = 0, s->lognormal = 0.3;
}

#endif
