/* bench_stats.h -- latency statistics shared by the collectives' benchmarks (bench_collectives.c,
 * bench_reduce.c): sort order and the nearest-rank quantile of a sorted sample. */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H
#include <math.h>

/* qsort order of doubles, ascending */
static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* q-quantile of sorted v[n] (nearest rank: the smallest value with at least q n values at or
 * below it); n >= 1 */
static inline double bench_quantile(const double *v, int n, double q) {
    int i = (int)ceil(q * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}
#endif
