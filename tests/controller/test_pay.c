/* test_pay.c -- the policy's step-time signal G and its rules (controller.h sections 2-3):
 * partial rounds go to sync when G < pay_enter, and a due sync probe waits for G >= pay_exit.
 * Traces: hand-made sync records with exact step times, and the event-time generator of trace.h
 * with rec.cost reporting every deposit's step time, as pcoll_set_cost does.
 * Usage: test_pay [-v]    (CTL_TEST=name runs one test)
 */
#include "tests/controller/trace.h"

/* G from exact sync records: ranks 0..2 take 1 s per step, rank 3 4 s. S = 4, sum_p 1/mean_p =
 * 3.25, so gain = 4 * 3.25 / 4 = 3.25 exactly; NAN until every rank has cost_n/2 = 4 step times,
 * and again once a rank has joined. */
static void test_gain_exact(void) {
    const int P = 4;
    ctl_policy_t *pol = mk("adaptive,rule=thresholds,start=sync,cost_n=8", P, NULL);
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

/* Event-time run of `spec`, P ranks with step periods period[p] (uniform jitter), N rounds.
 * costs: records report step times. period_to/at: rank 0's period becomes period_to from
 * round `at` on (0: never). */
static ctl_policy_t *run_sim(const char *spec, int P, const double *period, double jitter, int costs,
                             uint64_t N, double period_to, uint64_t at, declog_t *L) {
    ctl_policy_t *pol = mk(spec, P, NULL);
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    gen_t g;
    gen_init(&g, P, 77, &init);
    for (int p = 0; p < P; p++) g.period[p] = period[p];
    sim_start(&g, jitter, 0.01);
    if (costs) sim_report_costs(&g);
    if (at) {
        run_loop(&g, pol, at, L);
        g.period[0] = period_to;
        run_loop(&g, pol, N - at, L);
    } else {
        run_loop(&g, pol, N, L);
    }
    gen_free(&g);
    return pol;
}

static int reason_has(const declog_t *L, const char *s) {
    for (int i = 0; i < L->n; i++)
        if (strstr(L->d[i].reason, s)) return 1;
    return 0;
}

/* Alike ranks (G about 1.06 < pay_enter 1.5): solo goes to sync at its first evaluation and stays there: every
 * probe that falls due waits, over 3,000 rounds (11 probe intervals). */
static void test_alike_to_sync(void) {
    const double per[4] = {1, 1, 1, 1};
    declog_t L = {0};
    ctl_policy_t *pol = run_sim("adaptive,rule=thresholds", 4, per, 0.1, 1, 3000, 0, 0, &L);
    ctl_policy_stats_t st;
    ctl_policy_stats(pol, &st);
    CHECK(L.n == 1 && L.d[0].from == PCOLL_SOLO && L.d[0].to == PCOLL_SYNC &&
              strstr(L.d[0].reason, "pay_enter"),
          "%d decisions, first: %s", L.n, L.n ? L.d[0].reason : "(none)");
    CHECK(L.n && L.d[0].round >= 31 && L.d[0].round < 100,
          "solo -> sync decided at round %llu, want "
          "once the window (32) is full and every rank has 16 step times",
          L.n ? (unsigned long long)L.d[0].round : 0ULL);
    CHECK(st.mode == PCOLL_SYNC && st.probes == 0, "ends in mode %d after %llu probes", st.mode,
          (unsigned long long)st.probes);
    CHECK(st.gain > 1.0 && st.gain < 1.15, "gain = %.3f for alike ranks (jitter 0.1, about 1.06)", st.gain);
    ctl_policy_free(pol);
    free(L.d);
}

/* Rank 0 becomes 4x slower at round 1000 of a sync spell: the probe, long due, goes as soon as
 * G >= pay_exit, within a few of rank 0's steps, and the run leaves sync for good. */
static void test_imbalance_appears(void) {
    const double per[4] = {1, 1, 1, 1};
    declog_t L = {0};
    ctl_policy_t *pol = run_sim("adaptive,rule=thresholds", 4, per, 0.1, 1, 3000, 4.0, 1000, &L);
    ctl_policy_stats_t st;
    ctl_policy_stats(pol, &st);
    int k = -1;
    for (int i = 0; i < L.n; i++)
        if (L.d[i].what & CTL_DEC_PROBE) {
            k = i;
            break;
        }
    CHECK(k >= 0 && L.d[k].round >= 1000 && L.d[k].round <= 1000 + 8 && strstr(L.d[k].reason, "pay_exit"),
          "probe %s at %llu (rank 0 slows down at 1000)", k >= 0 ? L.d[k].reason : "(none)",
          k >= 0 ? (unsigned long long)L.d[k].round : 0ULL);
    CHECK(st.mode != PCOLL_SYNC, "ends in sync: %s", L.n ? L.d[L.n - 1].reason : "");
    CHECK(st.gain > 2.5, "gain = %.2f with one rank 4x slower (about 3.25)", st.gain);
    ctl_policy_free(pol);
    free(L.d);
}

/* Linear skew (periods 1, 2, 3, 4: G about 2.1 >= pay_enter 1.5, partial rounds pay): never sync for G. */
static void test_skew_stays_partial(void) {
    const double per[4] = {1, 2, 3, 4};
    declog_t L = {0};
    ctl_policy_t *pol = run_sim("adaptive,rule=thresholds", 4, per, 0.1, 1, 3000, 0, 0, &L);
    ctl_policy_stats_t st;
    ctl_policy_stats(pol, &st);
    CHECK(!reason_has(&L, "pay_enter"), "went to sync for G under linear skew");
    CHECK(st.mode != PCOLL_SYNC && st.gain > 1.8 && st.gain < 2.5, "mode %d, gain = %.2f (about 2.1)",
          st.mode, st.gain);
    ctl_policy_free(pol);
    free(L.d);
}

/* Without step times, or with pay_enter=0, the policy decides exactly as before G existed. */
static void test_off(void) {
    const double per[4] = {1, 1, 1, 1}, skew[4] = {1, 1, 1, 6};
    for (int s = 0; s < 2; s++) {
        const double *pp = s ? skew : per;
        declog_t A = {0}, B = {0}, C = {0};
        ctl_policy_t *a = run_sim("adaptive,rule=thresholds", 4, pp, 0.1, 0, 3000, 0, 0, &A);
        ctl_policy_t *b = run_sim("adaptive,rule=thresholds,pay_enter=0", 4, pp, 0.1, 1, 3000, 0, 0, &B);
        ctl_policy_t *c =
            run_sim("adaptive,rule=thresholds,start=sync,probe=64", 4, pp, 0.1, 0, 500, 0, 0, &C);
        CHECK(ctl_policy_hash(a) == ctl_policy_hash(b) && A.n == B.n,
              "%s: no step times and pay_enter=0 "
              "differ (%d / %d decisions)",
              s ? "skew" : "alike", A.n, B.n);
        CHECK(!reason_has(&A, "pay_") && !reason_has(&B, "pay_"), "a decision names pay_ with G off");
        CHECK(C.n >= 1 && (C.d[0].what & CTL_DEC_PROBE) && C.d[0].round == 63,
              "without step times sync probes "
              "on its interval: %s at %llu",
              C.n ? C.d[0].reason : "(none)", C.n ? (unsigned long long)C.d[0].round : 0ULL);
        ctl_policy_free(a);
        ctl_policy_free(b);
        ctl_policy_free(c);
        free(A.d);
        free(B.d);
        free(C.d);
    }
}

static void test_parse_pay(void) {
    ctl_policy_cfg_t c;
    char err[256], buf[1024];
    CHECK(ctl_policy_parse("adaptive,pay_enter=1.2,pay_exit=1.5,cost_n=16", &c, err, sizeof err) == CTL_OK,
          "%s", err);
    CHECK(c.pay_enter == 1.2 && c.pay_exit == 1.5 && c.cost_n == 16, "values not parsed");
    ctl_policy_cfg_t d;
    CHECK(ctl_policy_parse(ctl_policy_format(&c, buf, sizeof buf), &d, err, sizeof err) == CTL_OK &&
              d.pay_enter == 1.2 && d.pay_exit == 1.5 && d.cost_n == 16,
          "format does not round-trip: %s", buf);
    CHECK(ctl_policy_parse("adaptive", &c, err, sizeof err) == CTL_OK && c.pay_enter == 1.5 &&
              c.pay_exit == 1.3 && c.cost_n == 32,
          "defaults %g %g %d", c.pay_enter, c.pay_exit, c.cost_n);
    const char *bad[][2] = {
        {"adaptive,pay_exit=0", "pay_exit"},
        {"adaptive,pay_enter=-1", "pay_enter"},
        {"adaptive,pay_enter=x", "pay_enter"},
        {"adaptive,cost_n=1", "cost_n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(ctl_policy_parse(bad[i][0], &c, err, sizeof err) == CTL_ERR_ARG && strstr(err, bad[i][1]),
              "'%s': %s", bad[i][0], err);
    CHECK(ctl_policy_parse("adaptive,pay_enter=0", &c, err, sizeof err) == CTL_OK, "off: %s", err);
}

int main(int argc, char **argv) {
    verbose = argc > 1 && !strcmp(argv[1], "-v");
    const named_test_t tests[] = {
        {"gain_exact", test_gain_exact},
        {"alike_to_sync", test_alike_to_sync},
        {"imbalance_appears", test_imbalance_appears},
        {"skew_stays_partial", test_skew_stays_partial},
        {"off", test_off},
        {"parse_pay", test_parse_pay},
    };
    return run_tests(tests, sizeof tests / sizeof tests[0]);
}
