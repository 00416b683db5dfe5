/* common.c: data_open dispatch, accessors, permutation, RNG, file and gzip helpers. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "trainer/data/internal.h"

int derr(char *err, size_t errlen, int code, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

double rng_normal(rng_t *r) {
    double u1 = rng_unif(r), u2 = rng_unif(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

char *path_join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *p = malloc(la + lb + 2);
    if (!p) return NULL;
    memcpy(p, a, la);
    p[la] = '/';
    memcpy(p + la + 1, b, lb + 1);
    return p;
}

int read_file(const char *path, uint8_t **buf, size_t *len, size_t cap, char *err, size_t errlen) {
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return derr(err, errlen, DATA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return derr(err, errlen, DATA_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > cap) {
        fclose(f);
        return derr(err, errlen, DATA_ERR_FORMAT, "%s: file too large (%lld bytes, limit %zu)", path,
                    (long long)st.st_size, cap);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *p = malloc(n ? n : 1);
    if (!p) {
        fclose(f);
        return derr(err, errlen, DATA_ERR_NOMEM, "%s: out of memory (%zu bytes)", path, n);
    }
    size_t got = fread(p, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != n) {
        free(p);
        return derr(err, errlen, DATA_ERR_IO, "%s: read error at byte offset %zu", path, got);
    }
    *buf = p;
    *len = n;
    return DATA_OK;
}

int gunzip_mem(const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen, size_t cap, const char *name,
               char *err, size_t errlen) {
    *out = NULL;
    *outlen = 0;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return derr(err, errlen, DATA_ERR_NOMEM, "%s: zlib init failed", name);
    size_t size = inlen * 4 + 1024, used = 0, pos = 0;
    if (size > cap) size = cap + 1;
    uint8_t *o = malloc(size);
    int rc = DATA_OK;
    if (!o) {
        inflateEnd(&z);
        return derr(err, errlen, DATA_ERR_NOMEM, "%s: out of memory", name);
    }
    for (;;) { /* one gzip member per iteration (concatenated members are allowed) */
        int zr = Z_OK;
        while (zr != Z_STREAM_END) {
            if (used == size) {
                if (size > cap) {
                    rc = derr(err, errlen, DATA_ERR_FORMAT, "%s: decompressed size exceeds %zu bytes", name,
                              cap);
                    goto done;
                }
                size_t ns = size * 2 > cap + 1 ? cap + 1 : size * 2;
                uint8_t *q = realloc(o, ns);
                if (!q) {
                    rc = derr(err, errlen, DATA_ERR_NOMEM, "%s: out of memory", name);
                    goto done;
                }
                o = q;
                size = ns;
            }
            uInt ain = (uInt)((inlen - pos) > 0x40000000u ? 0x40000000u : (inlen - pos));
            uInt aout = (uInt)((size - used) > 0x40000000u ? 0x40000000u : (size - used));
            z.next_in = (Bytef *)(in + pos);
            z.avail_in = ain;
            z.next_out = o + used;
            z.avail_out = aout;
            zr = inflate(&z, Z_NO_FLUSH);
            pos += ain - z.avail_in;
            used += aout - z.avail_out;
            if (zr == Z_STREAM_END) break;
            if (zr == Z_BUF_ERROR && z.avail_in == 0 && pos == inlen) {
                rc = derr(err, errlen, DATA_ERR_FORMAT,
                          "%s: truncated gzip data (compressed stream ends at byte offset %zu)", name, pos);
                goto done;
            }
            if (zr != Z_OK && zr != Z_BUF_ERROR) {
                rc = derr(err, errlen, DATA_ERR_FORMAT, "%s: corrupt gzip data near byte offset %zu: %s",
                          name, pos, z.msg ? z.msg : "inflate error");
                goto done;
            }
        }
        if (used > cap) {
            rc = derr(err, errlen, DATA_ERR_FORMAT, "%s: decompressed size exceeds %zu bytes", name, cap);
            goto done;
        }
        /* another member? (skip trailing zero padding) */
        while (pos < inlen && in[pos] == 0) pos++;
        if (pos >= inlen) break;
        if (inlen - pos < 2 || in[pos] != 0x1f || in[pos + 1] != 0x8b) {
            rc = derr(err, errlen, DATA_ERR_FORMAT, "%s: trailing garbage after gzip data at byte offset %zu",
                      name, pos);
            goto done;
        }
        inflateReset(&z);
    }
done:
    inflateEnd(&z);
    if (rc != DATA_OK) {
        free(o);
        return rc;
    }
    *out = o;
    *outlen = used;
    return DATA_OK;
}

int read_file_maybe_gz(const char *path, uint8_t **buf, size_t *len, size_t cap, char *err, size_t errlen) {
    uint8_t *raw;
    size_t rlen;
    int rc = read_file(path, &raw, &rlen, cap, err, errlen);
    if (rc) return rc;
    if (rlen >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) {
        rc = gunzip_mem(raw, rlen, buf, len, cap, path, err, errlen);
        free(raw);
        return rc;
    }
    *buf = raw;
    *len = rlen;
    return DATA_OK;
}

/* ---- data sets ------------------------------------------------------------------------------ */
data_set_t *data_set_alloc(const data_spec_t *spec) {
    data_set_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->spec = *spec;
    s->spec.path = NULL; /* not kept: the caller's string may go away */
    s->spec.ucf_features = NULL;
    s->kind = spec->kind;
    return s;
}

data_set_t *data_open(const data_spec_t *spec, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!spec) {
        derr(err, errlen, DATA_ERR_ARG, "data_open: NULL spec");
        return NULL;
    }
    if (spec->split != DATA_TRAIN && spec->split != DATA_TEST) {
        derr(err, errlen, DATA_ERR_ARG, "data_open: bad split %d", (int)spec->split);
        return NULL;
    }
    if (spec->limit < 0 || spec->image_size < 0 || spec->max_t < 0 || spec->feat_dim < 0) {
        derr(err, errlen, DATA_ERR_ARG, "data_open: negative limit/image_size/max_t/feat_dim");
        return NULL;
    }
    if (spec->kind < DATA_CIFAR10 || spec->kind > DATA_HYPERPLANE) {
        derr(err, errlen, DATA_ERR_ARG, "data_open: unknown kind %d", (int)spec->kind);
        return NULL;
    }
    if (spec->kind != DATA_HYPERPLANE && spec->kind != DATA_FMNIST && !spec->path) {
        derr(err, errlen, DATA_ERR_ARG, "data_open: %s needs a path", data_kind_name(spec->kind));
        return NULL;
    }
    data_set_t *s = NULL;
    switch (spec->kind) {
    case DATA_CIFAR10: s = cifar10_open(spec, err, errlen); break;
    case DATA_IMAGENET: s = imagenet_open(spec, err, errlen); break;
    case DATA_UCF101: s = ucf101_open(spec, err, errlen); break;
    case DATA_FMNIST: s = fmnist_open(spec, err, errlen); break;
    case DATA_HYPERPLANE: s = hyperplane_open(spec, err, errlen); break;
    default: derr(err, errlen, DATA_ERR_ARG, "data_open: unknown kind %d", (int)spec->kind); break;
    }
    if (s && spec->limit > 0 && spec->limit < s->n) s->n = spec->limit;
    if (s && s->lengths) { /* T_max over the samples in use */
        int tmax = 1;
        for (int64_t i = 0; i < s->n; i++)
            if (s->lengths[i] > tmax) tmax = s->lengths[i];
        s->dims[0] = tmax;
        s->numel = (size_t)tmax * (size_t)s->dims[1];
    }
    return s;
}

void data_close(data_set_t *s) {
    if (!s) return;
    if (s->ops && s->ops->close) s->ops->close(s);
    if (s->class_names) {
        for (int i = 0; i < s->num_classes; i++) free(s->class_names[i]);
        free(s->class_names);
    }
    free(s->lengths);
    free(s);
}

int64_t data_count(const data_set_t *s) { return s ? s->n : 0; }
size_t data_sample_numel(const data_set_t *s) { return s ? s->numel : 0; }
int data_num_classes(const data_set_t *s) { return s ? s->num_classes : 0; }

int data_sample_shape(const data_set_t *s, int dims[3]) {
    for (int i = 0; i < 3; i++) dims[i] = i < s->ndims ? s->dims[i] : 0;
    return s->ndims;
}

const char *data_kind_name(data_kind_t k) {
    switch (k) {
    case DATA_CIFAR10: return "cifar10";
    case DATA_IMAGENET: return "imagenet";
    case DATA_UCF101: return "ucf101";
    case DATA_FMNIST: return "fmnist";
    case DATA_HYPERPLANE: return "hyperplane";
    }
    return "unknown";
}

const char *data_class_name(const data_set_t *s, int c) {
    if (!s || !s->class_names || c < 0 || c >= s->num_classes) return NULL;
    return s->class_names[c];
}

int data_sample_length(const data_set_t *s, int64_t idx) {
    if (!s || !s->lengths || idx < 0 || idx >= s->n) return 1;
    return s->lengths[idx];
}

double data_sample_cost(const data_set_t *s, int64_t idx) { return data_sample_length(s, idx); }

void data_permutation(int64_t n, uint64_t seed, int64_t epoch, int64_t *perm) {
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    rng_t r = rng_key(seed, STREAM_SHUFFLE, (uint64_t)epoch, 0);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(&r, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}
