/* test_ctl_mpi.c -- the controller thread on the real libpcoll under mpirun.
 *
 *   --policy P      solo | majority | sync | quorum:Q | adaptive (+ ",key=value" options)
 *   --tau T         staleness bound (library-enforced wait set); 0 = none
 *   --rounds N      run until N rounds completed (default 1000)
 *   --unit-us U     a normal step sleeps U us (default 1000); --slow R --factor F: rank R sleeps F x U
 *   --expect-max-streak S   fail if any streak exceeds S
 *   --min-switches K        fail if the controller made fewer than K mode switches
 *   --kill R --kill-after S rank R kills itself (SIGKILL) after S seconds; the survivors' stall
 *                   watchdog must abort the job (t_warn 1 s, t_abort 3 s) naming rank R
 *   --slow-from A --slow-until B   rank R is slow only while the rounds completed (as the rank
 *                   sees them at a step's start) are in [A, B): three phases, alike ranks, one
 *                   rank slower, alike again (a schedule in rounds)
 *   --follow on     (adaptive, with the phases above) check the choice per phase, on a schedule set
 *                   from what the run measures about itself, not from fixed times: a calibration
 *                   (before the controller starts, on handles of their own) measures the sync round
 *                   R and the solo cycle c with alike ranks at step U; while either overhead (R - U,
 *                   c - U) keeps sync from beating solo by 1.5x in the rule's model (check_follow),
 *                   U doubles (at most 6 times; then it fails: no clear choice on this machine now).
 *                   The slow rank then sleeps U + X, X the smallest multiple of R at which partial
 *                   levels beat sync by 2x in the model (--factor is ignored). Each phase's best level
 *                   comes from the model on the measured R, c, U, X and must win by 1.5x; a probe of
 *                   every level must begin within D = 3 M + lag rounds of each change (M = window +
 *                   2 f P rounds, f = (c + X) / c: one measurement's span, window deposits or rounds
 *                   and 2 deposits of every rank, the slow rank's taking about f (P - 1) rounds in
 *                   solo); and from D + 3 M rounds after each phase's start (the probe's
 *                   measurements) to its end, at least 80% of the rounds must run the best level's
 *                   kind (sync, or a partial level: majority and solo both beat sync there)
 * Prints the longest rejection streak per rank and the decision hash; checks that every rank made
 * the same decisions (hash compared across ranks) and logged the same switches.
 */
#include "collectives/pcoll.h"
#include "controller/controller.h"
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int P, me;

static void sleep_us(double us) {
    struct timespec ts = {(time_t)(us / 1e6), (long)((us - (time_t)(us / 1e6) * 1e6) * 1e3)};
    nanosleep(&ts, NULL);
}

/* --follow: the rule's own model of a phase's scores (gradients per second at their worth
 * 1/(1+lag), lag in sync steps: the gradients applied between a rank's rounds, over P), from the
 * measured sync round R and solo cycle c of alike ranks at step U, and the slow rank's extra sleep X
 * (0: alike). Sync takes P gradients per round, and a round waits for the slowest step: R + X. Solo
 * takes each rank's gradients as they come, the fast ranks every c, the slow one every c + X.
 * Returns partial's score over sync's. */
static double partial_over_sync(double R, double c, double X) {
    const double sync = P / (R + X), fast = 1 / c, slow = 1 / (c + X);
    const double lag_fast = ((P - 2) * fast + slow) * c / P, lag_slow = (P - 1) * fast * (c + X) / P;
    return ((P - 1) * fast / (1 + lag_fast) + slow / (1 + lag_slow)) / sync;
}

/* The ranks' mean cycle (seconds per step) over `rounds` rounds of a static rule at step `us`, on a
 * handle of its own (no controller), skipping each rank's first 3 steps. Collective. */
static double calibrate(pcoll_mode_t mode, double us, long rounds) {
    pcoll_config_t pc;
    pcoll_config_default(&pc);
    pc.rule.mode = mode;
    pc.ring = 64;
    const size_t n = 1024;
    pcoll_t *h;
    pcollCheck(pcoll_create(MPI_COMM_WORLD, n, PCOLL_MEM_HOST, &pc, &h));
    float *g = calloc(n, sizeof *g);
    const float *res;
    long steps = 0;
    double t3 = 0, t = 0;
    while (pcoll_rounds(h) < (uint64_t)rounds) {
        sleep_us(us);
        pcollCheck(pcoll_set_cost(h, 0, 0));
        pcollCheck(pcoll_deposit(h, g, 0));
        if (pcoll_wait(h, PCOLL_WAIT_CONSUMED, 60, NULL)) {
            fprintf(stderr, "rank %d: calibration wait: %s\n", me, pcoll_last_error(h));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        while (pcoll_next(h, NULL, &res, NULL) == PCOLL_OK) {}
        t = MPI_Wtime();
        if (++steps == 3) t3 = t;
    }
    pcoll_join(h);
    while (pcoll_wait(h, PCOLL_WAIT_NEWER, 60, NULL) == PCOLL_OK)
        while (pcoll_next(h, NULL, &res, NULL) == PCOLL_OK) {}
    pcollCheck(pcoll_finalize(&h, 60));
    free(g);
    double mine = steps > 4 ? (t - t3) / (double)(steps - 3) : 0, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / P;
}

/* --follow: each phase's best kind of level (sync, or partial) from the model on the measured
 * quantities, which must win by 1.5x, else the phases do not test a clear choice. Then the
 * re-probes and the share of each phase's rounds (see the header). Returns the failures, printed. */
static int check_follow(const ctl_switch_t *sw, size_t nsw, const ctl_policy_cfg_t *c, double R, double cyc,
                        double X, long from, long until, const uint64_t sync[3], const uint64_t n[3]) {
    int fails = 0;
    const double bal = partial_over_sync(R, cyc, 0), slow = partial_over_sync(R, cyc, X);
    const int want_sync[3] = {bal < 1, slow < 1, bal < 1};
    const double margin[3] = {bal < 1 ? 1 / bal : bal, slow < 1 ? 1 / slow : slow, bal < 1 ? 1 / bal : bal};
    const uint64_t M = (uint64_t)c->window + (uint64_t)ceil(2 * P * (cyc + X) / cyc),
                   D = 3 * M + (uint64_t)c->lag;
    for (int ph = 0; ph < 3; ph++) {
        if (margin[ph] < 1.5) {
            printf("FAIL: phase %d: best level by only %.2fx in the model: not a clear choice\n", ph,
                   margin[ph]);
            fails++;
        }
        const double share = n[ph] ? (double)(want_sync[ph] ? sync[ph] : n[ph] - sync[ph]) / n[ph] : 0;
        printf("phase %d: best %s (model %.2fx), %.0f%% of its %llu rounds after %llu in it\n", ph,
               want_sync[ph] ? "sync" : "partial", margin[ph], 100 * share, (unsigned long long)n[ph],
               (unsigned long long)(D + 3 * M));
        if (n[ph] < 100 || share < 0.8) {
            printf("FAIL: phase %d: %.0f%% of %llu rounds at its best level (at least 80%% of 100 or more)\n",
                   ph, 100 * share, (unsigned long long)n[ph]);
            fails++;
        }
        if (ph == 0) continue;
        const long at = ph == 1 ? from : until;
        long found = -1;
        for (size_t i = 0; i < nsw && found < 0; i++) {
            const long r = (long)sw[i].round;
            if ((sw[i].what & CTL_DEC_PROBE) && r >= at &&
                (!strncmp(sw[i].reason, "rate changed", 12) || !strncmp(sw[i].reason, "probe due", 9)))
                found = r - at;
        }
        printf("change %d at round %ld: probe of every level after %ld rounds (at most %llu)\n", ph, at,
               found, (unsigned long long)D);
        if (found < 0 || found > (long)D) {
            printf("FAIL: change %d: no probe of every level within %llu rounds\n", ph,
                   (unsigned long long)D);
            fails++;
        }
    }
    return fails;
}

int main(int argc, char **argv) {
    int prov;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &prov);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    const char *policy = "solo";
    int tau = 0, slow = -1, kill_rank = -1, expect = -1, min_sw = 0, follow = 0;
    long rounds = 1000, slow_from = 0, slow_until = -1;
    double unit = 1000, factor = 4, kill_after = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--policy"))
            policy = v;
        else if (!strcmp(a, "--tau"))
            tau = atoi(v);
        else if (!strcmp(a, "--rounds"))
            rounds = atol(v);
        else if (!strcmp(a, "--unit-us"))
            unit = atof(v);
        else if (!strcmp(a, "--slow"))
            slow = atoi(v);
        else if (!strcmp(a, "--factor"))
            factor = atof(v);
        else if (!strcmp(a, "--kill"))
            kill_rank = atoi(v);
        else if (!strcmp(a, "--kill-after"))
            kill_after = atof(v);
        else if (!strcmp(a, "--expect-max-streak"))
            expect = atoi(v);
        else if (!strcmp(a, "--min-switches"))
            min_sw = atoi(v);
        else if (!strcmp(a, "--slow-from"))
            slow_from = atol(v);
        else if (!strcmp(a, "--slow-until"))
            slow_until = atol(v);
        else if (!strcmp(a, "--follow") && !strcmp(v, "on"))
            follow = 1;
        else {
            if (!me) fprintf(stderr, "test_ctl_mpi: unknown option %s\n", a);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    /* --follow: the schedule from the run's own measurements (see the header) */
    double R = 0, cyc = 0, extra = (factor - 1) * unit;
    if (follow) {
        for (int tries = 0;; tries++) {
            R = calibrate(PCOLL_SYNC, unit, 24);
            cyc = calibrate(PCOLL_SOLO, unit, 24 * (long)P);
            const double bal = 1 / partial_over_sync(R, cyc, 0);
            if (!me)
                printf(
                    "calibration: step %.2f ms: sync round %.2f ms, solo cycle %.2f ms: sync beats solo by "
                    "%.2fx in the model\n",
                    unit / 1e3, R * 1e3, cyc * 1e3, bal);
            if (bal >= 1.5 || tries == 6) break;
            unit *= 2;
        }
        int k = 1;
        while (partial_over_sync(R, cyc, k * R) < 2 && k < 64) k++;
        extra = k * R * 1e6;
        if (!me)
            printf("calibration: the slow rank sleeps %.2f ms more (%d sync rounds): partial beats sync by "
                   "%.2fx in the model\n",
                   extra / 1e3, k, partial_over_sync(R, cyc, k * R));
    }
    ctl_config_t cc;
    ctl_config_default(&cc);
    char err[256];
    if (ctl_policy_parse(policy, &cc.policy, err, sizeof err)) {
        if (!me) fprintf(stderr, "%s\n", err);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    cc.policy.tau = tau;
    cc.log_switches = 0;
    if (kill_rank >= 0) {
        cc.t_warn = 1;
        cc.t_abort = 3;
    }
    pcoll_config_t pc;
    pcoll_config_default(&pc);
    pc.horizon = 1;
    pc.tau = tau;
    pc.ring = 64;
    size_t n = 1024;
    pcoll_t *h;
    pcollCheck(pcoll_create(MPI_COMM_WORLD, n, PCOLL_MEM_HOST, &pc, &h));
    ctl_t *ctl;
    if (ctl_start(h, &cc, &ctl)) {
        fprintf(stderr, "ctl_start failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    float *g = calloc(n, sizeof *g);
    pcoll_record_t rec;
    pcoll_record_init(&rec, P);
    uint32_t max_streak = 0, *per = calloc((size_t)P, 4);
    /* --follow: rounds of each phase (0, 1, 2: before, within, after [slow_from, slow_until)) run in
     * sync, counted from the phase's start + settle on */
    uint64_t ph_sync[3] = {0}, ph_n[3] = {0}, settle = 0;
    if (follow) {
        const uint64_t M = (uint64_t)cc.policy.window + (uint64_t)ceil(2 * P * (cyc + extra / 1e6) / cyc);
        settle = 3 * M + (uint64_t)cc.policy.lag + 3 * M;
    }
    int fails = 0;
    double t0 = MPI_Wtime();
    long steps = 0;
    double t_dep = MPI_Wtime(); /* this rank's previous deposit */
    for (;;) {
        if (me == kill_rank && MPI_Wtime() - t0 > kill_after) {
            fprintf(stderr, "test_ctl_mpi: rank %d kills itself with SIGKILL\n", me);
            fflush(stderr);
            raise(SIGKILL);
        }
        if (pcoll_rounds(h) >= (uint64_t)rounds) break;
        double ts = MPI_Wtime();
        const long done = (long)pcoll_rounds(h);
        const int slow_now = me == slow && done >= slow_from && (slow_until < 0 || done < slow_until);
        sleep_us(slow_now ? unit + extra : unit);
        for (size_t i = 0; i < n; i++) g[i] = 1.0f;
        double td = MPI_Wtime(); /* the step time, or the cycle time, as the policy reads it */
        pcollCheck(pcoll_set_cost(h, ctl_step_cost(&cc.policy, td - ts, td - t_dep), td - ts));
        t_dep = td;
        pcollCheck(pcoll_deposit(h, g, 0));
        int rc = pcoll_wait(h, PCOLL_WAIT_CONSUMED, 60, NULL);
        if (rc) {
            fprintf(stderr, "rank %d: wait: %s\n", me, pcoll_last_error(h));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        const float *res;
        while (pcoll_next(h, NULL, &res, &rec) == PCOLL_OK) {
            for (int p = 0; p < P; p++) {
                if (rec.streak[p] > max_streak) max_streak = rec.streak[p];
                if (rec.streak[p] > per[p]) per[p] = rec.streak[p];
            }
            const long r = (long)rec.round;
            const int ph = r < slow_from ? 0 : slow_until < 0 || r < slow_until ? 1 : 2;
            const long from = ph == 0 ? 0 : ph == 1 ? slow_from : slow_until;
            if (follow && (uint64_t)(r - from) >= settle) ph_n[ph]++, ph_sync[ph] += rec.mode == PCOLL_SYNC;
        }
        steps++;
    }
    pcoll_join(h);
    int rc;
    const float *res;
    while ((rc = pcoll_wait(h, PCOLL_WAIT_NEWER, 60, NULL)) == PCOLL_OK)
        while (pcoll_next(h, NULL, &res, &rec) == PCOLL_OK)
            for (int p = 0; p < P; p++)
                if (rec.streak[p] > per[p]) per[p] = rec.streak[p];
    if (rc != PCOLL_DONE) {
        fprintf(stderr, "rank %d: drain: %s\n", me, pcoll_strerror(rc));
        fails++;
    }
    if (ctl_wait(ctl, 60) != CTL_OK) {
        fprintf(stderr, "rank %d: ctl_wait: %s\n", me, ctl_last_error(ctl));
        fails++;
    }
    ctl_policy_stats_t st;
    uint64_t hash = 0;
    ctl_stats(ctl, &st, &hash);
    if (st.rounds != pcoll_rounds(h)) {
        fprintf(stderr, "rank %d: the policy observed %llu of %llu rounds\n", me,
                (unsigned long long)st.rounds, (unsigned long long)pcoll_rounds(h));
        fails++;
    }
    ctl_switch_t sw[256];
    size_t nsw = ctl_switch_log(ctl, sw, 256);
    if (ctl_stop(&ctl) != CTL_OK) {
        fprintf(stderr, "rank %d: controller error\n", me);
        fails++;
    }
    uint64_t total = pcoll_rounds(h);
    pcollCheck(pcoll_finalize(&h, 60));
    uint64_t *hs = malloc((size_t)P * 8);
    MPI_Allgather(&hash, 1, MPI_UINT64_T, hs, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int p = 0; p < P; p++)
        if (hs[p] != hash) {
            fprintf(stderr, "rank %d: decision hash differs from rank %d\n", me, p);
            fails++;
        }
    uint32_t gmax = 0;
    MPI_Allreduce(&max_streak, &gmax, 1, MPI_UINT32_T, MPI_MAX, MPI_COMM_WORLD);
    if (me == 0) {
        printf("policy=%s tau=%d P=%d slow=%d x%.1f: %llu rounds; longest rejection streak per rank:", policy,
               tau, P, slow, (unit + extra) / unit, (unsigned long long)total);
        for (int p = 0; p < P; p++) printf(" %u", per[p]);
        printf("; max %u; decision hash %016llx on all %d ranks; %llu mode switches, %llu screened probes\n",
               gmax, (unsigned long long)hash, P, (unsigned long long)st.mode_switches,
               (unsigned long long)st.screens);
        for (size_t i = 0; i < nsw && i < 256; i++)
            if (i < 16 || follow)
                printf("  switch at round %llu: %s\n", (unsigned long long)sw[i].effective, sw[i].reason);
        if (follow)
            fails += check_follow(sw, nsw < 256 ? nsw : 256, &cc.policy, R, cyc, extra / 1e6, slow_from,
                                  slow_until, ph_sync, ph_n);
        if (expect >= 0 && gmax > (uint32_t)expect) {
            printf("FAIL: streak %u > %d\n", gmax, expect);
            fails++;
        }
        if (st.mode_switches < (uint64_t)min_sw) {
            printf("FAIL: %llu mode switches, expected at least %d\n", (unsigned long long)st.mode_switches,
                   min_sw);
            fails++;
        }
    }
    int tot;
    MPI_Allreduce(&fails, &tot, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (!me) printf("%s\n", tot ? "FAIL" : "OK");
    pcoll_record_free(&rec);
    free(g);
    free(per);
    free(hs);
    MPI_Finalize();
    return tot ? 1 : 0;
}
