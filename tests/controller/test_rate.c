/* test_rate.c -- the rate rule (controller.h section 3a, controller/rate.c) on the event-time mock
 * of trace.h: ranks with step periods (uniform jitter or log-normal noise), a round latency, a cost
 * per round applied, and every deposit reporting its cycle time (the wall time since the rank's
 * previous deposit) as the trainer does for rule=rate.
 *
 * What "decides right" means here does not come from the rule: each scenario is also run under the
 * three static rules, and the true score of a rule is what it delivered over the whole run --
 * the gradients it took per unit of time, each counted at its worth (lag: its age in sync steps;
 * 1/(1+lag) for staleness=linear, the default, 1/(1+lag^2) with -w quadratic, which also gives
 * the adaptive policies staleness=quadratic), i.e. the quantity the rule estimates in probes.
 * The truth is thus the rule's own model of a stale gradient: these tests check that the rule
 * finds what it aims at, not which worth training has (docs/DESIGN.md#7-the-controller). The
 * adaptive run must spend most of its time in a rule whose true score is within 5% of the best
 * one (the rule is allowed to keep the less stale of two rules the noise cannot tell apart),
 * switch rarely, and never depend on P, the scale of the step times or the noise beyond that.
 * Usage: test_rate [-v|-vv] [-w linear|quadratic]    (CTL_TEST=name runs one test)
 *
 * One translation unit (trace.h's counters are static); the tests lie in headers of static
 * functions, one concern each:
 *   rate_scen.h     the harness: scenarios, a run's outcome, the static rules' truth, check_scen
 *   rate_choice.h   the level chosen and kept under stationary conditions (alike .. contest)
 *   rate_screen.h   the screen (screen, screen_sync)
 *   rate_measure.h  what the rule measures and reports (se, short, variants, stats, worth)
 *   rate_change.h   changes of the conditions (appears, follow*) and false alarms (steady, drift)
 * This file: the command line and the tests by name.
 */
#include "tests/controller/rate_change.h"
#include "tests/controller/rate_choice.h"
#include "tests/controller/rate_measure.h"
#include "tests/controller/rate_scen.h"
#include "tests/controller/rate_screen.h"

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "-vv"))
            verbose = argv[i][2] ? 2 : 1;
        else if (!strcmp(argv[i], "-w") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "linear") || !strcmp(argv[i + 1], "quadratic")))
            linear_worth = !strcmp(argv[++i], "linear");
        else {
            fprintf(stderr, "usage: test_rate [-v|-vv] [-w linear|quadratic]\n");
            return 2;
        }
    }
    const named_test_t tests[] = {
        {"alike", test_alike},
        {"straggler", test_straggler},
        {"skew", test_skew},
        {"appears", test_appears},
        {"noisy", test_noisy},
        {"random", test_random},
        {"drift", test_drift},
        {"variants", test_variants},
        {"stats", test_stats},
        {"short", test_short},
        {"se", test_se},
        {"screen", test_screen},
        {"behind", test_behind},
        {"contest", test_contest},
        {"screen_sync", test_screen_sync},
        {"follow", test_follow},
        {"follow_spread", test_follow_spread},
        {"follow_young", test_follow_young},
        {"steady", test_steady},
        {"worth", test_worth},
    };
    return run_tests(tests, sizeof tests / sizeof tests[0]);
}
