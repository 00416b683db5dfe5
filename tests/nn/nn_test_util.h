/* nn_test_util.h: helpers for the nn tests (norm-wise relative error, random fills, checks). */
#ifndef NN_TEST_UTIL_H
#define NN_TEST_UTIL_H
#include "trainer/nn/nn.h"
#include <math.h>
#include <string.h>

static int nt_fail = 0;

/* norm-wise relative error ||a-b|| / max(||b||, floor) */
static inline double nt_relerr(const float *a, const float *b, size_t n, double floor) {
  double d = 0, s = 0;
  for (size_t i = 0; i < n; i++) {
    double e = (double)a[i] - b[i];
    d += e * e;
    s += (double)b[i] * b[i];
  }
  s = sqrt(s);
  return sqrt(d) / (s > floor ? s : floor);
}

static inline void nt_check(int ok, const char *what, double val, double tol) {
  if (!ok) nt_fail++;
  printf("%s %-52s %.3e (tol %.1e)\n", ok ? "ok  " : "FAIL", what, val, tol);
}

static inline void nt_fill(nn_rng_t *r, float *p, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) p[i] = nn_rng_uniform(r, lo, hi);
}
#endif
