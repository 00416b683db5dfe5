/* test_iter.c: sharding (disjoint + covering over ranks), shuffle determinism per (seed, epoch),
 * prefetch == direct loading (with augmentation and decode threads), global mode, early
 * shutdown, and the hyperplane generator. */
#include "tests/data/testutil.h"
#include "trainer/data/data.h"

#include <math.h>

/* Collect the sample indices of one epoch on (rank, P); checks batches against direct loads. */
static int64_t run_epoch(const data_set_t *s, int rank, int P, int B, int64_t epoch, int flags, int threads,
                         int64_t *out, int check_direct) {
    char err[512];
    data_iter_t *it = data_iter_new(s, rank, P, B, epoch, flags, err, sizeof err);
    CHECKF(it, "%s", err);
    if (!it) return 0;
    data_iter_set_threads(it, threads);
    data_batch_t *d = data_batch_new(s, B);
    const data_batch_t *b;
    int64_t m = 0, nb = 0;
    int rc;
    while ((rc = data_iter_next(it, &b, err, sizeof err)) == 1) {
        CHECK(b->n >= 1 && b->n <= B);
        if (check_direct) {
            CHECK(data_load_indices(s, b->idx, b->n, epoch, (flags & DATA_AUGMENT) != 0, 1, d, err,
                                    sizeof err) == 0);
            CHECK(d->n == b->n && d->x_stride == b->x_stride && d->cost == b->cost);
            CHECK(memcmp(d->x, b->x, sizeof(float) * b->x_stride * b->n) == 0);
            CHECK(memcmp(d->y, b->y, sizeof(int) * b->n) == 0);
            CHECK(memcmp(d->target, b->target, sizeof(float) * b->n) == 0);
        }
        memcpy(out + m, b->idx, sizeof(int64_t) * b->n);
        m += b->n;
        nb++;
    }
    CHECKF(rc == 0, "%s", err);
    CHECK(m == data_iter_num_samples(it) || (flags & DATA_DROP_LAST));
    CHECK(nb == data_iter_num_batches(it));
    data_batch_free(d);
    data_iter_free(it);
    return m;
}

static void test_sharding(const data_set_t *s) {
    int64_t N = data_count(s);
    int64_t *seen = calloc((size_t)N, sizeof(int64_t)), *buf = malloc(sizeof(int64_t) * N);
    int64_t *e0 = malloc(sizeof(int64_t) * N), *e0b = malloc(sizeof(int64_t) * N);
    for (int P = 1; P <= 5; P++)
        for (int even = 0; even < 2; even++) {
            memset(seen, 0, sizeof(int64_t) * N);
            int64_t tot = 0;
            for (int r = 0; r < P; r++) {
                int64_t m = run_epoch(
                    s, r, P, 4, 1, DATA_SHUFFLE | DATA_PREFETCH | (even ? DATA_EVEN_SHARDS : 0), 1, buf, 0);
                CHECK(even ? m == N / P : (m == N / P || m == N / P + 1));
                for (int64_t k = 0; k < m; k++) seen[buf[k]]++;
                tot += m;
            }
            for (int64_t i = 0; i < N; i++) CHECK(seen[i] <= 1); /* disjoint */
            CHECK(tot == (even ? N / P * P : N));                /* covering */
        }
    /* shuffle determinism: same (seed, epoch) -> same order; different epoch -> different order */
    run_epoch(s, 1, 3, 5, 4, DATA_SHUFFLE, 1, e0, 0);
    int64_t m = run_epoch(s, 1, 3, 5, 4, DATA_SHUFFLE | DATA_PREFETCH, 1, e0b, 0);
    CHECK(memcmp(e0, e0b, sizeof(int64_t) * m) == 0);
    run_epoch(s, 1, 3, 5, 5, DATA_SHUFFLE, 1, e0b, 0);
    CHECK(memcmp(e0, e0b, sizeof(int64_t) * m) != 0);
    /* no shuffle: rank r gets r, r+P, ... */
    m = run_epoch(s, 2, 3, 4, 9, DATA_PREFETCH, 1, buf, 0);
    for (int64_t k = 0; k < m; k++) CHECK(buf[k] == 2 + 3 * k);
    /* permutation is a pure function of (seed, epoch) */
    data_permutation(N, 11, 3, e0);
    data_permutation(N, 11, 3, e0b);
    CHECK(memcmp(e0, e0b, sizeof(int64_t) * N) == 0);
    data_permutation(N, 12, 3, e0b);
    CHECK(memcmp(e0, e0b, sizeof(int64_t) * N) != 0);
    /* drop_last */
    m = run_epoch(s, 0, 2, 7, 0, DATA_SHUFFLE | DATA_DROP_LAST, 1, buf, 0);
    CHECK(m == (N + 1) / 2 / 7 * 7);
    free(seen);
    free(buf);
    free(e0);
    free(e0b);
}

static void test_global(const data_set_t *s) {
    char err[512];
    int64_t N = data_count(s);
    int64_t *perm = malloc(sizeof(int64_t) * N);
    data_permutation(N, 99, 2, perm);
    for (int flags = 0; flags <= DATA_TRAIN_FLAGS; flags += DATA_PREFETCH) {
        data_iter_t *it = data_iter_new_global(s, 8, flags | DATA_AUGMENT, err, sizeof err);
        CHECKF(it, "%s", err);
        data_batch_t *d = data_batch_new(s, 8);
        const data_batch_t *b;
        CHECK(data_iter_next(it, &b, err, sizeof err) == 0); /* nothing submitted */
        int64_t cur = 0;
        int sizes[5] = {8, 3, 8, 1, 6};
        for (int k = 0; k < 5; k++) {
            CHECK(data_iter_submit(it, perm + cur, sizes[k], 2) == 0);
            cur += sizes[k];
        }
        CHECK(data_iter_submit(it, perm, 9, 2) == DATA_ERR_ARG);
        cur = 0;
        for (int k = 0; k < 5; k++) {
            CHECK(data_iter_next(it, &b, err, sizeof err) == 1);
            CHECK(b->n == sizes[k] && memcmp(b->idx, perm + cur, sizeof(int64_t) * b->n) == 0);
            CHECK(data_load_indices(s, perm + cur, sizes[k], 2, 1, 1, d, err, sizeof err) == 0);
            CHECK(memcmp(d->x, b->x, sizeof(float) * b->x_stride * b->n) == 0);
            cur += sizes[k];
            if (k == 2) CHECK(data_iter_submit(it, perm + 100, 4, 3) == 0); /* one step ahead */
        }
        CHECK(data_iter_next(it, &b, err, sizeof err) == 1 && b->n == 4 && b->idx[0] == perm[100]);
        CHECK(data_iter_next(it, &b, err, sizeof err) == 0);
        data_batch_free(d);
        data_iter_free(it);
    }
    free(perm);
}

static void test_early_free(const data_set_t *s) {
    char err[512];
    for (int k = 0; k < 20; k++) { /* free with the prefetch thread mid-load / waiting */
        data_iter_t *it = data_iter_new(s, 0, 1, 16, k, DATA_TRAIN_FLAGS, err, sizeof err);
        data_iter_set_threads(it, 1 + k % 3);
        const data_batch_t *b;
        for (int j = 0; j < k % 3; j++) CHECK(data_iter_next(it, &b, err, sizeof err) == 1);
        data_iter_free(it);
    }
    data_iter_t *it = data_iter_new_global(s, 4, DATA_TRAIN_FLAGS, err, sizeof err);
    data_iter_free(it);
}

static void test_hyperplane(void) {
    char err[512];
    data_spec_t sp = {
        .kind = DATA_HYPERPLANE, .seed = 42, .hp_samples = 500, .hp_features = 64, .hp_noise = -1};
    data_set_t *s = data_open(&sp, err, sizeof err);
    CHECKF(s, "%s", err);
    int dims[3];
    CHECK(data_count(s) == 500 && data_num_classes(s) == 0);
    CHECK(data_sample_shape(s, dims) == 1 && dims[0] == 64);
    float a[64], a2[64];
    CHECK(data_hyperplane_weights(s, a) == 0);
    data_batch_t *b = data_batch_new(s, 500);
    int64_t *idx = malloc(sizeof(int64_t) * 500);
    for (int i = 0; i < 500; i++) idx[i] = i;
    CHECK(data_load_indices(s, idx, 500, 0, 1, 3, b, err, sizeof err) == 0);
    double sx = 0, sxx = 0;
    for (int k = 0; k < 500; k++) {
        double y = 0;
        for (int j = 0; j < 64; j++) {
            double x = b->x[k * 64 + j];
            y += a[j] * x;
            sx += x;
            sxx += x * x;
        }
        CHECK(fabs(y - b->target[k]) < 1e-4 && b->y[k] == -1);
    }
    double mean = sx / 32000, var = sxx / 32000 - mean * mean;
    CHECK(fabs(mean) < 0.005 && fabs(var * 64 - 1) < 0.05); /* x ~ U(-sqrt(3/F), sqrt(3/F)): variance 1/F */
    for (int j = 0; j < 64; j++) CHECK(a[j] >= -1 && a[j] <= 1);
    /* same seed -> same data; noise: residual std ~ sigma */
    data_spec_t sp2 = sp;
    sp2.hp_noise = 0.5f;
    data_set_t *s2 = data_open(&sp2, err, sizeof err);
    data_hyperplane_weights(s2, a2);
    CHECK(memcmp(a, a2, sizeof a) == 0);
    data_batch_t *b2 = data_batch_new(s2, 500);
    CHECK(data_load_indices(s2, idx, 500, 0, 0, 1, b2, err, sizeof err) == 0);
    CHECK(memcmp(b->x, b2->x, sizeof(float) * 500 * 64) == 0);
    double r2 = 0;
    for (int k = 0; k < 500; k++) r2 += (b2->target[k] - b->target[k]) * (b2->target[k] - b->target[k]);
    CHECK(fabs(sqrt(r2 / 500) - 0.5) < 0.05);
    /* test split differs from train */
    sp2.split = DATA_TEST;
    data_set_t *s3 = data_open(&sp2, err, sizeof err);
    CHECK(data_count(s3) == 500);
    CHECK(data_load_indices(s3, idx, 10, 0, 0, 1, b2, err, sizeof err) == 0);
    CHECK(memcmp(b->x, b2->x, sizeof(float) * 64) != 0);
    CHECK(data_hyperplane_weights(s3, a2) == 0 && memcmp(a, a2, sizeof a) == 0);
    /* arguments */
    CHECK(data_load_indices(s, idx, 501, 0, 0, 1, b, err, sizeof err) == DATA_ERR_ARG);
    idx[3] = 500;
    CHECK(data_load_indices(s, idx, 4, 0, 0, 1, b, err, sizeof err) == DATA_ERR_ARG);
    CHECK_ERR(err, "out of range");
    CHECK(data_iter_new(s, 2, 2, 4, 0, 0, err, sizeof err) == NULL);
    CHECK_ERR(err, "bad rank");
    CHECK(data_iter_new(s, 0, 1, 0, 0, 0, err, sizeof err) == NULL);
    data_spec_t bad = {.kind = 77};
    CHECK(data_open(&bad, err, sizeof err) == NULL);
    CHECK_ERR(err, "unknown kind");
    bad.kind = DATA_CIFAR10;
    CHECK(data_open(&bad, err, sizeof err) == NULL);
    CHECK_ERR(err, "needs a path");
    free(idx);
    data_batch_free(b);
    data_batch_free(b2);
    data_close(s);
    data_close(s2);
    data_close(s3);
}

/* data_set_batch_memory: the batches an iterator makes take every array but idx from the
 * allocator (zeroed), give each back at free, and load the same data as malloc'd ones */
typedef struct {
    int live, made;
    void *seen[16];
} count_mem_t;
static void *count_alloc(void *ctx, size_t bytes) {
    count_mem_t *c = ctx;
    void *p = malloc(bytes);
    memset(p, 0x5a, bytes); /* batch_mem must zero it */
    if (c->made < 16) c->seen[c->made] = p;
    c->made++, c->live++;
    return p;
}
static void count_release(void *ctx, void *p) {
    ((count_mem_t *)ctx)->live--;
    free(p);
}
static int counted(const count_mem_t *c, const void *p) {
    for (int i = 0; i < c->made && i < 16; i++)
        if (c->seen[i] == p) return 1;
    return 0;
}
static void test_batch_memory(data_set_t *s) {
    char err[512];
    count_mem_t c = {0};
    data_alloc_t a = {count_alloc, count_release, &c};
    const data_batch_t *b, *d;
    data_iter_t *plain = data_iter_new(s, 0, 1, 8, 0, DATA_EVAL_FLAGS, err, sizeof err);
    data_set_batch_memory(s, &a);
    data_batch_t *nb = data_batch_new(s, 8);
    CHECK(c.made == 4 && c.live == 4 && counted(&c, nb->x) && counted(&c, nb->y) && counted(&c, nb->lengths));
    CHECK(nb->y[0] == 0 && nb->lengths[7] == 0 && nb->target[3] == 0 && nb->x[0] == 0);
    data_batch_free(nb);
    CHECK(c.live == 0);
    data_iter_t *it = data_iter_new(s, 0, 1, 8, 0, DATA_EVAL_FLAGS, err, sizeof err);
    CHECKF(it, "%s", err);
    CHECK(c.made == 12 && c.live == 8); /* two prefetch buffers, four arrays each */
    CHECK(data_iter_next(it, &b, err, sizeof err) == 1 && counted(&c, b->x) && counted(&c, b->target));
    CHECK(data_iter_next(plain, &d, err, sizeof err) == 1 && !counted(&c, d->x));
    CHECK(b->n == d->n && memcmp(b->x, d->x, sizeof(float) * b->x_stride * b->n) == 0 &&
          memcmp(b->target, d->target, sizeof(float) * b->n) == 0);
    data_iter_free(it);
    CHECK(c.live == 0);
    data_set_batch_memory(s, NULL); /* back to malloc */
    nb = data_batch_new(s, 8);
    CHECK(c.made == 12 && c.live == 0);
    data_batch_free(nb);
    data_iter_free(plain);
}

int main(void) {
    char err[512];
    test_hyperplane();
    data_spec_t sp = {.kind = DATA_HYPERPLANE, .seed = 9, .hp_samples = 203, .hp_features = 16};
    data_set_t *s = data_open(&sp, err, sizeof err);
    test_sharding(s);
    test_global(s);
    test_early_free(s);
    test_batch_memory(s);
    int64_t *buf = malloc(sizeof(int64_t) * 203);
    run_epoch(s, 1, 2, 6, 0, DATA_TRAIN_FLAGS, 3, buf, 1);
    free(buf);
    data_close(s);
    /* prefetch equivalence with augmentation: CIFAR records */
    char *dir = t_tmpdir();
    uint8_t *rec = malloc(3073 * 40);
    for (int f = 0; f < 5; f++) {
        for (size_t k = 0; k < 3073 * 40; k++) rec[k] = (uint8_t)((k * 31 + f * 7) % 251);
        for (int r = 0; r < 40; r++) rec[r * 3073] = (uint8_t)((r + f) % 10);
        char *p = t_path(dir, "data_batch_%d.bin", f + 1);
        t_write(p, rec, 3073 * 40);
        free(p);
    }
    free(rec);
    data_spec_t cs = {.kind = DATA_CIFAR10, .path = dir, .seed = 1234};
    s = data_open(&cs, err, sizeof err);
    CHECKF(s && data_count(s) == 200, "%s", err);
    buf = malloc(sizeof(int64_t) * 200);
    for (int e = 0; e < 2; e++)
        for (int r = 0; r < 3; r++) {
            run_epoch(s, r, 3, 16, e, DATA_TRAIN_FLAGS, 1 + r, buf, 1);
            run_epoch(s, r, 3, 16, e, DATA_EVAL_FLAGS, 2, buf, 1);
        }
    test_early_free(s);
    /* flat-array variant */
    data_iter_t *it = data_iter_new(s, 0, 1, 32, 0, DATA_EVAL_FLAGS, err, sizeof err);
    float *x = malloc(sizeof(float) * 32 * 3072);
    int y[32], len[32], nb = 0, tp = 0, tot = 0, rc;
    double cost;
    while ((rc = data_iter_next_into(it, x, y, len, &nb, &tp, &cost, err, sizeof err)) == 1) {
        CHECK(y[0] == (tot % 40 + tot / 40) % 10 && len[0] == 1 && tp == 1 && cost == nb);
        tot += nb;
    }
    CHECK(rc == 0 && tot == 200 && nb == 0);
    free(x);
    data_iter_free(it);
    free(buf);
    data_close(s);
    return t_done("iter");
}
