/* test_imbalance.c -- injection is a pure function of (seed, step, rank) with the stated shape;
 * busy=1 delays are computed: they use the delay in this thread's CPU time. */
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
    printf("%s\n", fails ? "FAIL" : "OK");
    return fails != 0;
}
