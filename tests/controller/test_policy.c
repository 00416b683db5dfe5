/* test_policy.c -- unit tests of the controller policy (controller/policy.c) on synthetic traces.
 *
 * Two trace generators, both closed-loop: they apply the rules the policy decides, at the rounds
 * the decisions take effect, so the records look like what libpcoll would produce:
 *   - gen (probabilistic): per round, rank p is fresh with probability q(phase, p) (seeded hash
 *     of (seed, round, rank)); the rule in force forces ranks fresh (sync: all; majority: the
 *     initiator; quorum: Q; wait set; library tau: streak >= tau).
 *   - sim (event time): rank p computes steps of period base_p * (1 +- jitter), deposits, and its
 *     deposit is consumed by the first round that starts once it is pending (eager-SGD with
 *     PCOLL_WAIT_CONSUMED); a round starts when its rule holds and takes `lat` time.
 * Usage: test_policy [-v]
 */
#include "tests/controller/trace.h"

/* ================================================================== tests */

static void test_parse(void) {
    ctl_policy_cfg_t c, d;
    char err[512], buf[1024];
    CHECK(ctl_policy_parse("adaptive", &c, err, sizeof err) == CTL_OK, "%s", err);
    CHECK(c.kind == CTL_ADAPTIVE && c.base.mode == PCOLL_SYNC && c.lag == 2 && c.window == 32 && c.tau == 0,
          "adaptive defaults kind=%d mode=%d lag=%d window=%d", c.kind, c.base.mode, c.lag, c.window);
    /* rule=rate starts in sync, rule=thresholds in solo, unless start= says otherwise */
    CHECK(ctl_policy_parse("adaptive,rule=thresholds", &c, err, sizeof err) == CTL_OK &&
              c.base.mode == PCOLL_SOLO,
          "adaptive,rule=thresholds starts in mode %d, not solo", c.base.mode);
    CHECK(ctl_policy_parse("adaptive,start=solo", &c, err, sizeof err) == CTL_OK && c.base.mode == PCOLL_SOLO,
          "adaptive,start=solo starts in mode %d", c.base.mode);
    CHECK(ctl_policy_parse("adaptive,start=quorum:2", &c, err, sizeof err) == CTL_OK &&
              c.base.mode == PCOLL_QUORUM && c.base.quorum == 2,
          "adaptive,start=quorum:2 starts in mode %d", c.base.mode);
    CHECK(ctl_policy_parse("quorum:3", &c, err, sizeof err) == CTL_OK && c.kind == CTL_STATIC &&
              c.base.mode == PCOLL_QUORUM && c.base.quorum == 3,
          "quorum:3 -> mode %d q %d", c.base.mode, c.base.quorum);
    CHECK(ctl_policy_parse("majority", &c, err, sizeof err) == CTL_OK && c.base.mode == PCOLL_MAJORITY,
          "majority");
    CHECK(ctl_policy_parse("sync", &c, err, sizeof err) == CTL_OK && c.base.mode == PCOLL_SYNC, "sync");
    CHECK(ctl_policy_parse("solo,tau=6", &c, err, sizeof err) == CTL_OK && c.base.mode == PCOLL_SOLO &&
              c.tau == 6,
          "solo,tau=6");
    const char *full = "adaptive,start=quorum:2,tau=8,tau_by=policy,lag=3,window=16,dwell=20,max_dwell=400,"
                       "maj_enter=3.5,maj_exit=1.25,wait_enter=0.2,wait_exit=0.05,sync_fresh=0.1,"
                       "sync_streak=7,sync_wait=0.6,probe=100,probe_max=800";
    CHECK(ctl_policy_parse(full, &c, err, sizeof err) == CTL_OK, "%s", err);
    CHECK(c.base.mode == PCOLL_QUORUM && c.base.quorum == 2 && c.tau == 8 && c.tau_by == CTL_TAU_POLICY &&
              c.lag == 3 && c.window == 16 && c.min_dwell == 20 && c.max_dwell == 400 && c.maj_enter == 3.5 &&
              c.maj_exit == 1.25 && c.wait_enter == 0.2 && c.wait_exit == 0.05 && c.sync_fresh == 0.1 &&
              c.sync_streak == 7 && c.sync_wait == 0.6 && c.sync_probe == 100 && c.probe_max == 800,
          "full option set not applied");
    ctl_policy_format(&c, buf, sizeof buf);
    CHECK(ctl_policy_parse(buf, &d, err, sizeof err) == CTL_OK && !memcmp(&c, &d, sizeof c),
          "format/parse round trip: '%s' (%s)", buf, err);

    struct {
        const char *s, *must1, *must2;
    } bad[] = {
        {"adaptive,foo=1", "unknown option 'foo'", "adaptive,foo=1"},
        {"adaptive,window=abc", "'abc'", "'window'"},
        {"adaptive,window=0", "'0'", "'window'"},
        {"adaptive,tau=-1", "'-1'", "'tau'"},
        {"adaptive,tau_by=lib", "'lib'", "'tau_by'"},
        {"adaptive,maj_enter=x1", "'x1'", "'maj_enter'"},
        {"adaptive,lag", "'lag'", "no value"},
        {"bogus", "unknown policy 'bogus'", "quorum:Q"},
        {"quorum:0", "'quorum:0'", "Q >= 1"},
        {"quorum:2x", "'quorum:2x'", "unknown policy"},
        {"solo,start=sync", "'start'", "only for adaptive"},
        {"adaptive,start=fast", "'fast'", "'start'"},
        {"adaptive,maj_exit=5", "maj_exit", "maj_enter"},
        {"adaptive,tau=1,tau_by=policy", "tau_by=policy needs tau >= lag", "tau=1"},
        {"adaptive,probe=100,probe_max=50", "probe_max=50", "probe=100"},
        {"", "empty policy", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int rc = ctl_policy_parse(bad[i].s, &c, err, sizeof err);
        CHECK(rc == CTL_ERR_ARG, "'%s' accepted (rc %d)", bad[i].s, rc);
        CHECK(strstr(err, bad[i].must1) && strstr(err, bad[i].must2), "'%s': message '%s' lacks '%s' / '%s'",
              bad[i].s, err, bad[i].must1, bad[i].must2);
        if (verbose) printf("    %-36s -> %s\n", bad[i].s, err);
    }
    ctl_policy_default(&c);
    CHECK(ctl_policy_new(&c, 0) == NULL, "P=0 accepted");
    c.window = 0;
    CHECK(ctl_policy_new(&c, 4) == NULL, "window=0 accepted by ctl_policy_new");
}

/* Light imbalance in event time (periodic ranks, +-15% jitter, P=8 and 32): stays solo. */
static void test_light_stays_solo(void) {
    int Ps[] = {8, 32};
    for (int k = 0; k < 2; k++) {
        int P = Ps[k];
        ctl_policy_cfg_t cfg;
        ctl_policy_t *pol = mk("adaptive,rule=thresholds", P, &cfg);
        pcoll_rule_t init;
        ctl_policy_initial(pol, &init);
        CHECK(init.mode == PCOLL_SOLO, "adaptive starts in %d", init.mode);
        gen_t g;
        gen_init(&g, P, 11 + k, &init);
        for (int p = 0; p < P; p++) g.period[p] = 1.0 + 0.05 * (p % 3);
        sim_start(&g, 0.15, 0.01);
        declog_t L = {0};
        run_loop(&g, pol, 6000, &L);
        ctl_policy_stats_t st;
        ctl_policy_stats(pol, &st);
        if (verbose) printf("    P=%d light: L=%.2f F=%.3f max streak %u\n", P, st.L, st.F, st.max_streak);
        CHECK(L.n == 0, "P=%d light imbalance made %d decisions (first: %s)", P, L.n,
              L.n ? L.d[0].reason : "");
        CHECK(st.mode == PCOLL_SOLO && st.L < cfg.maj_enter, "P=%d mode %d L=%.2f", P, st.mode, st.L);
        CHECK(st.max_streak >= 2, "P=%d: solo should have streaks (rounds are frequent), max %u", P,
              st.max_streak);
        ctl_policy_free(pol);
        gen_free(&g);
    }
    /* and the probabilistic model with moderate, uniform participation */
    phases_t ph = {1, {{UINT64_MAX, 0.35, 0, {0}, 0}}};
    declog_t L = {0};
    ctl_policy_t *pol = run_phases("adaptive,rule=thresholds", 8, 5, &ph, 5000, &L);
    CHECK(L.n == 0, "uniform q=0.35 made %d decisions (first: %s)", L.n, L.n ? L.d[0].reason : "");
    ctl_policy_free(pol);
    free(L.d);
}

/* One rank k times slower in event time: k=8 goes to majority, and a late-onset slowdown is caught. */
static void test_growing_streaks_to_majority(void) {
    /* (a) probabilistic: healthy for 600 rounds, then ranks 6,7 almost never fresh */
    ctl_policy_cfg_t cfg;
    ctl_policy_t *pol = mk("adaptive,rule=thresholds", 8, &cfg);
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    phases_t ph = {2, {{600, 0.4, 0, {0}, 0}, {UINT64_MAX, 0.4, 2, {6, 7}, 0.01}}};
    gen_t g;
    gen_init(&g, 8, 21, &init);
    g.q = q_phases;
    g.qarg = &ph;
    declog_t L = {0};
    run_loop(&g, pol, 2000, &L);
    CHECK(L.n >= 1, "no decision after streaks grew");
    if (L.n >= 1) {
        dec_t *d = &L.d[0];
        CHECK(d->from == PCOLL_SOLO && d->to == PCOLL_MAJORITY, "first switch %d -> %d (%s)", d->from, d->to,
              d->reason);
        CHECK(d->round >= 600 && d->round <= 600 + 2 * (uint64_t)cfg.window,
              "first switch at round %llu (onset 600)", (unsigned long long)d->round);
        CHECK(strstr(d->reason, "maj_enter") && strstr(d->reason, "solo -> majority"), "reason '%s'",
              d->reason);
    }
    for (int i = 0; i < L.n; i++)
        CHECK(L.d[i].to != PCOLL_SOLO, "went back to solo while ranks 6,7 stay slow (%s)", L.d[i].reason);
    ctl_policy_free(pol);
    gen_free(&g);
    free(L.d);

    /* (b) event time: rank 0 ten times slower than the others */
    pol = mk("adaptive,rule=thresholds", 8, &cfg);
    gen_init(&g, 8, 3, &init);
    for (int p = 0; p < 8; p++) g.period[p] = p == 0 ? 10.0 : 1.0;
    sim_start(&g, 0.1, 0.01);
    declog_t L2 = {0};
    run_loop(&g, pol, 3000, &L2);
    CHECK(L2.n >= 1 && L2.d[0].to == PCOLL_MAJORITY && L2.d[0].round < 200,
          "10x slow rank: first decision %s at %llu", L2.n ? L2.d[0].reason : "(none)",
          L2.n ? (unsigned long long)L2.d[0].round : 0ULL);
    ctl_policy_free(pol);
    gen_free(&g);
    free(L2.d);
}

/* Library-enforced tau: the policy computes the wait set the library applies, and checks it. */
static void test_tau_library(void) {
    const int P = 8, tau = 4;
    ctl_policy_t *pol = mk("solo,tau=4", P, NULL);
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    phases_t ph = {1, {{UINT64_MAX, 0.5, 1, {3}, 0.0}}}; /* rank 3 never fresh on its own */
    gen_t g;
    gen_init(&g, P, 31, &init);
    g.q = q_phases;
    g.qarg = &ph;
    g.lib_tau = tau;
    int n_wait3 = 0, n_other = 0, n_exact = 0;
    const int N = 1000;
    for (int i = 0; i < N; i++) {
        const pcoll_record_t *rec = gen_next(&g);
        uint32_t s3 = rec->streak[3];
        ctl_decision_t d;
        CHECK(ctl_policy_observe(pol, rec, &d) == 0, "static solo with library tau made a decision");
        int w[MAXP];
        uint64_t wr;
        int nw = ctl_policy_tau_wait(pol, &wr, w, MAXP);
        CHECK(wr == rec->round + 1, "tau wait set for round %llu, expected %llu", (unsigned long long)wr,
              (unsigned long long)rec->round + 1);
        int has3 = 0;
        for (int k = 0; k < nw; k++) {
            if (w[k] == 3)
                has3 = 1;
            else
                n_other++;
        }
        CHECK(has3 == (s3 >= (uint32_t)tau), "round %llu: streak_3=%u, rank 3 in tau wait set: %d",
              (unsigned long long)rec->round, s3, has3);
        n_wait3 += has3;
        n_exact += has3 && s3 == (uint32_t)tau;
    }
    ctl_policy_stats_t st;
    ctl_policy_stats(pol, &st);
    CHECK(n_wait3 >= N / (tau + 1) - 2 && n_wait3 <= N / (tau + 1) + 2,
          "rank 3 waited %d times in %d rounds (tau %d)", n_wait3, N, tau);
    CHECK(n_exact == n_wait3, "rank 3 put in the wait set with streak != tau (%d of %d)", n_wait3 - n_exact,
          n_wait3);
    CHECK(st.max_streak == (uint32_t)tau, "max streak %u, tau %d", st.max_streak, tau);
    CHECK(st.tau_violations == 0 && st.tau_misses == 0, "violations %llu misses %llu",
          (unsigned long long)st.tau_violations, (unsigned long long)st.tau_misses);
    CHECK(st.tau_waits == (uint64_t)(n_wait3 + n_other), "tau_waits %llu", (unsigned long long)st.tau_waits);
    ctl_policy_free(pol);
    gen_free(&g);

    /* the check can fail: a "library" that does not enforce tau is caught */
    pol = mk("solo,tau=4", P, NULL);
    gen_init(&g, P, 31, &init);
    g.q = q_phases;
    g.qarg = &ph;
    for (int i = 0; i < 200; i++) ctl_policy_observe(pol, gen_next(&g), NULL);
    ctl_policy_stats(pol, &st);
    CHECK(st.tau_violations > 0 && st.tau_misses > 0, "unenforced tau not detected (viol %llu, miss %llu)",
          (unsigned long long)st.tau_violations, (unsigned long long)st.tau_misses);
    ctl_policy_free(pol);
    gen_free(&g);

    /* adaptive with tau: a rank that keeps hitting tau raises T and moves the policy to majority */
    ctl_policy_cfg_t cfg;
    pol = mk("adaptive,rule=thresholds,tau=4", P, &cfg);
    gen_init(&g, P, 32, &init);
    g.q = q_phases;
    g.qarg = &ph;
    g.lib_tau = tau;
    declog_t L = {0};
    run_loop(&g, pol, 400, &L);
    CHECK(L.n >= 1 && L.d[0].to == PCOLL_MAJORITY && L.d[0].round < 40 && strstr(L.d[0].reason, "maj_enter"),
          "adaptive,rule=thresholds,tau=4 with a permanently slow rank: first decision '%s'",
          L.n ? L.d[0].reason : "(none)");
    CHECK(L.max_streak <= (uint32_t)tau, "max streak %u > tau", L.max_streak);
    ctl_policy_free(pol);
    gen_free(&g);
    free(L.d);
    /* the T path alone (L threshold out of reach): T >= 1/(tau+1) = 0.2 (slow rank) plus fast ranks
     * that happen to reach tau */
    pol = mk("adaptive,rule=thresholds,tau=4,maj_enter=1e9", P, &cfg);
    gen_init(&g, P, 32, &init);
    g.q = q_phases;
    g.qarg = &ph;
    g.lib_tau = tau;
    declog_t L2 = {0};
    run_loop(&g, pol, 400, &L2);
    CHECK(L2.n >= 1 && L2.d[0].to == PCOLL_MAJORITY && L2.d[0].round < 40 &&
              strstr(L2.d[0].reason, "wait_enter"),
          "T path: first decision '%s'", L2.n ? L2.d[0].reason : "(none)");
    CHECK(L2.n >= 1 && L2.d[0].T >= 0.1 && L2.d[0].T <= 0.6, "T path: T=%g", L2.n ? L2.d[0].T : -1.0);
    ctl_policy_free(pol);
    gen_free(&g);
    free(L2.d);
}

/* Policy-enforced tau: decisions put the slow rank in the wait set lag rounds ahead. */
static void test_tau_policy(void) {
    const int P = 8;
    int taus[] = {4, 3, 6, 5, 8}, lags[] = {2, 3, 1, 5, 3};
    for (int t = 0; t < 5; t++) {
        int tau = taus[t], lag = lags[t];
        char spec[96];
        snprintf(spec, sizeof spec, "solo,tau=%d,tau_by=policy,lag=%d", tau, lag);
        ctl_policy_t *pol = mk(spec, P, NULL);
        pcoll_rule_t init;
        ctl_policy_initial(pol, &init);
        const double q = 0.8; /* the fast ranks; ranks 3, 5 are never fresh unless waited for */
        phases_t ph = {1, {{UINT64_MAX, q, 2, {3, 5}, 0.0}}};
        gen_t g;
        gen_init(&g, P, 41 + t, &init);
        g.q = q_phases;
        g.qarg = &ph;
        declog_t L = {0};
        const int N = 1200;
        run_loop(&g, pol, N, &L);
        CHECK(L.max_streak <= (uint32_t)tau, "%s: max streak %u > tau", spec, L.max_streak);
        CHECK(L.max_streak == (uint32_t)tau, "%s: max streak %u: waits come earlier than needed", spec,
              L.max_streak);
        int adds = 0, fast = 0;
        for (int i = 0; i < L.n; i++) {
            CHECK(L.d[i].what == CTL_DEC_WAIT && L.d[i].to == PCOLL_SOLO, "%s: decision %d what=%d", spec, i,
                  L.d[i].what);
            for (int k = 0; k < L.d[i].nwait; k++) {
                if (L.d[i].wait[k] == 3 || L.d[i].wait[k] == 5)
                    adds++;
                else
                    fast++;
            }
        }
        /* each slow rank exactly once every tau+1 rounds (when its streak would reach tau), not
         * more; a fast rank only when its own streak reaches tau-lag+1 (probability (1-q)^thr) */
        int expect = 2 * N / (tau + 1), thr = tau - lag + 1;
        double fast_expect = 6.0 * N * pow(1 - q, thr) * q;
        CHECK(adds >= expect - 4 && adds <= expect + 4, "%s: slow ranks waited %d times, expected ~%d", spec,
              adds, expect);
        CHECK(fast <= 1.5 * fast_expect + 5, "%s: fast ranks waited %d times, expected ~%.0f", spec, fast,
              fast_expect);
        if (verbose)
            printf("    %s: slow waits %d (~%d), fast waits %d (~%.0f), decisions %d\n", spec, adds, expect,
                   fast, fast_expect, L.n);
        ctl_policy_stats_t st;
        ctl_policy_stats(pol, &st);
        CHECK(st.tau_violations == 0 && st.mode_switches == 0, "%s: violations %llu switches %llu", spec,
              (unsigned long long)st.tau_violations, (unsigned long long)st.mode_switches);
        if (L.n) CHECK(strstr(L.d[0].reason, "wait for"), "%s: reason '%s'", spec, L.d[0].reason);
        ctl_policy_free(pol);
        gen_free(&g);
        free(L.d);
    }
}

/* Heavy imbalance: solo -> majority -> sync; probes fail while it lasts (backoff); it clears ->
 * majority -> solo. */
static void test_sync_and_back(void) {
    const int P = 8;
    ctl_policy_cfg_t cfg;
    ctl_policy_t *pol = mk("adaptive,rule=thresholds", P, &cfg);
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    phases_t ph = {
        3, {{300, 0.5, 0, {0}, 0}, {1800, 0.1, 4, {0, 1, 2, 3}, 0.005}, {UINT64_MAX, 0.9, 0, {0}, 0}}};
    gen_t g;
    gen_init(&g, P, 51, &init);
    g.q = q_phases;
    g.qarg = &ph;
    declog_t L = {0};
    const int N = 5000;
    run_loop(&g, pol, N, &L);
    ctl_policy_stats_t st;
    ctl_policy_stats(pol, &st);
    CHECK(L.n >= 4, "only %d decisions", L.n);
    if (L.n >= 2) {
        CHECK(L.d[0].from == PCOLL_SOLO && L.d[0].to == PCOLL_MAJORITY && L.d[0].round >= 300 &&
                  L.d[0].round < 380,
              "first: %s at %llu", L.d[0].reason, (unsigned long long)L.d[0].round);
        CHECK(L.d[1].from == PCOLL_MAJORITY && L.d[1].to == PCOLL_SYNC && L.d[1].round < 460 &&
                  strstr(L.d[1].reason, "sync_fresh"),
              "second: %s at %llu", L.d[1].reason, (unsigned long long)L.d[1].round);
    }
    int back_to_sync_after_clear = 0, saw_probe_fail = 0;
    uint64_t last_sync_exit = 0;
    for (int i = 0; i < L.n; i++) {
        dec_t *d = &L.d[i];
        if (d->from == PCOLL_SYNC) {
            CHECK(d->to == PCOLL_MAJORITY && (d->what & CTL_DEC_PROBE), "sync left by a non-probe: %s",
                  d->reason);
            last_sync_exit = d->eff;
        }
        if (d->to == PCOLL_SYNC && d->eff > 1800 + 2 * (uint64_t)cfg.window) back_to_sync_after_clear = 1;
        if (d->to == PCOLL_SYNC && i >= 2) saw_probe_fail = 1;
    }
    CHECK(saw_probe_fail && st.probe_failures >= 1, "no failed probe during the heavy phase (%llu)",
          (unsigned long long)st.probe_failures);
    CHECK(st.probes >= 2, "probes %llu", (unsigned long long)st.probes);
    CHECK(!back_to_sync_after_clear, "went back to sync after imbalance cleared");
    CHECK(last_sync_exit >= 1800 && last_sync_exit <= 1800 + (uint64_t)cfg.probe_max,
          "last sync exit at %llu (clears at 1800)", (unsigned long long)last_sync_exit);
    CHECK(st.mode == PCOLL_SOLO, "final mode %d (expected solo)", st.mode);
    CHECK(L.n && L.d[L.n - 1].to == PCOLL_SOLO && strstr(L.d[L.n - 1].reason, "maj_exit"),
          "last decision '%s'", L.n ? L.d[L.n - 1].reason : "");
    /* backoff: probe intervals during the heavy phase double */
    uint64_t prev_gap = 0;
    int doubling = 1;
    for (int i = 1; i < L.n; i++) {
        if (!(L.d[i].what & CTL_DEC_PROBE) || L.d[i].eff > 1800) continue;
        uint64_t entered = 0;
        for (int j = i - 1; j >= 0; j--)
            if (L.d[j].to == PCOLL_SYNC) {
                entered = L.d[j].eff;
                break;
            }
        uint64_t gap = L.d[i].round + 1 - entered;
        if (prev_gap && gap != 2 * prev_gap) doubling = 0;
        prev_gap = gap;
    }
    CHECK(doubling && prev_gap >= 2 * (uint64_t)cfg.sync_probe, "probe intervals do not double (last %llu)",
          (unsigned long long)prev_gap);
    ctl_policy_free(pol);
    gen_free(&g);
    free(L.d);
}

/* Hand-made records, P=4: ranks 1..3 fresh every round, rank 0 fresh every k-th round, so its
 * streak cycles 0..k-1 and L = (k-1)/2 * (3 + 1/k)/4. k alternates between kA and kB in blocks of
 * H rounds. */
static int run_square(const char *spec, int H, int kA, int kB, int N, declog_t *L) {
    const int P = 4;
    ctl_policy_t *pol = mk(spec, P, NULL);
    pcoll_record_t rec = {.fresh = calloc(P, 1),
                          .flags = calloc(P, 1),
                          .streak = calloc(P, 4),
                          .waited = calloc(P, 1),
                          .staleness = calloc(P, 4)};
    uint32_t s0 = 0;
    for (int r = 0; r < N; r++) {
        int k = (r / H) % 2 ? kB : kA;
        int f0 = s0 + 1 >= (uint32_t)k;
        s0 = f0 ? 0 : s0 + 1;
        rec.round = r;
        rec.P = P;
        rec.nactive = P;
        rec.nfresh = P - 1 + f0;
        rec.mode = PCOLL_SOLO;
        rec.initiator = -1;
        for (int p = 0; p < P; p++) {
            rec.fresh[p] = p ? 1 : (uint8_t)f0;
            rec.streak[p] = p ? 0 : s0;
        }
        ctl_decision_t d;
        if (ctl_policy_observe(pol, &rec, &d) == 1) declog_add(L, &d);
    }
    free(rec.fresh);
    free(rec.flags);
    free(rec.streak);
    free(rec.waited);
    free(rec.staleness);
    ctl_policy_free(pol);
    return count_mode(L);
}

static void test_hysteresis(void) {
    /* L alternates ~5.4 / ~0.8 in blocks of 40 rounds: every block crosses both thresholds */
    const int N = 6000;
    declog_t A = {0}, B = {0}, C = {0};
    int n_guard = run_square("adaptive,rule=thresholds", 40, 15, 3, N, &A);
    int n_none = run_square("adaptive,rule=thresholds,window=1,dwell=1,max_dwell=1", 40, 15, 3, N, &B);
    if (verbose) printf("    square wave: %d switches with guards, %d without\n", n_guard, n_none);
    CHECK(n_none >= 50, "without dwell/window the trace should flap (%d switches)", n_none);
    /* dwell 32, 64, ... 1024 after quick reversals: <= ~6 switches to reach the cap, then one per
     * 1024 rounds at most */
    CHECK(n_guard >= 3 && n_guard <= 12, "with hysteresis: %d switches in %d rounds", n_guard, N);
    uint64_t maxgap = 0;
    for (int i = 1; i < A.n; i++) {
        uint64_t gap = A.d[i].eff - A.d[i - 1].eff;
        if (verbose) printf("    gap %llu: %s\n", (unsigned long long)gap, A.d[i].reason);
        CHECK(gap >= 32, "switches %d and %d only %llu rounds apart", i - 1, i, (unsigned long long)gap);
        if (gap > maxgap) maxgap = gap;
    }
    CHECK(maxgap >= 512, "dwell never backed off (longest gap %llu)", (unsigned long long)maxgap);
    /* L alternates ~5.4 / ~3.1 around maj_enter but never below maj_exit: one switch, no return */
    int n_mild = run_square("adaptive,rule=thresholds", 40, 15, 9, N, &C);
    CHECK(n_mild == 1 && C.d[0].to == PCOLL_MAJORITY, "mild oscillation: %d switches", n_mild);
    free(A.d);
    free(B.d);
    free(C.d);
}

/* Same history -> same decisions and hash; local fields do not matter; order is enforced. */
static void test_determinism(void) {
    const int P = 8;
    ctl_policy_t *a = mk("adaptive,rule=thresholds,tau=5", P, NULL),
                 *b = mk("adaptive,rule=thresholds,tau=5", P, NULL);
    ctl_policy_t *c = mk("adaptive,rule=thresholds,tau=5,window=16", P, NULL);
    pcoll_rule_t init;
    ctl_policy_initial(a, &init);
    phases_t ph = {3, {{400, 0.5, 0, {0}, 0}, {1500, 0.05, 1, {2}, 0.0}, {UINT64_MAX, 0.8, 0, {0}, 0}}};
    gen_t g;
    gen_init(&g, P, 61, &init);
    g.q = q_phases;
    g.qarg = &ph;
    g.lib_tau = 5;
    pcoll_record_t cp = {.fresh = calloc(P, 1),
                         .flags = calloc(P, 1),
                         .streak = calloc(P, 4),
                         .waited = calloc(P, 1),
                         .staleness = calloc(P, 4)};
    int na = 0, diff = 0;
    for (int i = 0; i < 4000; i++) {
        const pcoll_record_t *rec = gen_next(&g);
        ctl_decision_t da, db;
        int ka = ctl_policy_observe(a, rec, &da);
        if (ka == 1) sched_push(&g.sched, &da);
        /* b sees the same agreed fields but different local fields (times, staleness) */
        cp.round = rec->round;
        cp.P = P;
        cp.mode = rec->mode;
        cp.quorum = rec->quorum;
        cp.initiator = rec->initiator;
        cp.nactive = rec->nactive;
        cp.nfresh = rec->nfresh;
        memcpy(cp.fresh, rec->fresh, P);
        memcpy(cp.flags, rec->flags, P);
        memcpy(cp.streak, rec->streak, 4 * P);
        memcpy(cp.waited, rec->waited, P);
        for (int p = 0; p < P; p++) cp.staleness[p] = (uint32_t)mix(p + i);
        cp.t_start = 1e9 * u01(7, i, 0);
        cp.t_end = cp.t_start + 5;
        cp.t_deposit = -3;
        int kb = ctl_policy_observe(b, &cp, &db);
        ctl_policy_observe(c, rec, NULL);
        na += ka == 1;
        if (ka != kb || (ka == 1 && (da.effective != db.effective || da.what != db.what ||
                                     da.new_rule.mode != db.new_rule.mode || strcmp(da.reason, db.reason))))
            diff++;
    }
    CHECK(na >= 3, "trace too tame: %d decisions", na);
    CHECK(diff == 0, "%d differing decisions between two instances", diff);
    CHECK(ctl_policy_hash(a) == ctl_policy_hash(b), "hash %016llx != %016llx",
          (unsigned long long)ctl_policy_hash(a), (unsigned long long)ctl_policy_hash(b));
    ctl_policy_t *e = mk("adaptive,rule=thresholds,tau=5", P, NULL);
    CHECK(ctl_policy_hash(a) != ctl_policy_hash(e), "hash does not depend on the decisions");
    CHECK(ctl_policy_hash(a) != ctl_policy_hash(c), "different config (observing only) gave the same hash");
    if (verbose) printf("    %d decisions, hash %016llx\n", na, (unsigned long long)ctl_policy_hash(a));

    /* order and shape errors leave the state unchanged */
    gen_t g2;
    gen_init(&g2, P, 61, &init);
    g2.q = q_phases;
    g2.qarg = &ph;
    const pcoll_record_t *r0 = gen_next(&g2);
    ((pcoll_record_t *)r0)->round = 5;
    CHECK(ctl_policy_observe(e, r0, NULL) == CTL_ERR_ORDER, "round 5 before round 0 accepted");
    ((pcoll_record_t *)r0)->round = 0;
    ((pcoll_record_t *)r0)->P = P + 1;
    CHECK(ctl_policy_observe(e, r0, NULL) == CTL_ERR_ORDER, "P mismatch accepted");
    ((pcoll_record_t *)r0)->P = P;
    CHECK(ctl_policy_observe(e, r0, NULL) == 0, "round 0 after errors rejected");
    CHECK(ctl_policy_observe(e, r0, NULL) == CTL_ERR_ORDER, "round 0 twice accepted");
    ctl_policy_stats_t st;
    ctl_policy_stats(e, &st);
    CHECK(st.rounds == 1, "rounds %llu", (unsigned long long)st.rounds);
    gen_free(&g2);
    ctl_policy_free(a);
    ctl_policy_free(b);
    ctl_policy_free(c);
    ctl_policy_free(e);
    gen_free(&g);
    free(cp.fresh);
    free(cp.flags);
    free(cp.streak);
    free(cp.waited);
    free(cp.staleness);
}

/* Joined ranks are ignored; lag sets the effective round; static policies never switch. */
static void test_joined_lag_static(void) {
    const int P = 4;
    for (int joined = 0; joined <= 1; joined++) {
        ctl_policy_t *pol = mk("adaptive,rule=thresholds", P, NULL);
        pcoll_rule_t init;
        ctl_policy_initial(pol, &init);
        phases_t ph = {1, {{UINT64_MAX, 0.5, 1, {3}, 0.0}}};
        gen_t g;
        gen_init(&g, P, 71, &init);
        g.q = q_phases;
        g.qarg = &ph;
        g.joined[3] = joined;
        declog_t L = {0};
        run_loop(&g, pol, 500, &L);
        if (joined)
            CHECK(L.n == 0, "a joined rank's streak triggered '%s'", L.n ? L.d[0].reason : "");
        else
            CHECK(L.n >= 1 && L.d[0].to == PCOLL_MAJORITY,
                  "an active never-fresh rank did not trigger majority");
        ctl_policy_free(pol);
        gen_free(&g);
        free(L.d);
    }
    int lags[] = {1, 2, 7};
    for (int i = 0; i < 3; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "adaptive,rule=thresholds,lag=%d", lags[i]);
        phases_t ph = {1, {{UINT64_MAX, 0.4, 2, {6, 7}, 0.0}}};
        declog_t L = {0};
        ctl_policy_t *pol =
            run_phases(spec, 8, 81, &ph, 300, &L); /* run_loop checks effective == round + lag */
        CHECK(L.n >= 1, "lag %d: no decision", lags[i]);
        pcoll_rule_t cur;
        uint64_t from = ctl_policy_rule(pol, &cur);
        CHECK(L.n == 0 || from == L.d[L.n - 1].eff, "ctl_policy_rule from %llu", (unsigned long long)from);
        ctl_policy_free(pol);
        free(L.d);
    }
    const char *statics[] = {"solo", "majority", "sync", "quorum:3"};
    for (int i = 0; i < 4; i++) {
        ctl_policy_t *pol = mk(statics[i], 8, NULL);
        pcoll_rule_t init;
        ctl_policy_initial(pol, &init);
        phases_t ph = {1, {{UINT64_MAX, 0.05, 0, {0}, 0}}};
        gen_t g;
        gen_init(&g, 8, 91, &init);
        g.q = q_phases;
        g.qarg = &ph;
        declog_t L = {0};
        run_loop(&g, pol, 1000, &L);
        CHECK(L.n == 0, "static %s switched: %s", statics[i], L.n ? L.d[0].reason : "");
        if (i == 3)
            CHECK(init.mode == PCOLL_QUORUM && init.quorum == 3, "quorum:3 initial rule %d/%d", init.mode,
                  init.quorum);
        ctl_policy_free(pol);
        gen_free(&g);
        free(L.d);
    }
    /* adaptive starting from a quorum keeps the quorum as its light rule */
    ctl_policy_t *pol = mk("adaptive,rule=thresholds,start=quorum:2", 8, NULL);
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    CHECK(init.mode == PCOLL_QUORUM && init.quorum == 2, "start=quorum:2 -> %d/%d", init.mode, init.quorum);
    ctl_policy_free(pol);
}

/* -m: prints the signal distribution (mean / p95 / max over rounds) of scenarios under static
 * rules, for tuning the thresholds documented in controller.h. Not a test. */
static void measure_one(const char *name, const char *spec, int P, int time_model, double slow_period,
                        int nslow, double q, double q_slow, int lib_tau) {
    ctl_policy_t *pol = mk(spec, P, NULL);
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    phases_t ph = {1, {{UINT64_MAX, q, nslow, {0, 1, 2, 3}, q_slow}}};
    gen_t g;
    gen_init(&g, P, 1234, &init);
    g.q = q_phases;
    g.qarg = &ph;
    g.lib_tau = lib_tau;
    if (time_model) {
        for (int p = 0; p < P; p++) g.period[p] = p < nslow ? slow_period : 1.0;
        sim_start(&g, 0.15, 0.01);
    }
    enum { N = 4000 };
    static double Ls[N], As[N], Fs[N];
    int n = 0;
    for (int i = 0; i < N; i++) {
        ctl_policy_observe(pol, gen_next(&g), NULL);
        ctl_policy_stats_t st;
        ctl_policy_stats(pol, &st);
        if (st.window_fill == ctl_policy_cfg(pol)->window) {
            Ls[n] = st.L;
            As[n] = st.A;
            Fs[n] = st.F;
            n++;
        }
    }
    double *v[3] = {Ls, As, Fs};
    printf("  %-34s %-9s", name, spec);
    for (int k = 0; k < 3; k++) {
        double m = 0, mx = -1;
        for (int i = 0; i < n; i++) {
            m += v[k][i];
            if (v[k][i] > mx) mx = v[k][i];
        }
        printf("  %c mean %6.2f max %6.2f", "LAF"[k], m / n, mx);
    }
    printf("\n");
    ctl_policy_free(pol);
    gen_free(&g);
}

static void measure(void) {
    const char *modes[] = {"solo", "majority"};
    for (int m = 0; m < 2; m++) {
        measure_one("time P=8 balanced", modes[m], 8, 1, 1.0, 0, 0, 0, 0);
        measure_one("time P=32 balanced", modes[m], 32, 1, 1.0, 0, 0, 0, 0);
        measure_one("time P=8 one 2x slow", modes[m], 8, 1, 2.0, 1, 0, 0, 0);
        measure_one("time P=8 one 4x slow", modes[m], 8, 1, 4.0, 1, 0, 0, 0);
        measure_one("time P=8 one 8x slow", modes[m], 8, 1, 8.0, 1, 0, 0, 0);
        measure_one("time P=32 one 8x slow", modes[m], 32, 1, 8.0, 1, 0, 0, 0);
        measure_one("time P=8 half 3x slow", modes[m], 8, 1, 3.0, 4, 0, 0, 0);
        measure_one("prob P=8 q=0.35", modes[m], 8, 0, 0, 0, 0.35, 0, 0);
        measure_one("prob P=8 q=0.15", modes[m], 8, 0, 0, 0, 0.15, 0, 0);
        measure_one("prob P=32 q=0.1", modes[m], 32, 0, 0, 0, 0.1, 0, 0);
        measure_one("prob P=8 q=0.4, 2 at 0.01", modes[m], 8, 0, 0, 2, 0.4, 0.01, 0);
        measure_one("prob P=8 q=0.03", modes[m], 8, 0, 0, 0, 0.03, 0, 0);
        measure_one("prob P=8 q=0.5, 1 at 0, tau 4", modes[m], 8, 0, 0, 1, 0.5, 0.0, 4);
    }
}

/* light_fresh: solo whose rounds carry few gradients (uniform q=0.35 at P=8: F ~ 0.35) goes to
 * majority for "stale rounds"; LIGHT is then blocked for a probe interval (256 rounds), a return
 * that ends the same way doubles it; healthy participation (q=0.9) stays solo; the block carries
 * into the next handle (the trainer's next epoch) with the policy's state. */
static void test_light_fresh(void) {
    const int P = 8;
    for (int healthy = 0; healthy < 2; healthy++) {
        phases_t ph = {1, {{UINT64_MAX, healthy ? 0.9 : 0.35, 0, {0}, 0}}};
        declog_t L = {0};
        ctl_policy_t *pol = run_phases("adaptive,rule=thresholds,light_fresh=0.5", P, 7, &ph, 3000, &L);
        ctl_policy_stats_t st;
        ctl_policy_stats(pol, &st);
        if (healthy) {
            CHECK(L.n == 0, "q=0.9 left solo: %s", L.n ? L.d[0].reason : "");
        } else {
            CHECK(L.n >= 3, "only %d decisions", L.n);
            if (L.n >= 3) {
                CHECK(L.d[0].to == PCOLL_MAJORITY && strstr(L.d[0].reason, "light_fresh") &&
                          L.d[0].round < 64,
                      "first: %s at %llu", L.d[0].reason, (unsigned long long)L.d[0].round);
                CHECK(L.d[1].to == PCOLL_SOLO && L.d[1].eff >= L.d[0].eff + 256,
                      "returned to solo at %llu, "
                      "blocked until %llu",
                      (unsigned long long)L.d[1].eff, (unsigned long long)L.d[0].eff + 256);
                CHECK(L.d[2].to == PCOLL_MAJORITY && strstr(L.d[2].reason, "light_fresh"), "third: %s",
                      L.d[2].reason);
            }
            if (L.n >= 4)
                CHECK(L.d[3].eff >= L.d[2].eff + 512,
                      "failed probe did not double the block: %llu after %llu",
                      (unsigned long long)L.d[3].eff, (unsigned long long)L.d[2].eff);
            CHECK(st.light_exits >= 2 && st.light_probe >= 512, "light exits %llu, probe %d",
                  (unsigned long long)st.light_exits, st.light_probe);
            if (verbose)
                printf("    light_fresh: %d decisions, %llu exits, probe interval %d\n", L.n,
                       (unsigned long long)st.light_exits, st.light_probe);
        }
        ctl_policy_free(pol);
        free(L.d);
    }
    /* two ranks rarely fresh until round 100: the streak signal L fires first, but F < light_fresh
     * too, so solo is blocked all the same (the reason says both), although L is low afterwards */
    {
        phases_t ps = {2, {{100, 0.4, 2, {6, 7}, 0.02}, {UINT64_MAX, 0.35, 0, {0}, 0}}};
        declog_t LL = {0};
        ctl_policy_t *pl =
            run_phases("adaptive,rule=thresholds,light_fresh=0.5,sync_streak=1000", P, 13, &ps, 1500, &LL);
        CHECK(LL.n >= 1 && strstr(LL.d[0].reason, "light_fresh") && LL.d[0].to == PCOLL_MAJORITY, "first: %s",
              LL.n ? LL.d[0].reason : "(none)");
        for (int i = 1; i < LL.n; i++)
            if (LL.d[i].to == PCOLL_SOLO)
                CHECK(LL.d[i].eff >= LL.d[0].eff + 256,
                      "back to solo at %llu, before the block ends (%llu): %s",
                      (unsigned long long)LL.d[i].eff, (unsigned long long)LL.d[0].eff + 256, LL.d[0].reason);
        for (int i = 0; verbose && i < LL.n; i++)
            printf("    slow ranks: %llu %s\n", (unsigned long long)LL.d[i].eff, LL.d[i].reason);
        ctl_policy_free(pl);
        free(LL.d);
    }
    /* blocked in a handle of 100 stale rounds, then a handle of healthy rounds resumed from its
     * state: no solo before the block (set in the first handle) ends */
    {
        phases_t stale = {1, {{UINT64_MAX, 0.35, 0, {0}, 0}}}, good = {1, {{UINT64_MAX, 0.9, 0, {0}, 0}}};
        declog_t A = {0}, B = {0};
        ctl_policy_cfg_t cfg;
        ctl_policy_t *pa = run_phases("adaptive,rule=thresholds,light_fresh=0.5", P, 9, &stale, 100, &A);
        cfg = *ctl_policy_cfg(pa);
        ctl_policy_stats_t sa;
        ctl_policy_stats(pa, &sa);
        CHECK(A.n == 1 && A.d[0].to == PCOLL_MAJORITY && sa.light_block_until > 100,
              "first handle: %d decisions, "
              "block until %llu",
              A.n, (unsigned long long)sa.light_block_until);
        ctl_state_t *st = ctl_policy_state(pa);
        char err[256];
        ctl_policy_t *pb = ctl_policy_resume(&cfg, P, st, err, sizeof err);
        CHECK(pb != NULL, "resume: %s", err);
        if (pb) {
            pcoll_rule_t init;
            ctl_policy_initial(pb, &init);
            CHECK(init.mode == PCOLL_MAJORITY, "resumed handle starts in %d, not majority", init.mode);
            gen_t g;
            gen_init(&g, P, 10, &init);
            g.q = q_phases;
            g.qarg = &good;
            run_loop(&g, pb, 1000, &B);
            CHECK(B.n >= 1 && B.d[0].to == PCOLL_SOLO && 100 + B.d[0].eff >= sa.light_block_until,
                  "carried block: first decision %s at %llu (+100), block until %llu",
                  B.n ? B.d[0].reason : "", B.n ? (unsigned long long)B.d[0].eff : 0ULL,
                  (unsigned long long)sa.light_block_until);
            gen_free(&g);
        }
        ctl_state_free(st);
        ctl_policy_free(pa);
        ctl_policy_free(pb);
        free(A.d);
        free(B.d);
    }
}

/* A sync spell cut into handles of 20 rounds (a trainer's epochs), each resumed from the state the
 * previous one ended with, probes at the same overall round as one handle does (record 63); a
 * doubled probe interval carries too. Without the carry an epoch shorter than the probe interval
 * would never leave sync. */
static void test_sync_carry(void) {
    const int P = 4;
    ctl_policy_cfg_t c;
    char err[256];
    CHECK(ctl_policy_parse("adaptive,rule=thresholds,start=sync,probe=64,probe_max=1024", &c, err,
                           sizeof err) == CTL_OK,
          "%s", err);
    phases_t ph = {1, {{UINT64_MAX, 0.9, 0, {0}, 0}}};
    long probed = -1;
    ctl_state_t *st = NULL;
    for (int h = 0; h < 6 && probed < 0; h++) {
        ctl_policy_t *pol = st ? ctl_policy_resume(&c, P, st, err, sizeof err) : ctl_policy_new(&c, P);
        CHECK(pol != NULL, "handle %d: %s", h, err);
        if (!pol) break;
        pcoll_rule_t init;
        ctl_policy_initial(pol, &init);
        gen_t g;
        gen_init(&g, P, 5 + h, &init);
        g.q = q_phases;
        g.qarg = &ph;
        declog_t L = {0};
        run_loop(&g, pol, 20, &L);
        if (L.n) probed = 20L * h + (long)L.d[0].round;
        ctl_policy_stats_t ps;
        ctl_policy_stats(pol, &ps);
        CHECK(L.n || (ps.mode == PCOLL_SYNC && ps.probe == 64), "handle %d: mode %d, probe %d", h, ps.mode,
              ps.probe);
        ctl_state_free(st);
        st = ctl_policy_state(pol);
        CHECK(ctl_state_rounds(st) == 20 * (uint64_t)(h + 1), "handle %d: state says %llu rounds", h,
              (unsigned long long)ctl_state_rounds(st));
        ctl_policy_free(pol);
        gen_free(&g);
        free(L.d);
    }
    ctl_state_free(st);
    CHECK(probed == 63, "probe in handles of 20 rounds at overall record %ld, one handle probes at 63",
          probed);
    /* the carried-state keys are gone from the user's options */
    const char *gone[] = {"light_block=3", "light_probe=3", "sync_held=3", "probe_start=3"};
    for (int i = 0; i < 4; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "adaptive,%s", gone[i]);
        CHECK(ctl_policy_parse(spec, &c, err, sizeof err) == CTL_ERR_ARG && strstr(err, "unknown option"),
              "'%s' accepted: %s", spec, err);
    }
}
int main(int argc, char **argv) {
    verbose = argc > 1 && !strcmp(argv[1], "-v");
    if (argc > 1 && !strcmp(argv[1], "-m")) {
        measure();
        return 0;
    }
    const named_test_t tests[] = {
        {"parse", test_parse},
        {"light_stays_solo", test_light_stays_solo},
        {"growing_streaks_to_majority", test_growing_streaks_to_majority},
        {"tau_library", test_tau_library},
        {"tau_policy", test_tau_policy},
        {"sync_and_back", test_sync_and_back},
        {"hysteresis", test_hysteresis},
        {"determinism", test_determinism},
        {"joined_lag_static", test_joined_lag_static},
        {"light_fresh", test_light_fresh},
        {"sync_carry", test_sync_carry},
    };
    return run_tests(tests, sizeof tests / sizeof tests[0]);
}
