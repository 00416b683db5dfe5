/* loss.c: softmax cross-entropy (with top-1/top-5 counts) and mean squared error. */
#include "trainer/nn/nn_impl.h"
#include <math.h>

double nn_softmax_ce_forward(float *probs, int *top1, int *top5, const float *logits, const int *labels,
                             int N, int K) {
    double loss = 0;
    int t1 = 0, t5 = 0;
    for (int n = 0; n < N; n++) {
        float mx = logits[n];
        for (int k = 1; k < K; k++) mx = fmaxf(mx, logits[(size_t)k * N + n]);
        double z = 0;
        for (int k = 0; k < K; k++) z += exp((double)logits[(size_t)k * N + n] - mx);
        int y = labels[n];
        float ly = logits[(size_t)y * N + n];
        for (int k = 0; k < K; k++)
            probs[(size_t)k * N + n] = (float)(exp((double)logits[(size_t)k * N + n] - mx) / z);
        loss += log(z) + mx - ly;
        int above = 0; /* ties count against */
        for (int k = 0; k < K; k++)
            if (k != y && logits[(size_t)k * N + n] >= ly) above++;
        t1 += above < 1;
        t5 += above < 5;
    }
    if (top1) *top1 = t1;
    if (top5) *top5 = t5;
    return loss / N;
}

void nn_softmax_ce_backward(float *dlogits, const float *probs, const int *labels, int N, int K,
                            float scale) {
    float s = scale / (float)N;
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            dlogits[(size_t)k * N + n] += s * (probs[(size_t)k * N + n] - (labels[n] == k ? 1.f : 0.f));
}

double nn_mse_forward(const float *y, const float *target, int N, int K) {
    double acc = 0;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            double d = (double)y[(size_t)k * N + n] - target[(size_t)n * K + k];
            acc += d * d;
        }
    return acc / ((double)N * K);
}

void nn_mse_backward(float *dy, const float *y, const float *target, int N, int K, float scale) {
    float s = 2.f * scale / ((float)N * K);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            dy[(size_t)k * N + n] += s * (y[(size_t)k * N + n] - target[(size_t)n * K + k]);
}
