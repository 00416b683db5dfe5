/* bench_follow.c -- how the rate rule follows a change of the run's conditions, on test_rate's
 * event-time mock (trace.h): the detection delay (rounds from a change to the probe of every level
 * that follows it, and to being settled at the new phase's best level) and the cost of following
 * (the fresh-gradient equivalents lost against an oracle that runs each phase's best static level
 * from the phase's first round), on three schedules of issue 56, each in three phases of `rounds`
 * rounds (changes at rounds/3 and 2 rounds/3; schedule b changes once, at rounds/2):
 *   a  balanced -> the paper's random straggler (a rank's step waits 2 more steps, probability 1/P)
 *      -> balanced
 *   b  balanced -> one rank (drawn from the seed) 3x slower for good
 *   c  log-normal step times, sigma 0.4 -> 0.8 -> 0.4 (the spread doubles, then halves)
 * and the false alarms on stationary regimes (probes for a change that did not happen). Each
 * policy spec given is run on the same draws, side by side. A phase's best level and its score
 * (the oracle's rate) come from the three static rules run on the phase's conditions alone.
 * Not a test: it prints one table and writes JSON (--json FILE).
 *
 * Usage: bench_follow [--seeds N] [--rounds N] [--json FILE] [-v|-vv] [SPEC...]   (default SPEC:
 *        "adaptive") */
#include "tests/controller/trace.h"

#define MAXPH 3
typedef struct {
    double period[MAXP]; /* step period of each rank */
    double lognormal, rand_delay;
} cond_t;
typedef struct {
    int P, nph;
    uint64_t start[MAXPH]; /* first round of each phase */
    cond_t c[MAXPH];
    uint64_t N, seed;
} sched_scen_t;

static const char *lvname[CTL_NLV] = {
    [CTL_LV_SYNC] = "sync", [CTL_LV_MAJORITY] = "majority", [CTL_LV_LIGHT] = "solo"};
static int mode_level(pcoll_mode_t m) {
    return m == PCOLL_SYNC ? CTL_LV_SYNC : m == PCOLL_MAJORITY ? CTL_LV_MAJORITY : CTL_LV_LIGHT;
}

static void set_cond(gen_t *g, const cond_t *c) {
    for (int p = 0; p < g->P; p++) g->period[p] = c->period[p];
    g->lognormal = c->lognormal;
    g->rand_delay = c->rand_delay;
}

static ctl_policy_t *start(const char *spec, const sched_scen_t *s, gen_t *g) {
    ctl_policy_t *pol = mk(spec, s->P, NULL);
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    gen_init(g, s->P, s->seed, &init);
    set_cond(g, &s->c[0]);
    g->apply = 0.005;
    sim_start(g, s->c[0].lognormal > 0 ? 0 : 0.1, 0.01);
    sim_report_cycles(g);
    return pol;
}

/* The true score (fresh-gradient equivalents per time unit, linear worth) of static level l under
 * conditions c, over `n` rounds after 100. */
static double static_score(int l, int P, const cond_t *c, uint64_t seed, uint64_t n) {
    sched_scen_t s = {.P = P, .nph = 1, .N = n + 100, .seed = seed};
    s.c[0] = *c;
    gen_t g;
    ctl_policy_t *pol = start(lvname[l], &s, &g);
    uint32_t gsince[MAXP] = {0};
    double worth = 0, t0 = 0, t = 0;
    for (uint64_t r = 0; r < s.N; r++) {
        const pcoll_record_t *rec = gen_next(&g);
        ctl_decision_t d;
        ctl_policy_observe(pol, rec, &d);
        uint32_t nf = 0;
        for (int p = 0; p < P; p++) nf += rec->fresh[p];
        for (int p = 0; p < P; p++) {
            if (r >= 100 && rec->fresh[p]) worth += 1 / (1 + (double)gsince[p] / P);
            gsince[p] = rec->fresh[p] ? 0 : gsince[p] + nf;
        }
        if (r == 99) t0 = rec->t_end;
        t = rec->t_end;
    }
    ctl_policy_free(pol);
    gen_free(&g);
    return worth / (t - t0);
}

typedef struct {
    double detect[MAXPH], settle[MAXPH]; /* rounds from the phase's start (-1: not within the phase) */
    double lost[MAXPH];                  /* time units lost against the oracle in the phase */
    double time[MAXPH];                  /* the adaptive run's time in the phase */
    int alarms;                          /* probes for a change (reason "... changed ...") */
    int probes;                          /* probes of every level begun */
} follow_t;

/* Whether decision reason r starts a probe of every level for a detected change. */
static int is_alarm(const char *r) { return strstr(r, "changed") != NULL && strstr(r, "probe:") != NULL; }

static void run_follow(const char *spec, const sched_scen_t *s, const double best[MAXPH][CTL_NLV],
                       follow_t *f) {
    memset(f, 0, sizeof *f);
    gen_t g;
    ctl_policy_t *pol = start(spec, s, &g);
    uint32_t gsince[MAXP] = {0};
    double worth[MAXPH] = {0}, t_prev = 0;
    int ph = 0;
    for (int i = 0; i < MAXPH; i++) f->detect[i] = f->settle[i] = -1;
    for (uint64_t r = 0; r < s->N; r++) {
        if (ph + 1 < s->nph && r == s->start[ph + 1]) set_cond(&g, &s->c[++ph]);
        const pcoll_record_t *rec = gen_next(&g);
        ctl_decision_t d;
        int k = ctl_policy_observe(pol, rec, &d);
        if (k == 1) {
            sched_push(&g.sched, &d);
            const int alarm = is_alarm(d.reason), all = strstr(d.reason, "probe due") != NULL;
            f->alarms += alarm;
            f->probes += alarm || all;
            if ((alarm || all) && f->detect[ph] < 0 && ph > 0) f->detect[ph] = (double)(r - s->start[ph]);
            if (verbose > 1) printf("      r=%llu %s\n", (unsigned long long)d.round, d.reason);
        }
        uint32_t nf = 0;
        for (int p = 0; p < s->P; p++) nf += rec->fresh[p];
        for (int p = 0; p < s->P; p++) {
            if (rec->fresh[p]) worth[ph] += 1 / (1 + (double)gsince[p] / s->P);
            gsince[p] = rec->fresh[p] ? 0 : gsince[p] + nf;
        }
        f->time[ph] += rec->t_end - t_prev;
        t_prev = rec->t_end;
        ctl_policy_stats_t st;
        ctl_policy_stats(pol, &st);
        double top = 0;
        for (int l = 0; l < CTL_NLV; l++) top = fmax(top, best[ph][l]);
        /* settled at a level within 5% of the phase's best (the noise may not tell them apart) in
         * force: the level of the round and the choice */
        const int lv = mode_level(rec->mode),
                  good = !st.probing && st.choice == lv && best[ph][lv] >= 0.95 * top;
        /* the first such round of the phase */
        if (good && f->settle[ph] < 0) f->settle[ph] = (double)(r - s->start[ph]);
    }
    for (int i = 0; i < s->nph; i++) {
        double top = 0;
        for (int l = 0; l < CTL_NLV; l++) top = fmax(top, best[i][l]);
        f->lost[i] = f->time[i] - worth[i] / top;
    }
    ctl_policy_free(pol);
    gen_free(&g);
}

/* schedule kind (0 a, 1 b, 2 c) at P ranks for seed */
static sched_scen_t make_sched(int kind, int P, uint64_t N, uint64_t seed) {
    sched_scen_t s;
    memset(&s, 0, sizeof s);
    s.P = P, s.N = N, s.seed = seed;
    for (int i = 0; i < MAXPH; i++)
        for (int p = 0; p < P; p++) s.c[i].period[p] = 1;
    if (kind == 1) {
        s.nph = 2, s.start[1] = N / 2;
        s.c[1].period[hash_splitmix64(seed) % (uint64_t)P] = 3;
    } else {
        s.nph = 3, s.start[1] = N / 3, s.start[2] = 2 * N / 3;
        if (kind == 0) s.c[1].rand_delay = 2;
        if (kind == 2) s.c[0].lognormal = s.c[2].lognormal = 0.4, s.c[1].lognormal = 0.8;
    }
    return s;
}

int main(int argc, char **argv) {
    int seeds = 5;
    uint64_t N = 6000;
    const char *json = NULL, *specs[8];
    int nspec = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
            seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            N = (uint64_t)atoll(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "-vv"))
            verbose = argv[i][2] ? 2 : 1;
        else if (argv[i][0] != '-' && nspec < 8)
            specs[nspec++] = argv[i];
        else {
            fprintf(stderr,
                    "usage: bench_follow [--seeds N] [--rounds N] [--json FILE] [-v|-vv] [SPEC...]\n");
            return 2;
        }
    }
    if (seeds < 1 || N < 300) {
        fprintf(stderr, "bench_follow: --seeds >= 1 and --rounds >= 300\n");
        return 2;
    }
    if (!nspec) specs[nspec++] = "adaptive";
    FILE *js = json ? fopen(json, "w") : NULL;
    if (json && !js) {
        fprintf(stderr, "bench_follow: cannot write %s\n", json);
        return 1;
    }
    if (js) fprintf(js, "{\"rounds\": %llu, \"seeds\": %d, \"schedules\": [", (unsigned long long)N, seeds);
    const char *kname[3] = {"a: balanced/random straggler/balanced", "b: a 3x slow rank from halfway",
                            "c: log-normal 0.4/0.8/0.4"};
    printf("%-40s %2s %-24s %-9s %18s %18s %14s %7s %6s\n", "schedule", "P", "policy", "change",
           "detect (rounds)", "settled (rounds)", "lost (steps)", "lost %", "alarms");
    int first = 1;
    for (int kind = 0; kind < 3; kind++)
        for (int P = 4; P <= 8; P += 4)
            for (int v = 0; v < nspec; v++) {
                double det[MAXPH] = {0}, set[MAXPH] = {0}, lost[MAXPH] = {0}, tm[MAXPH] = {0};
                int ndet[MAXPH] = {0}, nset[MAXPH] = {0}, alarms = 0, nph = 0;
                for (uint64_t seed = 1; seed <= (uint64_t)seeds; seed++) {
                    sched_scen_t s = make_sched(kind, P, N, seed);
                    double best[MAXPH][CTL_NLV];
                    for (int i = 0; i < s.nph; i++)
                        for (int l = 0; l < CTL_NLV; l++)
                            best[i][l] = static_score(l, P, &s.c[i], seed, 3000);
                    follow_t f;
                    run_follow(specs[v], &s, (const double(*)[CTL_NLV])best, &f);
                    nph = s.nph;
                    alarms += f.alarms;
                    for (int i = 0; i < s.nph; i++) {
                        if (f.detect[i] >= 0) det[i] += f.detect[i], ndet[i]++;
                        if (f.settle[i] >= 0) set[i] += f.settle[i], nset[i]++;
                        lost[i] += f.lost[i] / seeds, tm[i] += f.time[i] / seeds;
                    }
                    if (verbose)
                        for (int i = 1; i < s.nph; i++)
                            printf("    %s P=%d %s seed %llu change %d: detect %.0f settle %.0f lost %.1f of "
                                   "%.1f\n",
                                   kname[kind], P, specs[v], (unsigned long long)seed, i, f.detect[i],
                                   f.settle[i], f.lost[i], f.time[i]);
                }
                if (js)
                    fprintf(js,
                            "%s\n  {\"schedule\": \"%c\", \"P\": %d, \"policy\": \"%s\", \"alarms\": %d, "
                            "\"changes\": [",
                            first ? "" : ",", 'a' + kind, P, specs[v], alarms);
                first = 0;
                for (int i = 1; i < nph; i++) {
                    char d[32], st[32];
                    snprintf(d, sizeof d, "%.0f (%d/%d)", ndet[i] ? det[i] / ndet[i] : -1, ndet[i], seeds);
                    snprintf(st, sizeof st, "%.0f (%d/%d)", nset[i] ? set[i] / nset[i] : -1, nset[i], seeds);
                    printf("%-40s %2d %-24s %-9d %18s %18s %14.1f %6.1f%% %6d\n", kname[kind], P, specs[v], i,
                           d, st, lost[i], 100 * lost[i] / tm[i], i == 1 ? alarms : 0);
                    if (js)
                        fprintf(js,
                                "%s{\"change\": %d, \"detect_rounds\": %.1f, \"detected\": %d, "
                                "\"settle_rounds\": %.1f, \"settled\": %d, \"lost_steps\": %.2f, "
                                "\"phase_time\": %.2f}",
                                i > 1 ? ", " : "", i, ndet[i] ? det[i] / ndet[i] : -1, ndet[i],
                                nset[i] ? set[i] / nset[i] : -1, nset[i], lost[i], tm[i]);
                }
                if (js) fprintf(js, "]}");
            }
    /* false alarms on stationary regimes: probes for a change that did not happen, in 12,000 rounds */
    printf("\nstationary regimes, %d seeds x 12,000 rounds: probes for a change (false alarms)\n", seeds);
    if (js) fprintf(js, "\n], \"stationary\": [");
    const char *rname[5] = {"balanced", "3x slow rank", "random straggler", "log-normal 0.8",
                            "log-normal 0.3"};
    first = 1;
    for (int kind = 0; kind < 5; kind++)
        for (int P = 4; P <= 8; P += 4)
            for (int v = 0; v < nspec; v++) {
                int alarms = 0, probes = 0;
                for (uint64_t seed = 1; seed <= (uint64_t)seeds; seed++) {
                    sched_scen_t s = make_sched(0, P, 12000, seed);
                    s.nph = 1;
                    if (kind == 1) s.c[0].period[P - 1] = 3;
                    if (kind == 2) s.c[0].rand_delay = 2;
                    if (kind >= 3) s.c[0].lognormal = kind == 3 ? 0.8 : 0.3;
                    double best[MAXPH][CTL_NLV] = {{0}};
                    follow_t f;
                    run_follow(specs[v], &s, (const double(*)[CTL_NLV])best, &f);
                    alarms += f.alarms, probes += f.probes;
                }
                printf("%-18s P=%d %-24s %3d false alarms, %3d probes of every level in all\n", rname[kind],
                       P, specs[v], alarms, probes);
                if (js)
                    fprintf(js,
                            "%s\n  {\"regime\": \"%s\", \"P\": %d, \"policy\": \"%s\", \"alarms\": %d, "
                            "\"probes\": %d}",
                            first ? "" : ",", rname[kind], P, specs[v], alarms, probes);
                first = 0;
            }
    if (js) {
        fprintf(js, "\n]}\n");
        fclose(js);
    }
    return 0;
}
