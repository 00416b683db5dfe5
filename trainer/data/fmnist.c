/* fmnist.c: Fashion-MNIST IDX files ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]), as the
 * Debian package dataset-fashion-mnist installs them under /usr/share/datasets/fashion-mnist.
 * gzip is inflated with zlib; uncompressed files are accepted too (the .gz name is tried first).
 * IDX: bytes 00 00 08 nd, nd big-endian uint32 dimensions, then the unsigned bytes.
 * Samples are 1x28x28 (any HxW the file declares), normalised with mean 0.2860, std 0.3530. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/data/internal.h"

#define FMNIST_DEFAULT "/usr/share/datasets/fashion-mnist"
static const float FM_MEAN = 0.2860f, FM_STD = 0.3530f;

typedef struct {
    uint8_t *img_buf, *lab_buf;
    idx_t img, lab;
} fmnist_t;

int idx_parse(const uint8_t *buf, size_t len, int want_ndims, idx_t *out, const char *name, char *err,
              size_t errlen) {
    memset(out, 0, sizeof *out);
    if (len < 4) return derr(err, errlen, DATA_ERR_FORMAT, "%s: truncated IDX header (%zu bytes)", name, len);
    if (buf[0] != 0 || buf[1] != 0 || buf[2] != 0x08)
        return derr(err, errlen, DATA_ERR_FORMAT,
                    "%s: bad IDX magic %02x %02x %02x %02x at byte offset 0 (want 00 00 08 %02x)", name,
                    buf[0], buf[1], buf[2], buf[3], want_ndims);
    int nd = buf[3];
    if (nd < 1 || nd > 4 || (want_ndims && nd != want_ndims))
        return derr(err, errlen, DATA_ERR_FORMAT, "%s: IDX has %d dimensions at byte offset 3, want %d", name,
                    nd, want_ndims);
    size_t hdr = 4 + 4 * (size_t)nd;
    if (len < hdr)
        return derr(err, errlen, DATA_ERR_FORMAT, "%s: truncated IDX header (%zu of %zu bytes)", name, len,
                    hdr);
    uint64_t count = 1;
    for (int i = 0; i < nd; i++) {
        const uint8_t *p = buf + 4 + 4 * i;
        uint32_t d = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (d == 0 || d > (1u << 30))
            return derr(err, errlen, DATA_ERR_FORMAT, "%s: bad IDX dimension %u at byte offset %d", name, d,
                        4 + 4 * i);
        out->dims[i] = d;
        count *= d;
        if (count > ((uint64_t)1 << 40))
            return derr(err, errlen, DATA_ERR_FORMAT, "%s: IDX dimensions too large", name);
    }
    if (len - hdr != count)
        return derr(err, errlen, DATA_ERR_FORMAT,
                    "%s: %s: header declares %llu data bytes but the file has %zu after the %zu-byte "
                    "header (data ends at byte offset %zu)",
                    name, len - hdr < count ? "truncated" : "trailing bytes", (unsigned long long)count,
                    len - hdr, hdr, len);
    out->ndims = nd;
    out->count = (size_t)count;
    out->data = buf + hdr;
    return DATA_OK;
}

static int load_idx(const char *dir, const char *base, int nd, uint8_t **buf, idx_t *idx, char *err,
                    size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.gz", dir, base);
    if (access(path, F_OK) != 0) snprintf(path, sizeof path, "%s/%s", dir, base);
    if (access(path, F_OK) != 0)
        return derr(err, errlen, DATA_ERR_IO, "%s/%s(.gz): cannot open: no such file", dir, base);
    size_t len;
    int rc = read_file_maybe_gz(path, buf, &len, (size_t)1 << 32, err, errlen);
    if (rc) return rc;
    rc = idx_parse(*buf, len, nd, idx, path, err, errlen);
    if (rc) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}

static int fm_load(const data_set_t *s, int64_t i, int64_t epoch, int augment, float *x, int *label,
                   float *target, char *err, size_t errlen) {
    const fmnist_t *f = s->priv;
    size_t np = s->numel;
    const uint8_t *p = f->img.data + (size_t)i * np;
    float m = s->spec.raw ? 0.f : FM_MEAN, sd = s->spec.raw ? 1.f : FM_STD;
    for (size_t k = 0; k < np; k++) x[k] = (p[k] / 255.f - m) / sd;
    *label = f->lab.data[i];
    *target = 0;
    return DATA_OK;
}

static void fm_close(data_set_t *s) {
    fmnist_t *f = s->priv;
    if (f) {
        free(f->img_buf);
        free(f->lab_buf);
    }
    free(f);
}

static const data_ops_t FM_OPS = {fm_load, fm_close};

data_set_t *fmnist_open(const data_spec_t *spec, char *err, size_t errlen) {
    static const char *names[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    const char *dir = spec->path ? spec->path : FMNIST_DEFAULT;
    const char *pre = spec->split == DATA_TRAIN ? "train" : "t10k";
    char ib[64], lb[64];
    snprintf(ib, sizeof ib, "%s-images-idx3-ubyte", pre);
    snprintf(lb, sizeof lb, "%s-labels-idx1-ubyte", pre);
    data_set_t *s = data_set_alloc(spec);
    fmnist_t *f = calloc(1, sizeof *f);
    if (!s || !f) {
        free(s);
        free(f);
        derr(err, errlen, DATA_ERR_NOMEM, "fmnist: out of memory");
        return NULL;
    }
    s->priv = f;
    s->ops = &FM_OPS;
    if (load_idx(dir, ib, 3, &f->img_buf, &f->img, err, errlen)) goto fail;
    if (load_idx(dir, lb, 1, &f->lab_buf, &f->lab, err, errlen)) goto fail;
    if (f->img.dims[0] != f->lab.dims[0]) {
        derr(err, errlen, DATA_ERR_FORMAT, "%s/%s: %u images but %s has %u labels", dir, ib, f->img.dims[0],
             lb, f->lab.dims[0]);
        goto fail;
    }
    for (uint32_t i = 0; i < f->lab.dims[0]; i++)
        if (f->lab.data[i] > 9) {
            derr(err, errlen, DATA_ERR_FORMAT, "%s/%s: label %u out of range 0..9 at byte offset %u", dir, lb,
                 f->lab.data[i], 8 + i);
            goto fail;
        }
    s->n = f->img.dims[0];
    s->ndims = 3;
    s->dims[0] = 1;
    s->dims[1] = (int)f->img.dims[1];
    s->dims[2] = (int)f->img.dims[2];
    s->numel = (size_t)f->img.dims[1] * f->img.dims[2];
    s->num_classes = 10;
    s->class_names = calloc(10, sizeof(char *));
    if (s->class_names)
        for (int i = 0; i < 10; i++) s->class_names[i] = strdup(names[i]);
    return s;
fail:
    data_close(s);
    return NULL;
}
