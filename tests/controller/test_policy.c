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
    /* adaptive starts in sync unless start= says otherwise */
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
    const char *full = "adaptive,start=quorum:2,tau=8,tau_by=policy,lag=3,window=16,probe=100,probe_max=800,"
                       "cost_n=16,staleness=quadratic,screen=off,rule=rate";
    CHECK(ctl_policy_parse(full, &c, err, sizeof err) == CTL_OK, "%s", err);
    CHECK(c.base.mode == PCOLL_QUORUM && c.base.quorum == 2 && c.tau == 8 && c.tau_by == CTL_TAU_POLICY &&
              c.lag == 3 && c.window == 16 && c.sync_probe == 100 && c.probe_max == 800 && c.cost_n == 16 &&
              c.staleness == CTL_STALE_QUADRATIC && c.screen == 0,
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
        {"adaptive,cost_n=x1", "'x1'", "'cost_n'"},
        {"adaptive,cost_n=1", "'1'", "'cost_n'"},
        {"adaptive,lag", "'lag'", "no value"},
        {"bogus", "unknown policy 'bogus'", "quorum:Q"},
        {"quorum:0", "'quorum:0'", "Q >= 1"},
        {"quorum:2x", "'quorum:2x'", "unknown policy"},
        {"solo,start=sync", "'start'", "only for adaptive"},
        {"adaptive,start=fast", "'fast'", "'start'"},
        {"adaptive,rule=fast", "'fast'", "rule=thresholds is gone"},
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

/* Same history -> same decisions and hash; local fields do not matter; order is enforced. */
static void test_determinism(void) {
    const int P = 8;
    /* the decisions: the wait sets of tau_by=policy (no step times, so the level stays) */
    ctl_policy_t *a = mk("adaptive,start=solo,tau=5,tau_by=policy", P, NULL),
                 *b = mk("adaptive,start=solo,tau=5,tau_by=policy", P, NULL);
    ctl_policy_t *c = mk("adaptive,start=solo,tau=5,tau_by=policy,lag=3", P, NULL);
    pcoll_rule_t init;
    ctl_policy_initial(a, &init);
    phases_t ph = {3, {{400, 0.5, 0, {0}, 0}, {1500, 0.05, 1, {2}, 0.0}, {UINT64_MAX, 0.8, 0, {0}, 0}}};
    gen_t g;
    gen_init(&g, P, 61, &init);
    g.q = q_phases;
    g.qarg = &ph;
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
        for (int p = 0; p < P; p++) cp.staleness[p] = (uint32_t)hash_splitmix64(p + i);
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
    ctl_policy_t *e = mk("adaptive,start=solo,tau=5,tau_by=policy", P, NULL);
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

/* Joined ranks are ignored (tau_by=policy waits only for active ones); lag sets the effective round; static policies never switch. */
static void test_joined_lag_static(void) {
    const int P = 4;
    for (int joined = 0; joined <= 1; joined++) {
        ctl_policy_t *pol = mk("adaptive,start=solo,tau=4,tau_by=policy", P, NULL);
        pcoll_rule_t init;
        ctl_policy_initial(pol, &init);
        phases_t ph = {1, {{UINT64_MAX, 1.0, 1, {3}, 0.0}}}; /* rank 3 never fresh, the others always */
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
            CHECK(L.n >= 1 && L.d[0].what == CTL_DEC_WAIT, "an active never-fresh rank was not waited for");
        ctl_policy_free(pol);
        gen_free(&g);
        free(L.d);
    }
    int lags[] = {1, 2, 7};
    for (int i = 0; i < 3; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "adaptive,start=solo,tau=8,tau_by=policy,lag=%d", lags[i]);
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
    ctl_policy_t *pol = mk("adaptive,start=quorum:2", 8, NULL);
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    CHECK(init.mode == PCOLL_QUORUM && init.quorum == 2, "start=quorum:2 -> %d/%d", init.mode, init.quorum);
    ctl_policy_free(pol);
}

/* The step-time gain (controller.h section 2; reported for static policies) from exact sync records: ranks 0..2 take 1 s per step, rank 3 4 s. S = 4, sum_p 1/mean_p =
 * 3.25, so gain = 4 * 3.25 / 4 = 3.25 exactly; NAN until every rank has cost_n/2 = 4 step times,
 * and again once a rank has joined. */
static void test_gain_exact(void) {
    const int P = 4;
    ctl_policy_t *pol = mk("sync,cost_n=8", P, NULL);
    pcoll_record_t rec = {.P = P,
                          .fresh = calloc(P, 1),
                          .waited = calloc(P, 1),
                          .flags = calloc(P, 1),
                          .staleness = calloc(P, 4),
                          .streak = calloc(P, 4),
                          .cost = calloc(P, sizeof(float))};
    ctl_policy_stats_t st;
    for (int r = 0; r < 12; r++) {
        rec.round = (uint64_t)r;
        rec.mode = PCOLL_SYNC;
        rec.initiator = -1;
        rec.nactive = rec.nfresh = P;
        for (int p = 0; p < P; p++) {
            rec.fresh[p] = 1;
            rec.cost[p] = p == 3 ? 4.0f : 1.0f;
        }
        if (r == 10) {
            rec.fresh[3] = 2;
            rec.cost[3] = 8.0f;
        } /* two merged deposits: 4 s each */
        CHECK(ctl_policy_observe(pol, &rec, NULL) == 0, "round %d: a decision in sync", r);
        ctl_policy_stats(pol, &st);
        if (r < 3)
            CHECK(isnan(st.gain), "round %d: gain = %g before 4 step times per rank", r, st.gain);
        else
            CHECK(st.gain == 3.25, "round %d: gain = %.17g, want 3.25", r, st.gain);
    }
    /* negative, NaN and zero step times are "not reported" */
    rec.round = 12;
    rec.cost[0] = -1.0f;
    rec.cost[1] = NAN;
    rec.cost[2] = 0.0f;
    rec.cost[3] = 4.0f;
    CHECK(ctl_policy_observe(pol, &rec, NULL) == 0, "bad step times are skipped, not an error");
    ctl_policy_stats(pol, &st);
    CHECK(st.gain == 3.25, "gain = %.17g after unreported step times", st.gain);
    /* once a rank has joined (the tail of an epoch) G says nothing */
    rec.round = 13;
    rec.flags[3] = PCOLL_F_JOINED;
    rec.fresh[3] = 0;
    rec.cost[3] = 0;
    ctl_policy_observe(pol, &rec, NULL);
    ctl_policy_stats(pol, &st);
    CHECK(isnan(st.gain), "gain = %.17g with rank 3 joined, want NAN", st.gain);
    free(rec.fresh);
    free(rec.waited);
    free(rec.flags);
    free(rec.staleness);
    free(rec.streak);
    free(rec.cost);
    ctl_policy_free(pol);
}

/* Keys that are gone: the carried state's, and rule=thresholds' with the rule itself. */
static void test_gone_keys(void) {
    ctl_policy_cfg_t c;
    char err[256];
    /* the carried-state keys are gone from the user's options */
    const char *gone[] = {"light_block=3",  "light_probe=3",   "sync_held=3",    "probe_start=3",
                          "dwell=3",        "max_dwell=3",     "maj_enter=3",    "maj_exit=1",
                          "wait_enter=0.1", "wait_exit=0.1",   "sync_fresh=0.1", "sync_streak=3",
                          "sync_wait=0.5",  "light_fresh=0.5", "pay_enter=1",    "pay_exit=1"};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "adaptive,%s", gone[i]);
        CHECK(ctl_policy_parse(spec, &c, err, sizeof err) == CTL_ERR_ARG && strstr(err, "unknown option"),
              "'%s' accepted: %s", spec, err);
    }
    CHECK(ctl_policy_parse("adaptive,rule=rate", &c, err, sizeof err) == CTL_OK, "rule=rate refused: %s",
          err);
    CHECK(ctl_policy_parse("adaptive,rule=thresholds", &c, err, sizeof err) == CTL_ERR_ARG &&
              strstr(err, "rule=thresholds is gone"),
          "rule=thresholds: '%s'", err);
}
int main(int argc, char **argv) {
    verbose = argc > 1 && !strcmp(argv[1], "-v");
    const named_test_t tests[] = {
        {"parse", test_parse},
        {"tau_library", test_tau_library},
        {"tau_policy", test_tau_policy},
        {"determinism", test_determinism},
        {"joined_lag_static", test_joined_lag_static},
        {"gone_keys", test_gone_keys},
        {"gain_exact", test_gain_exact},
    };
    return run_tests(tests, sizeof tests / sizeof tests[0]);
}
