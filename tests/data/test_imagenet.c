/* test_imagenet.c: ImageNet class-folder loader on a tiny tree of JPEGs written with libjpeg:
 * class order, eval transform values, augmentation determinism, corrupt/unreadable files. */
#include "tests/data/testutil.h"
#include "trainer/data/data.h"

#include <math.h>
#include <unistd.h>

static const uint8_t COL[3][3] = {{200, 30, 40}, {20, 180, 60}, {10, 50, 220}}; /* ant cat dog */
static const char *CLS[3] = {"n02_cat", "n01_ant", "n03_dog"};                  /* unsorted */

static void solid(const char *path, int w, int h, const uint8_t *c) {
    uint8_t *p = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h; i++) memcpy(p + 3 * i, c, 3);
    t_write_jpeg(path, p, w, h, 95);
    free(p);
}

int main(void) {
    char *dir = t_tmpdir(), err[512];
    /* train: 3 classes x 3 images of different sizes; val: 2 images per class */
    for (int c = 0; c < 3; c++) {
        int label = c == 0 ? 1 : c == 1 ? 0 : 2; /* sorted: ant cat dog */
        for (int i = 0; i < 3; i++) {
            char *p = t_path(dir, "train/%s/img_%d.JPEG", CLS[c], i);
            solid(p, 40 + 13 * i, 30 + 21 * i, COL[label]);
            free(p);
        }
        for (int i = 0; i < 2; i++) {
            char *p = t_path(dir, "val/%s/ILSVRC2012_val_%d.JPEG", CLS[c], i);
            solid(p, 64, 48 + 40 * i, COL[label]);
            free(p);
        }
    }
    char *hidden = t_path(dir, "train/n01_ant/.DS_Store");
    t_write(hidden, "junk", 4);
    data_spec_t sp = {
        .kind = DATA_IMAGENET, .path = dir, .split = DATA_TRAIN, .image_size = 32, .seed = 5, .raw = 1};
    data_set_t *s = data_open(&sp, err, sizeof err);
    CHECKF(s, "%s", err);
    if (!s) return t_done("imagenet");
    int dims[3];
    CHECK(data_count(s) == 9 && data_num_classes(s) == 3);
    CHECK(data_sample_shape(s, dims) == 3 && dims[0] == 3 && dims[1] == 32 && dims[2] == 32);
    CHECK(!strcmp(data_class_name(s, 0), "n01_ant") && !strcmp(data_class_name(s, 2), "n03_dog"));
    data_batch_t *b = data_batch_new(s, 9), *b2 = data_batch_new(s, 9);
    int64_t idx[9];
    for (int i = 0; i < 9; i++) idx[i] = i;
    for (int aug = 0; aug < 2; aug++) {
        CHECKF(data_load_indices(s, idx, 9, 2, aug, 3, b, err, sizeof err) == 0, "%s", err);
        for (int k = 0; k < 9; k++) {
            CHECK(b->y[k] == k / 3);
            double m[3] = {0};
            for (int c = 0; c < 3; c++)
                for (int p = 0; p < 1024; p++) m[c] += b->x[(size_t)k * 3072 + c * 1024 + p] / 1024;
            for (int c = 0; c < 3; c++) /* solid colour survives JPEG + resampling */
                CHECKF(fabs(m[c] - COL[k / 3][c] / 255.0) < 0.03, "aug %d sample %d ch %d: %f vs %f", aug, k,
                       c, m[c], COL[k / 3][c] / 255.0);
        }
    }
    CHECK(data_load_indices(s, idx, 9, 2, 1, 1, b2, err, sizeof err) == 0);
    CHECK(memcmp(b->x, b2->x, sizeof(float) * 9 * 3072) == 0); /* same (seed, epoch): same crops */
    data_batch_free(b);
    data_batch_free(b2);
    data_close(s);

    /* a gradient image: eval transform = resize shorter side to S*256/224 + centre crop */
    uint8_t *g = malloc(224 * 112 * 3);
    for (int y = 0; y < 112; y++)
        for (int x = 0; x < 224; x++) {
            uint8_t *q = g + 3 * (y * 224 + x);
            q[0] = (uint8_t)x;
            q[1] = (uint8_t)(2 * y);
            q[2] = 128;
        }
    char *gp = t_path(dir, "grad/val/c0/g.jpg"), *gr = t_path(dir, "grad");
    t_write_jpeg(gp, g, 224, 112, 100);
    data_spec_t gs = {.kind = DATA_IMAGENET, .path = gr, .split = DATA_TEST, .image_size = 56, .raw = 1};
    s = data_open(&gs, err, sizeof err);
    CHECKF(s && data_count(s) == 1, "%s", err);
    if (s) {
        b = data_batch_new(s, 1);
        idx[0] = 0;
        CHECK(data_load_indices(s, idx, 1, 0, 0, 1, b, err, sizeof err) == 0);
        /* R = 64: resized 128x64, crop x 36..91, y 4..59 -> source x = (36+j+.5)*224/128 - .5 */
        for (int i = 0; i < 56; i += 11)
            for (int j = 0; j < 56; j += 9) {
                double sx = (36 + j + 0.5) * 224 / 128.0 - 0.5, sy = (4 + i + 0.5) * 112 / 64.0 - 0.5;
                CHECKF(fabs(b->x[i * 56 + j] * 255 - sx) < 3, "R at %d,%d: %f vs %f", i, j,
                       b->x[i * 56 + j] * 255, sx);
                CHECKF(fabs(b->x[3136 + i * 56 + j] * 255 - 2 * sy) < 3, "G at %d,%d", i, j);
            }
        data_batch_free(b);
        data_close(s);
    }
    free(g);
    free(gp);
    free(gr);

    /* normalised val split: labels follow train's class order */
    sp.split = DATA_TEST;
    sp.raw = 0;
    s = data_open(&sp, err, sizeof err);
    CHECKF(s && data_count(s) == 6, "%s", err);
    if (s) {
        b = data_batch_new(s, 6);
        for (int i = 0; i < 6; i++) idx[i] = i;
        CHECK(data_load_indices(s, idx, 6, 0, 0, 2, b, err, sizeof err) == 0);
        for (int k = 0; k < 6; k++) CHECK(b->y[k] == k / 2);
        CHECK(fabs(b->x[0] - (200 / 255.0 - 0.485) / 0.229) < 0.1);
        data_batch_free(b);
        data_close(s);
    }
    sp.split = DATA_TRAIN;

    /* corrupt JPEGs: error at load time naming the file; through the prefetching iterator too */
    char *bad = t_path(dir, "train/n03_dog/img_1.JPEG");
    size_t len;
    uint8_t *jb = t_read(bad, &len);
    t_write(bad, jb, len / 2); /* truncated */
    s = data_open(&sp, err, sizeof err);
    CHECKF(s, "%s", err);
    b = data_batch_new(s, 9);
    for (int i = 0; i < 9; i++) idx[i] = i;
    CHECK(data_load_indices(s, idx, 9, 0, 0, 4, b, err, sizeof err) == DATA_ERR_FORMAT);
    CHECK_ERR(err, "train/n03_dog/img_1.JPEG", "corrupt JPEG");
    data_iter_t *it = data_iter_new(s, 0, 1, 4, 0, DATA_TRAIN_FLAGS, err, sizeof err);
    const data_batch_t *cb;
    int rc, got = 0;
    while ((rc = data_iter_next(it, &cb, err, sizeof err)) == 1) got++;
    CHECK(rc == DATA_ERR_FORMAT);
    CHECK_ERR(err, "train/n03_dog/img_1.JPEG");
    CHECK(data_iter_next(it, &cb, err, sizeof err) == DATA_ERR_FORMAT); /* sticky */
    data_iter_free(it);
    memset(jb + 200, 0x55, len - 400); /* garbage entropy data / markers */
    jb[2] = 0x12;
    t_write(bad, jb, len);
    idx[0] = 7;
    CHECK(data_load_indices(s, idx, 1, 0, 0, 1, b, err, sizeof err) == DATA_ERR_FORMAT);
    CHECK_ERR(err, "img_1.JPEG", "corrupt JPEG");
    t_write(bad, "this is not a jpeg", 18);
    CHECK(data_load_indices(s, idx, 1, 0, 0, 1, b, err, sizeof err) == DATA_ERR_FORMAT);
    CHECK_ERR(err, "img_1.JPEG", "not a JPEG", "byte offset 0");
    t_write(bad, jb, 0);
    CHECK(data_load_indices(s, idx, 1, 0, 0, 1, b, err, sizeof err) == DATA_ERR_FORMAT);
    CHECK_ERR(err, "img_1.JPEG");
    unlink(bad);
    CHECK(data_load_indices(s, idx, 1, 0, 0, 1, b, err, sizeof err) == DATA_ERR_IO);
    CHECK_ERR(err, "img_1.JPEG", "cannot open");
    data_batch_free(b);
    data_close(s);
    free(jb);
    free(bad);

    /* val class that train lacks; missing root */
    char *stray = t_path(dir, "val/n09_zebra/x.JPEG");
    solid(stray, 8, 8, COL[0]);
    sp.split = DATA_TEST;
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "n09_zebra", "not among");
    sp.path = "/nonexistent/imagenet";
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "/nonexistent/imagenet/val", "cannot open");
    free(stray);
    free(hidden);
    return t_done("imagenet");
}
