/* imbalance.c -- injected load imbalance, a pure function of (seed, step, rank): every rank can
 * compute every other rank's delay, and a rerun injects exactly the same delays.
 *
 *   none                      0
 *   linear:unit=MS            rank r waits r x unit                         (Fig. 9's skew)
 *   random:k=K,d=MS           K ranks drawn per step (with replacement: "up to K") wait d
 *                             (the paper's ImageNet setting: k=2, d=320)
 *   lognormal:mean=MS,std=MS  every rank waits a log-normal draw with that mean and std
 *                             (heavy-tailed step times: 475 ms / 144 ms on cloud V100s)
 *   slow:rank=R,factor=F      rank R is F times slower: it waits (F-1) x its compute time
 *   inherent:unit=MS          every rank waits unit x the batch's own cost (e.g. frames)
 *
 * A delay is slept by default. With busy=1 appended to any model (e.g. random:k=1,d=320,busy=1)
 * the delayed rank computes instead until its own thread has used the delay in CPU time: on
 * shared cores it then takes a core from the others as real compute would, where a sleeping
 * straggler hands its core to them (and it stretches with contention as compute does).
 *
 * A schedule is phases separated by '/', each MODEL@START: the model from START to the next
 * phase's START, the last to the run's end; START is a step (an integer) or an epoch with the
 * suffix ep (1.5ep), all of one kind, the first 0, increasing. E.g.
 *   none@0/random:k=1,d=320@1.5ep/slow:rank=2,factor=3@3ep/none@4.5ep
 * The delay stays a pure function of (seed, step, rank): epochs are resolved to steps once, at
 * set-up, by the caller's steps per epoch (imb_sched_resolve).
 */
#include "collectives/sim/imbalance.h"
#include "common/hash.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A uniform draw in (0, 1), pure in (seed, a, b, c). */
static double u01(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
    uint64_t h =
        hash_splitmix64(seed ^ hash_splitmix64(a ^ hash_splitmix64(b ^ hash_splitmix64(c + 0x1234567))));
    return ((double)(h >> 11) + 0.5) * 0x1.0p-53; /* (0, 1) */
}

/* key=value in the comma list s: 1 with the value in *out, 0 if the key is absent, -1 if its value
 * is not a finite number. */
static int kv(const char *s, const char *key, double *out) {
    const char *p = strstr(s, key);
    size_t kl = strlen(key);
    while (p && !((p == s || p[-1] == ':' || p[-1] == ',') && p[kl] == '=')) p = strstr(p + 1, key);
    if (!p) return 0;
    char *end;
    *out = strtod(p + kl + 1, &end);
    return (*end == 0 || *end == ',') && end != p + kl + 1 && isfinite(*out) ? 1 : -1;
}

int imb_parse(const char *s, imb_t *m, char *err, size_t n) {
    memset(m, 0, sizeof *m);
    double v;
    const char *colon = strchr(s, ':');
    size_t kl = colon ? (size_t)(colon - s) : strlen(s);
#define NEED(key, field, lo)                                                                      \
    do {                                                                                          \
        int r_ = kv(s, key, &v);                                                                  \
        if (r_ <= 0 || v < (lo))                                                                  \
            return snprintf(err, n, "--imbalance '%s': needs %s=<a finite number >= %g>", s, key, \
                            (double)(lo)),                                                        \
                   -1;                                                                            \
        m->field = v;                                                                             \
    } while (0)
    if (!strncmp(s, "none", kl) && kl == 4)
        m->kind = IMB_NONE;
    else if (!strncmp(s, "linear", kl) && kl == 6) {
        m->kind = IMB_LINEAR;
        NEED("unit", unit_ms, 0);
    } else if (!strncmp(s, "random", kl) && kl == 6) {
        m->kind = IMB_RANDOM;
        NEED("d", delay_ms, 0);
        if (kv(s, "k", &v) <= 0 || v < 1 || v != floor(v))
            return snprintf(err, n, "--imbalance '%s': needs k=<ranks delayed per step, >= 1>", s), -1;
        m->k = (int)v;
    } else if (!strncmp(s, "lognormal", kl) && kl == 9) {
        m->kind = IMB_LOGNORMAL;
        NEED("mean", mean_ms, 1e-9);
        NEED("std", std_ms, 0);
    } else if (!strncmp(s, "slow", kl) && kl == 4) {
        m->kind = IMB_SLOW;
        NEED("factor", factor, 1);
        if (kv(s, "rank", &v) <= 0 || v < 0 || v != floor(v))
            return snprintf(err, n, "--imbalance '%s': needs rank=<the slow rank>", s), -1;
        m->rank = (int)v;
    } else if (!strncmp(s, "inherent", kl) && kl == 8) {
        m->kind = IMB_INHERENT;
        NEED("unit", unit_ms, 0);
    } else
        return snprintf(err, n,
                        "--imbalance '%s': unknown model (none, linear:unit=MS, random:k=K,d=MS, "
                        "lognormal:mean=MS,std=MS, slow:rank=R,factor=F, inherent:unit=MS)",
                        s),
               -1;
#undef NEED
    int b = kv(s, "busy", &v);
    if (b < 0 || (b > 0 && v != 0 && v != 1))
        return snprintf(err, n, "--imbalance '%s': busy= takes 0 (sleep the delay) or 1 (compute it)", s), -1;
    m->busy = b > 0 && v == 1;
    return 0;
}

static double thread_cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double imb_busy_ms(double ms) {
    if (!(ms > 0)) return 0;
    /* floating-point work on a few cache lines (a damped recurrence that cannot be folded away),
     * checking the thread's CPU clock every few microseconds */
    volatile double acc[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    double t0 = thread_cpu_ms(), t;
    while ((t = thread_cpu_ms()) - t0 < ms)
        for (int i = 0; i < 256; i++) acc[i & 7] = acc[i & 7] * 0.999999 + 1e-6 * acc[(i + 1) & 7];
    return t - t0;
}

double imb_delay_ms(const imb_t *m, uint64_t seed, uint64_t step, int rank, int P, double compute_ms,
                    double cost) {
    switch (m->kind) {
    case IMB_LINEAR: return rank * m->unit_ms;
    case IMB_RANDOM:
        for (int j = 0; j < m->k; j++)
            if ((int)(hash_splitmix64(seed ^ hash_splitmix64(step * 64 + (uint64_t)j + 0xABCDEF)) %
                      (uint64_t)P) == rank)
                return m->delay_ms;
        return 0;
    case IMB_LOGNORMAL: {
        double s2 = log(1.0 + (m->std_ms * m->std_ms) / (m->mean_ms * m->mean_ms));
        double mu = log(m->mean_ms) - s2 / 2;
        double u1 = u01(seed, step, (uint64_t)rank, 1), u2 = u01(seed, step, (uint64_t)rank, 2);
        double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
        return exp(mu + sqrt(s2) * z);
    }
    case IMB_SLOW: return rank == m->rank ? (m->factor - 1) * compute_ms : 0;
    case IMB_INHERENT: return m->unit_ms * cost;
    default: return 0;
    }
}

int imb_sched_parse(const char *s, imb_sched_t *q, char *err, size_t n) {
    memset(q, 0, sizeof *q);
    if (!strchr(s, '@') && !strchr(s, '/')) { /* a plain model: one phase for the whole run */
        q->n = 1;
        return imb_parse(s, &q->phase[0], err, n);
    }
    const char *p = s;
    char part[256], inner[512];
    for (int i = 0;; i++) {
        size_t len = strcspn(p, "/");
        if (i == IMB_MAX_PHASES)
            return snprintf(err, n, "--imbalance '%s': more than %d phases", s, IMB_MAX_PHASES), -1;
        if (len >= sizeof part)
            return snprintf(err, n, "--imbalance '%s': phase %d is too long", s, i + 1), -1;
        memcpy(part, p, len);
        part[len] = 0;
        char *at = strrchr(part, '@');
        if (!at)
            return snprintf(err, n,
                            "--imbalance '%s': phase %d '%s' has no @START (MODEL@STEP or MODEL@EPOCHep)", s,
                            i + 1, part),
                   -1;
        *at = 0;
        if (imb_parse(part, &q->phase[i], inner, sizeof inner))
            return snprintf(err, n, "--imbalance '%s': phase %d: %s", s, i + 1,
                            inner + strlen("--imbalance ")),
                   -1;
        char *end;
        double v = strtod(at + 1, &end);
        int ep = !strcmp(end, "ep");
        if (end == at + 1 || (*end && !ep) || !isfinite(v) || v < 0 || (!ep && (v != floor(v) || v > 1e18)))
            return snprintf(err, n,
                            "--imbalance '%s': phase %d '%s@%s': the start must be a step (an integer >= 0) "
                            "or an epoch (a number >= 0 with ep, e.g. 1.5ep)",
                            s, i + 1, part, at + 1),
                   -1;
        if (i == 0) q->epochs = ep;
        if (ep != q->epochs)
            return snprintf(err, n,
                            "--imbalance '%s': phase %d '%s@%s': the boundaries must be all steps or all "
                            "epochs (ep)",
                            s, i + 1, part, at + 1),
                   -1;
        if (i == 0 && v != 0)
            return snprintf(err, n, "--imbalance '%s': phase 1 '%s@%s' must start at 0", s, part, at + 1), -1;
        if (i > 0 && v <= q->at[i - 1])
            return snprintf(err, n,
                            "--imbalance '%s': phase %d '%s@%s' starts at %g, not after phase %d's start %g "
                            "(boundaries overlap or decrease)",
                            s, i + 1, part, at + 1, v, i, q->at[i - 1]),
                   -1;
        q->at[i] = v;
        q->start[i] = ep ? (i == 0 ? 0 : UINT64_MAX) : (uint64_t)v;
        q->n = i + 1;
        p += len;
        if (!*p) break;
        p++;
    }
    return 0;
}

int imb_sched_resolve(imb_sched_t *q, uint64_t stride, double epoch_steps, char *err, size_t n) {
    if (!q->epochs) return 0;
    if (stride == 0 || !(epoch_steps > 0) || epoch_steps > (double)stride)
        return snprintf(err, n,
                        "--imbalance: boundaries in epochs need the steps per epoch, which this caller "
                        "does not give; give them in steps"),
               -1;
    for (int i = 0; i < q->n; i++) {
        double e = floor(q->at[i]);
        q->start[i] = (uint64_t)e * stride + (uint64_t)ceil((q->at[i] - e) * epoch_steps);
        if (i > 0 && q->start[i] <= q->start[i - 1])
            return snprintf(err, n,
                            "--imbalance: phases %d and %d (epochs %g and %g) start on the same step %llu at "
                            "%g steps per epoch",
                            i, i + 1, q->at[i - 1], q->at[i], (unsigned long long)q->start[i], epoch_steps),
                   -1;
    }
    return 0;
}

const imb_t *imb_sched_at(const imb_sched_t *q, uint64_t step) {
    int i = q->n - 1;
    while (i > 0 && step < q->start[i]) i--;
    return &q->phase[i];
}

double imb_sched_delay_ms(const imb_sched_t *q, uint64_t seed, uint64_t step, int rank, int P,
                          double compute_ms, double cost) {
    return imb_delay_ms(imb_sched_at(q, step), seed, step, rank, P, compute_ms, cost);
}
