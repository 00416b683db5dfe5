/* fc.c: fully connected layer over (features, N) column-batched activations. */
#include "trainer/nn/nn_impl.h"

void nn_fc_forward(float *out, const float *in, const float *w, const float *b, int N, int In, int O) {
    nn_sgemm(0, 0, O, N, In, 1.f, w, In, in, N, 0.f, out, N);
    if (b)
        for (int o = 0; o < O; o++)
            for (int n = 0; n < N; n++) out[(size_t)o * N + n] += b[o];
}

void nn_fc_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                    int N, int In, int O) {
    nn_sgemm(0, 1, O, In, N, 1.f, dout, N, in, N, 1.f, dw, In);
    if (db)
        for (int o = 0; o < O; o++) {
            double acc = 0;
            for (int n = 0; n < N; n++) acc += dout[(size_t)o * N + n];
            db[o] += (float)acc;
        }
    if (din) nn_sgemm(1, 0, In, N, O, 1.f, w, In, dout, N, 1.f, din, N);
}
