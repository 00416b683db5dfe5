/* test_pcoll.c -- libpcoll invariants under mpirun (DESIGN.md section 3).
 *
 * Every rank runs `steps` steps: sleep a delay that is a pure function of (seed, step, rank),
 * deposit an integer-valued gradient that encodes (rank, step), wait, apply every completed round
 * to a double-precision replica. At the end (after finalize flushed everything) it checks:
 *   1 agreement     hash of every round's (index, rule, F_r, flags, step times, result bits)
 *                   equal on all ranks; each step time (pcoll_set_cost) arrives with its deposit
 *   2 conservation  each (rank, step) deposit is in exactly one round; sum of results = deposits
 *   3 trigger       F_r satisfies the round's rule (sync, quorum, majority initiator, wait set)
 *   4 staleness     with --tau, no rejection streak exceeds tau
 *   5 liveness      the run ends (the test runner's timeout catches a hang)
 *   6 replicas      the replicas (weights) are bitwise equal on all ranks
 * Options: --mode sync|solo|majority|quorum:Q|mixed|dynamic  --steps N  --n N  --delay-us U
 *          --seed S  --slow RANK --slow-factor F  --tau T  --newer (WAIT_NEWER + ACCUMULATE)
 *          --expect-streak-growth  --mismatch FIELD  --div p|fresh
 *          --ring K  --records R  --pause-ms MS --pause-every N (rank 1 pauses between its
 *          pcoll_wait and pcoll_next every N steps: it falls behind the results ring)
 *          --expect-no-handoff (sync/solo, pcoll_wait(CONSUMED)): no pcoll_wait slept until the
 *          engine made progress (pcoll_stats: wait_sleeps == 0), and rounds were completed by
 *          the waiting application thread itself (driven > 0): a count, not a timing
 *          --wait-next  deposit with PCOLL_WAIT_NEXT (pcoll_wait follows at once)
 *          --expect-no-wake (with --wait-next, sync): the engine thread was not woken by the
 *          rounds: its wake-ups (pcoll_stats: engine_wakes) are no more than its 50 ms safety-net
 *          sleeps could time out in the run, plus 2
 *          --max-buffers B: at most B result buffers were allocated (the ring reuses the ones
 *          the application released, however many slots it has)
 *          --max-polls X: the engine's polls that found the round still waiting (engine_polls)
 *          are at most X per round: it holds the drive token only when a message or a local
 *          event is there
 * Exit 0 = all checks passed on every rank.
 */
#include "collectives/pcoll.h"
#include "tests/collectives/round_check.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The counts of pcoll_stats after the steps (before the drain, whose waits may sleep), each
 * checked if asked for. no_handoff: every pcoll_wait(CONSUMED) found the round either complete
 * or drivable by this thread: it never slept waiting for the engine (each such sleep is a
 * wake-up, a thread hand-off), and some rounds were completed by this thread itself. no_wake:
 * the engine woke no more often than its 50 ms safety-net sleeps time out in elapsed_s, plus 2.
 * max_polls > 0: the engine's idle polls per round are at most max_polls. */
static void check_counts(pcoll_t *h, int steps, int no_handoff, int no_wake, double max_polls,
                         int max_buffers, double elapsed_s) {
    pcoll_stats_t st;
    memset(&st, 0, sizeof st);
    pcollCheck(pcoll_stats(h, &st));
    printf("rank %d: %d waits, %llu rounds: %llu completed by the waiting thread, %llu sleeps in "
           "pcoll_wait, %llu engine wake-ups and %llu idle polls in %.2f s, %llu result buffers\n",
           me, steps, (unsigned long long)st.rounds, (unsigned long long)st.driven,
           (unsigned long long)st.wait_sleeps, (unsigned long long)st.engine_wakes,
           (unsigned long long)st.engine_polls, elapsed_s, (unsigned long long)st.result_buffers);
    if (no_handoff) {
        CHECK(st.wait_sleeps == 0, "pcoll_wait slept %llu times waiting for the engine",
              (unsigned long long)st.wait_sleeps);
        CHECK(st.driven > 0, "no round was completed by the waiting application thread");
    }
    double timeouts = elapsed_s / 0.05 + 2;
    if (no_wake)
        CHECK((double)st.engine_wakes <= timeouts,
              "the engine woke %llu times in %llu rounds (its safety-net timeouts: <= %.0f)",
              (unsigned long long)st.engine_wakes, (unsigned long long)st.rounds, timeouts);
    if (max_buffers > 0)
        CHECK(st.result_buffers <= (uint64_t)max_buffers, "%llu result buffers allocated (allowed %d)",
              (unsigned long long)st.result_buffers, max_buffers);
    if (max_polls > 0)
        CHECK((double)st.engine_polls <= max_polls * (double)st.rounds,
              "the engine polled %llu times without progress in %llu rounds (allowed %.1f a round)",
              (unsigned long long)st.engine_polls, (unsigned long long)st.rounds, max_polls);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    const char *mode = "sync", *mismatch = NULL, *div = NULL;
    int steps = 200, tau = 0, slow = -1, newer = 0, growth = 0, ring = 0, records = 1 << 16;
    int pause_every = 0, no_handoff = 0, wait_next = 0, no_wake = 0;
    double max_polls = 0;
    int max_buffers = 0;
    double pause_ms = 0;
    size_t n = 64;
    double delay_us = 500, slow_factor = 4;
    uint64_t seed = 7;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--mode"))
            mode = v, i++;
        else if (!strcmp(a, "--steps"))
            steps = atoi(v), i++;
        else if (!strcmp(a, "--n"))
            n = (size_t)atol(v), i++;
        else if (!strcmp(a, "--delay-us"))
            delay_us = atof(v), i++;
        else if (!strcmp(a, "--seed"))
            seed = (uint64_t)atoll(v), i++;
        else if (!strcmp(a, "--slow"))
            slow = atoi(v), i++;
        else if (!strcmp(a, "--slow-factor"))
            slow_factor = atof(v), i++;
        else if (!strcmp(a, "--tau"))
            tau = atoi(v), i++;
        else if (!strcmp(a, "--mismatch"))
            mismatch = v, i++;
        else if (!strcmp(a, "--div"))
            div = v, i++;
        else if (!strcmp(a, "--ring"))
            ring = atoi(v), i++;
        else if (!strcmp(a, "--records"))
            records = atoi(v), i++;
        else if (!strcmp(a, "--pause-ms"))
            pause_ms = atof(v), i++;
        else if (!strcmp(a, "--pause-every"))
            pause_every = atoi(v), i++;
        else if (!strcmp(a, "--newer"))
            newer = 1;
        else if (!strcmp(a, "--expect-no-handoff"))
            no_handoff = 1;
        else if (!strcmp(a, "--wait-next"))
            wait_next = PCOLL_WAIT_NEXT;
        else if (!strcmp(a, "--expect-no-wake"))
            no_wake = 1;
        else if (!strcmp(a, "--max-buffers"))
            max_buffers = atoi(v), i++;
        else if (!strcmp(a, "--max-polls"))
            max_polls = atof(v), i++;
        else if (!strcmp(a, "--expect-streak-growth"))
            growth = 1;
        else {
            if (!me) fprintf(stderr, "test_pcoll: unknown option %s\n", a);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (n < (size_t)P + 2) n = (size_t)P + 2;

    pcoll_config_t cfg;
    pcoll_config_default(&cfg);
    cfg.seed = seed;
    cfg.tau = tau;
    cfg.ring = ring ? ring : tau ? tau + 8 : 1024; /* a lagging rank holds the others back */
    cfg.records = records;
    if (div) cfg.div = !strcmp(div, "p") ? PCOLL_DIV_P : PCOLL_DIV_FRESH;
    int dynamic = !strcmp(mode, "dynamic"), mixed = !strcmp(mode, "mixed");
    if (dynamic || mixed)
        cfg.horizon = 1; /* rule changes need a horizon */
    else if (!mixed && pcoll_parse_mode(mode, &cfg.rule)) {
        if (!me) fprintf(stderr, "test_pcoll: bad --mode %s\n", mode);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    if (mismatch) { /* every rank must get a clean error naming the field; no hang */
        size_t nn = n;
        if (!strcmp(mismatch, "n") && me == P - 1) nn = n + 1;
        if (!strcmp(mismatch, "seed") && me == P - 1) cfg.seed = seed + 1;
        if (!strcmp(mismatch, "mode") && me == P - 1) cfg.rule.mode = PCOLL_MAJORITY;
        if (!strcmp(mismatch, "arg") && me == P - 1) cfg.ring = 0;
        pcoll_t *h = NULL;
        int rc = pcoll_create(MPI_COMM_WORLD, nn, PCOLL_MEM_HOST, &cfg, &h);
        const char *m = pcoll_last_error(NULL);
        printf("rank %d: rc=%d (%s): %s\n", me, rc, pcoll_strerror(rc), m);
        int want = !strcmp(mismatch, "arg") ? PCOLL_ERR_ARG : PCOLL_ERR_MISMATCH;
        CHECK(rc == want, "rc %d, want %d", rc, want);
        CHECK(h == NULL, "handle created despite the mismatch");
        const char *field = !strcmp(mismatch, "mode")  ? "rule.mode"
                            : !strcmp(mismatch, "arg") ? "ring"
                                                       : mismatch;
        if (strcmp(mismatch, "arg") || me == P - 1)
            CHECK(strstr(m, field) != NULL, "message does not name '%s': %s", field, m);
        char rk[32];
        snprintf(rk, sizeof rk, "rank %d", P - 1);
        if (P > 1) CHECK(strstr(m, rk) != NULL, "message does not name %s: %s", rk, m);
        int tot = 0;
        MPI_Allreduce(&fails, &tot, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Finalize();
        return tot ? 1 : 0;
    }

    pcoll_t *h = NULL;
    pcollCheck(pcoll_create(MPI_COMM_WORLD, n, PCOLL_MEM_HOST, &cfg, &h));
    CHECK(pcoll_set_cost(h, -1.0) == PCOLL_ERR_ARG && strstr(pcoll_last_error(h), "pcoll_set_cost"),
          "a negative step time is refused, naming the call: %s", pcoll_last_error(h));
    CHECK(pcoll_set_cost(h, NAN) == PCOLL_ERR_ARG, "a NaN step time is refused");
    if (mixed) { /* a static schedule of rule changes, the same on every rank */
        static int w[1];
        w[0] = P - 1;
        for (int k = 1; k < 400; k++) {
            pcoll_rule_t ru = {0};
            switch (k % 5) {
            case 0: ru.mode = PCOLL_SYNC; break;
            case 1: ru.mode = PCOLL_SOLO; break;
            case 2: ru.mode = PCOLL_MAJORITY; break;
            case 3:
                ru.mode = PCOLL_QUORUM;
                ru.quorum = 2;
                break;
            default:
                ru.mode = PCOLL_SOLO;
                ru.wait = w;
                ru.nwait = 1;
            }
            pcollCheck(pcoll_set_rule(h, (uint64_t)k * 13, &ru));
        }
        pcollCheck(pcoll_set_horizon(h, UINT64_MAX)); /* the schedule is final: every round */
    }
    ctl_t ctl = {h, P, 0, 2};
    pthread_t cth;
    if (dynamic) pthread_create(&cth, NULL, dyn_ctl, &ctl);

    float *g = malloc(n * sizeof *g);
    double *w = calloc(n, sizeof *w);             /* replica: w += result of every round */
    double *dep_sum = calloc(n, sizeof *dep_sum); /* this rank's deposits, summed */
    int *seen = calloc((size_t)steps, sizeof *seen);
    uint64_t applied = 0;
    pcoll_record_t rec;
    pcoll_record_init(&rec, P);
    uint64_t hash = 1469598103934665603ull;
    uint32_t *streak_at = calloc(8, 4); /* max streak of the slow rank at 1/8 .. 8/8 of the run */
    double *all_sum = calloc(n, sizeof *all_sum);

    /* a slow rank runs proportionally fewer steps, so that all ranks finish at about the same
     * time and its streaks are measured while the others are still active */
    if (me == slow && slow_factor > 1)
        steps = (int)(steps / slow_factor) > 0 ? (int)(steps / slow_factor) : 1;
    rcheck_t rc_ = {P, me,      steps, tau,       slow, (int)cfg.div, n, 0, 1469598103934665603ull,
                    w, all_sum, seen,  streak_at, 0};
    int joined = 0;
    double t_begin = MPI_Wtime();
    for (int s = 0; s <= steps; s++) {
        if (s == steps && !joined) /* before the drain, whose waits may sleep */
            check_counts(h, steps, no_handoff, no_wake, max_polls, max_buffers, MPI_Wtime() - t_begin);
        if (s == steps) { /* join, then drain the rounds that still complete */
            pcoll_join(h);
            joined = 1;
        }
        if (!joined) {
            double d = delay_us * u01(seed, (uint64_t)s, (uint64_t)me);
            if (me == slow) d = delay_us * slow_factor;
            sleep_us(d);
            make_grad(g, n, me, s);
            for (size_t k = 0; k < n; k++) dep_sum[k] += g[k];
            pcollCheck(pcoll_set_cost(h, cost_of(me, s)));
            int rc = pcoll_deposit(h, g, (newer ? PCOLL_ACCUMULATE : 0) | wait_next);
            if (rc) {
                fprintf(stderr, "rank %d: deposit: %s\n", me, pcoll_last_error(h));
                fails++;
                break;
            }
            rc = pcoll_wait(h, newer ? PCOLL_WAIT_NEWER : PCOLL_WAIT_CONSUMED, 60.0, NULL);
            if (rc) {
                fprintf(stderr, "rank %d: wait: %s\n", me, pcoll_last_error(h));
                fails++;
                break;
            }
        }
        if (pause_every && me == 1 % P && s % pause_every == pause_every - 1) sleep_us(pause_ms * 1e3);
        const float *res;
        uint64_t r;
        while (pcoll_next(h, &r, &res, &rec) == PCOLL_OK) { rcheck_round(&rc_, r, res, &rec, s); }
        if (joined) {
            int rc = pcoll_wait(h, PCOLL_WAIT_NEWER, 60.0, NULL);
            if (rc == PCOLL_DONE) break;
            if (rc) {
                fprintf(stderr, "rank %d: drain: %s\n", me, pcoll_last_error(h));
                fails++;
                break;
            }
            s--; /* stay in the drain step */
        }
    }
    applied = rc_.applied;
    hash = rc_.hash;
    fails += rc_.fails;
    ctl.stop = 1;
    if (dynamic) pthread_join(cth, NULL); /* it ends once the engine is done; then free */
    int rc = pcoll_finalize(&h, 120.0);
    CHECK(rc == PCOLL_OK, "finalize: %s", pcoll_strerror(rc));
    if (!newer && !cfg.div)
        for (int s = 0; s < steps; s++) CHECK(seen[s] == 1, "step %d seen %d times", s, seen[s]);

    /* conservation: sum over rounds = sum over deposits (double sums of integers: exact) */
    double *tot_dep = calloc(n, sizeof *tot_dep);
    MPI_Allreduce(dep_sum, tot_dep, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    uint64_t maxapplied = 0;
    MPI_Allreduce(&applied, &maxapplied, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    int complete = applied == maxapplied;
    if (!cfg.div && complete)
        for (size_t k = 0; k < n; k++)
            CHECK(all_sum[k] == tot_dep[k], "conservation: element %zu: rounds sum %g, deposits %g", k,
                  all_sum[k], tot_dep[k]);
    /* agreement and replica equality: compare on ranks that applied the same number of rounds */
    uint64_t mine[3] = {hash, mix(applied), 0};
    for (size_t k = 0; k < n; k++) {
        uint64_t b;
        memcpy(&b, &w[k], 8);
        mine[2] = (mine[2] ^ b) * 1099511628211ull;
    }
    uint64_t *all = malloc((size_t)P * sizeof mine);
    uint64_t *apl = malloc((size_t)P * 8);
    MPI_Allgather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, MPI_COMM_WORLD);
    MPI_Allgather(&applied, 1, MPI_UINT64_T, apl, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int p = 0; p < P; p++)
        if (apl[p] == applied) {
            CHECK(all[3 * p] == hash, "agreement: round hash differs from rank %d", p);
            CHECK(all[3 * p + 2] == mine[2], "replicas differ from rank %d", p);
        }
    if (!me) {
        printf("mode=%s P=%d steps=%d rounds=%llu (max over ranks) n=%zu tau=%d\n", mode, P, steps,
               (unsigned long long)maxapplied, n, tau);
    }
    if (slow >= 0 && me == slow) {
        printf("slow rank %d (x%.0f): longest rejection streak by eighth of the run:", slow, slow_factor);
        for (int o = 0; o < 8; o++) printf(" %u", streak_at[o]);
        printf("\n");
    }
    if (slow >= 0 && growth && me == slow) {
        uint32_t b = 0;
        for (int o = 0; o < 8; o++) b = streak_at[o] > b ? streak_at[o] : b;
        CHECK(b > 4, "expected the slow rank's streak to exceed 4 without a bound (max %u)", b);
    }
    int tot = 0;
    MPI_Allreduce(&fails, &tot, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (!me) printf("%s: %d check failures\n", tot ? "FAIL" : "OK", tot);
    pcoll_record_free(&rec);
    free(g);
    free(w);
    free(dep_sum);
    free(seen);
    free(streak_at);
    free(all_sum);
    free(tot_dep);
    free(all);
    free(apl);
    MPI_Finalize();
    return tot ? 1 : 0;
}
