/* rate_measure.h -- test_rate's tests of what the rate rule measures and reports: the standard
 * errors its measurements claim (se), the cost of learning over a short run (short), same records
 * -> same decisions and the variants staleness=bound and no step times (variants), what
 * ctl_policy_stats reports and what a resumed or resized policy carries (stats), and worth=measured
 * on the losses the mock reports (worth). Static functions for test_rate.c's one translation unit. */
#ifndef CTL_TEST_RATE_MEASURE_H
#define CTL_TEST_RATE_MEASURE_H
#include "tests/controller/rate_scen.h"

/* Time spec's run takes to deliver `target` fresh-gradient equivalents (each gradient at its worth
 * truth_worth(lag), lag in sync steps: count_round, as run_scen counts them). */
static double time_to_worth(const char *spec, const scen_t *sc, double target) {
    gen_t g;
    ctl_policy_t *pol = scen_start(spec, sc, &g, NULL);
    uint32_t gsince[MAXP] = {0};
    double worth = 0, lag_sum = 0, t = 0;
    uint64_t lag_n = 0;
    for (uint64_t r = 0; r < 1000000 && worth < target; r++) {
        ctl_decision_t d;
        int k;
        const pcoll_record_t *rec = scen_step(pol, &g, &d, &k);
        count_round(rec, sc->P, gsince, 1, &worth, &lag_sum, &lag_n);
        t = rec->t_end;
    }
    ctl_policy_free(pol);
    gen_free(&g);
    return t;
}

/* A measurement never claims less error than it has, nor much more: over 300 draws of one
 * scenario, the first measurement of each level (the run's first probe; full-length ones only)
 * scatters about its mean by at most 1.6 times the root mean square of the standard errors it
 * claimed, and by at least a quarter of it. The claims are conservative (ratios 0.3-0.75, printed
 * with -v; the bound for the ranks' correlation in sync, and the lag-1 correction only); a claim
 * 4x too wide keeps a probe of a clearly worse level running for rounds the run pays for (the
 * errors of the previous rule, which summed the ranks' errors in every level and ignored the
 * negative correlation of a rank's consecutive cycles, read 0.18-0.21 for solo and sync). */
static void test_se(void) {
    const int draws = 300;
    const char *kname[2] = {"alike", "linear skew"};
    for (int kd = 0; kd < 2; kd++) {
        double sx[CTL_NLV] = {0}, sxx[CTL_NLV] = {0}, se2[CTL_NLV] = {0};
        int n[CTL_NLV] = {0};
        for (int seed = 1; seed <= draws; seed++) {
            scen_t sc = alike(4, 1);
            sc.seed = (uint64_t)seed;
            if (kd == 1)
                for (int p = 0; p < 4; p++) sc.period[p] = 1 + 0.5 * p;
            gen_t g;
            ctl_policy_cfg_t cfg;
            /* from solo: started in sync, the partial levels' probes end early against it */
            ctl_policy_t *pol = scen_start("adaptive,rule=rate,screen=off,start=solo", &sc, &g, &cfg);
            ctl_policy_stats_t st;
            for (uint64_t r = 0; r < 2000; r++) { /* until every level has its first measurement */
                ctl_decision_t d;
                int k;
                scen_step(pol, &g, &d, &k);
                ctl_policy_stats(pol, &st);
                if (st.samples[CTL_LV_SYNC] && st.samples[CTL_LV_MAJORITY] && st.samples[CTL_LV_LIGHT]) break;
            }
            for (int l = 0; l < 3; l++)
                if (st.samples[l] >= (uint64_t)cfg.window) {
                    sx[l] += st.score[l], sxx[l] += st.score[l] * st.score[l];
                    se2[l] += st.score_se[l] * st.score_se[l], n[l]++;
                }
            ctl_policy_free(pol);
            gen_free(&g);
        }
        for (int l = 0; l < 3; l++) {
            CHECK(n[l] >= 50, "%s %s: %d full first measurements in %d draws", kname[kd], lvname[l], n[l],
                  draws);
            if (n[l] < 2) continue;
            double mean = sx[l] / n[l], sd = sqrt((sxx[l] - n[l] * mean * mean) / (n[l] - 1)),
                   rms = sqrt(se2[l] / n[l]);
            if (verbose)
                printf("    %-11s %-8s: score %.4f, spread %.4f, claimed error %.4f (ratio %.2f, %d draws)\n",
                       kname[kd], lvname[l], mean, sd, rms, sd / rms, n[l]);
            CHECK(sd / rms <= 1.6,
                  "%s %s: measurements spread by %.4f, their standard errors claim %.4f (ratio %.2f)",
                  kname[kd], lvname[l], sd, rms, sd / rms);
            CHECK(sd / rms >= 0.25,
                  "%s %s: measurements spread by %.4f, their standard errors claim %.4f: %.1fx too wide",
                  kname[kd], lvname[l], sd, rms, rms / sd);
        }
    }
}

/* A short run: the cost of learning. A 2-epoch training run is about 100 sync steps; over one of
 * that length, adaptive (which spends its first part measuring every level) must reach the
 * progress of 100 sync steps (100 P fresh-gradient equivalents) in at most `bound` times what the
 * best static rule of the same draw takes, on average over 8 draws, in every regime. With -v it
 * also prints the cost at 50 sync steps, where a 2-epoch run's target falls (not checked). */
static double short_cost(const scen_t *base, int kind, int P, double steps, uint64_t seed) {
    scen_t s = *base;
    s.seed = seed;
    set_regime(&s, kind);
    double target = steps * P, best = 0;
    for (int l = 0; l < CTL_NLV; l++) {
        double t = time_to_worth(lvname[l], &s, target);
        if (l == 0 || t < best) best = t;
    }
    return time_to_worth("adaptive,rule=rate", &s, target) / best;
}

static void test_short(void) {
    const double bound = 1.15;
    struct {
        const char *name;
        int P, kind;
    } reg[] = {
        {"alike", 4, R_ALIKE},         {"straggler k=4", 4, R_STRAGGLER}, {"linear skew", 4, R_SKEW},
        {"log-normal 0.8", 4, R_LN08}, {"random straggler", 4, R_RANDOM}, {"alike", 8, R_ALIKE},
        {"linear skew", 8, R_SKEW},    {"random straggler", 8, R_RANDOM}, {"log-normal 0.3", 4, R_LN03},
        {"log-normal 0.3", 8, R_LN03}};
    for (size_t i = 0; i < sizeof reg / sizeof reg[0]; i++) {
        double sum = 0, worst = 0, sum50 = 0;
        int P = reg[i].P;
        scen_t base = alike(P, 1);
        for (uint64_t seed = 1; seed <= 8; seed++) {
            double ratio = short_cost(&base, reg[i].kind, P, 100, seed);
            sum += ratio;
            if (ratio > worst) worst = ratio;
            if (verbose) sum50 += short_cost(&base, reg[i].kind, P, 50, seed);
        }
        if (verbose)
            printf("    short run %-18s P=%d: adaptive's time to 100 sync steps of progress over the best "
                   "static's: mean %.3f, worst %.3f (8 draws); to 50 steps: mean %.3f\n",
                   reg[i].name, P, sum / 8, worst, sum50 / 8);
        CHECK(sum / 8 <= bound,
              "short run %s P=%d: adaptive takes %.2fx the best static's time (at most %.2fx)", reg[i].name,
              P, sum / 8, bound);
    }
}

/* Same records -> same decisions; staleness=bound takes the raw rate; the rule with no step times
 * keeps the start rule. */
static void test_variants(void) {
    scen_t s = alike(4, 1);
    s.period[3] = 1.6;
    outcome_t a, b, c;
    run_scen("adaptive,rule=rate", &s, 0, &a);
    run_scen("adaptive,rule=rate", &s, 0, &b);
    CHECK(a.L.n == b.L.n && a.switches == b.switches, "two runs of the same records differ");
    run_scen("adaptive,rule=rate,staleness=bound", &s, 0, &c);
    CHECK(main_level(&c) == CTL_LV_LIGHT, "staleness=bound: mostly %s, not the fastest (solo)",
          lvname[main_level(&c)]);
    free(a.L.d);
    free(b.L.d);
    free(c.L.d);
    /* without step times the rule cannot measure: it keeps the start rule and decides nothing */
    ctl_policy_t *pol = mk_worth("adaptive,rule=rate", 4, NULL);
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    gen_t g;
    gen_init(&g, 4, 5, &init);
    for (int p = 0; p < 4; p++) g.period[p] = 1 + p;
    sim_start(&g, 0.1, 0.01);
    declog_t L = {0};
    run_loop(&g, pol, 2000, &L);
    CHECK(L.n == 0, "no step times: %d decisions", L.n);
    ctl_policy_free(pol);
    gen_free(&g);
    free(L.d);
}

/* What ctl_policy_stats reports of the rate rule (the trainer writes it into each epoch's JSON):
 * per measured level a finite rate, lag, score and standard error with the gradients behind the
 * score (at least 2 per rank; more than one measurement's worth once the choice has been confirmed
 * and pooled), the rounds run per level and the switches and probes as the decisions counted them,
 * the chosen level one of the levels; and a policy resumed from the carried state (ctl_state_t, as
 * the trainer's next epoch) reports the same measurements. One rank 4x slower, P = 4. */
static void test_stats(void) {
    const int P = 4;
    scen_t sc = alike(P, 1);
    sc.period[P - 1] = 4;
    sc.seed = 7;
    ctl_policy_cfg_t cfg;
    gen_t g;
    ctl_policy_t *pol = scen_start("adaptive,rule=rate,window=32,screen=off", &sc, &g, &cfg);
    uint64_t ran[3] = {0}, switches = 0, probes = 0;
    for (uint64_t r = 0; r < 6000; r++) {
        ctl_decision_t d;
        int k;
        const pcoll_record_t *rec = scen_step(pol, &g, &d, &k);
        if (k) {
            switches += (d.what & CTL_DEC_MODE) != 0;
            probes += (d.what & CTL_DEC_PROBE) != 0;
        }
        ran[mode_level(rec->mode)]++;
    }
    ctl_policy_stats_t st;
    ctl_policy_stats(pol, &st);
    CHECK(st.mode_switches == switches && st.probes == probes,
          "stats: %llu switches %llu probes, counted %llu %llu", (unsigned long long)st.mode_switches,
          (unsigned long long)st.probes, (unsigned long long)switches, (unsigned long long)probes);
    CHECK(switches >= 2 && probes >= 2, "too few switches (%llu) or probes (%llu) to check the counts",
          (unsigned long long)switches, (unsigned long long)probes);
    for (int l = 0; l < 3; l++) {
        CHECK(st.lv_rounds[l] == ran[l], "%s: stats say %llu rounds, the records %llu", lvname[l],
              (unsigned long long)st.lv_rounds[l], (unsigned long long)ran[l]);
        CHECK(isfinite(st.rate[l]) && st.rate[l] > 0 && isfinite(st.lag[l]) && st.lag[l] >= 0 &&
                  isfinite(st.score[l]) && st.score[l] > 0 && isfinite(st.score_se[l]) && st.score_se[l] >= 0,
              "%s: rate %g lag %g score %g +- %g", lvname[l], st.rate[l], st.lag[l], st.score[l],
              st.score_se[l]);
        CHECK(st.samples[l] >= (uint64_t)(2 * P), "%s: %llu gradients behind its score", lvname[l],
              (unsigned long long)st.samples[l]);
    }
    CHECK(st.choice >= 0 && st.choice < CTL_NLV && !st.probing, "choice %d, probing %d", st.choice,
          st.probing);
    if (st.choice >= 0 && st.choice < CTL_NLV)
        CHECK(st.samples[st.choice] > (uint64_t)cfg.window,
              "chosen %s: %llu gradients, no more than one window", lvname[st.choice],
              (unsigned long long)st.samples[st.choice]);
    ctl_state_t *cs = ctl_policy_state(pol);
    char err[256] = "";
    ctl_policy_t *res = cs ? ctl_policy_resume(&cfg, P, cs, err, sizeof err) : NULL;
    CHECK(res != NULL, "resume: %s", err);
    if (res) {
        ctl_policy_stats_t rs;
        ctl_policy_stats(res, &rs);
        CHECK(!memcmp(rs.rate, st.rate, sizeof st.rate) && !memcmp(rs.lag, st.lag, sizeof st.lag) &&
                  !memcmp(rs.score, st.score, sizeof st.score) &&
                  !memcmp(rs.score_se, st.score_se, sizeof st.score_se) &&
                  !memcmp(rs.samples, st.samples, sizeof st.samples) && rs.choice == st.choice &&
                  rs.probing == st.probing && rs.mode == st.mode,
              "the resumed policy reports other measurements than the one it continues");
        CHECK(rs.rounds == 0 &&
                  rs.lv_rounds[CTL_LV_SYNC] + rs.lv_rounds[CTL_LV_MAJORITY] + rs.lv_rounds[CTL_LV_LIGHT] ==
                      0 &&
                  rs.mode_switches == 0,
              "a resumed policy's per-handle counts do not start at 0");
    }
    ctl_policy_free(res);
    /* an elastic resume on 3 ranks (ctl_state_resize): the chosen level is kept as the level in
     * force, the pools are dropped and every other level is probed again, and the resumed policy
     * settles on a choice on the new world size; on the same P the copy reports the same numbers */
    ctl_state_t *same = ctl_state_resize(cs, P), *three = ctl_state_resize(cs, P - 1);
    CHECK(same && three, "ctl_state_resize returned NULL");
    ctl_policy_t *rs = same ? ctl_policy_resume(&cfg, P, same, err, sizeof err) : NULL;
    if (rs) {
        ctl_policy_stats_t a;
        ctl_policy_stats(rs, &a);
        CHECK(!memcmp(a.score, st.score, sizeof st.score) && a.choice == st.choice && a.mode == st.mode,
              "resize to the same P changed what the policy reports");
    }
    ctl_policy_free(rs);
    ctl_policy_cfg_t c3 = cfg;
    ctl_policy_t *p3 = three ? ctl_policy_resume(&c3, P - 1, three, err, sizeof err) : NULL;
    CHECK(p3 != NULL, "resume on %d ranks: %s", P - 1, err);
    if (p3) {
        ctl_policy_stats_t a;
        ctl_policy_stats(p3, &a);
        CHECK(a.probing && a.mode == st.mode, "resized: probing %d, mode %d (before: %d)", a.probing, a.mode,
              st.mode);
        for (int l = 0; l < 3; l++)
            CHECK(a.samples[l] == 0 && !isfinite(a.score[l]), "resized: %s keeps a pooled score", lvname[l]);
        scen_t s3 = alike(P - 1, 1);
        s3.period[P - 2] = 4;
        s3.seed = 9;
        gen_t g3;
        scen_gen(p3, &s3, &g3);
        for (uint64_t r = 0; r < 3000; r++) {
            ctl_decision_t d;
            int k;
            scen_step(p3, &g3, &d, &k);
        }
        ctl_policy_stats(p3, &a);
        CHECK(a.choices >= 1 && a.choice != CTL_LV_SYNC,
              "resized to %d ranks, one 4x slower: %llu choices, choice %d", P - 1,
              (unsigned long long)a.choices, a.choice);
        gen_free(&g3);
    }
    ctl_policy_free(p3);
    ctl_state_free(same);
    ctl_state_free(three);
    ctl_state_free(cs);
    ctl_policy_free(pol);
    gen_free(&g);
}

/* worth=measured on the mock: the ranks report a training loss whose log falls by A per fresh
 * gradient of lag 0 and by A x `stale` per stale one (lag > 0), plus noise of sd 0.01 (the
 * mock's batches). Linear skew at P = 4 (periods 1..4): partial rounds deliver 1.6-2x sync's
 * gradients per second, so a level's worth decides: with stale = 1 a stale gradient is worth a
 * fresh one and a partial level should run; with stale = 0.05 it is nearly worthless and sync
 * should (stale < 0: no losses reported). Returns the share of the simulated time after the first
 * 1,000 rounds spent in sync. */
static double worth_sync_share(const char *spec, double stale, uint64_t seed) {
    scen_t sc = alike(4, 1);
    set_regime(&sc, R_SKEW);
    sc.seed = seed;
    sc.N = 5000;
    gen_t g;
    ctl_policy_t *pol = scen_start(spec, &sc, &g, NULL);
    float loss[MAXP], samples[MAXP];
    if (stale >= 0) g.rec.loss = loss, g.rec.samples = samples; /* stale < 0: no losses reported */
    const double A = 1e-3;
    double ll = 0, t_prev = 0, t_sync = 0, t_all = 0;
    uint32_t gsince[MAXP] = {0};
    for (uint64_t r = 0; r < sc.N; r++) {
        /* the losses the next round's deposits carry: computed on the weights before it */
        for (int p = 0; p < sc.P; p++) {
            const double u1 = u01(seed, r, 7000 + p), u2 = u01(seed, r, 8000 + p),
                         z = sqrt(-2 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2);
            loss[p] = (float)exp(ll + 0.01 * z);
            samples[p] = 32;
        }
        ctl_decision_t d;
        int k;
        const pcoll_record_t *rec = scen_step(pol, &g, &d, &k);
        uint32_t nf = 0;
        for (int p = 0; p < sc.P; p++) nf += rec->fresh[p];
        for (int p = 0; p < sc.P; p++) {
            if (rec->fresh[p]) ll -= A * (gsince[p] ? stale : 1);
            gsince[p] = rec->fresh[p] ? 0 : gsince[p] + nf;
        }
        if (r >= 1000) {
            t_all += rec->t_end - t_prev;
            if (rec->mode == PCOLL_SYNC) t_sync += rec->t_end - t_prev;
        }
        t_prev = rec->t_end;
    }
    g.rec.loss = g.rec.samples = NULL;
    ctl_policy_free(pol);
    gen_free(&g);
    return t_all > 0 ? t_sync / t_all : 0;
}

/* worth=measured follows what the losses say a stale gradient is worth, where worth=assumed
 * (1/(1+lag)) runs a partial level either way: stale gradients worth a fresh one -> mostly
 * partial; nearly worthless -> mostly sync (3 seeds each). The second fails under worth=assumed
 * (checked: it runs sync 0-2% of the time there), and the measured rule without the losses keeps
 * its start level (sync) throughout. */
static void test_worth(void) {
    for (uint64_t seed = 1; seed <= 3; seed++) {
        const double free_ = worth_sync_share("adaptive,worth=measured", 1, seed),
                     dear = worth_sync_share("adaptive,worth=measured", 0.05, seed),
                     assumed = worth_sync_share("adaptive", 0.05, seed);
        if (verbose)
            printf("  worth seed %llu: sync share, stale worth 1: %.2f; 0.05: %.2f (assumed: %.2f)\n",
                   (unsigned long long)seed, free_, dear, assumed);
        CHECK(free_ < 0.2, "seed %llu: stale gradients worth fresh ones, yet sync %.2f of the time",
              (unsigned long long)seed, free_);
        CHECK(dear > 0.8, "seed %llu: stale gradients worth 0.05, yet sync only %.2f of the time",
              (unsigned long long)seed, dear);
        const double none = worth_sync_share("adaptive,worth=measured", -1, seed);
        CHECK(none == 1, "seed %llu: no losses reported, yet out of sync %.2f of the time",
              (unsigned long long)seed, 1 - none);
    }
}

#endif
