/* test_cifar.c: CIFAR-10 loader: decode values, normalisation, augmentation (a pad-4 crop + flip
 * of the source, deterministic per (seed, epoch, index)), and bad files. */
#include "tests/data/testutil.h"
#include "trainer/data/data.h"

#include <math.h>
#include <unistd.h>

#define REC 3073
static uint8_t pix(int file, int r, int c, int i, int j) {
    return (uint8_t)(file * 37 + r * 11 + c * 80 + i * 3 + j * 5);
}

static void write_batches(const char *dir, int nrec) {
    uint8_t *buf = malloc((size_t)REC * nrec);
    for (int f = 0; f <= 5; f++) {
        for (int r = 0; r < nrec; r++) {
            uint8_t *p = buf + (size_t)r * REC;
            p[0] = (uint8_t)((f * nrec + r) % 10);
            for (int c = 0; c < 3; c++)
                for (int i = 0; i < 32; i++)
                    for (int j = 0; j < 32; j++) p[1 + c * 1024 + i * 32 + j] = pix(f, r, c, i, j);
        }
        char *path = f < 5 ? t_path(dir, "data_batch_%d.bin", f + 1) : t_path(dir, "test_batch.bin");
        t_write(path, buf, (size_t)REC * nrec);
        free(path);
    }
    free(buf);
}

/* Does x (raw, 3x32x32) equal a crop (ox,oy in 0..8) + optional flip of record (f,r)? */
static int is_crop_of(const float *x, int f, int r) {
    for (int oy = 0; oy <= 8; oy++)
        for (int ox = 0; ox <= 8; ox++)
            for (int fl = 0; fl < 2; fl++) {
                int ok = 1;
                for (int c = 0; c < 3 && ok; c++)
                    for (int i = 0; i < 32 && ok; i++)
                        for (int j = 0; j < 32 && ok; j++) {
                            int sy = i + oy - 4, sx = (fl ? 31 - j : j) + ox - 4;
                            float v =
                                (sy < 0 || sy > 31 || sx < 0 || sx > 31) ? 0.f : pix(f, r, c, sy, sx) / 255.f;
                            ok = fabsf(x[c * 1024 + i * 32 + j] - v) < 1e-6f;
                        }
                if (ok) return 1;
            }
    return 0;
}

int main(void) {
    char *dir = t_tmpdir(), err[512];
    const int NR = 3;
    write_batches(dir, NR);
    data_spec_t sp = {.kind = DATA_CIFAR10, .path = dir, .split = DATA_TRAIN, .seed = 7, .raw = 1};
    data_set_t *s = data_open(&sp, err, sizeof err);
    CHECKF(s, "%s", err);
    if (!s) return t_done("cifar");
    int dims[3];
    CHECK(data_count(s) == 5 * NR);
    CHECK(data_sample_shape(s, dims) == 3 && dims[0] == 3 && dims[1] == 32 && dims[2] == 32);
    CHECK(data_num_classes(s) == 10 && !strcmp(data_class_name(s, 0), "airplane"));
    data_batch_t *b = data_batch_new(s, 16);
    int64_t idx[15];
    for (int i = 0; i < 15; i++) idx[i] = i;
    CHECK(data_load_indices(s, idx, 15, 0, 0, 1, b, err, sizeof err) == 0);
    for (int k = 0; k < 15; k++) {
        int f = k / NR, r = k % NR;
        CHECK(b->y[k] == (f * NR + r) % 10);
        CHECK(b->lengths[k] == 1 && b->idx[k] == k);
        float *x = b->x + (size_t)k * 3072;
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < 32; i += 7)
                for (int j = 0; j < 32; j += 5)
                    CHECK(fabsf(x[c * 1024 + i * 32 + j] - pix(f, r, c, i, j) / 255.f) < 1e-6f);
    }
    CHECK(b->cost == 15.0);
    /* augmentation: a crop/flip of the source; deterministic; varies with epoch */
    data_batch_t *b2 = data_batch_new(s, 16);
    CHECK(data_load_indices(s, idx, 15, 3, 1, 1, b, err, sizeof err) == 0);
    CHECK(data_load_indices(s, idx, 15, 3, 1, 4, b2, err, sizeof err) == 0);
    CHECK(memcmp(b->x, b2->x, sizeof(float) * 15 * 3072) == 0);
    for (int k = 0; k < 15; k++) CHECKF(is_crop_of(b->x + (size_t)k * 3072, k / NR, k % NR), "sample %d", k);
    CHECK(data_load_indices(s, idx, 15, 4, 1, 1, b2, err, sizeof err) == 0);
    CHECK(memcmp(b->x, b2->x, sizeof(float) * 15 * 3072) != 0);
    data_batch_free(b2);
    data_batch_free(b);
    data_close(s);

    /* normalisation + test split */
    sp.raw = 0;
    sp.split = DATA_TEST;
    s = data_open(&sp, err, sizeof err);
    CHECKF(s && data_count(s) == NR, "%s", err);
    if (s) {
        b = data_batch_new(s, 1);
        idx[0] = 1;
        CHECK(data_load_indices(s, idx, 1, 0, 0, 1, b, err, sizeof err) == 0);
        float want = (pix(5, 1, 2, 3, 4) / 255.f - 0.4465f) / 0.2616f;
        CHECK(fabsf(b->x[2 * 1024 + 3 * 32 + 4] - want) < 1e-5f);
        CHECK(b->y[0] == (5 * NR + 1) % 10);
        data_batch_free(b);
        data_close(s);
    }
    /* parent folder holding cifar-10-batches-bin/ */
    char *sub = t_path(dir, "p/cifar-10-batches-bin"), *par = t_path(dir, "p");
    write_batches(sub, 2);
    sp.path = par;
    s = data_open(&sp, err, sizeof err);
    CHECKF(s && data_count(s) == 2, "%s", err);
    data_close(s);
    sp.path = dir;
    sp.split = DATA_TRAIN;

    /* bad input */
    char *f3 = t_path(dir, "data_batch_3.bin");
    size_t len;
    uint8_t *keep = t_read(f3, &len);
    unlink(f3);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "data_batch_3.bin", "cannot open");
    t_write(f3, keep, len - 100); /* truncated */
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "data_batch_3.bin", "truncated", "byte offset 6146");
    keep[REC] = 200; /* bad label in record 1 */
    t_write(f3, keep, len);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "data_batch_3.bin", "bad label 200", "byte offset 3073");
    t_write(f3, keep, 0);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "data_batch_3.bin", "empty");
    free(keep);
    free(f3);
    sp.path = "/nonexistent/cifar";
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "/nonexistent/cifar/data_batch_1.bin");
    free(sub);
    free(par);
    return t_done("cifar");
}
