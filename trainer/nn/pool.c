/* pool.c: max / average pooling (per (c,n) plane) and global average pooling. */
#include "trainer/nn/nn_impl.h"
#include <float.h>

static inline int od(int x, int k, int s, int p) { return (x + 2 * p - k) / s + 1; }

void nn_maxpool_forward(float *out, const float *in, int NC, int H, int W, int k, int s, int p) {
    int OH = od(H, k, s, p), OW = od(W, k, s, p);
#pragma omp parallel for schedule(static)
    for (int q = 0; q < NC; q++) {
        const float *x = in + (size_t)q * H * W;
        float *y = out + (size_t)q * OH * OW;
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                float mx = -FLT_MAX;
                for (int i = 0; i < k; i++) {
                    int ih = oh * s - p + i;
                    if (ih < 0 || ih >= H) continue;
                    for (int j = 0; j < k; j++) {
                        int iw = ow * s - p + j;
                        if (iw < 0 || iw >= W) continue;
                        float v = x[ih * W + iw];
                        if (v > mx) mx = v;
                    }
                }
                y[oh * OW + ow] = mx;
            }
    }
}

/* gradient to the first maximum of each window (as PyTorch); the window's arg max is found
 * with conditional moves, not branches (which mispredict on data-dependent comparisons) */
void nn_maxpool_backward(float *din, const float *dout, const float *in, int NC, int H, int W, int k, int s,
                         int p) {
    int OH = od(H, k, s, p), OW = od(W, k, s, p);
#pragma omp parallel for schedule(static)
    for (int q = 0; q < NC; q++) {
        const float *x = in + (size_t)q * H * W;
        const float *dy = dout + (size_t)q * OH * OW;
        float *dx = din + (size_t)q * H * W;
        for (int oh = 0; oh < OH; oh++) {
            int ih0 = oh * s - p, ilo = ih0 < 0 ? 0 : ih0, ihi = ih0 + k > H ? H : ih0 + k;
            for (int ow = 0; ow < OW; ow++) {
                int iw0 = ow * s - p, jlo = iw0 < 0 ? 0 : iw0, jhi = iw0 + k > W ? W : iw0 + k;
                if (ilo >= ihi || jlo >= jhi) continue;
                int am = ilo * W + jlo;
                float mx = x[am];
                for (int ih = ilo; ih < ihi; ih++)
                    for (int iw = jlo; iw < jhi; iw++) {
                        int idx = ih * W + iw;
                        float v = x[idx];
                        int gt = v > mx;
                        mx = gt ? v : mx;
                        am = gt ? idx : am;
                    }
                dx[am] += dy[oh * OW + ow];
            }
        }
    }
}

void nn_avgpool_forward(float *out, const float *in, int NC, int H, int W, int k, int s, int p) {
    int OH = od(H, k, s, p), OW = od(W, k, s, p);
    float inv = 1.f / (float)(k * k);
#pragma omp parallel for schedule(static)
    for (int q = 0; q < NC; q++) {
        const float *x = in + (size_t)q * H * W;
        float *y = out + (size_t)q * OH * OW;
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                float acc = 0.f;
                for (int i = 0; i < k; i++) {
                    int ih = oh * s - p + i;
                    if (ih < 0 || ih >= H) continue;
                    for (int j = 0; j < k; j++) {
                        int iw = ow * s - p + j;
                        if (iw >= 0 && iw < W) acc += x[ih * W + iw];
                    }
                }
                y[oh * OW + ow] = acc * inv;
            }
    }
}

void nn_avgpool_backward(float *din, const float *dout, int NC, int H, int W, int k, int s, int p) {
    int OH = od(H, k, s, p), OW = od(W, k, s, p);
    float inv = 1.f / (float)(k * k);
#pragma omp parallel for schedule(static)
    for (int q = 0; q < NC; q++) {
        const float *dy = dout + (size_t)q * OH * OW;
        float *dx = din + (size_t)q * H * W;
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                float g = dy[oh * OW + ow] * inv;
                for (int i = 0; i < k; i++) {
                    int ih = oh * s - p + i;
                    if (ih < 0 || ih >= H) continue;
                    for (int j = 0; j < k; j++) {
                        int iw = ow * s - p + j;
                        if (iw >= 0 && iw < W) dx[ih * W + iw] += g;
                    }
                }
            }
    }
}

void nn_gap_forward(float *out, const float *in, int NC, int HW) {
#pragma omp parallel for schedule(static)
    for (int q = 0; q < NC; q++) {
        const float *x = in + (size_t)q * HW;
        float acc = 0.f;
        for (int i = 0; i < HW; i++) acc += x[i];
        out[q] = acc / (float)HW;
    }
}

void nn_gap_backward(float *din, const float *dout, int NC, int HW) {
#pragma omp parallel for schedule(static)
    for (int q = 0; q < NC; q++) {
        float g = dout[q] / (float)HW;
        float *dx = din + (size_t)q * HW;
        for (int i = 0; i < HW; i++) dx[i] += g;
    }
}
