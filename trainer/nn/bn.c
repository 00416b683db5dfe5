/* bn.c: batch normalisation over CNHW activations (one channel = M contiguous floats). */
#include "trainer/nn/nn_impl.h"
#include <math.h>

/* Channel sums over M ~ 1e5 floats, in double.  One running sum would be a chain of dependent
 * scalar additions (C does not let the compiler reorder them); NL independent partial sums, one
 * per lane i % NL, vectorise, and are then added in lane order: same order on every run. */
enum { NL = 32 };
static inline double lane_total(const double *acc) {
    double s = 0;
    for (int l = 0; l < NL; l++) s += acc[l];
    return s;
}

/* *s1 = sum x, *s2 = sum x^2, in one pass (double: the variance s2/M - (s1/M)^2 keeps ~16 - 2
 * log10(|mean|/std) digits, far beyond float's 7 for any activation scale) */
static void sum_x_x2(const float *x, size_t M, double *s1, double *s2) {
    double a1[NL] = {0}, a2[NL] = {0};
    size_t i = 0;
    for (; i + NL <= M; i += NL)
        for (int l = 0; l < NL; l++) {
            double v = x[i + l];
            a1[l] += v;
            a2[l] += v * v;
        }
    for (int l = 0; i < M; i++, l++) {
        double v = x[i];
        a1[l] += v;
        a2[l] += v * v;
    }
    *s1 = lane_total(a1);
    *s2 = lane_total(a2);
}

/* *sdy = sum g, *sdyx = sum g (x - mu), g = dy masked by ro > 0 where ro is given */
static void sum_grad(double *sdy, double *sdyx, const float *dy, const float *x, const float *ro, size_t M,
                     float mu) {
    double a1[NL] = {0}, a2[NL] = {0};
    size_t i = 0;
    if (ro)
        for (; i + NL <= M; i += NL)
            for (int l = 0; l < NL; l++) {
                float d = dy[i + l] * (float)(ro[i + l] > 0.f); /* branch-free: vectorises */
                a1[l] += d;
                a2[l] += d * (x[i + l] - mu);
            }
    else
        for (; i + NL <= M; i += NL)
            for (int l = 0; l < NL; l++) {
                a1[l] += dy[i + l];
                a2[l] += dy[i + l] * (x[i + l] - mu);
            }
    for (int l = 0; i < M; i++, l++) {
        float d = ro && !(ro[i] > 0.f) ? 0.f : dy[i];
        a1[l] += d;
        a2[l] += d * (x[i] - mu);
    }
    *sdy = lane_total(a1);
    *sdyx = lane_total(a2);
}

void nn_bn_forward(float *out, float *mean, float *invstd, float *run_mean, float *run_var, const float *in,
                   const float *gamma, const float *beta, int C, size_t M, float momentum, float eps,
                   int training, int relu) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float *x = in + (size_t)c * M;
        float *y = out + (size_t)c * M;
        float mu, is;
        if (training) {
            double s1, sq;
            sum_x_x2(x, M, &s1, &sq);
            double dm = s1 / (double)M, s2 = sq - s1 * dm; /* sum (x - mean)^2 */
            if (s2 < 0) s2 = 0;
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
            for (size_t i = 0; i < M; i++) {
                float v = x[i] * a + b;
                y[i] = v > 0.f ? v : 0.f;
            }
        else
            for (size_t i = 0; i < M; i++) y[i] = x[i] * a + b;
    }
}

/* Training-mode backward (batch statistics):
 * din (+)= gamma*invstd/M * (M*dy - sum(dy) - xhat*sum(dy*xhat)); set: = instead of +=. */
static void bn_backward(float *din, int set, float *dgamma, float *dbeta, const float *dout, const float *in,
                        const float *mean, const float *invstd, const float *gamma, int C, size_t M,
                        const float *relu_out) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float *x = in + (size_t)c * M, *dy = dout + (size_t)c * M;
        float mu = mean[c], is = invstd[c];
        const float *ro = relu_out ? relu_out + (size_t)c * M : NULL;
        double sdy, sdyx;
        sum_grad(&sdy, &sdyx, dy, x, ro, M, mu);
        sdyx *= is; /* sum dy*xhat */
        dgamma[c] += (float)sdyx;
        dbeta[c] += (float)sdy;
        if (!din) continue;
        float *dx = din + (size_t)c * M;
        float k = gamma[c] * is, a = (float)(sdy / (double)M), b = (float)(sdyx / (double)M) * is;
        if (ro && set)
            for (size_t i = 0; i < M; i++) dx[i] = k * ((ro[i] > 0.f ? dy[i] : 0.f) - a - (x[i] - mu) * b);
        else if (ro)
            for (size_t i = 0; i < M; i++) dx[i] += k * ((ro[i] > 0.f ? dy[i] : 0.f) - a - (x[i] - mu) * b);
        else if (set)
            for (size_t i = 0; i < M; i++) dx[i] = k * (dy[i] - a - (x[i] - mu) * b);
        else
            for (size_t i = 0; i < M; i++) dx[i] += k * (dy[i] - a - (x[i] - mu) * b);
    }
}

void nn_bn_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *in,
                    const float *mean, const float *invstd, const float *gamma, int C, size_t M,
                    const float *relu_out) {
    bn_backward(din, 0, dgamma, dbeta, dout, in, mean, invstd, gamma, C, M, relu_out);
}

void nn_bn_backward_set(float *din, float *dgamma, float *dbeta, const float *dout, const float *in,
                        const float *mean, const float *invstd, const float *gamma, int C, size_t M,
                        const float *relu_out) {
    bn_backward(din, 1, dgamma, dbeta, dout, in, mean, invstd, gamma, C, M, relu_out);
}
