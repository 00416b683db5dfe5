/* internal.h: shared between the loaders of trainer/data (not public). */
#ifndef TRAINER_DATA_INTERNAL_H
#define TRAINER_DATA_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hash.h"
#include "trainer/data/data.h"

/* ---- errors ------------------------------------------------------------------------------ */
__attribute__((format(printf, 4, 5))) int derr(char *err, size_t errlen, int code, const char *fmt, ...);

/* ---- counter-based RNG: splitmix64 (common/hash.h) ------------------------------------------ */
typedef struct {
    uint64_t s;
} rng_t;
/* Stream keyed by (a, b, c, d): a pure function of its key. */
static inline rng_t rng_key(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    rng_t r = {hash_splitmix64(hash_splitmix64(hash_splitmix64(hash_splitmix64(a) ^ b) ^ c) ^ d)};
    return r;
}
static inline uint64_t rng_u64(rng_t *r) {
    r->s += HASH_SPLITMIX64_GAMMA;
    return hash_splitmix64(r->s);
}
static inline double rng_unif(rng_t *r) { return (double)(rng_u64(r) >> 11) * 0x1.0p-53; }
static inline uint64_t rng_below(rng_t *r, uint64_t n) { /* [0, n) */
    return (uint64_t)(((unsigned __int128)rng_u64(r) * n) >> 64);
}
double rng_normal(rng_t *r);

enum { STREAM_SHUFFLE = 0x5348u, STREAM_AUG = 0x4155u, STREAM_HP_A = 0x4841u, STREAM_HP_X = 0x4858u };

/* ---- files ---------------------------------------------------------------------------------- */
/* Whole file into memory (gzip members inflated when the file starts with 1f 8b).
 * cap bounds the (decompressed) size. */
int read_file(const char *path, uint8_t **buf, size_t *len, size_t cap, char *err, size_t errlen);
int read_file_maybe_gz(const char *path, uint8_t **buf, size_t *len, size_t cap, char *err, size_t errlen);
int gunzip_mem(const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen, size_t cap, const char *name,
               char *err, size_t errlen);
char *path_join(const char *a, const char *b); /* malloc'd "a/b" */

/* ---- parsers (pure, on memory; fuzzed) ------------------------------------------------------- */
typedef struct {
    int ndims;
    uint32_t dims[4];
    size_t count;
    const uint8_t *data;
} idx_t;
/* IDX file: magic 00 00 08 nd, nd big-endian uint32 dims, then prod(dims) ubytes. */
int idx_parse(const uint8_t *buf, size_t len, int want_ndims, idx_t *out, const char *name, char *err,
              size_t errlen);

#define CIFAR_REC 3073
/* CIFAR-10 binary batch: len must be a multiple of 3073; labels < 10. */
int cifar_parse(const uint8_t *buf, size_t len, size_t *nrec, const char *name, char *err, size_t errlen);

#define UCFF_HDR 16
typedef struct {
    uint32_t version, T, F;
} ucff_hdr_t;
/* Header of a UCFF file of total length file_len (buf holds at least the first min(len,16)). */
int ucff_parse_header(const uint8_t *buf, size_t len, uint64_t file_len, ucff_hdr_t *h, const char *name,
                      char *err, size_t errlen);
/* Frames [0, t) of a whole UCFF file into x[t][F]; rejects non-finite values (names offset). */
int ucff_parse_body(const uint8_t *buf, size_t len, const ucff_hdr_t *h, int t, float *x, const char *name,
                    char *err, size_t errlen);

typedef struct {
    char **names;
    int n;
} classind_t;
int classind_parse(const char *buf, size_t len, classind_t *ci, const char *name, char *err, size_t errlen);
void classind_free(classind_t *ci);
typedef struct {
    char **paths;
    int *labels;
    int n;
} splitlist_t;
/* trainlist lines "Class/v_Class_gXX_cYY.avi L" (L 1-based, must match the folder's class);
 * testlist lines "Class/v_....avi" (class from the folder). */
int splitlist_parse(const char *buf, size_t len, const classind_t *ci, splitlist_t *sl, const char *name,
                    char *err, size_t errlen);
void splitlist_free(splitlist_t *sl);

typedef struct {
    int w, h;
    uint8_t *rgb;
} image_t; /* rgb[h][w][3] */
#ifndef JPEG_MAX_PIXELS
#define JPEG_MAX_PIXELS (64u << 20) /* larger images are refused (memory bound) */
#endif
int jpeg_decode_mem(const uint8_t *buf, size_t len, image_t *img, const char *name, char *err, size_t errlen);
/* Bilinear sample of the source box (x0,y0,bw,bh) onto out[3][S][S], optional horizontal flip,
 * out = (v/255 - mean[c]) / std[c]. */
void image_resample(const image_t *img, double x0, double y0, double bw, double bh, int S, int flip,
                    const float *mean, const float *std, float *out);

/* ---- data sets ------------------------------------------------------------------------------ */
typedef struct {
    /* Load sample idx into x (x_stride floats; sequences [t_pad][F], zero padded by the caller).
   * Must be thread-safe (the set is read-only). */
    int (*load)(const data_set_t *s, int64_t idx, int64_t epoch, int augment, float *x, int *label,
                float *target, char *err, size_t errlen);
    void (*close)(data_set_t *s);
} data_ops_t;

struct data_set {
    data_kind_t kind;
    data_spec_t spec;
    const data_ops_t *ops;
    void *priv;
    int64_t n;
    int ndims, dims[3]; /* sample shape */
    size_t numel;       /* floats of the largest sample */
    int num_classes;
    char **class_names; /* [num_classes] or NULL (freed by data_close) */
    int *lengths;       /* sequences: [n] (after truncation), else NULL */
    data_alloc_t mem;   /* batch memory (data_set_batch_memory; zero: malloc) */
};

data_set_t *cifar10_open(const data_spec_t *spec, char *err, size_t errlen);
data_set_t *imagenet_open(const data_spec_t *spec, char *err, size_t errlen);
data_set_t *ucf101_open(const data_spec_t *spec, char *err, size_t errlen);
data_set_t *fmnist_open(const data_spec_t *spec, char *err, size_t errlen);
data_set_t *hyperplane_open(const data_spec_t *spec, char *err, size_t errlen);
data_set_t *data_set_alloc(const data_spec_t *spec);

#endif
