/* conv.c: 2-D convolution over CNHW activations: one im2col + one sgemm for the whole batch. */
#include "trainer/nn/nn_impl.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static inline int out_dim(int x, int k, int s, int p) { return (x + 2 * p - k) / s + 1; }
static inline int is_pointwise(int kh, int kw, int s, int p) {
    return kh == 1 && kw == 1 && s == 1 && p == 0;
}

/* valid output range [lo,hi) along one axis for kernel offset j */
static inline void valid_range(int *lo, int *hi, int O, int X, int j, int s, int p) {
    int a = p - j, b = X - 1 + p - j;
    int l = a > 0 ? (a + s - 1) / s : 0;
    int h = b < 0 ? 0 : b / s + 1;
    if (h > O) h = O;
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

/* Work is split over chunks of images: each OpenMP thread takes whole chunks, builds the chunk's
 * columns in its own slice of the workspace (sized to stay in cache) and runs one single-threaded
 * sgemm on it writing its columns of the output (ldc = N*OH*OW).  Weight gradients go to a
 * per-thread partial buffer, summed at the end. */
static int nthreads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* this thread's slice of the workspace */
static inline float *tslice(float *ws, size_t slice) {
#ifdef _OPENMP
    return ws + (size_t)omp_get_thread_num() * slice;
#else
    (void)slice;
    return ws;
#endif
}

/* im2col / col2im timed by thread 0 only (an "of which" row of the profile) */
static inline int is_thread0(void) {
#ifdef _OPENMP
    return omp_get_thread_num() == 0;
#else
    return 1;
#endif
}
static inline void prof_im2col(int phase, nn_tick_t t0) {
    if (is_thread0()) nn_prof_end(NP_IM2COL, phase, t0, 0);
}

/* images per chunk: columns of ~1 MB, at least one chunk per thread; Kc = 0 (pointwise, no
 * columns): one chunk per thread, so each runs one GEMM over its images */
static int chunk_images(int N, int OHW, int Kc) {
    size_t per = (size_t)OHW * Kc * sizeof(float), target = 1u << 20; /* ~1 MB of columns (L2) */
    int c = (int)(target / (per ? per : 1));
    if (c < 1) c = 1;
    int T = nthreads();
    if (c * T > N) c = (N + T - 1) / T; /* at least one chunk per thread */
    if (c < 1) c = 1;
    return c;
}

/* the direct 3x3 kernel where it applies (NN_CONV=gemm in the environment forces im2col) */
static int use_direct(int kh, int kw, int s, int p) {
    static int forced = -1;
    if (forced < 0) {
        const char *e = getenv("NN_CONV");
        forced = e && !strcmp(e, "gemm");
    }
    return !forced && nn_conv3_applies(kh, kw, s, p);
}

size_t nn_conv_ws_size(int N, int C, int H, int W, int K, int kh, int kw, int s, int p) {
    if (use_direct(kh, kw, s, p)) return nn_conv3_ws_size(N, C, H, W, K);
    int OHW = out_dim(H, kh, s, p) * out_dim(W, kw, s, p), Kc = C * kh * kw;
    size_t cols = (size_t)chunk_images(N, OHW, Kc) * OHW * Kc;
    if (is_pointwise(kh, kw, s, p)) cols = 0;
    return (size_t)nthreads() * (cols + (size_t)K * Kc);
}

/* col (Kc, nc, OH, OW) from images [n0, n0+nc) of in (C,N,H,W) */
static void im2col(float *col, const float *in, int N, int n0, int nc, int C, int H, int W, int kh, int kw,
                   int s, int p) {
    int OH = out_dim(H, kh, s, p), OW = out_dim(W, kw, s, p);
    size_t L = (size_t)nc * OH * OW;
    int rows = C * kh * kw;
    for (int r = 0; r < rows; r++) {
        int c = r / (kh * kw), i = (r / kw) % kh, j = r % kw;
        float *dst = col + (size_t)r * L;
        int ohl, ohh, owl, owh;
        valid_range(&ohl, &ohh, OH, H, i, s, p);
        valid_range(&owl, &owh, OW, W, j, s, p);
        for (int n = 0; n < nc; n++) {
            const float *src = in + ((size_t)c * N + n0 + n) * H * W;
            float *d = dst + (size_t)n * OH * OW;
            for (int oh = 0; oh < OH; oh++) {
                float *drow = d + (size_t)oh * OW;
                if (oh < ohl || oh >= ohh) {
                    memset(drow, 0, sizeof(float) * OW);
                    continue;
                }
                const float *srow = src + (size_t)(oh * s - p + i) * W + (j - p);
                for (int ow = 0; ow < owl; ow++) drow[ow] = 0.f;
                if (s == 1)
                    memcpy(drow + owl, srow + owl, sizeof(float) * (owh - owl));
                else
                    for (int ow = owl; ow < owh; ow++) drow[ow] = srow[ow * s];
                for (int ow = owh; ow < OW; ow++) drow[ow] = 0.f;
            }
        }
    }
}

/* images [n0, n0+nc) of din (C,N,H,W) += col2im(col (Kc, nc, OH, OW)) */
static void col2im(float *din, const float *col, int N, int n0, int nc, int C, int H, int W, int kh, int kw,
                   int s, int p) {
    int OH = out_dim(H, kh, s, p), OW = out_dim(W, kw, s, p);
    size_t L = (size_t)nc * OH * OW;
    for (int c = 0; c < C; c++) {
        for (int i = 0; i < kh; i++)
            for (int j = 0; j < kw; j++) {
                const float *src = col + ((size_t)(c * kh + i) * kw + j) * L;
                int ohl, ohh, owl, owh;
                valid_range(&ohl, &ohh, OH, H, i, s, p);
                valid_range(&owl, &owh, OW, W, j, s, p);
                for (int n = 0; n < nc; n++) {
                    float *d = din + ((size_t)c * N + n0 + n) * H * W;
                    const float *sn = src + (size_t)n * OH * OW;
                    for (int oh = ohl; oh < ohh; oh++) {
                        float *drow = d + (size_t)(oh * s - p + i) * W + (j - p);
                        const float *srow = sn + (size_t)oh * OW;
                        if (s == 1)
                            for (int ow = owl; ow < owh; ow++) drow[ow] += srow[ow];
                        else
                            for (int ow = owl; ow < owh; ow++) drow[ow * s] += srow[ow];
                    }
                }
            }
    }
}

static inline CBLAS_TRANSPOSE tr(int t) { return t ? CblasTrans : CblasNoTrans; }
#define GEMM(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc) \
    cblas_sgemm(CblasRowMajor, tr(ta), tr(tb), M, N, K, 1.f, A, lda, B, ldb, beta, C, ldc)

void nn_conv_forward(float *out, float *ws, const float *in, const float *w, const float *b, int N, int C,
                     int H, int W, int K, int kh, int kw, int s, int p) {
    if (use_direct(kh, kw, s, p)) {
        nn_conv3_forward(out, ws, in, w, b, N, C, H, W, K);
        return;
    }
    int OHW = out_dim(H, kh, s, p) * out_dim(W, kw, s, p), Kc = C * kh * kw;
    int L = N * OHW, pw = is_pointwise(kh, kw, s, p);
    int cn = chunk_images(N, OHW, pw ? 0 : Kc), nch = (N + cn - 1) / cn;
    size_t slice = pw ? 0 : (size_t)cn * OHW * Kc + (size_t)K * Kc;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < nch; ch++) {
        int n0 = ch * cn, nc = n0 + cn > N ? N - n0 : cn;
        float *col = tslice(ws, slice);
        float *o = out + (size_t)n0 * OHW;
        if (pw) {
            GEMM(0, 0, K, nc * OHW, Kc, w, Kc, in + (size_t)n0 * OHW, L, 0.f, o, L);
        } else {
            nn_tick_t t0 = nn_prof_start();
            im2col(col, in, N, n0, nc, C, H, W, kh, kw, s, p);
            prof_im2col(0, t0);
            GEMM(0, 0, K, nc * OHW, Kc, w, Kc, col, nc * OHW, 0.f, o, L);
        }
        if (b)
            for (int k = 0; k < K; k++) {
                float *ok = o + (size_t)k * L, bk = b[k];
                for (int i = 0; i < nc * OHW; i++) ok[i] += bk;
            }
    }
}

/* set: din = the data gradient (written whole), else din += it */
static void conv_backward(float *din, int set, float *dw, float *db, float *ws, const float *dout,
                          const float *in, const float *w, int N, int C, int H, int W, int K, int kh, int kw,
                          int s, int p) {
    int OHW = out_dim(H, kh, s, p) * out_dim(W, kw, s, p), Kc = C * kh * kw;
    int L = N * OHW, pw = is_pointwise(kh, kw, s, p);
    int cn = chunk_images(N, OHW, pw ? 0 : Kc), nch = (N + cn - 1) / cn, T = nthreads();
    size_t colsz = pw ? 0 : (size_t)cn * OHW * Kc, slice = colsz + (size_t)K * Kc;
    if (db) {
#pragma omp parallel for schedule(static)
        for (int k = 0; k < K; k++) {
            const float *d = dout + (size_t)k * L;
            float acc = 0.f;
            for (int i = 0; i < L; i++) acc += d[i];
            db[k] += acc;
        }
    }
    if (use_direct(kh, kw, s, p)) {
        nn_conv3_backward(din, set, dw, ws, dout, in, w, N, C, H, W, K);
        return;
    }
    /* weight gradient: pointwise, one sgemm over all positions whose output the threads split
     * (each sums over the whole batch); im2col paths: with one thread straight into dw, else
     * per-thread partials (K,Kc) summed in thread order (a fixed order: static chunk -> thread map) */
    if (pw) nn_sgemm(0, 1, K, Kc, L, 1.f, dout, L, in, L, 1.f, dw, Kc); /* dw (K,C) += dy x^T */
    int direct_dw = pw || T == 1 || nch == 1;
    if (!direct_dw)
        for (int t = 0; t < T; t++) memset(ws + (size_t)t * slice + colsz, 0, sizeof(float) * K * Kc);
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < nch; ch++) {
        int n0 = ch * cn, nc = n0 + cn > N ? N - n0 : cn, cols = nc * OHW;
        float *col = tslice(ws, slice);
        float *dwp = direct_dw ? dw : col + colsz;
        const float *dy = dout + (size_t)n0 * OHW;
        if (pw) { /* dx (C,cols) (+)= w^T dy */
            if (din) GEMM(1, 0, C, cols, K, w, Kc, dy, L, set ? 0.f : 1.f, din + (size_t)n0 * OHW, L);
            continue;
        }
        nn_tick_t t0 = nn_prof_start();
        im2col(col, in, N, n0, nc, C, H, W, kh, kw, s, p);
        prof_im2col(1, t0);
        GEMM(0, 1, K, Kc, cols, dy, L, col, cols, 1.f, dwp, Kc); /* dw (K,Kc) */
        if (!din) continue;
        GEMM(1, 0, Kc, cols, K, w, Kc, dy, L, 0.f, col, cols);
        t0 = nn_prof_start();
        if (set) /* this chunk's images of every channel */
            for (int c = 0; c < C; c++)
                memset(din + ((size_t)c * N + n0) * H * W, 0, sizeof(float) * nc * H * W);
        col2im(din, col, N, n0, nc, C, H, W, kh, kw, s, p);
        prof_im2col(1, t0);
    }
    if (direct_dw) return;
    nn_tick_t t0 = nn_prof_start();
    int used = nch < T ? nch : T;
    size_t KKc = (size_t)K * Kc;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < KKc; i++) {
        float acc = 0.f;
        for (int t = 0; t < used; t++) acc += ws[(size_t)t * slice + colsz + i];
        dw[i] += acc;
    }
    nn_prof_end(NP_WSUM, 1, t0, 0);
}

void nn_conv_backward(float *din, float *dw, float *db, float *ws, const float *dout, const float *in,
                      const float *w, int N, int C, int H, int W, int K, int kh, int kw, int s, int p) {
    conv_backward(din, 0, dw, db, ws, dout, in, w, N, C, H, W, K, kh, kw, s, p);
}

void nn_conv_backward_set(float *din, float *dw, float *db, float *ws, const float *dout, const float *in,
                          const float *w, int N, int C, int H, int W, int K, int kh, int kw, int s, int p) {
    conv_backward(din, 1, dw, db, ws, dout, in, w, N, C, H, W, K, kh, kw, s, p);
}
