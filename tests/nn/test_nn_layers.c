/* test_nn_layers.c: finite-difference gradient checks of every layer kernel (CNHW layouts).
 * Loss L = sum(r .* y) accumulated in double, r random; analytic gradients come from backward
 * with dout = r.  Central differences with eps = 1e-2 (inputs O(1)) on up to 40 sampled
 * coordinates per tensor; pass if the norm-wise relative error ||g - fd|| / ||fd|| <= 5e-3.
 * Inputs of kinked layers (ReLU, max pooling) are kept >= 2 eps away from the kinks/ties. */
#include "tests/nn/nn_test_util.h"

#define MAXT 6
typedef struct {
    const char *name;
    float *p[MAXT], *g[MAXT]; /* value and analytic gradient of each checked tensor */
    size_t n[MAXT];
    const char *tn[MAXT];
    int nt;
    float *y, *r;
    size_t ny; /* output and its random cotangent */
    void (*fwd)(void *c);
    void (*bwd)(void *c);      /* accumulates into g[] (zeroed by the harness) */
    double (*scalar)(void *c); /* if set: L = scalar() instead of sum r.y */
} gc_t;

static nn_rng_t R;

static double lossval(gc_t *c, void *ctx) {
    if (c->scalar) return c->scalar(ctx);
    c->fwd(ctx);
    double L = 0;
    for (size_t i = 0; i < c->ny; i++) L += (double)c->r[i] * c->y[i];
    return L;
}

static void gradcheck(gc_t *c, void *ctx, double eps, double tol) {
    for (int t = 0; t < c->nt; t++)
        if (c->g[t]) memset(c->g[t], 0, c->n[t] * sizeof(float));
    if (c->scalar)
        c->scalar(ctx);
    else
        c->fwd(ctx);
    c->bwd(ctx);
    for (int t = 0; t < c->nt; t++) {
        if (!c->g[t]) continue;
        int ns = c->n[t] < 40 ? (int)c->n[t] : 40;
        float an[40], fd[40];
        for (int s = 0; s < ns; s++) {
            size_t i = c->n[t] <= 40 ? (size_t)s : nn_rng_u64(&R) % c->n[t];
            float v = c->p[t][i];
            c->p[t][i] = v + (float)eps;
            double l1 = lossval(c, ctx);
            c->p[t][i] = v - (float)eps;
            double l2 = lossval(c, ctx);
            c->p[t][i] = v;
            fd[s] = (float)((l1 - l2) / (2 * eps));
            an[s] = c->g[t][i];
        }
        char what[128];
        snprintf(what, sizeof what, "%s d/d%s", c->name, c->tn[t]);
        double e = nt_relerr(an, fd, (size_t)ns, 1e-6);
        nt_check(e <= tol, what, e, tol);
    }
}

static float *vec(size_t n, float lo, float hi) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    nt_fill(&R, p, n, lo, hi);
    return p;
}
/* values in +-[0.1, 1]: away from the ReLU kink */
static float *vec_nokink(size_t n) {
    float *p = vec(n, 0.1f, 1.f);
    for (size_t i = 0; i < n; i++)
        if (nn_rng_u64(&R) & 1) p[i] = -p[i];
    return p;
}

/* ---- convolution */
typedef struct {
    int N, C, H, W, K, k, s, p, bias;
    float *x, *w, *b, *y, *col, *dx, *dw, *db;
} conv_c;
static void conv_f(void *v) {
    conv_c *c = v;
    nn_conv_forward(c->y, c->col, c->x, c->w, c->b, c->N, c->C, c->H, c->W, c->K, c->k, c->k, c->s, c->p);
}
static gc_t *cur;
static void conv_b(void *v) {
    conv_c *c = v;
    nn_conv_backward(c->dx, c->dw, c->db, c->col, cur->r, c->x, c->w, c->N, c->C, c->H, c->W, c->K, c->k,
                     c->k, c->s, c->p);
}

static void test_conv(int N, int C, int H, int W, int K, int k, int s, int p, int bias) {
    conv_c c = {N, C, H, W, K, k, s, p, bias, 0, 0, 0, 0, 0, 0, 0, 0};
    int OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
    size_t nx = (size_t)N * C * H * W, nw = (size_t)K * C * k * k, ny = (size_t)K * N * OH * OW;
    c.x = vec(nx, -1, 1);
    c.w = vec(nw, -1, 1);
    c.b = bias ? vec(K, -1, 1) : NULL;
    c.y = vec(ny, 0, 0);
    c.dx = vec(nx, 0, 0);
    c.dw = vec(nw, 0, 0);
    c.db = bias ? vec(K, 0, 0) : NULL;
    size_t nc = nn_conv_ws_size(N, C, H, W, K, k, k, s, p);
    c.col = vec(nc, 0, 0);
    char name[96];
    snprintf(name, sizeof name, "conv N%d C%d %dx%d K%d k%d s%d p%d%s", N, C, H, W, K, k, s, p,
             bias ? " bias" : "");
    gc_t g = {.name = name,
              .nt = bias ? 3 : 2,
              .y = c.y,
              .ny = ny,
              .r = vec(ny, -1, 1),
              .fwd = conv_f,
              .bwd = conv_b};
    g.p[0] = c.x;
    g.g[0] = c.dx;
    g.n[0] = nx;
    g.tn[0] = "x";
    g.p[1] = c.w;
    g.g[1] = c.dw;
    g.n[1] = nw;
    g.tn[1] = "w";
    if (bias) {
        g.p[2] = c.b;
        g.g[2] = c.db;
        g.n[2] = K;
        g.tn[2] = "b";
    }
    cur = &g;
    gradcheck(&g, &c, 1e-2, 5e-3);
    free(c.x);
    free(c.w);
    free(c.b);
    free(c.y);
    free(c.dx);
    free(c.dw);
    free(c.db);
    free(c.col);
    free(g.r);
}

/* ---- batch norm */
typedef struct {
    int C;
    size_t M;
    float *x, *g, *b, *y, *mean, *istd, *rm, *rv, *dx, *dg, *db;
} bn_c;
static void bn_f(void *v) {
    bn_c *c = v;
    nn_bn_forward(c->y, c->mean, c->istd, NULL, NULL, c->x, c->g, c->b, c->C, c->M, 0.1f, 1e-5f, 1, 0);
}
static void bn_b(void *v) {
    bn_c *c = v;
    nn_bn_backward(c->dx, c->dg, c->db, cur->r, c->x, c->mean, c->istd, c->g, c->C, c->M, NULL);
}
static void test_bn(int C, size_t M) {
    bn_c c = {C,
              M,
              vec(C * M, -1, 2),
              vec(C, 0.5f, 1.5f),
              vec(C, -1, 1),
              vec(C * M, 0, 0),
              vec(C, 0, 0),
              vec(C, 0, 0),
              vec(C, 0, 0),
              vec(C, 1, 1),
              vec(C * M, 0, 0),
              vec(C, 0, 0),
              vec(C, 0, 0)};
    char name[64];
    snprintf(name, sizeof name, "batchnorm C%d M%zu", C, M);
    gc_t g = {.name = name, .nt = 3, .y = c.y, .ny = C * M, .r = vec(C * M, -1, 1), .fwd = bn_f, .bwd = bn_b};
    g.p[0] = c.x;
    g.g[0] = c.dx;
    g.n[0] = C * M;
    g.tn[0] = "x";
    g.p[1] = c.g;
    g.g[1] = c.dg;
    g.n[1] = C;
    g.tn[1] = "gamma";
    g.p[2] = c.b;
    g.g[2] = c.db;
    g.n[2] = C;
    g.tn[2] = "beta";
    cur = &g;
    gradcheck(&g, &c, 1e-2, 5e-3);
    /* running statistics (momentum 0.1, unbiased variance) and eval mode, against double */
    nn_bn_forward(c.y, c.mean, c.istd, c.rm, c.rv, c.x, c.g, c.b, C, M, 0.1f, 1e-5f, 1, 0);
    double e = 0;
    for (int ch = 0; ch < C; ch++) {
        double s = 0, s2 = 0;
        for (size_t i = 0; i < M; i++) s += c.x[ch * M + i];
        s /= M;
        for (size_t i = 0; i < M; i++) s2 += (c.x[ch * M + i] - s) * (c.x[ch * M + i] - s);
        e = fmax(e, fabs(c.rm[ch] - 0.1 * s) + fabs(c.rv[ch] - (0.9 + 0.1 * s2 / (M - 1))));
    }
    nt_check(e < 1e-5, "batchnorm running mean/var update", e, 1e-5);
    nn_bn_forward(c.y, NULL, NULL, c.rm, c.rv, c.x, c.g, c.b, C, M, 0.1f, 1e-5f, 0, 0);
    e = 0;
    for (int ch = 0; ch < C; ch++)
        for (size_t i = 0; i < M; i++) {
            double ref = (c.x[ch * M + i] - c.rm[ch]) / sqrt(c.rv[ch] + 1e-5) * c.g[ch] + c.b[ch];
            e = fmax(e, fabs(ref - c.y[ch * M + i]));
        }
    nt_check(e < 1e-5, "batchnorm eval mode (running statistics)", e, 1e-5);
    { /* fused BN+ReLU == ReLU after BN, forward and backward */
        size_t n = C * M;
        float *y2 = vec(n, 0, 0), *z = vec(n, 0, 0), *dz = vec(n, 0, 0), *dx1 = vec(n, 0, 0),
              *dx2 = vec(n, 0, 0);
        float *dg1 = vec(C, 0, 0), *db1 = vec(C, 0, 0), *dg2 = vec(C, 0, 0), *db2 = vec(C, 0, 0);
        nn_bn_forward(c.y, c.mean, c.istd, NULL, NULL, c.x, c.g, c.b, C, M, 0.1f, 1e-5f, 1, 0);
        nn_relu_forward(z, c.y, n);
        nn_bn_forward(y2, c.mean, c.istd, NULL, NULL, c.x, c.g, c.b, C, M, 0.1f, 1e-5f, 1, 1);
        double ef = nt_relerr(y2, z, n, 1e-6);
        nn_relu_backward(dz, g.r, z, n);
        nn_bn_backward(dx1, dg1, db1, dz, c.x, c.mean, c.istd, c.g, C, M, NULL);
        nn_bn_backward(dx2, dg2, db2, g.r, c.x, c.mean, c.istd, c.g, C, M, y2);
        double eb = fmax(nt_relerr(dx2, dx1, n, 1e-6),
                         fmax(nt_relerr(dg2, dg1, C, 1e-6), nt_relerr(db2, db1, C, 1e-6)));
        nt_check(ef == 0 && eb < 1e-6, "fused BN+ReLU equals BN then ReLU (fwd, bwd)", fmax(ef, eb), 1e-6);
        /* fused add+ReLU */
        float *a2 = vec(n, -1, 1), *s1 = vec(n, 0, 0), *s2 = vec(n, 0, 0), *da1 = vec(n, 0, 0),
              *da2 = vec(n, 0, 0), *dd = vec(n, 0, 0);
        nn_add_forward(s1, c.x, a2, n, 0);
        nn_relu_forward(z, s1, n);
        nn_add_forward(s2, c.x, a2, n, 1);
        memset(dz, 0, n * sizeof(float));
        nn_relu_backward(dz, g.r, z, n);
        nn_add_backward(da1, NULL, dz, n, NULL);
        nn_add_backward(da2, dd, g.r, n, s2);
        ef = nt_relerr(s2, z, n, 1e-6) + nt_relerr(da2, da1, n, 1e-6) + nt_relerr(dd, da1, n, 1e-6);
        nt_check(ef == 0, "fused add+ReLU equals add then ReLU (fwd, bwd)", ef, 0);
        float *fr[] = {y2, z, dz, dx1, dx2, dg1, db1, dg2, db2, a2, s1, s2, da1, da2, dd};
        for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    }
    free(c.x);
    free(c.g);
    free(c.b);
    free(c.y);
    free(c.mean);
    free(c.istd);
    free(c.rm);
    free(c.rv);
    free(c.dx);
    free(c.dg);
    free(c.db);
    free(g.r);
}

/* ---- pooling / relu / add / padsub / gap / fc */
typedef struct {
    int type, N, C, H, W, k, s, p, K;
    float *x, *x2, *y, *dx, *dx2, *w, *b, *dw, *db;
    size_t ny;
} simple_c;
static void simple_f(void *v) {
    simple_c *c = v;
    int NC = c->N * c->C;
    switch (c->type) {
    case 0: nn_maxpool_forward(c->y, c->x, NC, c->H, c->W, c->k, c->s, c->p); break;
    case 1: nn_avgpool_forward(c->y, c->x, NC, c->H, c->W, c->k, c->s, c->p); break;
    case 2: nn_gap_forward(c->y, c->x, NC, c->H * c->W); break;
    case 3: nn_relu_forward(c->y, c->x, (size_t)NC * c->H * c->W); break;
    case 4: nn_add_forward(c->y, c->x, c->x2, (size_t)NC * c->H * c->W, 0); break;
    case 5: nn_padsub_forward(c->y, c->x, c->N, c->C, c->H, c->W, c->K, c->s); break;
    case 6: nn_fc_forward(c->y, c->x, c->w, c->b, c->N, c->C, c->K); break;
    }
}
static void simple_b(void *v) {
    simple_c *c = v;
    int NC = c->N * c->C;
    switch (c->type) {
    case 0: nn_maxpool_backward(c->dx, cur->r, c->x, NC, c->H, c->W, c->k, c->s, c->p); break;
    case 1: nn_avgpool_backward(c->dx, cur->r, NC, c->H, c->W, c->k, c->s, c->p); break;
    case 2: nn_gap_backward(c->dx, cur->r, NC, c->H * c->W); break;
    case 3: nn_relu_backward(c->dx, cur->r, c->y, (size_t)NC * c->H * c->W); break;
    case 4: nn_add_backward(c->dx, c->dx2, cur->r, (size_t)NC * c->H * c->W, NULL); break;
    case 5: nn_padsub_backward(c->dx, cur->r, c->N, c->C, c->H, c->W, c->K, c->s); break;
    case 6: nn_fc_backward(c->dx, c->dw, c->db, cur->r, c->x, c->w, c->N, c->C, c->K); break;
    }
}
static void test_simple(const char *name, int type, int N, int C, int H, int W, int k, int s, int p, int K,
                        int bias) {
    simple_c c = {type, N, C, H, W, k, s, p, K, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    size_t nx = (size_t)N * C * H * W;
    int OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
    if (type == 0) { /* distinct values 0.05 apart: no ties within 2 eps */
        c.x = vec(nx, 0, 0);
        for (size_t i = 0; i < nx; i++) c.x[i] = 0.05f * (float)i - 1.f;
        for (size_t i = nx - 1; i > 0; i--) {
            size_t j = nn_rng_u64(&R) % (i + 1);
            float t = c.x[i];
            c.x[i] = c.x[j];
            c.x[j] = t;
        }
    } else
        c.x = type == 3 ? vec_nokink(nx) : vec(nx, -1, 1);
    c.ny = type <= 1   ? (size_t)N * C * OH * OW
           : type == 2 ? (size_t)N * C
           : type <= 4 ? nx
           : type == 5 ? (size_t)K * N * ((H - 1) / s + 1) * ((W - 1) / s + 1)
                       : (size_t)K * N;
    c.y = vec(c.ny, 0, 0);
    c.dx = vec(nx, 0, 0);
    gc_t g = {
        .name = name, .nt = 1, .y = c.y, .ny = c.ny, .r = vec(c.ny, -1, 1), .fwd = simple_f, .bwd = simple_b};
    g.p[0] = c.x;
    g.g[0] = c.dx;
    g.n[0] = nx;
    g.tn[0] = "x";
    if (type == 4) {
        c.x2 = vec(nx, -1, 1);
        c.dx2 = vec(nx, 0, 0);
        g.nt = 2;
        g.p[1] = c.x2;
        g.g[1] = c.dx2;
        g.n[1] = nx;
        g.tn[1] = "b";
    }
    if (type == 6) {
        size_t nw = (size_t)K * C;
        c.w = vec(nw, -1, 1);
        c.dw = vec(nw, 0, 0);
        g.p[1] = c.w;
        g.g[1] = c.dw;
        g.n[1] = nw;
        g.tn[1] = "w";
        g.nt = 2;
        if (bias) {
            c.b = vec(K, -1, 1);
            c.db = vec(K, 0, 0);
            g.p[2] = c.b;
            g.g[2] = c.db;
            g.n[2] = K;
            g.tn[2] = "b";
            g.nt = 3;
        }
    }
    cur = &g;
    gradcheck(&g, &c, 1e-2, 5e-3);
    free(c.x);
    free(c.x2);
    free(c.y);
    free(c.dx);
    free(c.dx2);
    free(c.w);
    free(c.b);
    free(c.dw);
    free(c.db);
    free(g.r);
}

/* ---- LSTM with variable lengths */
typedef struct {
    int N, T, D, H;
    int lens[8];
    float *x, *wih, *whh, *bih, *bhh, *y, *xp, *gates, *cs, *hs;
    float *dx, *dwih, *dwhh, *dbih, *dbhh, *dg, *dxp, *dh, *dc;
} lstm_c;
static void lstm_f(void *v) {
    lstm_c *c = v;
    nn_lstm_forward(c->y, c->xp, c->gates, c->cs, c->hs, c->x, c->lens, c->wih, c->whh, c->bih, c->bhh, c->N,
                    c->T, c->D, c->H);
}
static void lstm_b(void *v) {
    lstm_c *c = v;
    nn_lstm_backward(c->dx, c->dwih, c->dwhh, c->dbih, c->dbhh, c->dg, c->dxp, c->dh, c->dc, cur->r, c->xp,
                     c->gates, c->cs, c->hs, c->lens, c->wih, c->whh, c->N, c->T, c->D, c->H);
}
static void test_lstm(void) {
    lstm_c c = {.N = 4, .T = 6, .D = 5, .H = 3, .lens = {6, 2, 4, 1}};
    int N = c.N, T = c.T, D = c.D, H = c.H;
    size_t R = (size_t)N * (T + 1), nx = (size_t)N * T * D;
    c.x = vec(nx, -1, 1);
    c.wih = vec(4 * H * D, -0.6f, 0.6f);
    c.whh = vec(4 * H * H, -0.6f, 0.6f);
    c.bih = vec(4 * H, -0.5f, 0.5f);
    c.bhh = vec(4 * H, -0.5f, 0.5f);
    c.y = vec(H * N, 0, 0);
    c.xp = vec(R * D, 0, 0);
    c.gates = vec(R * 4 * H, 0, 0);
    c.cs = vec(R * H, 0, 0);
    c.hs = vec(R * H, 0, 0);
    c.dx = vec(nx, 0, 0);
    c.dwih = vec(4 * H * D, 0, 0);
    c.dwhh = vec(4 * H * H, 0, 0);
    c.dbih = vec(4 * H, 0, 0);
    c.dbhh = vec(4 * H, 0, 0);
    c.dg = vec(R * 4 * H, 0, 0);
    c.dxp = vec(R * D, 0, 0);
    c.dh = vec(N * H, 0, 0);
    c.dc = vec(N * H, 0, 0);
    gc_t g = {.name = "lstm N4 T6 D5 H3 lens 6,2,4,1",
              .nt = 5,
              .y = c.y,
              .ny = (size_t)H * N,
              .r = vec(H * N, -1, 1),
              .fwd = lstm_f,
              .bwd = lstm_b};
    float *ps[5] = {c.x, c.wih, c.whh, c.bih, c.bhh}, *gs[5] = {c.dx, c.dwih, c.dwhh, c.dbih, c.dbhh};
    size_t ns[5] = {nx, 4 * H * D, 4 * H * H, 4 * H, 4 * H};
    const char *tn[5] = {"x", "w_ih", "w_hh", "b_ih", "b_hh"};
    for (int i = 0; i < 5; i++) {
        g.p[i] = ps[i];
        g.g[i] = gs[i];
        g.n[i] = ns[i];
        g.tn[i] = tn[i];
    }
    cur = &g;
    gradcheck(&g, &c, 1e-2, 5e-3);
    /* padding steps beyond a sequence's length must not matter and get zero gradient */
    float y0[12], dmax = 0;
    lstm_f(&c);
    memcpy(y0, c.y, sizeof y0);
    for (int t = c.lens[1]; t < T; t++) c.x[(1 * T + t) * D] += 5.f;
    lstm_f(&c);
    for (int i = 0; i < H * N; i++) dmax = fmaxf(dmax, fabsf(c.y[i] - y0[i]));
    for (int t = c.lens[1]; t < T; t++)
        for (int d = 0; d < D; d++) dmax = fmaxf(dmax, fabsf(c.dx[(1 * T + t) * D + d]));
    nt_check(dmax == 0.f, "lstm ignores steps beyond the length", dmax, 0);
    float *all[] = {c.x,  c.wih,  c.whh,  c.bih,  c.bhh,  c.y,  c.xp,  c.gates, c.cs, c.hs,
                    c.dx, c.dwih, c.dwhh, c.dbih, c.dbhh, c.dg, c.dxp, c.dh,    c.dc, g.r};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* ---- losses */
typedef struct {
    int N, K, labels[8];
    float *z, *p, *dz, *t;
    int mse;
} loss_c;
static double loss_s(void *v) {
    loss_c *c = v;
    if (c->mse) return nn_mse_forward(c->z, c->t, c->N, c->K);
    int t1, t5;
    return nn_softmax_ce_forward(c->p, &t1, &t5, c->z, c->labels, c->N, c->K);
}
static void loss_b(void *v) {
    loss_c *c = v;
    if (c->mse)
        nn_mse_backward(c->dz, c->z, c->t, c->N, c->K, 1.f);
    else
        nn_softmax_ce_backward(c->dz, c->p, c->labels, c->N, c->K, 1.f);
}
static void test_losses(void) {
    for (int mse = 0; mse < 2; mse++) {
        loss_c c = {.N = 5, .K = 7, .labels = {0, 6, 3, 3, 1}, .mse = mse};
        c.z = vec(35, -2, 2);
        c.p = vec(35, 0, 0);
        c.dz = vec(35, 0, 0);
        c.t = vec(35, -1, 1);
        gc_t g = {.name = mse ? "mse N5 K7" : "softmax cross-entropy N5 K7",
                  .nt = 1,
                  .scalar = loss_s,
                  .bwd = loss_b};
        g.p[0] = c.z;
        g.g[0] = c.dz;
        g.n[0] = 35;
        g.tn[0] = "logits";
        cur = &g;
        gradcheck(&g, &c, 1e-2, 5e-3);
        if (!mse) { /* top-1 / top-5 counts, (K,N) layout */
            float z[7 * 2] = {0};
            int lab[2] = {2, 6}, t1, t5;
            for (int k = 0; k < 7; k++) {
                z[k * 2] = (float)k;
                z[k * 2 + 1] = (float)k;
            } /* rank of label 2: 4 above; of 6: top */
            nn_softmax_ce_forward(c.p, &t1, &t5, z, lab, 2, 7);
            nt_check(t1 == 1 && t5 == 2, "softmax top-1 / top-5 counts", t1 * 10 + t5, 0);
        }
        free(c.z);
        free(c.p);
        free(c.dz);
        free(c.t);
    }
}

/* A "same" kxk convolution, k = 3 (pad 1: the direct AVX-512 kernel where built) or 1 (pointwise
 * sgemm), against plain loops in double: forward with bias, data and filter gradients.  Shapes
 * with channel counts off the kernel's register blocks and its filter-gradient thread split,
 * planes that straddle its 16-float vectors and batches whose positions span several of its mask
 * chunks and threads. */
static void test_direct_loops(int N, int C, int H, int W, int K, int k) {
    int pd = (k - 1) / 2;
    size_t P = (size_t)N * H * W, nx = (size_t)C * P, ny = (size_t)K * P, nw = (size_t)K * C * k * k;
    float *x = vec(nx, -1, 1), *w = vec(nw, -1, 1), *b = vec(K, -1, 1), *dy = vec(ny, -1, 1);
    float *y = malloc(ny * sizeof(float)), *dx = vec(nx, -1, 1), *dw = vec(nw, -1, 1), *db = vec(K, -1, 1);
    float *dx0 = malloc(nx * sizeof(float)), *dw0 = malloc(nw * sizeof(float)),
          *db0 = malloc(K * sizeof(float));
    memcpy(dx0, dx, nx * sizeof(float)); /* backward accumulates: start from non-zero gradients */
    memcpy(dw0, dw, nw * sizeof(float));
    memcpy(db0, db, K * sizeof(float));
    float *ws = malloc(nn_conv_ws_size(N, C, H, W, K, k, k, 1, pd) * sizeof(float));
    nn_conv_forward(y, ws, x, w, b, N, C, H, W, K, k, k, 1, pd);
    nn_conv_backward(dx, dw, db, ws, dy, x, w, N, C, H, W, K, k, k, 1, pd);
    float *ry = malloc(ny * sizeof(float)), *rdx = malloc(nx * sizeof(float)),
          *rdw = malloc(nw * sizeof(float)), *rdb = malloc(K * sizeof(float));
    for (size_t i = 0; i < nx; i++) rdx[i] = dx0[i];
    for (size_t i = 0; i < nw; i++) rdw[i] = dw0[i];
    for (int o = 0; o < K; o++) { /* the bias gradient: db0 + the sum of dy over the plane */
        double acc = db0[o];
        for (size_t q = 0; q < P; q++) acc += dy[(size_t)o * P + q];
        rdb[o] = (float)acc;
    }
    for (int o = 0; o < K; o++)
        for (int n = 0; n < N; n++)
            for (int oh = 0; oh < H; oh++)
                for (int ow = 0; ow < W; ow++) {
                    size_t q = ((size_t)n * H + oh) * W + ow;
                    double acc = b[o];
                    for (int c = 0; c < C; c++)
                        for (int i = 0; i < k; i++)
                            for (int j = 0; j < k; j++) {
                                int ih = oh + i - pd, iw = ow + j - pd;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                size_t xi = (size_t)c * P + ((size_t)n * H + ih) * W + iw,
                                       wi = (((size_t)o * C + c) * k + i) * k + j;
                                acc += (double)w[wi] * x[xi];
                                rdx[xi] += (float)((double)w[wi] * dy[(size_t)o * P + q]);
                                rdw[wi] += (float)((double)dy[(size_t)o * P + q] * x[xi]);
                            }
                    ry[(size_t)o * P + q] = (float)acc;
                }
    char what[128];
    snprintf(what, sizeof what, "conv%dx%d N%d C%d %dx%d K%d vs loops: y, dx, dw, db", k, k, N, C, H, W, K);
    double e = nt_relerr(y, ry, ny, 1e-6), e2 = nt_relerr(dx, rdx, nx, 1e-6),
           e3 = nt_relerr(dw, rdw, nw, 1e-6), e4 = nt_relerr(db, rdb, K, 1e-6);
    if (e2 > e) e = e2;
    if (e3 > e) e = e3;
    if (e4 > e) e = e4;
    nt_check(e <= 1e-5, what, e, 1e-5);
    free(x);
    free(w);
    free(b);
    free(dy);
    free(y);
    free(dx);
    free(dw);
    free(db);
    free(dx0);
    free(dw0);
    free(db0);
    free(ws);
    free(ry);
    free(rdx);
    free(rdw);
    free(rdb);
}

/* The "set" backward variants (the input gradient written, not accumulated: the model's first
 * consumer of a gradient slot uses them instead of zeroing it) equal the accumulating ones on a
 * zeroed buffer, whatever the buffer held (here NaN): every convolution path and batch norm. */
static void test_set_mode(int N, int C, int H, int W, int K, int k, int s, int p) {
    int OH = (H + 2 * p - k) / s + 1, OW = (W + 2 * p - k) / s + 1;
    size_t nx = (size_t)C * N * H * W, ny = (size_t)K * N * OH * OW, nw = (size_t)K * C * k * k;
    float *x = vec(nx, -1, 1), *w = vec(nw, -1, 1), *dy = vec(ny, -1, 1);
    float *dx1 = calloc(nx, sizeof(float)), *dx2 = malloc(nx * sizeof(float));
    float *dw1 = calloc(nw, sizeof(float)), *dw2 = calloc(nw, sizeof(float));
    for (size_t i = 0; i < nx; i++) dx2[i] = NAN;
    float *ws = malloc(nn_conv_ws_size(N, C, H, W, K, k, k, s, p) * sizeof(float));
    nn_conv_backward(dx1, dw1, NULL, ws, dy, x, w, N, C, H, W, K, k, k, s, p);
    nn_conv_backward_set(dx2, dw2, NULL, ws, dy, x, w, N, C, H, W, K, k, k, s, p);
    char what[128];
    snprintf(what, sizeof what, "conv %dx%d s%d p%d backward_set on NaN = backward on zeros", k, k, s, p);
    double e = nt_relerr(dx2, dx1, nx, 1e-6), e2 = nt_relerr(dw2, dw1, nw, 1e-6);
    nt_check(e <= 1e-6 && e2 <= 1e-6, what, e2 > e ? e2 : e, 1e-6);
    /* batch norm over the convolution's input, plain and with the fused ReLU's mask */
    size_t M = (size_t)N * H * W;
    float *g = vec(C, 0.5f, 1.5f), *b = vec(C, -1, 1), *mean = malloc(C * sizeof(float)),
          *istd = malloc(C * sizeof(float)), *y = malloc(nx * sizeof(float)), *d = vec(nx, -1, 1);
    float *dg = calloc(C, sizeof(float)), *db = calloc(C, sizeof(float));
    for (int relu = 0; relu < 2; relu++) {
        nn_bn_forward(y, mean, istd, NULL, NULL, x, g, b, C, M, 0.1f, 1e-5f, 1, relu);
        memset(dx1, 0, nx * sizeof(float));
        for (size_t i = 0; i < nx; i++) dx2[i] = NAN;
        nn_bn_backward(dx1, dg, db, d, x, mean, istd, g, C, M, relu ? y : NULL);
        nn_bn_backward_set(dx2, dg, db, d, x, mean, istd, g, C, M, relu ? y : NULL);
        e = nt_relerr(dx2, dx1, nx, 1e-6);
        nt_check(e <= 1e-6,
                 relu ? "batch norm + ReLU backward_set on NaN = backward on zeros"
                      : "batch norm backward_set on NaN = backward on zeros",
                 e, 1e-6);
    }
    free(x), free(w), free(dy), free(dx1), free(dx2), free(dw1), free(dw2), free(ws);
    free(g), free(b), free(mean), free(istd), free(y), free(d), free(dg), free(db);
}

int main(void) {
    nn_rng_seed(&R, 7);
    test_conv(2, 3, 7, 5, 4, 3, 2, 1, 1);   /* strided, padded, odd sizes, bias */
    test_conv(2, 3, 6, 6, 5, 3, 1, 1, 0);   /* 3x3 same */
    test_conv(3, 4, 5, 5, 3, 1, 1, 0, 0);   /* pointwise (no im2col path) */
    test_conv(2, 4, 7, 7, 6, 1, 2, 0, 0);   /* 1x1 stride 2 (downsample) */
    test_conv(1, 2, 9, 8, 3, 5, 3, 2, 1);   /* 5x5 stride 3 pad 2 */
    test_conv(2, 3, 11, 11, 4, 7, 2, 3, 0); /* 7x7 stride 2 pad 3 (ResNet-50 stem) */
    test_conv(2, 2, 4, 5, 3, 3, 1, 0, 1);   /* valid (no padding) */
    test_conv(2, 10, 5, 7, 9, 3, 1, 1, 1);  /* 3x3 same, channels past one register block */
    test_direct_loops(3, 9, 5, 7, 11, 3);   /* channel tails, 35-pixel planes across vectors */
    test_direct_loops(9, 3, 32, 32, 17, 3); /* 9216 positions: several mask chunks per thread */
    test_direct_loops(2, 4, 1, 6, 3, 3);    /* one-row images */
    test_direct_loops(1, 5, 3, 1, 2, 3);    /* one-column images */
    test_direct_loops(3, 9, 5, 7, 11, 1);   /* pointwise */
    test_set_mode(3, 9, 5, 7, 11, 3, 1, 1); /* direct 3x3 */
    test_set_mode(3, 6, 5, 7, 5, 1, 1, 0);  /* pointwise GEMM */
    test_set_mode(3, 6, 7, 5, 5, 3, 2, 1);  /* im2col + col2im */
    test_set_mode(2, 3, 11, 11, 4, 7, 2, 3);
    test_bn(3, 30);
    test_bn(4, 6);
    test_simple("maxpool 3x3 s2 p1 on 7x6", 0, 2, 3, 7, 6, 3, 2, 1, 0, 0);
    test_simple("maxpool 2x2 s2 on 5x5", 0, 2, 2, 5, 5, 2, 2, 0, 0, 0);
    test_simple("avgpool 3x3 s2 p1 on 7x6", 1, 2, 3, 7, 6, 3, 2, 1, 0, 0);
    test_simple("avgpool 2x2 s2 on 4x4", 1, 2, 2, 4, 4, 2, 2, 0, 0, 0);
    test_simple("global average pool 5x3", 2, 2, 3, 5, 3, 1, 1, 0, 0, 0);
    test_simple("relu", 3, 2, 3, 4, 5, 1, 1, 0, 0, 0);
    test_simple("residual add", 4, 2, 3, 4, 5, 1, 1, 0, 0, 0);
    test_simple("option-A shortcut 4->8 ch stride 2 on 5x6", 5, 2, 4, 5, 6, 1, 2, 0, 8, 0);
    test_simple("fully connected 9->4 bias", 6, 3, 9, 1, 1, 1, 1, 0, 4, 1);
    test_simple("fully connected 6->5 no bias", 6, 2, 6, 1, 1, 1, 1, 0, 5, 0);
    test_lstm();
    test_losses();
    printf("%s: %d failures\n", nt_fail ? "FAIL" : "PASS", nt_fail);
    return nt_fail ? 1 : 0;
}
