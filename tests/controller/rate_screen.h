/* rate_screen.h -- test_rate's tests of the screen (controller/rate.c, predict.c): the scores it
 * replays from the step times against the true ones and the probes it skips (screen), and that it
 * skips a probe only while sync scores best (screen_sync). Static functions for test_rate.c's one
 * translation unit. */
#ifndef CTL_TEST_RATE_SCREEN_H
#define CTL_TEST_RATE_SCREEN_H
#include "tests/controller/rate_scen.h"

/* The screen (rate.c, predict.c). 1: the score it replays for majority and solo from the ranks'
 * step times after the run's first sync measurement is, on average over 8 draws, the level's true
 * score (the static rule run on the same draw) within `tol`, in every regime of the short-run
 * table at P = 4 and 8 (-v prints the bias and the draws' rms error: 1-4% where the step times
 * are regular, 10-27% with log-normal 0.8 noise or a random straggler, from the 4-8 step times
 * per rank it replays; the screen takes that spread as one measurement's). 2: with alike ranks,
 * where sync is best, a run that starts in sync (the default) runs no partial round (both probes
 * screened) and one that starts in solo skips majority's; with a straggler, a run that starts in
 * sync probes solo (replayed best) before majority; where a partial rule is best, the run still
 * spends most of its time in a partial level. (In the short-run table, starting in solo, the
 * cost over the best static fell with the screen from 1.07 to 1.045 with alike ranks at P = 4,
 * 1.08 to 1.045 at P = 8, 1.065 to 1.04 with a straggler, and moved nowhere else.) */
#define SCREEN_DRAWS 8
static void test_screen(void) {
    const double tol = 0.15;
    const char *kname[6] = {"alike",          "straggler k=4",    "linear skew",
                            "log-normal 0.8", "random straggler", "log-normal 0.3"};
    for (int P = 4; P <= 8; P += 4)
        for (int kind = 0; kind < 6; kind++) {
            scen_t s = alike(P, 1);
            s.N = 3000;
            set_regime(&s, kind);
            double sc3[3], e1[3] = {0}, e2[3] = {0};
            int best = 0;
            for (uint64_t seed = 1; seed <= SCREEN_DRAWS; seed++) {
                s.seed = seed;
                best = truth(&s, 100, sc3);
                gen_t g;
                ctl_policy_t *pol = scen_start("adaptive,start=sync,screen=off", &s, &g, NULL);
                ctl_policy_stats_t st;
                for (uint64_t r = 0; r < s.N; r++) {
                    ctl_decision_t d;
                    int k;
                    scen_step(pol, &g, &d, &k);
                    ctl_policy_stats(pol, &st);
                    if (isfinite(st.predicted[1]) && isfinite(st.predicted[2])) break;
                }
                ctl_policy_free(pol);
                gen_free(&g);
                for (int l = 1; l < 3; l++) {
                    double e = st.predicted[l] / sc3[l] - 1;
                    e1[l] += e / SCREEN_DRAWS, e2[l] += e * e / SCREEN_DRAWS;
                }
            }
            for (int l = 1; l < 3; l++) {
                if (verbose)
                    printf(
                        "    %-16s P=%d %-8s: replayed over true %+.1f%% on average, rms %.1f%% (%d draws)\n",
                        kname[kind], P, lvname[l], 100 * e1[l], 100 * sqrt(e2[l]), SCREEN_DRAWS);
                CHECK(fabs(e1[l]) <= tol, "%s P=%d %s: replayed %+.1f%% off the true score on average",
                      kname[kind], P, lvname[l], 100 * e1[l]);
            }
            /* with the screen: what it skips */
            const char *spec[2] = {"adaptive", "adaptive,start=solo"};
            for (int v = 0; v < 2; v++) {
                outcome_t o;
                run_scen(spec[v], &s, 0, &o);
                if (verbose > 1)
                    for (int i = 0; i < o.L.n; i++)
                        printf("      %s P=%d %s r=%llu %s\n", kname[kind], P, spec[v],
                               (unsigned long long)o.L.d[i].round, o.L.d[i].reason);
                if (best == 0 && kind == 0 && linear_worth) { /* the default worth */
                    if (v == 0)
                        CHECK(o.time[CTL_LV_MAJORITY] == 0 && o.time[CTL_LV_LIGHT] == 0,
                              "%s P=%d, %s: %.0f%% of the time partial", kname[kind], P, spec[v],
                              100 * (o.time[1] + o.time[2]) / o.total);
                    else
                        CHECK(o.time[1] == 0, "%s P=%d, %s: majority probed (%.0f%% of the time)",
                              kname[kind], P, spec[v], 100 * o.time[1] / o.total);
                }
                if (kind == R_STRAGGLER &&
                    v == 0) { /* after sync, the partial level replayed best is probed first */
                    int first = -1;
                    for (int i = 0; i < o.L.n && first < 0; i++)
                        if (o.L.d[i].what & CTL_DEC_PROBE && o.L.d[i].to != PCOLL_SYNC) first = o.L.d[i].to;
                    CHECK(first == PCOLL_SOLO, "%s P=%d, %s: first partial probe %d, not solo", kname[kind],
                          P, spec[v], first);
                }
                if (best > 0)
                    CHECK(main_level(&o) != CTL_LV_SYNC, "%s P=%d, %s: mostly sync, %s is best", kname[kind],
                          P, spec[v], lvname[best]);
                free(o.L.d);
            }
        }
}

/* The screen keeps sync or nothing: it skips a partial level's probe only while sync scores best
 * of the levels measured (the replay is not trusted to choose between partial levels: training
 * runs read it up to 30% low). Whenever a screen acts, sync's score is the highest; and where a
 * partial level is best, the other partial level is still measured. Straggler, linear skew and
 * random straggler at P = 4 and 8, both start levels, 4 draws each; screens must happen. */
static void test_screen_sync(void) {
    const int kinds[4] = {R_ALIKE, R_STRAGGLER, R_SKEW, R_RANDOM};
    uint64_t screens = 0;
    for (int P = 4; P <= 8; P += 4)
        for (int kind = 0; kind < 4; kind++)
            for (int v = 0; v < 2; v++)
                for (uint64_t seed = 1; seed <= 4; seed++) {
                    scen_t s = alike(P, 1);
                    s.N = 2000;
                    s.seed = seed;
                    set_regime(&s, kinds[kind]);
                    gen_t g;
                    ctl_policy_t *pol = scen_start(v ? "adaptive" : "adaptive,start=sync", &s, &g, NULL);
                    uint64_t was = 0;
                    unsigned measured = 0;
                    for (uint64_t r = 0; r < s.N; r++) {
                        ctl_decision_t d;
                        int k;
                        scen_step(pol, &g, &d, &k);
                        ctl_policy_stats_t st;
                        ctl_policy_stats(pol, &st);
                        for (int l = 0; l < 3; l++) measured |= (unsigned)isfinite(st.score[l]) << l;
                        if (st.screens > was) {
                            int top = 0;
                            for (int l = 1; l < 3; l++)
                                if (isfinite(st.score[l]) && !(st.score[l] <= st.score[top])) top = l;
                            CHECK(top == 0,
                                  "P=%d kind %d %s seed %llu round %llu: a screen while %s scores best", P,
                                  kind, v ? "start solo" : "start sync", (unsigned long long)seed,
                                  (unsigned long long)r, lvname[top]);
                            screens += st.screens - was;
                            was = st.screens;
                        }
                    }
                    if (kinds[kind] != R_ALIKE)
                        CHECK(measured == 7, "P=%d kind %d %s seed %llu: levels measured %x, not all three",
                              P, kind, v ? "start solo" : "start sync", (unsigned long long)seed, measured);
                    ctl_policy_free(pol);
                    gen_free(&g);
                }
    if (verbose) printf("    screens: %llu\n", (unsigned long long)screens);
    CHECK(screens >= 1, "no screen acted: the check saw nothing");
}

#endif
