/* follow_mpi.h -- test_ctl_mpi's --follow check: the controller's choice per phase of a schedule
 * (alike ranks, one rank slower, alike again) on the real libpcoll, judged by what the run measured
 * about itself in each phase, not by a calibration before it or by fixed times.
 *
 * Why not a calibration: on 2 shared cores under load the sync round calibrated at 1.2-121 ms in
 * runs minutes apart (1 ms steps), so a best level computed from it before the run said little about
 * the phases that followed. Here every number comes from the phase itself: each rank's cycle time
 * (the wall time between its deposits, waiting included, as the controller reads it) travels with
 * its deposit in the round's record, every rank sees the same records, and each phase's rounds of
 * each kind (sync, partial) give that kind's score in that phase. The contrast is made large
 * relative to the load's noise: the slow rank's extra sleep is K_SLOW times its own measured cycle
 * just before it becomes slow, so the partial levels beat sync by about 0.49 (1 + K_SLOW) at P = 4
 * in the rule's model whatever the machine's speed, and with alike ranks sync beats solo by the
 * worth of a gradient one round stale (1.75x at P = 4) while the two kinds' cycles are alike. */
#ifndef TESTS_CONTROLLER_FOLLOW_MPI_H
#define TESTS_CONTROLLER_FOLLOW_MPI_H
#include "collectives/pcoll.h"
#include "controller/controller.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { K_SLOW = 6 };         /* the slow rank's extra sleep, in its own balanced cycles */
#define FOLLOW_CLEAR 1.3     /* a phase's best kind must score this many times the other's */
#define FOLLOW_SHARE 0.8     /* share of a phase's settled rounds at its best kind */
enum { FOLLOW_MIN_N = 100 }; /* settled rounds a phase must have to be judged */

/* What the records of one run say, per phase (0, 1, 2) and kind (0 sync, 1 partial): each rank's
 * summed cycle times, the summed worth of the gradients they made, and their count; the phase's
 * settled rounds and those run in sync; each rank's gradients applied since it last took part. */
typedef struct {
    double cost[3][2][64], step[3][2][64], worth[3][2][64];
    long n[3][2][64];
    int last_kind[64], last_ph[64];
    uint64_t settled[3], settled_sync[3], gsince[64];
} follow_t;

/* One measurement's span in rounds, M = window + 2 f P (f: the slow rank's cycle over a fast one's). */
static inline uint64_t follow_M(const ctl_policy_cfg_t *c, int P, double f) {
    return (uint64_t)c->window + (uint64_t)ceil(2 * P * f);
}
/* D: the rounds from change ph (1: the slow rank appears, 2: it recovers) to a probe of every level:
 * the measurement in progress at the change, two more beyond the limits, and the policy's lag. */
static inline uint64_t follow_D(const ctl_policy_cfg_t *c, int P, int ph) {
    const uint64_t Mf = follow_M(c, P, 1 + K_SLOW), M1 = follow_M(c, P, 1);
    return ph == 1 ? 3 * Mf + (uint64_t)c->lag : Mf + 2 * M1 + (uint64_t)c->lag;
}
/* The rounds from phase ph's start before its share is counted: D, then the probe of 3 levels. */
static inline uint64_t follow_settle(const ctl_policy_cfg_t *c, int P, int ph) {
    const uint64_t M = follow_M(c, P, ph == 1 ? 1 + K_SLOW : 1);
    return (ph ? follow_D(c, P, ph) : 0) + 3 * M;
}

/* Adds a round's record. A rank's cycle that spans a change of kind or of phase is not counted.
 * A gradient's worth is 1 / (1 + lag), lag the gradients applied since its rank last took part
 * over P (the rule's default worth and lag, docs/DESIGN.md#7-the-controller): 0 in sync, and in a
 * partial round that every rank reached in time (alike ranks deposit together) as well. */
static inline void follow_add(follow_t *f, const pcoll_record_t *rec, const ctl_policy_cfg_t *c, long from,
                              long until) {
    const long r = (long)rec->round;
    const int ph = r < from ? 0 : until < 0 || r < until ? 1 : 2, k = rec->mode != PCOLL_SYNC;
    const long start = ph == 0 ? 0 : ph == 1 ? from : until;
    if ((uint64_t)(r - start) >= follow_settle(c, rec->P, ph)) f->settled[ph]++, f->settled_sync[ph] += !k;
    uint64_t nf = 0;
    for (int p = 0; p < rec->P && p < 64; p++) nf += rec->fresh[p];
    for (int p = 0; p < rec->P && p < 64; p++) {
        if (!rec->fresh[p] || !rec->cost) continue;
        if (f->last_kind[p] == k && f->last_ph[p] == ph)
            f->cost[ph][k][p] += rec->cost[p], f->step[ph][k][p] += rec->step ? rec->step[p] : 0,
                f->worth[ph][k][p] += 1 / (1 + (double)f->gsince[p] / rec->P), f->n[ph][k][p]++;
        f->last_kind[p] = k, f->last_ph[p] = ph;
    }
    for (int p = 0; p < rec->P && p < 64; p++) f->gsince[p] = rec->fresh[p] ? 0 : f->gsince[p] + nf;
}

/* Kind k's score in phase ph (gradients per second at their worth 1/(1+lag), lag in sync steps, as
 * the rule counts them): where it ran, sum over ranks of 1/c_p (c_p: p's mean cycle there) times the
 * mean worth of p's gradients there (follow_add). A kind that did not run in the phase (some rank
 * with fewer than 2 cycles of it: the screen skipped its probe) is scored by the rule's model on the
 * other kind's cycles: sync at a round per the slowest rank's cycle; a partial level at cycles of
 * each rank's step plus sync's overhead (the mean sync cycle less the slowest rank's mean step),
 * rank p's gradients lagging by the others' made in c_p, over P (with alike ranks, sync's score over
 * 1 + (P-1)/P); *modelled is set. 0: neither kind ran. */
static inline double follow_score(const follow_t *f, int ph, int k, int P, int *modelled) {
    double c[64], all = 0, sum = 0, slowest = 0, step_max = 0;
    long cnt = 0;
    int src = k;
    for (int p = 0; p < P; p++)
        if (f->n[ph][k][p] < 2) src = !k;
    *modelled = src != k;
    for (int p = 0; p < P; p++) {
        if (f->n[ph][src][p] < 2) return 0;
        c[p] = f->cost[ph][src][p] / f->n[ph][src][p];
        sum += f->cost[ph][src][p], cnt += f->n[ph][src][p], slowest = c[p] > slowest ? c[p] : slowest;
        const double st = f->step[ph][src][p] / f->n[ph][src][p];
        step_max = st > step_max ? st : step_max;
    }
    if (!*modelled) {
        double s = 0;
        for (int p = 0; p < P; p++) s += f->worth[ph][k][p] / f->n[ph][k][p] / c[p];
        return s;
    }
    if (!k) return P / slowest;
    for (int p = 0; p < P; p++) c[p] = f->step[ph][0][p] / f->n[ph][0][p] + sum / cnt - step_max;
    for (int p = 0; p < P; p++) all += 1 / c[p];
    double s = 0;
    for (int p = 0; p < P; p++) s += 1 / c[p] / (1 + (all * c[p] - 1) / P);
    return s;
}

/* Rank 0's check after the run (the header of test_ctl_mpi.c); returns the failures, printed. */
static inline int follow_check(const follow_t *f, const ctl_switch_t *sw, size_t nsw,
                               const ctl_policy_cfg_t *c, int P, long from, long until) {
    int fails = 0;
    for (int ph = 0; ph < 3; ph++) {
        int my, mp;
        const double sy = follow_score(f, ph, 0, P, &my), pa = follow_score(f, ph, 1, P, &mp);
        const int want_sync = sy > pa;
        const double margin = want_sync ? sy / pa : pa / sy;
        const uint64_t n = f->settled[ph], at = want_sync ? f->settled_sync[ph] : n - f->settled_sync[ph];
        const double share = n ? (double)at / (double)n : 0;
        printf("phase %d: score sync %.1f%s, partial %.1f%s /s: best %s by %.2fx; %.0f%% of its %llu rounds "
               "after %llu in it\n",
               ph, sy, my ? " (model)" : "", pa, mp ? " (model)" : "", want_sync ? "sync" : "partial", margin,
               100 * share, (unsigned long long)n, (unsigned long long)follow_settle(c, P, ph));
        int judge = 1;
        if (!sy || !pa) {
            printf("FAIL: phase %d: no kind of level ran 2 cycles of every rank in it\n", ph);
            fails++;
        } else if (margin < FOLLOW_CLEAR && ph == 1) {
            printf("FAIL: phase 1: best kind by only %.2fx (at least %.2fx): the slow rank made no clear "
                   "choice\n",
                   margin, FOLLOW_CLEAR);
            fails++;
        } else if (margin < FOLLOW_CLEAR) { /* alike ranks whose partial rounds took every rank fresh */
            printf("phase %d: the kinds within %.2fx of each other: either is right\n", ph, FOLLOW_CLEAR);
            judge = 0;
        }
        if (judge && (n < FOLLOW_MIN_N || share < FOLLOW_SHARE)) {
            printf("FAIL: phase %d: %.0f%% of %llu rounds at its best kind (at least %.0f%% of %d or more)\n",
                   ph, 100 * share, (unsigned long long)n, 100 * FOLLOW_SHARE, FOLLOW_MIN_N);
            fails++;
        }
        if (ph == 0) continue;
        /* a probe that began within one probe's span (3 M of alike ranks) before the change was in
         * progress at it: it counts as found at 0, and the phase's share above judges its outcome */
        const long at_r = ph == 1 ? from : until, D = (long)follow_D(c, P, ph),
                   span = 3 * (long)follow_M(c, P, 1);
        long found = -1, began = 0;
        for (size_t i = 0; i < nsw && found < 0; i++)
            if ((sw[i].what & CTL_DEC_PROBE) && (long)sw[i].round >= at_r - span &&
                (!strncmp(sw[i].reason, "rate changed", 12) ||
                 !strncmp(sw[i].reason, "step times changed", 18) || !strncmp(sw[i].reason, "probe due", 9)))
                began = (long)sw[i].round - at_r, found = began > 0 ? began : 0;
        printf("change %d at round %ld: probe of every level after %ld rounds (at most %ld)%s\n", ph, at_r,
               found, D, began < 0 ? " (in progress at the change)" : "");
        if (found < 0 || found > D) {
            printf("FAIL: change %d: no probe of every level within %ld rounds\n", ph, D);
            fails++;
        }
    }
    return fails;
}
#endif
