/* hyperplane.c: synthetic linear regression y = a.x + noise (the paper's Fig. 10 workload).
 * Distribution (all pure functions of the seed, generated on the fly, nothing stored but a):
 *   a_j   ~ U(-1, 1)                      j < F, stream (seed, HP_A, j)
 *   x_ij  ~ U(-sqrt(3/F), sqrt(3/F))       stream (seed, HP_X, split, i): F draws in order
 *                                          (variance 1/F; uniform rather than normal because
 *                                          generating 8,192 normals per sample dominated a step)
 *   y_i   = a.x_i + e_i, e_i ~ N(0, sigma^2)   (sigma = hp_noise, default 0.1; the last draw of
 *                                               the sample's stream)
 * x is scaled by 1/sqrt(F) so that Var(a.x) = 1/3 whatever F.  Train and test are disjoint
 * streams (split in the key).  Augmentation does not apply. */
#include <math.h>
#include <stdlib.h>

#include "trainer/data/internal.h"

typedef struct {
    float *a;
    float noise;
} hp_t;

static int hp_load(const data_set_t *s, int64_t i, int64_t epoch, int augment, float *x, int *label,
                   float *target, char *err, size_t errlen) {
    const hp_t *h = s->priv;
    int F = s->dims[0];
    rng_t r = rng_key(s->spec.seed, STREAM_HP_X, (uint64_t)s->spec.split, (uint64_t)i);
    /* two 32-bit uniforms per 64-bit draw, mapped to (-1, 1) and scaled to variance 1/F */
    const double sc = sqrt(3.0 / (double)F) / 2147483648.0;
    double y = 0;
    for (int j = 0; j < F; j += 2) {
        uint64_t u = rng_u64(&r);
        x[j] = (float)(((double)(uint32_t)u - 2147483647.5) * sc);
        if (j + 1 < F) x[j + 1] = (float)(((double)(uint32_t)(u >> 32) - 2147483647.5) * sc);
    }
    for (int j = 0; j < F; j++) y += (double)h->a[j] * x[j];
    double e = rng_normal(&r);
    *target = (float)(y + h->noise * e);
    *label = -1;
    return DATA_OK;
}

static void hp_close(data_set_t *s) {
    hp_t *h = s->priv;
    if (h) free(h->a);
    free(h);
}

static const data_ops_t HP_OPS = {hp_load, hp_close};

int data_hyperplane_weights(const data_set_t *s, float *a) {
    if (!s || s->kind != DATA_HYPERPLANE) return DATA_ERR_ARG;
    const hp_t *h = s->priv;
    for (int j = 0; j < s->dims[0]; j++) a[j] = h->a[j];
    return DATA_OK;
}

data_set_t *hyperplane_open(const data_spec_t *spec, char *err, size_t errlen) {
    int F = spec->hp_features ? spec->hp_features : 8192;
    int64_t n = spec->hp_samples ? spec->hp_samples : (spec->split == DATA_TRAIN ? 65536 : 8192);
    if (F < 1 || F > (1 << 26) || n < 1) {
        derr(err, errlen, DATA_ERR_ARG, "hyperplane: bad features %d / samples %lld", F, (long long)n);
        return NULL;
    }
    data_set_t *s = data_set_alloc(spec);
    hp_t *h = calloc(1, sizeof *h);
    float *a = malloc((size_t)F * sizeof(float));
    if (!s || !h || !a) {
        free(s);
        free(h);
        free(a);
        derr(err, errlen, DATA_ERR_NOMEM, "hyperplane: out of memory");
        return NULL;
    }
    for (int j = 0; j < F; j++) {
        rng_t r = rng_key(spec->seed, STREAM_HP_A, (uint64_t)j, 0);
        a[j] = (float)(2.0 * rng_unif(&r) - 1.0);
    }
    h->a = a;
    h->noise = spec->hp_noise == 0 ? 0.1f : spec->hp_noise < 0 ? 0.f : spec->hp_noise;
    s->priv = h;
    s->ops = &HP_OPS;
    s->n = n;
    s->ndims = 1;
    s->dims[0] = F;
    s->numel = (size_t)F;
    s->num_classes = 0;
    return s;
}
