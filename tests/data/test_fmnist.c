/* test_fmnist.c: IDX loader on small generated files (gzip and plain), and every bad-file case. */
#include "tests/data/testutil.h"
#include "trainer/data/data.h"

#include <math.h>
#include <unistd.h>

static size_t idx_file(uint8_t *buf, int nd, const uint32_t *dims, int fill_seed) {
    buf[0] = 0;
    buf[1] = 0;
    buf[2] = 8;
    buf[3] = (uint8_t)nd;
    size_t n = 1, o = 4;
    for (int i = 0; i < nd; i++) {
        buf[o++] = dims[i] >> 24;
        buf[o++] = dims[i] >> 16;
        buf[o++] = dims[i] >> 8;
        buf[o++] = dims[i];
        n *= dims[i];
    }
    for (size_t k = 0; k < n; k++) buf[o + k] = (uint8_t)(fill_seed ? (k * 7 + 3) % 256 : k % 10);
    return o + n;
}

int main(void) {
    char *dir = t_tmpdir(), err[512];
    const uint32_t NI = 13;
    uint8_t *img = malloc(16 + NI * 784), lab[64];
    uint32_t di[3] = {NI, 28, 28}, dl[1] = {NI};
    size_t li = idx_file(img, 3, di, 1), ll = idx_file(lab, 1, dl, 0);
    char *pi = t_path(dir, "train-images-idx3-ubyte.gz"), *pl = t_path(dir, "train-labels-idx1-ubyte.gz");
    t_write_gz(pi, img, li);
    t_write_gz(pl, lab, ll);
    /* t10k as uncompressed files */
    char *ti = t_path(dir, "t10k-images-idx3-ubyte"), *tl = t_path(dir, "t10k-labels-idx1-ubyte");
    t_write(ti, img, 16 + 5 * 784);
    uint32_t d5[3] = {5, 28, 28};
    idx_file(img, 3, d5, 1); /* rewrite header for 5 images */
    t_write(ti, img, 16 + 5 * 784);
    uint8_t lab5[13];
    uint32_t dl5[1] = {5};
    t_write(tl, lab5, idx_file(lab5, 1, dl5, 0));
    idx_file(img, 3, di, 1);

    data_spec_t sp = {.kind = DATA_FMNIST, .path = dir, .split = DATA_TRAIN, .raw = 1};
    data_set_t *s = data_open(&sp, err, sizeof err);
    CHECKF(s, "%s", err);
    if (s) {
        int dims[3];
        CHECK(data_count(s) == NI && data_num_classes(s) == 10);
        CHECK(data_sample_shape(s, dims) == 3 && dims[0] == 1 && dims[1] == 28 && dims[2] == 28);
        data_batch_t *b = data_batch_new(s, 4);
        int64_t idx[3] = {0, 12, 5};
        CHECK(data_load_indices(s, idx, 3, 0, 1, 1, b, err, sizeof err) == 0);
        for (int k = 0; k < 3; k++) {
            CHECK(b->y[k] == (int)(idx[k] % 10));
            for (int p = 0; p < 784; p += 13)
                CHECK(fabsf(b->x[k * 784 + p] - ((idx[k] * 784 + p) * 7 + 3) % 256 / 255.f) < 1e-6f);
        }
        data_batch_free(b);
        data_close(s);
    }
    sp.raw = 0;
    sp.split = DATA_TEST;
    s = data_open(&sp, err, sizeof err);
    CHECKF(s && data_count(s) == 5, "%s", err);
    if (s) {
        data_batch_t *b = data_batch_new(s, 1);
        int64_t i1 = 1;
        CHECK(data_load_indices(s, &i1, 1, 0, 0, 1, b, err, sizeof err) == 0);
        CHECK(fabsf(b->x[0] - ((784 * 7 + 3) % 256 / 255.f - 0.2860f) / 0.3530f) < 1e-5f);
        data_batch_free(b);
        data_close(s);
    }
    sp.split = DATA_TRAIN;

    /* bad magic */
    img[2] = 9;
    t_write_gz(pi, img, li);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "train-images-idx3-ubyte.gz", "magic", "byte offset 0");
    img[2] = 8;
    /* image count in header > data in file */
    t_write_gz(pi, img, li - 784);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "train-images-idx3-ubyte.gz", "truncated", "byte offset");
    /* trailing bytes */
    t_write_gz(pi, img, li);
    uint8_t *lab2 = calloc(1, ll + 3);
    memcpy(lab2, lab, ll);
    t_write_gz(pl, lab2, ll + 3);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "train-labels-idx1-ubyte.gz", "trailing");
    /* label/image count mismatch */
    uint32_t d12[1] = {NI - 1};
    t_write_gz(pl, lab2, idx_file(lab2, 1, d12, 0));
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "13 images", "12 labels");
    /* label out of range */
    lab[8 + 4] = 10;
    t_write_gz(pl, lab, ll);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "train-labels-idx1-ubyte", "label 10", "byte offset 12");
    lab[8 + 4] = 4;
    t_write_gz(pl, lab, ll);
    /* wrong number of dimensions */
    uint32_t d2[2] = {NI, 784};
    t_write_gz(pi, img, idx_file(img, 2, d2, 1));
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "train-images-idx3-ubyte.gz", "dimensions");
    /* truncated gzip stream */
    t_write_gz(pi, img, idx_file(img, 3, di, 1));
    size_t gl;
    uint8_t *gz = t_read(pi, &gl);
    t_write(pi, gz, gl / 2);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "train-images-idx3-ubyte.gz", "truncated gzip", "byte offset");
    /* corrupt gzip data */
    memcpy(gz + 20, "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
    t_write(pi, gz, gl);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "train-images-idx3-ubyte.gz", "byte offset");
    /* missing */
    unlink(pi);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "train-images-idx3-ubyte", "cannot open");
    /* empty file */
    t_write(pi, img, 0);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "train-images-idx3-ubyte.gz", "truncated IDX header");
    free(gz);
    free(lab2);
    free(img);
    free(pi);
    free(pl);
    free(ti);
    free(tl);
    return t_done("fmnist");
}
