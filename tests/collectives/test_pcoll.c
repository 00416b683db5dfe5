/* test_pcoll.c -- libpcoll invariants under mpirun (docs/DESIGN.md#2-the-six-invariants-and-their-tests),
 * host buffers (PCOLL_MEM_HOST): gradients deposited and rounds read in place. The run and its checks
 * are those of tests/collectives/pcoll_invariants.h, shared with tests/cuda/test_pcoll_device.c (it says
 * each in full): 1 agreement (with each step time), 2 conservation, 3 trigger rule, 4 staleness
 * (--tau), 5 liveness, 6 bitwise equal replicas; a negative or NaN step time is refused;
 * --mismatch: a clean error on every rank. The results ring holds 1,024 rounds without --tau.
 * Options: --mode sync|solo|majority|quorum:Q|mixed|dynamic  --steps N  --n N  --delay-us U
 *          --seed S  --slow RANK --slow-factor F  --tau T  --newer (WAIT_NEWER + ACCUMULATE)
 *          --expect-streak-growth  --mismatch n|seed|mode|arg  --div p|fresh  (pcoll_invariants.h)
 *          and this program's own:
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
 *          --spin-us U: cfg.spin_us
 *          --max-signals X: pcoll_wait woke the engine (engine_signals) at most X times per round,
 *          and 2 more for each of this rank's absences longer than spin_us (a busy machine's);
 *          signals to an engine that was awake (fewer wake-ups than signals) are not counted
 *          (an application that comes back within spin_us need not wake it; skipped, exit 77,
 *          where this process may run on fewer processors than ranks: libpcoll then always wakes it)
 * Exit 0 = all checks passed on every rank.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "collectives/pcoll.h"
#include "tests/collectives/pcoll_invariants.h"
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* this program's own options */
typedef struct {
    int pause_every, no_handoff, wait_next, no_wake, max_buffers, spin_us;
    double pause_ms, max_polls, max_signals;
} host_opts_t;

static int host_option(pinv_t *t, void *ctx, const char *a, const char *v) {
    host_opts_t *o = ctx;
    if (!strcmp(a, "--ring"))
        t->ring = atoi(v);
    else if (!strcmp(a, "--records"))
        t->records = atoi(v);
    else if (!strcmp(a, "--pause-ms"))
        o->pause_ms = atof(v);
    else if (!strcmp(a, "--pause-every"))
        o->pause_every = atoi(v);
    else if (!strcmp(a, "--max-buffers"))
        o->max_buffers = atoi(v);
    else if (!strcmp(a, "--max-polls"))
        o->max_polls = atof(v);
    else if (!strcmp(a, "--spin-us"))
        o->spin_us = atoi(v);
    else if (!strcmp(a, "--max-signals"))
        o->max_signals = atof(v);
    else if (!strcmp(a, "--expect-no-handoff"))
        return o->no_handoff = 1;
    else if (!strcmp(a, "--wait-next"))
        return o->wait_next = 1;
    else if (!strcmp(a, "--expect-no-wake"))
        return o->no_wake = 1;
    else
        return 0;
    return 2; /* took the value too */
}

/* The counts of pcoll_stats after the steps (before the drain, whose waits may sleep), each
 * checked if asked for. no_handoff: every pcoll_wait(CONSUMED) found the round either complete
 * or drivable by this thread: it never slept waiting for the engine (each such sleep is a
 * wake-up, a thread hand-off), and some rounds were completed by this thread itself. no_wake:
 * the engine woke no more often than its 50 ms safety-net sleeps time out in elapsed_s, plus 2.
 * max_polls > 0: the engine's idle polls per round are at most max_polls. */
static void check_counts(void *ctx, pcoll_t *h, int steps, double elapsed_s) {
    const host_opts_t *o = ctx;
    pcoll_stats_t st;
    memset(&st, 0, sizeof st);
    pcollCheck(pcoll_stats(h, &st));
    printf("rank %d: %d waits, %llu rounds: %llu completed by the waiting thread, %llu sleeps in "
           "pcoll_wait, %llu engine wake-ups (%llu signalled by pcoll_wait) and %llu idle polls in %.2f s, "
           "%llu result buffers\n",
           me, steps, (unsigned long long)st.rounds, (unsigned long long)st.driven,
           (unsigned long long)st.wait_sleeps, (unsigned long long)st.engine_wakes,
           (unsigned long long)st.engine_signals, (unsigned long long)st.engine_polls, elapsed_s,
           (unsigned long long)st.result_buffers);
    if (o->no_handoff) {
        CHECK(st.wait_sleeps == 0, "pcoll_wait slept %llu times waiting for the engine",
              (unsigned long long)st.wait_sleeps);
        CHECK(st.driven > 0, "no round was completed by the waiting application thread");
    }
    double timeouts = elapsed_s / 0.05 + 2;
    if (o->no_wake)
        CHECK((double)st.engine_wakes <= timeouts,
              "the engine woke %llu times in %llu rounds (its safety-net timeouts: <= %.0f)",
              (unsigned long long)st.engine_wakes, (unsigned long long)st.rounds, timeouts);
    if (o->max_buffers > 0)
        CHECK(st.result_buffers <= (uint64_t)o->max_buffers, "%llu result buffers allocated (allowed %d)",
              (unsigned long long)st.result_buffers, o->max_buffers);
    /* On a busy machine: an absence longer than spin_us (this rank descheduled) may cost a signal
     * for it and the next (the engine is signalled until the rank comes back quickly twice), and
     * an engine thread descheduled before it parks is signalled at every return although it is
     * awake: such a signal wakes nothing, so the signals that count are at most its wake-ups. */
    if (o->max_signals > 0) {
        uint64_t woke = st.engine_signals < st.engine_wakes ? st.engine_signals : st.engine_wakes;
        CHECK(
            (double)woke <= o->max_signals * (double)st.rounds + 2.0 * pinv_late_absences,
            "pcoll_wait woke the engine %llu times in %llu rounds (%llu signals, %llu wake-ups; allowed %.2f "
            "a round, and 2 for each of the %d absences longer than spin_us)",
            (unsigned long long)woke, (unsigned long long)st.rounds, (unsigned long long)st.engine_signals,
            (unsigned long long)st.engine_wakes, o->max_signals, pinv_late_absences);
    }
    if (o->max_polls > 0)
        CHECK((double)st.engine_polls <= o->max_polls * (double)st.rounds,
              "the engine polled %llu times without progress in %llu rounds (allowed %.1f a round)",
              (unsigned long long)st.engine_polls, (unsigned long long)st.rounds, o->max_polls);
}

/* --pause-ms/--pause-every: rank 1 falls behind the results ring */
static void pause_rank1(void *ctx, int s) {
    const host_opts_t *o = ctx;
    if (o->pause_every && me == 1 % P && s % o->pause_every == o->pause_every - 1)
        sleep_us(o->pause_ms * 1e3);
}

int main(int argc, char **argv) {
    pinv_t t;
    pinv_init(&t, "test_pcoll", PCOLL_MEM_HOST, 1024, &argc, &argv);
    host_opts_t o = {0};
    pinv_parse(&t, argc, argv, host_option, &o);
    if (o.spin_us > 0) t.cfg.spin_us = o.spin_us;
    cpu_set_t cpus; /* the processors libpcoll counts: those this process may run on */
    long ncpu =
        sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : sysconf(_SC_NPROCESSORS_ONLN);
    if (o.max_signals > 0 && ncpu < P) {
        if (!me) printf("SKIP: %ld processors for %d ranks (the engine is always woken then)\n", ncpu, P);
        return pinv_exit(77);
    }
    if (t.mismatch) return pinv_exit(pinv_mismatch(&t));
    pinv_start(&t);
    pinv_io_t io = {.ctx = &o,
                    .deposit_flags = o.wait_next ? PCOLL_WAIT_NEXT : 0,
                    .steps_done = check_counts,
                    .before_next = pause_rank1};
    pinv_run(&t, &io);
    return pinv_exit(pinv_verify(&t));
}
