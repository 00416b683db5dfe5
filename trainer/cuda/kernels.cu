// kernels.cu: the CUDA backend's own kernels (element-wise layers, option-A shortcut, global
// average pooling, losses with top-1/top-5, SGD, finite check).  Launched from layers.cu,
// drivers.cu and step.cu on the model's stream; grid-stride loops (GRID_LOOP) so that any grid
// size covers any n.
#include "trainer/cuda/nn_cuda_impl.h"

namespace nncu {

__global__ void k_relu(float *out, const float *in, size_t n) {
    GRID_LOOP(i, n) out[i] = in[i] > 0.f ? in[i] : 0.f;
}
/* din (+)= out > 0 ? dout : 0 */
__global__ void k_relu_bwd(float *din, const float *dout, const float *out, size_t n, int acc) {
    GRID_LOOP(i, n) {
        float d = out[i] > 0.f ? dout[i] : 0.f;
        din[i] = acc ? din[i] + d : d;
    }
}
__global__ void k_mask(float *d, const float *out, size_t n) {
    GRID_LOOP(i, n) if (!(out[i] > 0.f)) d[i] = 0.f;
}
__global__ void k_add(float *out, const float *a, const float *b, size_t n, int relu) {
    GRID_LOOP(i, n) {
        float v = a[i] + b[i];
        out[i] = relu ? (v > 0.f ? v : 0.f) : v;
    }
}
__global__ void k_add_bwd(float *da, int acc_a, float *db, int acc_b, const float *dout,
                          const float *relu_out, size_t n) {
    GRID_LOOP(i, n) {
        float d = relu_out && !(relu_out[i] > 0.f) ? 0.f : dout[i];
        if (da) da[i] = acc_a ? da[i] + d : d;
        if (db) db[i] = acc_b ? db[i] + d : d;
    }
}
__global__ void k_accum(float *dst, const float *src, size_t n) { GRID_LOOP(i, n) dst[i] += src[i]; }
/* option-A shortcut, NCHW: out (N,K,OH,OW) */
__global__ void k_padsub(float *out, const float *in, int N, int C, int H, int W, int K, int s) {
    int OH = (H - 1) / s + 1, OW = (W - 1) / s + 1, lo = (K - C) / 2;
    size_t tot = (size_t)N * K * OH * OW;
    GRID_LOOP(i, tot) {
        int ow = (int)(i % OW);
        size_t r = i / OW;
        int oh = (int)(r % OH);
        r /= OH;
        int k = (int)(r % K);
        int n = (int)(r / K);
        int c = k - lo;
        out[i] =
            (c >= 0 && c < C) ? in[(((size_t)n * C + c) * H + (size_t)oh * s) * W + (size_t)ow * s] : 0.f;
    }
}
/* din (zeroed or accumulating) += the subsampled positions */
__global__ void k_padsub_bwd(float *din, const float *dout, int N, int C, int H, int W, int K, int s) {
    int OH = (H - 1) / s + 1, OW = (W - 1) / s + 1, lo = (K - C) / 2;
    size_t tot = (size_t)N * C * OH * OW;
    GRID_LOOP(i, tot) {
        int ow = (int)(i % OW);
        size_t r = i / OW;
        int oh = (int)(r % OH);
        r /= OH;
        int c = (int)(r % C);
        int n = (int)(r / C);
        din[(((size_t)n * C + c) * H + (size_t)oh * s) * W + (size_t)ow * s] +=
            dout[(((size_t)n * K + c + lo) * OH + oh) * OW + ow];
    }
}
/* global average pooling: one warp per (n,c) plane */
__global__ void k_gap(float *out, const float *in, int NC, int HW) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (warp >= NC) return;
    const float *x = in + (size_t)warp * HW;
    float acc = 0.f;
    for (int i = lane; i < HW; i += 32) acc += x[i];
    for (int o = 16; o; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (!lane) out[warp] = acc / (float)HW;
}
__global__ void k_gap_bwd(float *din, const float *dout, int NC, int HW, int acc) {
    size_t tot = (size_t)NC * HW;
    GRID_LOOP(i, tot) {
        float g = dout[i / HW] / (float)HW;
        din[i] = acc ? din[i] + g : g;
    }
}
/* out (N,O) += b (O) */
__global__ void k_bias(float *out, const float *b, int N, int O) {
    size_t tot = (size_t)N * O;
    GRID_LOOP(i, tot) out[i] += b[i % O];
}

/* softmax cross-entropy, logits (N,K) row-major; one block per sample */
__global__ void k_softmax_ce(float *probs, double *rowloss, int *rowtop, const float *logits,
                             const int *labels, int N, int K) {
    int n = blockIdx.x;
    if (n >= N) return;
    const float *x = logits + (size_t)n * K;
    __shared__ float smax[32];
    __shared__ double ssum[32];
    __shared__ int scnt[32];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    float mx = -INFINITY;
    for (int k = threadIdx.x; k < K; k += blockDim.x) mx = fmaxf(mx, x[k]);
    for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_down_sync(0xffffffffu, mx, o));
    if (!lane) smax[wid] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        float v = smax[0];
        for (int w = 1; w < nw; w++) v = fmaxf(v, smax[w]);
        smax[0] = v;
    }
    __syncthreads();
    mx = smax[0];
    int y = labels[n];
    float ly = x[y];
    double z = 0;
    int above = 0;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        z += exp((double)x[k] - mx);
        if (k != y && x[k] >= ly) above++;
    }
    for (int o = 16; o; o >>= 1) {
        z += __shfl_down_sync(0xffffffffu, z, o);
        above += __shfl_down_sync(0xffffffffu, above, o);
    }
    __syncthreads();
    if (!lane) {
        ssum[wid] = z;
        scnt[wid] = above;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double zz = 0;
        int a = 0;
        for (int w = 0; w < nw; w++) {
            zz += ssum[w];
            a += scnt[w];
        }
        ssum[0] = zz;
        rowloss[n] = log(zz) + mx - ly;
        rowtop[2 * n] = a < 1;
        rowtop[2 * n + 1] = a < 5;
    }
    __syncthreads();
    z = ssum[0];
    for (int k = threadIdx.x; k < K; k += blockDim.x)
        probs[(size_t)n * K + k] = (float)(exp((double)x[k] - mx) / z);
}
/* sums per-sample results in a fixed order (deterministic) */
__global__ void k_finish(res_t *res, const double *rowloss, const int *rowtop, int N, double div) {
    __shared__ double sl[256];
    __shared__ int s1[256], s5[256];
    double l = 0;
    int a = 0, b = 0;
    for (int n = threadIdx.x; n < N; n += blockDim.x) {
        l += rowloss[n];
        if (rowtop) {
            a += rowtop[2 * n];
            b += rowtop[2 * n + 1];
        }
    }
    sl[threadIdx.x] = l;
    s1[threadIdx.x] = a;
    s5[threadIdx.x] = b;
    __syncthreads();
    for (int s = blockDim.x / 2; s; s >>= 1) {
        if ((int)threadIdx.x < s) {
            sl[threadIdx.x] += sl[threadIdx.x + s];
            s1[threadIdx.x] += s1[threadIdx.x + s];
            s5[threadIdx.x] += s5[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        res->loss = sl[0] / div;
        res->top1 = s1[0];
        res->top5 = s5[0];
    }
}
__global__ void k_softmax_ce_bwd(float *dlogits, const float *probs, const int *labels, int N, int K, float s,
                                 int acc) {
    size_t tot = (size_t)N * K;
    GRID_LOOP(i, tot) {
        int k = (int)(i % K), n = (int)(i / K);
        float d = s * (probs[i] - (labels[n] == k ? 1.f : 0.f));
        dlogits[i] = acc ? dlogits[i] + d : d;
    }
}
/* MSE: y (N,K) row-major, target (N,K); per-row sums of squares in double */
__global__ void k_mse_rows(double *rowloss, const float *y, const float *t, int N, int K) {
    int n = blockIdx.x;
    if (n >= N) return;
    __shared__ double s[256];
    double a = 0;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        double d = (double)y[(size_t)n * K + k] - t[(size_t)n * K + k];
        a += d * d;
    }
    s[threadIdx.x] = a;
    __syncthreads();
    for (int h = blockDim.x / 2; h; h >>= 1) {
        if ((int)threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    if (!threadIdx.x) rowloss[n] = s[0];
}
__global__ void k_mse_bwd(float *dy, const float *y, const float *t, size_t n, float s, int acc) {
    GRID_LOOP(i, n) {
        float d = s * (y[i] - t[i]);
        dy[i] = acc ? dy[i] + d : d;
    }
}
/* SGD momentum, PyTorch formulation with a factor gs on the gradient (as trainer/nn/optim.c) */
__global__ void k_sgd(float *w, float *v, const float *g, const uint8_t *decay, size_t n, float lr, float mu,
                      float wd, int wd_all, int nesterov, float gs) {
    GRID_LOOP(i, n) {
        float wdi = (wd_all || decay[i]) ? wd : 0.f;
        float wi = w[i];
        if (nesterov) {
            float gi = (gs == 1.f ? g[i] : gs * g[i]) + wdi * wi;
            float vi = mu * v[i] + gi;
            v[i] = vi;
            w[i] = wi - lr * (gi + mu * vi);
        } else {
            float gg = gs == 1.f ? g[i] : gs * g[i]; /* 1: PyTorch's step, unchanged */
            float vi = mu * v[i] + gg + wdi * wi;
            v[i] = vi;
            w[i] = wi - lr * vi;
        }
    }
}
__global__ void k_first_bad(unsigned long long *bad, const float *g, size_t n) {
    GRID_LOOP(i, n) if (!isfinite(g[i])) atomicMin(bad, (unsigned long long)i);
}
__global__ void k_fill(float *p, float v, size_t n) { GRID_LOOP(i, n) p[i] = v; }

} // namespace nncu
