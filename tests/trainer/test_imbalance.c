/* test_imbalance.c -- injection is a pure function of (seed, step, rank) with the stated shape;
 * busy=1 delays are computed: they use the delay in this thread's CPU time. Schedules: each phase's
 * model from its first step (given in steps, or in epochs resolved once), the old specs unchanged
 * (delays pinned before schedules existed), bad schedules refused naming the wrong part. */
#include "collectives/sim/imbalance.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int fails;
#define CHECK(c, ...)                                           \
    do {                                                        \
        if (!(c)) {                                             \
            fails++;                                            \
            printf("CHECK failed line %d: %s: ", __LINE__, #c); \
            printf(__VA_ARGS__);                                \
            printf("\n");                                       \
        }                                                       \
    } while (0)

int main(void) {
    imb_t m;
    char err[256];
    CHECK(imb_parse("linear:unit=20", &m, err, sizeof err) == 0, "%s", err);
    for (int r = 0; r < 8; r++) CHECK(imb_delay_ms(&m, 1, 5, r, 8, 0, 0) == 20.0 * r, "linear rank %d", r);
    CHECK(imb_parse("random:k=2,d=320", &m, err, sizeof err) == 0, "%s", err);
    long hits = 0, steps = 20000;
    for (long s = 0; s < steps; s++) {
        int n = 0;
        for (int r = 0; r < 8; r++) {
            double d = imb_delay_ms(&m, 7, (uint64_t)s, r, 8, 0, 0);
            CHECK(d == 0 || d == 320, "random: delay %g", d);
            CHECK(d == imb_delay_ms(&m, 7, (uint64_t)s, r, 8, 0, 0), "not pure");
            n += d > 0;
        }
        CHECK(n >= 1 && n <= 2, "random: %d ranks delayed in step %ld (k=2: 1 or 2)", n, s);
        hits += n;
    }
    /* with replacement: E[distinct of 2 draws from 8] = 2 - 1/8 */
    CHECK(fabs((double)hits / steps - 1.875) < 0.02, "random: mean delayed ranks %g", (double)hits / steps);
    CHECK(imb_parse("lognormal:mean=475,std=144", &m, err, sizeof err) == 0, "%s", err);
    double s1 = 0, s2 = 0;
    long n = 0;
    for (long s = 0; s < 20000; s++)
        for (int r = 0; r < 4; r++) {
            double d = imb_delay_ms(&m, 3, (uint64_t)s, r, 4, 0, 0);
            CHECK(d > 0, "lognormal must be positive");
            s1 += d;
            s2 += d * d;
            n++;
        }
    double mean = s1 / n, sd = sqrt(s2 / n - mean * mean);
    printf("lognormal(475, 144): sample mean %.1f std %.1f over %ld draws\n", mean, sd, n);
    CHECK(fabs(mean - 475) < 5 && fabs(sd - 144) < 5, "lognormal moments %g %g", mean, sd);
    CHECK(imb_parse("slow:rank=1,factor=4", &m, err, sizeof err) == 0, "%s", err);
    CHECK(imb_delay_ms(&m, 1, 1, 1, 4, 10, 0) == 30, "slow rank: (4-1) x 10 ms");
    CHECK(imb_delay_ms(&m, 1, 1, 0, 4, 10, 0) == 0, "other ranks not slowed");
    CHECK(imb_parse("inherent:unit=0.5", &m, err, sizeof err) == 0, "%s", err);
    CHECK(imb_delay_ms(&m, 1, 1, 0, 4, 10, 300) == 150, "inherent: cost x unit");
    /* busy=1 on any model: same delays, computed instead of slept */
    CHECK(imb_parse("random:k=1,d=320", &m, err, sizeof err) == 0 && !m.busy, "%s: sleeps by default", err);
    CHECK(imb_parse("random:k=1,d=320,busy=1", &m, err, sizeof err) == 0 && m.busy && m.k == 1 &&
              m.delay_ms == 320,
          "%s", err);
    CHECK(imb_parse("lognormal:busy=1,mean=475,std=144", &m, err, sizeof err) == 0 && m.busy &&
              m.mean_ms == 475,
          "%s", err);
    CHECK(imb_parse("slow:rank=1,factor=3,busy=0", &m, err, sizeof err) == 0 && !m.busy, "%s", err);
    CHECK(imb_busy_ms(0) == 0 && imb_busy_ms(-5) == 0, "no work for no delay");
    {
        struct timespec c0, c1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        double used = imb_busy_ms(30);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        double cpu = (c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6;
        printf("busy 30 ms: %.1f ms of this thread's CPU time\n", cpu);
        CHECK(used >= 30 && cpu >= 30, "busy 30 ms used %g ms (thread CPU %g ms): it must compute, not sleep",
              used, cpu);
    }
    const char *bad[] = {"linear",
                         "random:k=0,d=5",
                         "lognormal:mean=1",
                         "slow:factor=2",
                         "foo",
                         "linear:unit=x",
                         "random:k=1,d=5,busy=2",
                         "linear:unit=5,busy=yes",
                         "linear:unit=nan",
                         "random:k=inf,d=5",
                         "lognormal:mean=nan,std=1",
                         "lognormal:mean=475,std=inf",
                         "slow:rank=0,factor=nan",
                         "inherent:unit=infinity"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(imb_parse(bad[i], &m, err, sizeof err) != 0, "'%s' accepted", bad[i]);
        CHECK(strstr(err, bad[i]) != NULL, "message does not quote '%s': %s", bad[i], err);
    }
    /* delays pinned before schedules existed (seed 7, 4 ranks): a plain spec means what it meant */
    {
        static const int hit[6][4] = {{0, 1, 0, 1}, {0, 1, 0, 1}, {0, 1, 0, 0},
                                      {1, 0, 0, 1}, {0, 0, 0, 1}, {0, 1, 0, 0}};
        imb_sched_t q;
        CHECK(imb_sched_parse("random:k=2,d=320", &q, err, sizeof err) == 0 && q.n == 1, "%s", err);
        for (int st = 0; st < 6; st++)
            for (int r = 0; r < 4; r++)
                CHECK(imb_sched_delay_ms(&q, 7, (uint64_t)st, r, 4, 10, 64) == 320.0 * hit[st][r],
                      "pinned random %d %d", st, r);
        CHECK(imb_sched_parse("lognormal:mean=475,std=144", &q, err, sizeof err) == 0, "%s", err);
        CHECK(imb_sched_delay_ms(&q, 7, 0, 0, 4, 10, 64) == 509.28715500257675, "pinned lognormal (0, 0)");
        CHECK(imb_sched_delay_ms(&q, 7, 1, 3, 4, 10, 64) == 786.73773398555306, "pinned lognormal (1, 3)");
        CHECK(imb_sched_delay_ms(&q, 7, 5, 1, 4, 10, 64) == 247.5328968869936, "pinned lognormal (5, 1)");
        CHECK(imb_sched_parse("slow:rank=1,factor=3,busy=1", &q, err, sizeof err) == 0 && q.phase[0].busy &&
                  imb_sched_delay_ms(&q, 7, 1000000, 1, 4, 10, 64) == 20,
              "%s: a plain spec holds for the whole run", err);
        CHECK(imb_sched_resolve(&q, 0, 0, err, sizeof err) == 0, "a plain spec needs no steps per epoch: %s",
              err);
    }
    /* a schedule in steps: each phase from its first step, for every rank */
    {
        imb_sched_t q;
        imb_t lin, sl;
        imb_parse("linear:unit=20", &lin, err, sizeof err);
        imb_parse("slow:rank=2,factor=3", &sl, err, sizeof err);
        CHECK(imb_sched_parse("none@0/linear:unit=20@5/slow:rank=2,factor=3,busy=1@9/none@12", &q, err,
                              sizeof err) == 0 &&
                  q.n == 4,
              "%s", err);
        CHECK(imb_sched_resolve(&q, 0, 0, err, sizeof err) == 0, "steps need no resolving: %s", err);
        for (uint64_t st = 0; st < 20; st++)
            for (int r = 0; r < 4; r++) {
                double want = st < 5    ? 0
                              : st < 9  ? imb_delay_ms(&lin, 3, st, r, 4, 10, 64)
                              : st < 12 ? imb_delay_ms(&sl, 3, st, r, 4, 10, 64)
                                        : 0;
                CHECK(imb_sched_delay_ms(&q, 3, st, r, 4, 10, 64) == want, "step %d rank %d: %g, want %g",
                      (int)st, r, imb_sched_delay_ms(&q, 3, st, r, 4, 10, 64), want);
                CHECK(imb_sched_at(&q, st)->busy == (st >= 9 && st < 12), "busy is the phase's (step %d)",
                      (int)st);
            }
        CHECK(imb_sched_delay_ms(&q, 3, 8, 3, 4, 10, 64) == 60 &&
                  imb_sched_delay_ms(&q, 3, 9, 2, 4, 10, 64) == 20 &&
                  imb_sched_delay_ms(&q, 3, 9, 3, 4, 10, 64) == 0,
              "linear up to step 8, then only rank 2 slow");
    }
    /* a schedule in epochs: epoch E + f starts at E x stride + ceil(f x epoch steps) */
    {
        imb_sched_t q;
        CHECK(imb_sched_parse("none@0ep/linear:unit=1@0.5ep/random:k=4,d=7@1.5ep/none@2ep", &q, err,
                              sizeof err) == 0 &&
                  q.epochs && q.n == 4,
              "%s", err);
        CHECK(imb_sched_resolve(&q, 0, 0, err, sizeof err) != 0 && strstr(err, "epochs"),
              "epochs without steps per epoch must be refused: %s", err);
        CHECK(imb_sched_resolve(&q, 10, 10, err, sizeof err) == 0, "%s", err);
        CHECK(q.start[1] == 5 && q.start[2] == 15 && q.start[3] == 20, "shard: starts %llu %llu %llu",
              (unsigned long long)q.start[1], (unsigned long long)q.start[2], (unsigned long long)q.start[3]);
        for (uint64_t st = 0; st < 25; st++)
            for (int r = 0; r < 4; r++) {
                double d = imb_sched_delay_ms(&q, 5, st, r, 4, 0, 0);
                CHECK(st < 5 || st >= 20 ? d == 0
                      : st < 15          ? d == r
                                         : (d == 0 || d == 7),
                      "epochs: step %d rank %d: %g", (int)st, r, d);
            }
        /* global epochs: index stride 40 (an epoch's batches), 10 steps a rank on average */
        CHECK(imb_sched_resolve(&q, 40, 10, err, sizeof err) == 0 && q.start[1] == 5 && q.start[2] == 45 &&
                  q.start[3] == 80,
              "global: starts %llu %llu %llu (%s)", (unsigned long long)q.start[1],
              (unsigned long long)q.start[2], (unsigned long long)q.start[3], err);
        CHECK(imb_sched_parse("none@0ep/linear:unit=1@1.01ep/none@1.05ep", &q, err, sizeof err) == 0 &&
                  imb_sched_resolve(&q, 10, 10, err, sizeof err) != 0 && strstr(err, "same step"),
              "two boundaries on one step must be refused: %s", err);
    }
    /* bad schedules: refused, naming the spec and the part that is wrong */
    {
        imb_sched_t q;
        const char *badq[][2] = {{"none@0/linear:unit=1@5/none@5", "phase 3 'none@5'"},
                                 {"none@0/linear:unit=1@5/none@3", "overlap or decrease"},
                                 {"none@0/foo@3", "phase 2: 'foo': unknown model"},
                                 {"none@0/linear:unit=1", "phase 2 'linear:unit=1' has no @START"},
                                 {"none/linear:unit=1@4", "phase 1 'none' has no @START"},
                                 {"none@0/random:k=0,d=5@3", "phase 2: 'random:k=0,d=5': needs k="},
                                 {"none@2/linear:unit=1@4", "must start at 0"},
                                 {"none@0/linear:unit=1@1.5", "the start must be a step"},
                                 {"none@0/linear:unit=1@x", "the start must be a step"},
                                 {"none@0/linear:unit=1@1ep", "all steps or all epochs"},
                                 {"none@0/", "phase 2 '' has no @START"}};
        for (size_t i = 0; i < sizeof badq / sizeof badq[0]; i++) {
            CHECK(imb_sched_parse(badq[i][0], &q, err, sizeof err) != 0, "'%s' accepted", badq[i][0]);
            CHECK(strstr(err, badq[i][0]) && strstr(err, badq[i][1]), "'%s': the message must name '%s': %s",
                  badq[i][0], badq[i][1], err);
        }
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
            CHECK(imb_sched_parse(bad[i], &q, err, sizeof err) != 0 && strstr(err, bad[i]),
                  "plain '%s': refused as before", bad[i]);
    }
    printf("%s\n", fails ? "FAIL" : "OK");
    return fails != 0;
}
