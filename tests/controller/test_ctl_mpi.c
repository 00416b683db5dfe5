/* test_ctl_mpi.c -- the controller thread on the real libpcoll under mpirun.
 *
 *   --policy P      solo | majority | sync | quorum:Q | adaptive (+ ",key=value" options)
 *   --tau T         staleness bound (library-enforced wait set); 0 = none
 *   --rounds N      run until N rounds completed (default 1000)
 *   --unit-us U     a normal step sleeps U us (default 1000); --slow R --factor F: rank R sleeps F x U
 *   --poll-us U --spin-us S   libpcoll's cfg.poll_max_us and cfg.spin_us (default: the library's)
 *   --expect-max-streak S   fail if any streak exceeds S
 *   --min-switches K        fail if the controller made fewer than K mode switches
 *   --kill R --kill-after S rank R kills itself (SIGKILL) after S seconds; the survivors' stall
 *                   watchdog must abort the job (t_warn 1 s, t_abort 3 s) naming rank R
 *   --slow-from A --slow-until B   rank R is slow only while the rounds completed (as the rank
 *                   sees them at a step's start) are in [A, B): three phases, alike ranks, one
 *                   rank slower, alike again (a schedule in rounds)
 *   --follow on     (adaptive, with the phases above) check the choice per phase, on a schedule and
 *                   bounds set from what the run measures about itself, not from fixed times (see
 *                   follow_mpi.h): the slow rank sleeps X = K_SLOW x its own mean cycle over the
 *                   balanced phase's last steps (--factor is ignored); each phase's best kind of level
 *                   (sync, or a partial level) is scored from that phase's own records of each kind
 *                   (cycle times and the gradients' worth; one the screen skipped: the rule's model
 *                   on the other kind's records); the slow phase's must win by CLEAR, a balanced
 *                   phase whose kinds tie within CLEAR takes either; a probe of every level must
 *                   begin within a bound D of rounds of each change, or be in progress at it (one
 *                   measurement's span M = window + 2 f P rounds, f = 1 + K_SLOW: 2 deposits of
 *                   every rank, the slow rank's taking about f (P - 1) rounds in solo), and from
 *                   D + 3 M rounds after a phase's start (the probe's measurements) to its end at
 *                   least 80% of the rounds run that kind
 * Prints the longest rejection streak per rank and the decision hash; checks that every rank made
 * the same decisions (hash compared across ranks) and logged the same switches.
 */
#include "collectives/pcoll.h"
#include "controller/controller.h"
#include "tests/controller/follow_mpi.h"
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

int main(int argc, char **argv) {
    int prov;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &prov);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    const char *policy = "solo";
    int tau = 0, slow = -1, kill_rank = -1, expect = -1, min_sw = 0, follow = 0, poll_us = -1, spin_us = -1;
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
        else if (!strcmp(a, "--poll-us"))
            poll_us = atoi(v);
        else if (!strcmp(a, "--spin-us"))
            spin_us = atoi(v);
        else if (!strcmp(a, "--follow") && !strcmp(v, "on"))
            follow = 1;
        else {
            if (!me) fprintf(stderr, "test_ctl_mpi: unknown option %s\n", a);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    double extra = (factor - 1) * unit; /* us; under --follow set when the slow phase begins */
    if (follow && P > 64) {
        if (!me) fprintf(stderr, "test_ctl_mpi: --follow takes at most 64 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
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
    if (poll_us > 0) pc.poll_max_us = poll_us;
    if (spin_us >= 0) pc.spin_us = spin_us;
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
    /* --follow: what the records say per phase (follow_mpi.h); the slow rank's cycles before it is slow */
    static follow_t fw;
    for (int p = 0; p < 64; p++) fw.last_kind[p] = fw.last_ph[p] = -1;
    double cyc_sum = 0, cyc_n = 0, cyc_last[32] = {0};
    if (follow) extra = -1;
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
        if (slow_now && extra < 0) { /* --follow: K_SLOW x the mean of this rank's last 32 cycles */
            extra = cyc_n ? K_SLOW * 1e6 * cyc_sum / cyc_n : K_SLOW * unit;
            printf("rank %d: slow from round %ld: sleeps %.2f ms more (%d x its mean cycle %.2f ms)\n", me,
                   done, extra / 1e3, K_SLOW, extra / 1e3 / K_SLOW);
        }
        sleep_us(slow_now && extra > 0 ? unit + extra : unit);
        for (size_t i = 0; i < n; i++) g[i] = 1.0f;
        double td = MPI_Wtime(); /* the step time, or the cycle time, as the policy reads it */
        pcollCheck(pcoll_set_cost(h, ctl_step_cost(&cc.policy, td - ts, td - t_dep), td - ts));
        if (steps) { /* this rank's last 32 cycles, for --follow's slow rank */
            cyc_sum += td - t_dep - cyc_last[steps % 32], cyc_last[steps % 32] = td - t_dep;
            if (cyc_n < 32) cyc_n++;
        }
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
            if (follow) follow_add(&fw, &rec, &cc.policy, slow_from, slow_until);
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
               tau, P, slow, follow ? 1.0 + K_SLOW : (unit + extra) / unit, (unsigned long long)total);
        for (int p = 0; p < P; p++) printf(" %u", per[p]);
        printf("; max %u; decision hash %016llx on all %d ranks; %llu mode switches, %llu screened probes\n",
               gmax, (unsigned long long)hash, P, (unsigned long long)st.mode_switches,
               (unsigned long long)st.screens);
        for (size_t i = 0; i < nsw && i < 256; i++)
            if (i < 16 || follow)
                printf("  switch at round %llu: %s\n", (unsigned long long)sw[i].effective, sw[i].reason);
        if (follow)
            fails += follow_check(&fw, sw, nsw < 256 ? nsw : 256, &cc.policy, P, slow_from, slow_until);
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
