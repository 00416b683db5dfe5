/* conv3.c: direct 3x3 stride-1 pad-1 ("same") convolution over CNHW activations, AVX-512.
 *
 * In CNHW a channel is one contiguous run of P = N*H*W positions, and for a same-size 3x3
 * convolution the input of output position q under tap (i,j) is position q + (i-1)*W + (j-1)
 * of the same channel, valid where that pixel lies inside the image.  So one 16-float vector of
 * consecutive output positions reads, per tap, one masked unaligned vector of the input (the
 * mask zeroes the lanes whose tap falls into the padding or another image): no im2col, no
 * col2im, and the channel counts of small ResNets (16-64) become register-blocking factors
 * instead of skinny GEMM dimensions.
 *
 * Forward:   out[k][q]  = b[k] + sum_c sum_t w[k][c][t] x[c][q + off(t)]
 * Data grad: dx[c][q]  += sum_k sum_t w[k][c][8-t] dy[k][q + off(t)]   (same kernel, flipped
 *            and transposed weights, off(8-t) = -off(t))
 * Filter:    dw[k][c][t] += sum_q dy[k][q] x[c][q + off(t)]
 *
 * Forward and data gradient: threads take fixed contiguous position ranges.  Filter gradient:
 * threads take fixed contiguous ranges of (output-channel block, input channel) pairs over all
 * positions, each writing its own entries of dw (no per-thread partials to sum; every sum runs
 * over the whole batch in one order).  Both are functions of the shapes and the thread count
 * only, so results do not depend on thread timing.
 *
 * The kernels are compiled for AVX-512 whatever the build's -march (GCC/Clang on x86-64:
 * target pragma) and used only where the CPU running them has it (nn_conv3_applies checks at
 * run time), so one build runs on any x86-64; elsewhere the im2col path serves every
 * convolution. */
#include "trainer/nn/nn_impl.h"
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__)
/* the CPU's AVX-512 (F, BW, VL, DQ: what the kernels and the compiler's code for them use) */
static int cpu_has_avx512(void) {
    static int has = -1;
    if (has < 0) {
        __builtin_cpu_init();
        has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    }
    return has;
}

int nn_conv3_applies(int kh, int kw, int s, int p) {
    return kh == 3 && kw == 3 && s == 1 && p == 1 && cpu_has_avx512();
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,avx2")
#include <immintrin.h>

enum {
    VL = 16,      /* floats per vector */
    KB = 8,       /* output channels per register tile (forward / data gradient) */
    NV = 3,       /* vectors per register tile: KB*NV = 24 accumulators of 32 registers */
    FB = 3,       /* output channels per filter-gradient tile: FB*9 = 27 accumulators */
    CHUNK = 4096, /* positions whose tap masks are computed once and reused by every channel */
};

static inline int tap_off(int t, int W) { return (t / 3 - 1) * W + (t % 3 - 1); }

/* m[v*9 + t], v < nv: lanes of vector v (positions q0 + 16v ...) whose output position is below
 * end and whose tap t input lies inside the image.  H, W: image size; HW = H*W. */
static void tap_masks(__mmask16 *m, size_t q0, int nv, size_t end, int H, int W) {
    size_t HW = (size_t)H * W, r = q0 % HW;
    int oh = (int)(r / W), ow = (int)(r % W);
    for (int v = 0; v < nv; v++) {
        unsigned rows[3] = {0, 0, 0}, cols[3] = {0, 0, 0};
        for (int l = 0; l < VL; l++) {
            if (q0 + (size_t)v * VL + l < end) {
                unsigned bit = 1u << l;
                rows[0] |= oh > 0 ? bit : 0;
                rows[1] |= bit;
                rows[2] |= oh < H - 1 ? bit : 0;
                cols[0] |= ow > 0 ? bit : 0;
                cols[1] |= bit;
                cols[2] |= ow < W - 1 ? bit : 0;
            }
            if (++ow == W) {
                ow = 0;
                if (++oh == H) oh = 0;
            }
        }
        for (int t = 0; t < 9; t++) m[v * 9 + t] = (__mmask16)(rows[t / 3] & cols[t % 3]);
    }
}

/* wp[blk][c][t][KB] = w[blk*KB + kk][c][flip ? 8-t : t], or w[c][blk*KB+kk] transposed (tr):
 * the weights one register tile broadcasts, contiguous; rows past K are zero. */
static void pack_weights(float *wp, const float *w, int K, int C, int tr) {
    int KO = tr ? C : K, KI = tr ? K : C; /* output / input channels of the packed convolution */
    int nb = (KO + KB - 1) / KB;
    for (int blk = 0; blk < nb; blk++)
        for (int c = 0; c < KI; c++)
            for (int t = 0; t < 9; t++)
                for (int kk = 0; kk < KB; kk++) {
                    int k = blk * KB + kk;
                    float v = 0.f;
                    if (k < KO)
                        v = tr ? w[((size_t)c * C + k) * 9 + (8 - t)] : w[((size_t)k * C + c) * 9 + t];
                    wp[(((size_t)blk * KI + c) * 9 + t) * KB + kk] = v;
                }
}

/* One register tile: output channels k0..k0+kb-1 (kb <= KB) at positions q0 .. q0+16*NV-1.
 * acc = (accumulate ? out : bias or 0) + sum over C input channels and 9 taps. */
static inline __attribute__((always_inline)) void fwd_tile(float *out, const float *in, const float *wp,
                                                           const float *bias, int accumulate, int k0, int kb,
                                                           size_t q0, size_t P, int C, int W,
                                                           const __mmask16 *m) {
    __m512 acc[KB][NV];
#pragma GCC unroll 8
    for (int kk = 0; kk < KB; kk++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) {
            if (accumulate && kk < kb)
                acc[kk][v] = _mm512_maskz_loadu_ps(m[v * 9 + 4], out + (size_t)(k0 + kk) * P + q0 + v * VL);
            else
                acc[kk][v] = _mm512_set1_ps(bias && kk < kb ? bias[k0 + kk] : 0.f);
        }
    for (int c = 0; c < C; c++) {
        const float *x = in + (size_t)c * P + q0;
        const float *wc = wp + (size_t)c * 9 * KB;
#pragma GCC unroll 9
        for (int t = 0; t < 9; t++) {
            int off = tap_off(t, W);
            __m512 xv[NV];
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++) xv[v] = _mm512_maskz_loadu_ps(m[v * 9 + t], x + v * VL + off);
#pragma GCC unroll 8
            for (int kk = 0; kk < KB; kk++) {
                __m512 wv = _mm512_set1_ps(wc[t * KB + kk]);
#pragma GCC unroll 3
                for (int v = 0; v < NV; v++) acc[kk][v] = _mm512_fmadd_ps(wv, xv[v], acc[kk][v]);
            }
        }
    }
#pragma GCC unroll 8
    for (int kk = 0; kk < KB; kk++)
        if (kk < kb)
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++)
                _mm512_mask_storeu_ps(out + (size_t)(k0 + kk) * P + q0 + v * VL, m[v * 9 + 4], acc[kk][v]);
}

/* the calling OpenMP thread's position range [*lo, *hi) of P, in whole vectors (a function of
 * P, the thread number and the team size only); returns the team size */
static int thread_range(size_t *lo, size_t *hi, size_t P) {
    int T = 1, t = 0;
#ifdef _OPENMP
    T = omp_get_num_threads();
    t = omp_get_thread_num();
#endif
    size_t nvec = (P + VL - 1) / VL, per = (nvec + T - 1) / T;
    size_t a = (size_t)t * per * VL, b = a + per * VL;
    *lo = a < P ? a : P;
    *hi = b < P ? b : P;
    return T;
}

/* out (KO channels) = or += direct conv of in (KI channels) with packed weights wp */
static void direct(float *out, const float *in, const float *wp, const float *bias, int accumulate, int KI,
                   int KO, int N, int H, int W) {
    size_t P = (size_t)N * H * W;
    const size_t tile = (size_t)NV * VL;
    int nb = (KO + KB - 1) / KB;
#pragma omp parallel
    {
        size_t lo, hi;
        thread_range(&lo, &hi, P);
        __mmask16 m[(CHUNK / (NV * VL) + 1) * NV * 9];
        for (size_t c0 = lo; c0 < hi; c0 += CHUNK) {
            size_t c1 = c0 + CHUNK < hi ? c0 + CHUNK : hi;
            size_t ntile = (c1 - c0 + tile - 1) / tile;
            for (size_t i = 0; i < ntile; i++) tap_masks(m + i * NV * 9, c0 + i * tile, NV, c1, H, W);
            for (int blk = 0; blk < nb; blk++) {
                int k0 = blk * KB, kb = KO - k0 < KB ? KO - k0 : KB;
                const float *wb = wp + (size_t)blk * KI * 9 * KB;
                for (size_t i = 0; i < ntile; i++)
                    fwd_tile(out, in, wb, bias, accumulate, k0, kb, c0 + i * tile, P, KI, W, m + i * NV * 9);
            }
        }
    }
}

/* Lane i of the result = the sum of u[i]'s 16 lanes: a transposing tree of 15 adds and 30
 * shuffles for 16 sums (a separate horizontal sum per vector costs ~8 operations each, half of
 * them on the shuffle port that also issues FMAs).  The inputs enter the tree permuted
 * (SUM16_MAP) so that the sums come out in order. */
static const int SUM16_MAP[16] = {0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15};
static inline __attribute__((always_inline)) __m512 sum16(const __m512 *u) {
    __m512 v[16], x[8], y[4], z[2];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) v[SUM16_MAP[i]] = u[i];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) /* 256-bit halves: v[i]'s (lanes 0-7), v[i+8]'s (8-15) */
        x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[i], v[i + 8], 0x44),
                             _mm512_shuffle_f32x4(v[i], v[i + 8], 0xEE));
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) /* 128-bit lanes: v[i], v[i+8], v[i+4], v[i+12] */
        y[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[i], x[i + 4], 0x88),
                             _mm512_shuffle_f32x4(x[i], x[i + 4], 0xDD));
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) /* per 128-bit lane: pairs of y[i]'s and y[i+2]'s, interleaved */
        z[i] = _mm512_add_ps(_mm512_unpacklo_ps(y[i], y[i + 2]), _mm512_unpackhi_ps(y[i], y[i + 2]));
    return _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], 0x44), _mm512_shuffle_ps(z[0], z[1], 0xEE));
}

/* dw (K,C,9) += filter gradient over positions [lo,hi); kb <= FB output channels */
static inline __attribute__((always_inline)) void filt_tile(float *dwp, const float *dy, const float *x,
                                                            int k0, int kb, int c, int C, size_t lo,
                                                            size_t hi, size_t P, int W, const __mmask16 *m) {
    __m512 acc[FB][9];
#pragma GCC unroll 3
    for (int kk = 0; kk < FB; kk++)
#pragma GCC unroll 9
        for (int t = 0; t < 9; t++) acc[kk][t] = _mm512_setzero_ps();
    const float *xc = x + (size_t)c * P;
    for (size_t q = lo, v = 0; q < hi; q += VL, v++) {
        const __mmask16 *mv = m + v * 9;
        __m512 d[FB];
#pragma GCC unroll 3
        for (int kk = 0; kk < FB; kk++)
            d[kk] =
                kk < kb ? _mm512_maskz_loadu_ps(mv[4], dy + (size_t)(k0 + kk) * P + q) : _mm512_setzero_ps();
#pragma GCC unroll 9
        for (int t = 0; t < 9; t++) {
            __m512 xv = _mm512_maskz_loadu_ps(mv[t], xc + q + tap_off(t, W));
#pragma GCC unroll 3
            for (int kk = 0; kk < FB; kk++) acc[kk][t] = _mm512_fmadd_ps(d[kk], xv, acc[kk][t]);
        }
    }
    /* the FB*9 = 27 sums, in (kk, t) order, then added to dw's rows of 9 taps */
    __m512 u[32];
#pragma GCC unroll 32
    for (int i = 0; i < 32; i++) u[i] = i < FB * 9 ? acc[i / 9][i % 9] : _mm512_setzero_ps();
    float sums[48]; /* 32 sums; a row of 9 read as one vector from any of the first 27 */
    _mm512_storeu_ps(sums, sum16(u));
    _mm512_storeu_ps(sums + 16, sum16(u + 16));
    const __mmask16 row = 0x1FF;
#pragma GCC unroll 3
    for (int kk = 0; kk < FB; kk++)
        if (kk < kb) {
            float *d = dwp + ((size_t)(k0 + kk) * C + c) * 9;
            _mm512_mask_storeu_ps(
                d, row,
                _mm512_add_ps(_mm512_maskz_loadu_ps(row, d), _mm512_maskz_loadu_ps(row, sums + kk * 9)));
        }
}

/* floats of packed weights: forward (K rounded up to KB) or data gradient (C rounded up) */
static size_t packed_size(int C, int K) {
    size_t pk = (size_t)((K + KB - 1) / KB) * KB * C * 9, pc = (size_t)((C + KB - 1) / KB) * KB * K * 9;
    return pk > pc ? pk : pc;
}

/* floats holding the tap masks of all P positions (9 per vector of 16) */
static size_t masks_size(size_t P) { return ((P + VL - 1) / VL * 9 * sizeof(__mmask16) + 3) / sizeof(float); }

size_t nn_conv3_ws_size(int N, int C, int H, int W, int K) {
    return packed_size(C, K) + masks_size((size_t)N * H * W);
}

void nn_conv3_forward(float *out, float *ws, const float *in, const float *w, const float *b, int N, int C,
                      int H, int W, int K) {
    pack_weights(ws, w, K, C, 0);
    direct(out, in, ws, b, 0, C, K, N, H, W);
}

void nn_conv3_backward(float *din, int set, float *dw, float *ws, const float *dout, const float *in,
                       const float *w, int N, int C, int H, int W, int K) {
    size_t P = (size_t)N * H * W, nvec = (P + VL - 1) / VL;
    int nkb = (K + FB - 1) / FB, units = nkb * C;         /* (output-channel block, input channel) pairs */
    __mmask16 *m = (__mmask16 *)(ws + packed_size(C, K)); /* tap masks of all positions */
#pragma omp parallel
    {
        int T = 1, tid = 0;
#ifdef _OPENMP
        T = omp_get_num_threads();
        tid = omp_get_thread_num();
#endif
#pragma omp for schedule(static)
        for (size_t v = 0; v < nvec; v++) tap_masks(m + v * 9, v * VL, 1, P, H, W);
        int per = (units + T - 1) / T, u0 = tid * per < units ? tid * per : units,
            u1 = u0 + per < units ? u0 + per : units;
        for (size_t c0 = 0; c0 < P; c0 += CHUNK) { /* chunks of positions: dy and x rows in L2 */
            size_t c1 = c0 + CHUNK < P ? c0 + CHUNK : P;
            for (int u = u0; u < u1; u++) {
                int k0 = u / C * FB, c = u % C, kb = K - k0 < FB ? K - k0 : FB;
                const __mmask16 *mc = m + c0 / VL * 9;
                if (kb == FB) /* a full block: the tile without its channel-count tests */
                    filt_tile(dw, dout, in, k0, FB, c, C, c0, c1, P, W, mc);
                else
                    filt_tile(dw, dout, in, k0, kb, c, C, c0, c1, P, W, mc);
            }
        }
    }
    if (!din) return;
    pack_weights(ws, w, K, C, 1);
    direct(din, dout, ws, NULL, !set, K, C, N, H, W);
}

#pragma GCC pop_options

#else /* not x86-64 GCC/Clang: the im2col path serves every convolution */
int nn_conv3_applies(int kh, int kw, int s, int p) {
    (void)kh;
    (void)kw;
    (void)s;
    (void)p;
    return 0;
}
size_t nn_conv3_ws_size(int N, int C, int H, int W, int K) {
    (void)N;
    (void)C;
    (void)H;
    (void)W;
    (void)K;
    return 0;
}
void nn_conv3_forward(float *out, float *ws, const float *in, const float *w, const float *b, int N, int C,
                      int H, int W, int K) {
    (void)out;
    (void)ws;
    (void)in;
    (void)w;
    (void)b;
    (void)N;
    (void)C;
    (void)H;
    (void)W;
    (void)K;
}
void nn_conv3_backward(float *din, int set, float *dw, float *ws, const float *dout, const float *in,
                       const float *w, int N, int C, int H, int W, int K) {
    (void)din;
    (void)set;
    (void)dw;
    (void)ws;
    (void)dout;
    (void)in;
    (void)w;
    (void)N;
    (void)C;
    (void)H;
    (void)W;
    (void)K;
}
#endif
