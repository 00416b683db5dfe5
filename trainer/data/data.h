/* data.h: data loaders for the eager-SGD trainer (CIFAR-10, ImageNet, UCF101 features,
 * Fashion-MNIST, synthetic hyperplane).  One public header; see trainer/data/README.md for the
 * on-disk formats (the UCF101 feature format "UCFF" is defined there and below).
 *
 * Batches are flat float arrays:
 *   images     x[n][C][H][W]  (NCHW, normalised with the per-channel mean/std of the data set)
 *   sequences  x[n][t_pad][F] (t_pad = longest sequence of this batch, zero padded; lengths[n])
 *   hyperplane x[n][F]        (regression target in target[n]; y[] is -1)
 * plus int labels y[n] (0-based class index), the global sample indices idx[n] and a cost value
 * (sum of per-sample costs: sequence length for UCF101, 1 otherwise; for inherent-imbalance
 * injection).
 *
 * Determinism.  Every random choice is a pure function of its inputs, drawn from a counter-based
 * hash (splitmix64 finaliser), never rand():
 *   epoch shuffle        = f(seed, epoch)                 (data_permutation)
 *   augmentation choices = f(seed, epoch, sample index)   (crop offsets, flips, resized crops)
 * so a sample gives the same tensor whichever rank, thread, batch or prefetch loads it.
 *
 * Sharding (shard mode).  perm = data_permutation(N, seed, epoch) when shuffling, else the
 * identity; rank r of P takes positions i of perm with i % P == r (interleaved; shard sizes differ
 * by at most one; with DATA_EVEN_SHARDS every rank takes exactly floor(N/P) samples, the tail of
 * the permutation is dropped).  Shards of one epoch are disjoint and cover the data set.
 * Global mode.  The trainer computes one permutation per epoch itself (data_permutation) and asks
 * for explicit index lists: data_load_indices (synchronous) or data_iter_new_global +
 * data_iter_submit (asynchronous, prefetched, returned in submission order).
 *
 * Errors.  Functions return DATA_OK (0) or a negative data_err_t and write a one-line message into
 * err[errlen] (may be NULL) naming the file and, where it applies, the byte offset.  The library
 * never exits and never aborts on bad input.
 *
 * Threads.  A data_set_t is read-only after data_open and may be used from several threads.  An
 * iterator is used by one thread (its own prefetch thread is internal).  ThreadSanitizer clean.
 */
#ifndef TRAINER_DATA_H
#define TRAINER_DATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DATA_OK = 0,
    DATA_ERR_ARG = -1,    /* bad argument / spec */
    DATA_ERR_IO = -2,     /* missing or unreadable file */
    DATA_ERR_FORMAT = -3, /* truncated or corrupt file, wrong dimensions, bad list entry */
    DATA_ERR_NOMEM = -4,
} data_err_t;

typedef enum {
    DATA_CIFAR10 = 1,
    DATA_IMAGENET = 2,
    DATA_UCF101 = 3,
    DATA_FMNIST = 4,
    DATA_HYPERPLANE = 5,
} data_kind_t;

typedef enum { DATA_TRAIN = 0, DATA_TEST = 1 } data_split_t;

/* Zero-initialise and set what you need; 0 means "default" for every numeric field. */
typedef struct {
    data_kind_t kind;
    const char *path;   /* CIFAR-10: folder with data_batch_{1..5}.bin / test_batch.bin
                           (or its parent holding cifar-10-batches-bin/);
                           ImageNet: root with train/<class>/ and val/<class>/;
                           UCF101: root with classInd.txt, {train,test}list0N.txt (or the same in
                           root/ucfTrainTestlist/) and features under root/<features>/;
                           Fashion-MNIST: folder of the IDX files, NULL = the Debian package's
                           /usr/share/datasets/fashion-mnist; hyperplane: unused */
    data_split_t split; /* DATA_TRAIN or DATA_TEST (ImageNet: val/, UCF101: testlist0N.txt) */
    uint64_t seed;      /* shuffle + augmentation seed; hyperplane: also the data seed */
    int image_size;     /* ImageNet output S (default 224) */
    int raw;            /* 1: pixels scaled to [0,1] only, no mean/std normalisation */
    int64_t limit;      /* use only the first `limit` samples (0 = all) */
    /* UCF101 */
    int ucf_split;            /* official split 1..3 (default 1) */
    const char *ucf_features; /* feature folder under path (default "features") */
    int feat_dim;             /* expected F (0 = take it from the first file; all must agree) */
    int max_t;                /* truncate sequences to max_t frames (0 = no truncation) */
    /* hyperplane */
    int64_t hp_samples; /* samples in the split (default 65536 train / 8192 test) */
    int hp_features;    /* features (default 8192) */
    float hp_noise;     /* noise standard deviation (0 = default 0.1; < 0 = no noise) */
} data_spec_t;

typedef struct data_set data_set_t;
typedef struct data_iter data_iter_t;

/* Where a batch's arrays (x, y, target, lengths) come from: alloc(ctx, bytes) returns memory or
 * NULL, release(ctx, p) frees what it returned. All NULL: malloc and free (the default). */
typedef struct {
    void *(*alloc)(void *ctx, size_t bytes);
    void (*release)(void *ctx, void *p);
    void *ctx;
} data_alloc_t;

typedef struct {
    int cap;          /* capacity in samples */
    int n;            /* samples in this batch */
    int t_pad;        /* sequences: padded length of this batch (x is [n][t_pad][F]); else 1 */
    size_t x_stride;  /* floats per sample in x for this batch */
    float *x;         /* [cap * max sample size] */
    int *y;           /* [cap] class labels 0..K-1 (-1 for regression) */
    float *target;    /* [cap] regression targets (hyperplane), 0 otherwise */
    int *lengths;     /* [cap] sequence lengths (1 for non-sequence data) */
    int64_t *idx;     /* [cap] global sample indices */
    double cost;      /* sum of per-sample costs */
    data_alloc_t mem; /* where x, y, target and lengths came from (data_set_batch_memory) */
} data_batch_t;

/* Iterator flags. */
enum {
    DATA_SHUFFLE = 1,      /* permute with data_permutation(seed, epoch) (else identity order) */
    DATA_AUGMENT = 2,      /* training augmentation (CIFAR crop+flip, ImageNet random-resized crop
                           + flip); off = evaluation transform */
    DATA_PREFETCH = 4,     /* background thread loads the next batch while you compute */
    DATA_DROP_LAST = 8,    /* drop the last incomplete batch of the shard */
    DATA_EVEN_SHARDS = 16, /* every rank gets floor(N/P) samples */
};
#define DATA_TRAIN_FLAGS (DATA_SHUFFLE | DATA_AUGMENT | DATA_PREFETCH)
#define DATA_EVAL_FLAGS  (DATA_PREFETCH)

data_set_t *data_open(const data_spec_t *spec, char *err, size_t errlen);
void data_close(data_set_t *set);

int64_t data_count(const data_set_t *set);
/* Shape of one sample: images (C,H,W) -> 3; sequences (T_max,F) -> 2 (T_max = longest sequence
 * after truncation); hyperplane (F) -> 1.  dims needs room for 3. */
int data_sample_shape(const data_set_t *set, int dims[3]);
size_t data_sample_numel(const data_set_t *set); /* floats of the largest sample */
int data_num_classes(const data_set_t *set);     /* 0 for regression */
const char *data_kind_name(data_kind_t kind);
const char *data_class_name(const data_set_t *set, int c);   /* NULL if none */
double data_sample_cost(const data_set_t *set, int64_t idx); /* seq length for UCF101, else 1 */
int data_sample_length(const data_set_t *set, int64_t idx);  /* T after truncation; 1 otherwise */
/* Hyperplane: the true weights a[F] (for checking convergence); DATA_ERR_ARG otherwise. */
int data_hyperplane_weights(const data_set_t *set, float *a);

/* perm[0..n-1] = the permutation of epoch `epoch` (Fisher-Yates over a counter-based RNG). */
void data_permutation(int64_t n, uint64_t seed, int64_t epoch, int64_t *perm);

/* Batches. */
/* The memory the set's batches made from now on take their arrays from (e.g. page-locked memory
 * a device copies from directly: trainer/backend.h's input_alloc); a = NULL or all-NULL: malloc.
 * Batches made before keep theirs. */
void data_set_batch_memory(data_set_t *set, const data_alloc_t *a);
data_batch_t *data_batch_new(const data_set_t *set, int cap);
void data_batch_free(data_batch_t *b);
/* Global mode: load samples idx[0..n-1] into b (n <= b->cap), augmenting when `augment`, with the
 * augmentation randomness of (set seed, epoch, idx[i]).  threads > 1 decodes in parallel. */
int data_load_indices(const data_set_t *set, const int64_t *idx, int n, int64_t epoch, int augment,
                      int threads, data_batch_t *b, char *err, size_t errlen);

/* Shard-mode iterator over one epoch of this rank's shard. */
data_iter_t *data_iter_new(const data_set_t *set, int rank, int nranks, int batch, int64_t epoch, int flags,
                           char *err, size_t errlen);
/* Global-mode iterator: batches come from data_iter_submit, in submission order. */
data_iter_t *data_iter_new_global(const data_set_t *set, int batch, int flags, char *err, size_t errlen);
int data_iter_submit(data_iter_t *it, const int64_t *idx, int n, int64_t epoch);
/* Decode threads per batch (default 1; ImageNet wants more).  Call before the first next. */
void data_iter_set_threads(data_iter_t *it, int threads);
/* Next batch: returns 1 and *out (owned by the iterator, valid until the next call or free),
 * 0 at the end (shard mode: epoch done; global mode: nothing submitted), < 0 on error (sticky). */
int data_iter_next(data_iter_t *it, const data_batch_t **out, char *err, size_t errlen);
/* Flat-array variant: copies the batch into caller arrays (any may be NULL except x), sized for
 * `batch` samples of data_sample_numel floats; *nb = samples, *t_pad = padded length (may be NULL).
 * Regression targets (hyperplane) come only with data_iter_next. */
int data_iter_next_into(data_iter_t *it, float *x, int *y, int *lengths, int *nb, int *t_pad, double *cost,
                        char *err, size_t errlen);
int64_t data_iter_num_samples(const data_iter_t *it); /* shard size (shard mode) */
int64_t data_iter_num_batches(const data_iter_t *it); /* batches this epoch (shard mode) */
void data_iter_free(data_iter_t *it);

#ifdef __cplusplus
}
#endif
#endif
