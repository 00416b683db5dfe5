/* init.c: deterministic parameter initialisation (PyTorch-default distributions) and the RNG. */
#include "common/hash.h"
#include "trainer/nn/nn_impl.h"
#include <math.h>

void nn_rng_seed(nn_rng_t *r, uint64_t seed) { r->s = seed * HASH_SPLITMIX64_GAMMA + 0x632BE59BD9B4E019ull; }

uint64_t nn_rng_u64(nn_rng_t *r) { /* a splitmix64 stream */
    uint64_t z = hash_splitmix64(r->s);
    r->s += HASH_SPLITMIX64_GAMMA;
    return z;
}

float nn_rng_uniform(nn_rng_t *r, float lo, float hi) {
    double u = (double)(nn_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

float nn_rng_normal(nn_rng_t *r) {
    double u1 = ((double)(nn_rng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (double)(nn_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

static void fill_u(nn_rng_t *r, float *p, size_t n, float b) {
    for (size_t i = 0; i < n; i++) p[i] = nn_rng_uniform(r, -b, b);
}

/* conv/linear weights: kaiming_uniform(a=sqrt(5)) => U(+-1/sqrt(fan_in)); biases likewise;
 * ResNet convs (init=1): kaiming_normal(fan_out, relu) => N(0, 2/fan_out); BN: 1, 0;
 * LSTM: U(+-1/sqrt(H)) for all four tensors. */
void nn_init_params(nn_model_t *m, uint64_t seed) {
    nn_rng_t r;
    nn_rng_seed(&r, seed);
    for (int li = 0; li < m->nlayers; li++) {
        nn_layer_t *l = &m->layers[li];
        if (l->p < 0) continue;
        nn_param_t *w = &m->ptensors[l->p];
        float *pw = NN_P(m, l->p);
        switch (l->type) {
        case L_CONV:
        case L_FC: {
            size_t fan_in = w->n / (size_t)w->shape[0];
            float bb = 1.f / sqrtf((float)fan_in);
            if (l->type == L_CONV && l->init == 1) {
                float sd = sqrtf(2.f / (float)(w->shape[0] * (l->k * l->k)));
                for (size_t i = 0; i < w->n; i++) pw[i] = sd * nn_rng_normal(&r);
            } else {
                fill_u(&r, pw, w->n, bb);
            }
            if (l->bias) fill_u(&r, NN_P(m, l->p + 1), m->ptensors[l->p + 1].n, bb);
            break;
        }
        case L_BN:
            for (size_t i = 0; i < w->n; i++) {
                pw[i] = 1.f;
                NN_P(m, l->p + 1)[i] = 0.f;
            }
            break;
        case L_LSTM: {
            float bb = 1.f / sqrtf((float)l->lstm_h);
            for (int k = 0; k < 4; k++) fill_u(&r, NN_P(m, l->p + k), m->ptensors[l->p + k].n, bb);
            break;
        }
        default: break;
        }
    }
}
