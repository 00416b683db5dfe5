/* nn_test_util.h: helpers for the nn tests (norm-wise relative error, random fills, checks). */
#ifndef NN_TEST_UTIL_H
#define NN_TEST_UTIL_H
#include "trainer/nn/nn.h"
#include <math.h>
#include <stdio.h>
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
/* After a reference file's SGD steps: the worst relative error of the model's parameters
 * ("final.<name>" tensors, those present) and of its BN running statistics
 * ("buf.<bn>.running_mean/var", all required) against the reference. */
static inline void nt_check_final_state(const nn_model_t *m, const nn_tfile_t *f, double tol_params,
                                        double tol_bn) {
  char what[160];
  double worst = 0, e;
  int nfin = 0;
  for (int t = 0; t < m->nptensors; t++) {
    snprintf(what, sizeof what, "final.%s", m->ptensors[t].name);
    const nn_tensor_t *g = nn_tfile_find(f, what);
    if (!g) continue;
    nfin++;
    e = nt_relerr(m->params + m->ptensors[t].off, g->data, g->n, 1e-6);
    if (e > worst) worst = e;
  }
  if (nfin) nt_check(worst <= tol_params, "parameters after the steps (worst tensor)", worst, tol_params);
  worst = 0;
  for (int i = 0; i < m->nbns; i++)
    for (int j = 0; j < 2; j++) {
      snprintf(what, sizeof what, "buf.%s.%s", m->bns[i].name, j ? "running_var" : "running_mean");
      const nn_tensor_t *g = nn_tfile_find(f, what);
      if (!g) { printf("FAIL %s missing\n", what); nt_fail++; continue; }
      e = nt_relerr(m->bn_stats + m->bns[i].off + (j ? m->bns[i].c : 0), g->data, g->n, 1e-6);
      if (e > worst) worst = e;
    }
  if (m->nbns) nt_check(worst <= tol_bn, "BN running mean/var after the steps (worst)", worst, tol_bn);
}

#endif
