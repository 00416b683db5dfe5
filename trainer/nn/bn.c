/* bn.c: batch normalisation over CNHW activations (one channel = M contiguous floats). */
#include "trainer/nn/nn_impl.h"
#include <math.h>

void nn_bn_forward(float *out, float *mean, float *invstd, float *run_mean, float *run_var,
                   const float *in, const float *gamma, const float *beta, int C, size_t M,
                   float momentum, float eps, int training, int relu) {
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; c++) {
    const float *x = in + (size_t)c * M;
    float *y = out + (size_t)c * M;
    float mu, is;
    if (training) {
      double s = 0, s2 = 0;
      for (size_t i = 0; i < M; i++) s += x[i];
      double dm = s / (double)M;
      for (size_t i = 0; i < M; i++) {
        double d = x[i] - dm;
        s2 += d * d;
      }
      double var = s2 / (double)M;
      mu = (float)dm;
      is = (float)(1.0 / sqrt(var + eps));
      mean[c] = mu;
      invstd[c] = is;
      if (run_mean) {
        double uv = M > 1 ? s2 / (double)(M - 1) : var;
        run_mean[c] = (1.f - momentum) * run_mean[c] + momentum * (float)dm;
        run_var[c] = (1.f - momentum) * run_var[c] + momentum * (float)uv;
      }
    } else {
      mu = run_mean[c];
      is = 1.f / sqrtf(run_var[c] + eps);
      if (mean) mean[c] = mu;
      if (invstd) invstd[c] = is;
    }
    float a = is * gamma[c], b = beta[c] - mu * a;
    if (relu)
      for (size_t i = 0; i < M; i++) { float v = x[i] * a + b; y[i] = v > 0.f ? v : 0.f; }
    else
      for (size_t i = 0; i < M; i++) y[i] = x[i] * a + b;
  }
}

/* Training-mode backward (batch statistics):
 * din += gamma*invstd/M * (M*dy - sum(dy) - xhat*sum(dy*xhat)). */
void nn_bn_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *in,
                    const float *mean, const float *invstd, const float *gamma, int C, size_t M,
                    const float *relu_out) {
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; c++) {
    const float *x = in + (size_t)c * M, *dy = dout + (size_t)c * M;
    float mu = mean[c], is = invstd[c];
    const float *ro = relu_out ? relu_out + (size_t)c * M : NULL;
    double sdy = 0, sdyx = 0;
    if (ro) {
      for (size_t i = 0; i < M; i++) {
        float d = ro[i] > 0.f ? dy[i] : 0.f;
        sdy += d;
        sdyx += d * (x[i] - mu);
      }
    } else {
      for (size_t i = 0; i < M; i++) {
        sdy += dy[i];
        sdyx += dy[i] * (x[i] - mu);
      }
    }
    sdyx *= is; /* sum dy*xhat */
    dgamma[c] += (float)sdyx;
    dbeta[c] += (float)sdy;
    if (!din) continue;
    float *dx = din + (size_t)c * M;
    float k = gamma[c] * is, a = (float)(sdy / (double)M), b = (float)(sdyx / (double)M) * is;
    if (ro)
      for (size_t i = 0; i < M; i++) dx[i] += k * ((ro[i] > 0.f ? dy[i] : 0.f) - a - (x[i] - mu) * b);
    else
      for (size_t i = 0; i < M; i++) dx[i] += k * (dy[i] - a - (x[i] - mu) * b);
  }
}
