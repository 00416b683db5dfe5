/* act.c: ReLU, residual add, option-A shortcut (subsample + zero-pad channels). */
#include "trainer/nn/nn_impl.h"

void nn_relu_forward(float *out, const float *in, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = in[i] > 0.f ? in[i] : 0.f;
}

void nn_relu_backward(float *din, const float *dout, const float *out, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) din[i] += out[i] > 0.f ? dout[i] : 0.f;
}

void nn_add_forward(float *out, const float *a, const float *b, size_t n, int relu) {
    if (relu) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) {
            float v = a[i] + b[i];
            out[i] = v > 0.f ? v : 0.f;
        }
    } else {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
    }
}

/* da, db (+)= dout masked by relu_out > 0 where given; set_a / set_b: = instead of +=.  One
 * loop per case, each with unconditional loads, so that each vectorises. */
#define ADD_BWD(STMT)                                                                    \
    do {                                                                                 \
        _Pragma("omp parallel for schedule(static)") for (size_t i = 0; i < n; i++) {    \
            float v = relu_out ? (relu_out[i] > 0.f ? dout[i] : 0.f) : dout[i];          \
            STMT;                                                                        \
        }                                                                                \
    } while (0)
void nn_add_backward_x(float *da, int set_a, float *db, int set_b, const float *dout, size_t n,
                       const float *relu_out) {
    int mode = (da ? (set_a ? 1 : 2) : 0) * 3 + (db ? (set_b ? 1 : 2) : 0);
    switch (mode) { /* da: none / set / add  x  db: none / set / add */
    case 1: ADD_BWD(db[i] = v); break;
    case 2: ADD_BWD(db[i] += v); break;
    case 3: ADD_BWD(da[i] = v); break;
    case 4: ADD_BWD(da[i] = v; db[i] = v); break;
    case 5: ADD_BWD(da[i] = v; db[i] += v); break;
    case 6: ADD_BWD(da[i] += v); break;
    case 7: ADD_BWD(da[i] += v; db[i] = v); break;
    case 8: ADD_BWD(da[i] += v; db[i] += v); break;
    }
}
#undef ADD_BWD

void nn_add_backward(float *da, float *db, const float *dout, size_t n, const float *relu_out) {
    nn_add_backward_x(da, 0, db, 0, dout, n, relu_out);
}

void nn_padsub_forward(float *out, const float *in, int N, int C, int H, int W, int K, int s) {
    int OH = (H - 1) / s + 1, OW = (W - 1) / s + 1, lo = (K - C) / 2;
    size_t plane = (size_t)N * OH * OW;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < K; k++) {
        float *o = out + (size_t)k * plane;
        int c = k - lo;
        if (c < 0 || c >= C) {
            memset(o, 0, sizeof(float) * plane);
            continue;
        }
        for (int n = 0; n < N; n++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++)
                    o[((size_t)n * OH + oh) * OW + ow] = in[(((size_t)c * N + n) * H + oh * s) * W + ow * s];
    }
}

void nn_padsub_backward(float *din, const float *dout, int N, int C, int H, int W, int K, int s) {
    int OH = (H - 1) / s + 1, OW = (W - 1) / s + 1, lo = (K - C) / 2;
    size_t plane = (size_t)N * OH * OW;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float *d = dout + (size_t)(c + lo) * plane;
        for (int n = 0; n < N; n++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++)
                    din[(((size_t)c * N + n) * H + oh * s) * W + ow * s] +=
                        d[((size_t)n * OH + oh) * OW + ow];
    }
}
