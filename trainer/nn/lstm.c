/* lstm.c: one LSTM layer over whole variable-length sequences.  The input projection of all
 * time steps is one sgemm; each step adds h_{t-1} W_hh^T for the whole batch (strided sgemm,
 * its columns split over the threads).
 * Buffers are (N, T+1, .) with row 0 of each sample the zero initial state, so the weight
 * gradients are single sgemms over all (n,t) rows too. */
#include "trainer/nn/nn_impl.h"
#include <math.h>

#define sigm  nn_vsigmoid
#define tanhf nn_vtanh

void nn_lstm_forward(float *hlast, float *xp, float *gates, float *cs, float *hs, const float *x,
                     const int *lens, const float *wih, const float *whh, const float *bih, const float *bhh,
                     int N, int T, int D, int H) {
    size_t R = (size_t)N * (T + 1), G4 = 4 * (size_t)H;
    nn_tick_t t0 = nn_prof_start();
    for (int n = 0; n < N; n++) {
        float *dst = xp + (size_t)n * (T + 1) * D;
        memset(dst, 0, sizeof(float) * D);
        memcpy(dst + D, x + (size_t)n * T * D, sizeof(float) * T * D);
        memset(cs + (size_t)n * (T + 1) * H, 0, sizeof(float) * H);
        memset(hs + (size_t)n * (T + 1) * H, 0, sizeof(float) * H);
    }
    nn_prof_end(NP_LSTM_OTHER, 0, t0, 0);
    t0 = nn_prof_start();
    nn_sgemm(0, 1, (int)R, (int)G4, D, 1.f, xp, D, wih, D, 0.f, gates, (int)G4);
    nn_prof_end(NP_LSTM_PROJ, 0, t0, 2.0 * R * G4 * D);
    for (int t = 0; t < T; t++) {
        t0 = nn_prof_start();
        nn_sgemm(0, 1, N, (int)G4, H, 1.f, hs + (size_t)t * H, (T + 1) * H, whh, H, 1.f,
                 gates + (size_t)(t + 1) * G4, (int)((T + 1) * G4));
        nn_prof_end(NP_LSTM_REC, 0, t0, 2.0 * N * G4 * H);
        t0 = nn_prof_start();
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) {
            size_t r = (size_t)n * (T + 1) + t + 1;
            float *g = gates + r * G4, *c = cs + r * H, *h = hs + r * H;
            const float *cp = c - H, *hp = h - H;
            if (t >= lens[n]) {
                memcpy(c, cp, sizeof(float) * H);
                memcpy(h, hp, sizeof(float) * H);
                memset(g, 0, sizeof(float) * G4);
                continue;
            }
            for (int j = 0; j < H; j++) {
                float gi = sigm(g[j] + bih[j] + bhh[j]);
                float gf = sigm(g[H + j] + bih[H + j] + bhh[H + j]);
                float gg = tanhf(g[2 * H + j] + bih[2 * H + j] + bhh[2 * H + j]);
                float go = sigm(g[3 * H + j] + bih[3 * H + j] + bhh[3 * H + j]);
                g[j] = gi;
                g[H + j] = gf;
                g[2 * H + j] = gg;
                g[3 * H + j] = go;
                c[j] = gf * cp[j] + gi * gg;
                h[j] = go * tanhf(c[j]);
            }
        }
        nn_prof_end(NP_LSTM_GATES, 0, t0, 0);
    }
    t0 = nn_prof_start();
    for (int n = 0; n < N; n++)
        for (int j = 0; j < H; j++) hlast[(size_t)j * N + n] = hs[((size_t)n * (T + 1) + T) * H + j];
    nn_prof_end(NP_LSTM_OTHER, 0, t0, 0);
}

void nn_lstm_backward(float *dx, float *dwih, float *dwhh, float *dbih, float *dbhh, float *dgates,
                      float *dxp, float *dh, float *dc, const float *dhlast, const float *xp,
                      const float *gates, const float *cs, const float *hs, const int *lens, const float *wih,
                      const float *whh, int N, int T, int D, int H) {
    size_t R = (size_t)N * (T + 1), G4 = 4 * (size_t)H;
    nn_tick_t t0 = nn_prof_start();
    for (int n = 0; n < N; n++) {
        for (int j = 0; j < H; j++) dh[(size_t)n * H + j] = dhlast[(size_t)j * N + n];
        memset(dgates + (size_t)n * (T + 1) * G4, 0, sizeof(float) * G4);
    }
    memset(dc, 0, sizeof(float) * N * H);
    nn_prof_end(NP_LSTM_OTHER, 1, t0, 0);
    for (int t = T - 1; t >= 0; t--) {
        t0 = nn_prof_start();
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) {
            size_t r = (size_t)n * (T + 1) + t + 1;
            float *dg = dgates + r * G4;
            if (t >= lens[n]) {
                memset(dg, 0, sizeof(float) * G4);
                continue;
            }
            const float *g = gates + r * G4, *c = cs + r * H, *cp = c - H;
            float *dhn = dh + (size_t)n * H, *dcn = dc + (size_t)n * H;
            for (int j = 0; j < H; j++) {
                float gi = g[j], gf = g[H + j], gg = g[2 * H + j], go = g[3 * H + j];
                float tc = tanhf(c[j]);
                float dho = dhn[j];
                float dcc = dcn[j] + dho * go * (1.f - tc * tc);
                dg[j] = dcc * gg * gi * (1.f - gi);
                dg[H + j] = dcc * cp[j] * gf * (1.f - gf);
                dg[2 * H + j] = dcc * gi * (1.f - gg * gg);
                dg[3 * H + j] = dho * tc * go * (1.f - go);
                dcn[j] = dcc * gf;
                dhn[j] = 0.f;
            }
        }
        nn_prof_end(NP_LSTM_GATES, 1, t0, 0);
        t0 = nn_prof_start();
        nn_sgemm(0, 0, N, H, (int)G4, 1.f, dgates + (size_t)(t + 1) * G4, (int)((T + 1) * G4), whh, H, 1.f,
                 dh, H);
        nn_prof_end(NP_LSTM_REC, 1, t0, 2.0 * N * G4 * H);
    }
    t0 = nn_prof_start();
    nn_sgemm(1, 0, (int)G4, D, (int)R, 1.f, dgates, (int)G4, xp, D, 1.f, dwih, D);
    nn_sgemm(1, 0, (int)G4, H, (int)R - 1, 1.f, dgates + G4, (int)G4, hs, H, 1.f, dwhh, H);
#pragma omp parallel for schedule(static)
    for (size_t jb = 0; jb < G4; jb += 64) {
        double acc[64] = {0};
        size_t nb = G4 - jb < 64 ? G4 - jb : 64;
        for (size_t r = 0; r < R; r++) {
            const float *d = dgates + r * G4 + jb;
            for (size_t j = 0; j < nb; j++) acc[j] += d[j];
        }
        for (size_t j = 0; j < nb; j++) {
            dbih[jb + j] += (float)acc[j];
            dbhh[jb + j] += (float)acc[j];
        }
    }
    nn_prof_end(NP_LSTM_WGRAD, 1, t0, 2.0 * G4 * ((double)R * D + (R - 1) * H));
    if (!dx) return;
    t0 = nn_prof_start();
    nn_sgemm(0, 0, (int)R, D, (int)G4, 1.f, dgates, (int)G4, wih, D, 0.f, dxp, D);
    for (int n = 0; n < N; n++)
        for (size_t i = 0; i < (size_t)T * D; i++)
            dx[(size_t)n * T * D + i] += dxp[((size_t)n * (T + 1) + 1) * D + i];
    nn_prof_end(NP_LSTM_PROJ, 1, t0, 2.0 * R * D * G4);
}
