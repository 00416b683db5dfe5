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

/* gradient to the first maximum of each window (as PyTorch) */
void nn_maxpool_backward(float *din, const float *dout, const float *in, int NC, int H, int W, int k, int s,
                         int p) {
    int OH = od(H, k, s, p), OW = od(W, k, s, p);
#pragma omp parallel for schedule(static)
    for (int q = 0; q < NC; q++) {
        const float *x = in + (size_t)q * H * W;
        const float *dy = dout + (size_t)q * OH * OW;
        float *dx = din + (size_t)q * H * W;
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                float mx = -FLT_MAX;
                int am = -1;
                for (int i = 0; i < k; i++) {
                    int ih = oh * s - p + i;
                    if (ih < 0 || ih >= H) continue;
                    for (int j = 0; j < k; j++) {
                        int iw = ow * s - p + j;
                        if (iw < 0 || iw >= W) continue;
                        float v = x[ih * W + iw];
                        if (v > mx || am < 0) {
                            mx = v;
                            am = ih * W + iw;
                        }
                    }
                }
                if (am >= 0) dx[am] += dy[oh * OW + ow];
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
