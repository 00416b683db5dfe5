/* test_sim.c -- the collectives model (collectives/sim) against cases with a closed form. */
#include "collectives/sim/sim.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static int fails = 0;
#define CHECK(cond, ...)                                \
    do {                                                \
        if (!(cond)) {                                  \
            fails++;                                    \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                        \
            printf("\n");                               \
        }                                               \
    } while (0)
#define NEAR(a, b) (fabs((a) - (b)) <= 1e-9 * (1 + fabs(b)))

static double linear_ms; /* rank p waits p x linear_ms */
static double lin(void *arg, uint64_t it, int p, int P) {
    (void)arg;
    (void)it;
    (void)P;
    return p * linear_ms;
}
static double slow0(void *arg, uint64_t it, int p, int P) {
    (void)arg;
    (void)it;
    (void)P;
    return p == 0 ? 10.0 : 0.0;
}
static double lognorm(void *arg, uint64_t it, int p, int P) { /* deterministic spread, no libm draw */
    (void)arg;
    (void)P;
    uint64_t h = (it * 2654435761u + (uint64_t)p * 40503u) % 1000;
    return 0.5 + (double)h / 100.0;
}

static int lg(int P) {
    int l = 0;
    while ((1 << l) < P) l++;
    return l;
}
static size_t wire(int P) { return 8 + (size_t)P * 5 * sizeof(float); }

static sim_result_t run(sim_cfg_t c, sim_cost_t k, int want_rc) {
    sim_result_t r;
    memset(&r, 0, sizeof r);
    int rc = sim_run(&c, &k, &r);
    CHECK(rc == want_rc, "sim_run(P=%d %s) = %d, want %d", c.P, sim_rule_name(c.rule), rc, want_rc);
    return r;
}

static sim_cfg_t cfg(int P, sim_rule_t rule, sim_act_t act, int iters, int warm) {
    sim_cfg_t c = {P, rule, P / 2 > 0 ? P / 2 : 1, 0, act, 8, iters, warm, 1, NULL, NULL, 0, 0, 0};
    return c;
}

int main(void) {
    const sim_cost_t k = {1.0, 2.0, 3.0, 1e-3};
    /* the binomial tree: every rank but 0 has one parent, which lists it as a child */
    for (int P = 1; P <= 4096; P = P * 3 + 1) {
        long edges = 0;
        for (int v = 0; v < P; v++) {
            int ch[32], n = sim_tree_children(v, P, ch, 32);
            edges += n;
            for (int i = 0; i < n; i++)
                CHECK(sim_tree_parent(ch[i]) == v, "P=%d: parent(%d) != %d", P, ch[i], v);
            CHECK(n <= lg(P), "P=%d: rank %d has %d children", P, v, n);
        }
        CHECK(edges == P - 1, "P=%d: %ld tree edges", P, edges);
    }
    /* sync under linear skew u: the round ends at (P-1)u + A; rank p waits (P-1-p)u + A */
    for (int P = 1; P <= 64; P *= 2) {
        linear_ms = 1.0;
        sim_cost_t z = {0, 0, 3.0, 0};
        sim_cfg_t c = cfg(P, SIM_SYNC, SIM_ACT_FLAT, 5, 2);
        c.delay = lin;
        sim_result_t r = run(c, z, SIM_OK);
        double A = sim_allreduce_us(&z, P, wire(P));
        CHECK(NEAR(r.mean_us, (P - 1) * 500.0 + A), "sync P=%d mean %.6f want %.6f", P, r.mean_us,
              (P - 1) * 500.0 + A);
        CHECK(NEAR(r.max_us, (P - 1) * 1000.0 + A) && NEAR(r.min_us, A), "sync P=%d min/max %.3f/%.3f", P,
              r.min_us, r.max_us);
        CHECK(r.rounds == 7 && NEAR(r.fresh_frac, 1.0), "sync P=%d: %ld rounds, fresh %.3f", P, r.rounds,
              r.fresh_frac);
    }
    /* solo, no skew: every rank activates at once; flat: each sends P-1 messages before it enters */
    for (int P = 2; P <= 256; P *= 2) {
        sim_result_t r = run(cfg(P, SIM_SOLO, SIM_ACT_FLAT, 8, 1), k, SIM_OK);
        double want = (P - 1) * k.o_us + sim_allreduce_us(&k, P, wire(P));
        CHECK(NEAR(r.mean_us, want) && NEAR(r.max_us, want), "solo flat P=%d mean %.6f want %.6f", P,
              r.mean_us, want);
        CHECK(NEAR(r.fresh_frac, 1.0) && r.rounds == 9, "solo flat P=%d fresh %.3f rounds %ld", P,
              r.fresh_frac, r.rounds);
        /* tree: an activator sends to the root and its children: at most log2 P messages */
        r = run(cfg(P, SIM_SOLO, SIM_ACT_TREE, 8, 1), k, SIM_OK);
        want = lg(P) * k.o_us + sim_allreduce_us(&k, P, wire(P));
        CHECK(NEAR(r.mean_us, want), "solo tree P=%d mean %.6f want %.6f", P, r.mean_us, want);
    }
    /* solo, linear skew far above the costs, one iteration: rank 0 activates alone; the last
     * ACT arrives at (P-1)o + L; everybody else deposits after the round ended and returns at once */
    for (int P = 2; P <= 64; P *= 2) {
        linear_ms = 1000.0;
        sim_cfg_t c = cfg(P, SIM_SOLO, SIM_ACT_FLAT, 1, 0);
        c.delay = lin;
        sim_result_t r = run(c, k, SIM_OK);
        double C = (P - 1) * k.o_us + k.L_us + sim_allreduce_us(&k, P, wire(P));
        CHECK(NEAR(r.mean_us, C / P) && NEAR(r.max_us, C) && r.min_us == 0,
              "solo linear P=%d mean %.6f want %.6f", P, r.mean_us, C / P);
    }
    /* majority, no skew: the initiator's ACT reaches its last target at (P-1)o + L */
    for (int P = 2; P <= 64; P *= 2) {
        sim_result_t r = run(cfg(P, SIM_MAJORITY, SIM_ACT_FLAT, 4, 0), k, SIM_OK);
        double want = (P - 1) * k.o_us + k.L_us + sim_allreduce_us(&k, P, wire(P));
        CHECK(NEAR(r.mean_us, want), "majority P=%d mean %.6f want %.6f", P, r.mean_us, want);
    }
    /* liveness of the model on odd P, every rule and activation, uneven delays; tau bounds streaks */
    for (int P = 1; P <= 37; P += 6)
        for (int rule = SIM_SYNC; rule <= SIM_QUORUM; rule++)
            for (int act = SIM_ACT_FLAT; act <= SIM_ACT_TREE; act++) {
                sim_cfg_t c = cfg(P, (sim_rule_t)rule, (sim_act_t)act, 20, 2);
                c.delay = lognorm;
                sim_result_t r = run(c, k, SIM_OK);
                CHECK(r.rounds > 0 && r.fresh_frac > 0 && r.fresh_frac <= 1.0 + 1e-12,
                      "P=%d %s: rounds %ld fresh %.3f", P, sim_rule_name(c.rule), r.rounds, r.fresh_frac);
                c.delay = slow0;
                c.tau = 3;
                r = run(c, k, SIM_OK);
                CHECK(r.max_streak <= 3, "P=%d %s tau 3: max streak %u", P, sim_rule_name(c.rule),
                      r.max_streak);
            }
    /* The trainer's loop (c.loop = 1): no barrier, each rank computes, waits its delay, deposits
     * and waits until a round took the deposit. Sync: every step is the compute, the slowest
     * delay of that step and the reduction, exactly. */
    for (int P = 1; P <= 16; P *= 2) {
        sim_cost_t z = {0, 0, 3.0, 0};
        sim_cfg_t c = cfg(P, SIM_SYNC, SIM_ACT_TREE, 50, 5);
        c.loop = 1, c.compute_ms = 2.0, c.delay = lognorm;
        sim_result_t r = run(c, z, SIM_OK);
        double mx = 0, A = sim_allreduce_us(&z, P, wire(P));
        for (int it = 5; it < 55; it++) {
            double m = 0;
            for (int p = 0; p < P; p++) m = fmax(m, lognorm(NULL, (uint64_t)it, p, P));
            mx += m / 50;
        }
        double want = 2000.0 + 1e3 * mx + A;
        CHECK(NEAR(r.step_us, want), "loop sync P=%d step %.6f want %.6f", P, r.step_us, want);
        c.go = 1; /* --late go: no sync round completes without this rank's deposit */
        r = run(c, z, SIM_OK);
        CHECK(NEAR(r.step_us, want), "loop sync go P=%d step %.6f want %.6f", P, r.step_us, want);
        /* solo, tau 0, no costs, rank p delayed p ms: a round starts at every deposit, so no rank
         * ever waits and rank p's step is 2 + p ms: the mean step is their harmonic mean */
        sim_cost_t zero = {0, 0, 0, 0};
        linear_ms = 1.0;
        c = cfg(P, SIM_SOLO, SIM_ACT_TREE, 4000, 100);
        c.loop = 1, c.compute_ms = 2.0, c.delay = lin;
        r = run(c, zero, SIM_OK);
        double inv = 0;
        for (int p = 0; p < P; p++) inv += 1.0 / (2000.0 + 1000.0 * p);
        CHECK(fabs(r.step_us / (P / inv) - 1) < 0.01 && r.max_us == 0,
              "loop solo P=%d step %.3f want %.3f, max wait %.3f", P, r.step_us, P / inv, r.max_us);
    }
    /* bad arguments */
    sim_cfg_t bad = cfg(4, SIM_QUORUM, SIM_ACT_FLAT, 1, 0);
    bad.quorum = 9;
    run(bad, k, SIM_ERR_ARG);
    bad = cfg(4, SIM_SYNC, SIM_ACT_FLAT, 1, 0);
    bad.loop = 1, bad.compute_ms = -1;
    run(bad, k, SIM_ERR_ARG);
    printf("%s: test_sim\n", fails ? "FAIL" : "ok");
    return fails != 0;
}
