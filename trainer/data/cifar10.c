/* cifar10.c: CIFAR-10 binary batches (data_batch_1..5.bin / test_batch.bin), held in memory.
 * Record: 1 label byte (0..9) + 3072 pixel bytes (1024 R, 1024 G, 1024 B, row-major 32x32).
 * Training augmentation: zero-pad 4 (black, before normalisation), random 32x32 crop, horizontal
 * flip with probability 1/2; offsets and flip drawn from (seed, epoch, sample index). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trainer/data/internal.h"

static const float CIFAR_MEAN[3] = {0.4914f, 0.4822f, 0.4465f};
static const float CIFAR_STD[3] = {0.2470f, 0.2435f, 0.2616f};

typedef struct {
    uint8_t *recs;
} cifar_t;

int cifar_parse(const uint8_t *buf, size_t len, size_t *nrec, const char *name, char *err, size_t errlen) {
    *nrec = 0;
    if (len == 0) return derr(err, errlen, DATA_ERR_FORMAT, "%s: empty file", name);
    if (len % CIFAR_REC)
        return derr(err, errlen, DATA_ERR_FORMAT,
                    "%s: truncated: %zu bytes is not a whole number of %d-byte records (last record "
                    "starts at byte offset %zu)",
                    name, len, CIFAR_REC, len - len % CIFAR_REC);
    for (size_t r = 0; r < len / CIFAR_REC; r++)
        if (buf[r * CIFAR_REC] > 9)
            return derr(err, errlen, DATA_ERR_FORMAT, "%s: bad label %u at byte offset %zu (record %zu)",
                        name, buf[r * CIFAR_REC], r * CIFAR_REC, r);
    *nrec = len / CIFAR_REC;
    return DATA_OK;
}

static int cifar_load(const data_set_t *s, int64_t idx, int64_t epoch, int augment, float *x, int *label,
                      float *target, char *err, size_t errlen) {
    const cifar_t *c = s->priv;
    const uint8_t *rec = c->recs + (size_t)idx * CIFAR_REC;
    *label = rec[0];
    *target = 0;
    int ox = 4, oy = 4, flip = 0; /* crop origin in the padded 40x40 image */
    if (augment) {
        rng_t r = rng_key(s->spec.seed, STREAM_AUG, (uint64_t)epoch, (uint64_t)idx);
        ox = (int)rng_below(&r, 9);
        oy = (int)rng_below(&r, 9);
        flip = (int)rng_below(&r, 2);
    }
    for (int ch = 0; ch < 3; ch++) {
        const uint8_t *p = rec + 1 + ch * 1024;
        float m = s->spec.raw ? 0.f : CIFAR_MEAN[ch], sd = s->spec.raw ? 1.f : CIFAR_STD[ch];
        float *o = x + ch * 1024;
        for (int i = 0; i < 32; i++) {
            int sy = i + oy - 4;
            for (int j = 0; j < 32; j++) {
                int jj = flip ? 31 - j : j;
                int sx = jj + ox - 4;
                float v = (sy < 0 || sy >= 32 || sx < 0 || sx >= 32) ? 0.f : p[sy * 32 + sx] / 255.f;
                o[i * 32 + j] = (v - m) / sd;
            }
        }
    }
    return DATA_OK;
}

static void cifar_close(data_set_t *s) {
    cifar_t *c = s->priv;
    if (c) free(c->recs);
    free(c);
}

static const data_ops_t CIFAR_OPS = {cifar_load, cifar_close};

data_set_t *cifar10_open(const data_spec_t *spec, char *err, size_t errlen) {
    static const char *names[10] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                    "dog",      "frog",       "horse", "ship", "truck"};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/cifar-10-batches-bin", spec->path);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) snprintf(dir, sizeof dir, "%s", spec->path);
    int nfiles = spec->split == DATA_TRAIN ? 5 : 1;
    data_set_t *s = data_set_alloc(spec);
    cifar_t *c = calloc(1, sizeof *c);
    if (!s || !c) {
        free(s);
        free(c);
        derr(err, errlen, DATA_ERR_NOMEM, "cifar10: out of memory");
        return NULL;
    }
    s->priv = c;
    s->ops = &CIFAR_OPS;
    size_t total = 0;
    for (int f = 0; f < nfiles; f++) {
        char path[4200];
        if (spec->split == DATA_TRAIN)
            snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, f + 1);
        else
            snprintf(path, sizeof path, "%s/test_batch.bin", dir);
        uint8_t *buf;
        size_t len, nrec;
        if (read_file(path, &buf, &len, (size_t)1 << 31, err, errlen)) goto fail;
        if (cifar_parse(buf, len, &nrec, path, err, errlen)) {
            free(buf);
            goto fail;
        }
        uint8_t *nr = realloc(c->recs, total + len);
        if (!nr) {
            free(buf);
            derr(err, errlen, DATA_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
        c->recs = nr;
        memcpy(c->recs + total, buf, len);
        total += len;
        free(buf);
    }
    s->n = (int64_t)(total / CIFAR_REC);
    s->ndims = 3;
    s->dims[0] = 3;
    s->dims[1] = 32;
    s->dims[2] = 32;
    s->numel = 3 * 32 * 32;
    s->num_classes = 10;
    s->class_names = calloc(10, sizeof(char *));
    if (s->class_names)
        for (int i = 0; i < 10; i++) s->class_names[i] = strdup(names[i]);
    return s;
fail:
    data_close(s);
    return NULL;
}
