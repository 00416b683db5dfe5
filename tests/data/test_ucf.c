/* test_ucf.c: UCF101 feature sequences (UCFF files) + official split lists: lengths, padding,
 * values, truncation, cost, and every bad-input case. */
#include "tests/data/testutil.h"
#include "trainer/data/data.h"

#include <math.h>
#include <unistd.h>

#define F 5
static float val(int v, int t, int f) { return (float)(v * 1000 + t * 10 + f) * 0.01f; }

static void write_ucff(const char *path, int v, uint32_t T, uint32_t Fd) {
    size_t n = 16 + 4ull * T * Fd;
    uint8_t *b = malloc(n);
    uint32_t h[3] = {1, T, Fd};
    memcpy(b, "UCFF", 4);
    memcpy(b + 4, h, 12); /* little-endian host */
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t f = 0; f < Fd; f++) {
            float x = val(v, (int)t, (int)f);
            memcpy(b + 16 + 4 * (t * Fd + f), &x, 4);
        }
    t_write(path, b, n);
    free(b);
}

static const char *CLASSES[3] = {"ApplyEyeMakeup", "Basketball", "YoYo"};
static const int TLEN[6] = {3, 7, 1, 12, 5, 9};

int main(void) {
    char *dir = t_tmpdir(), err[512];
    char *ci = t_path(dir, "ucfTrainTestlist/classInd.txt");
    const char *cis = "1 ApplyEyeMakeup\r\n2 Basketball\r\n3 YoYo\r\n";
    t_write(ci, cis, strlen(cis));
    char tr[1024] = "", te[1024] = "";
    for (int v = 0; v < 6; v++) {
        int c = v % 3;
        char line[256], *fp;
        snprintf(line, sizeof line, "%s/v_%s_g%02d_c01.avi", CLASSES[c], CLASSES[c], v + 1);
        fp = t_path(dir, "features/%s/v_%s_g%02d_c01.ucff", CLASSES[c], CLASSES[c], v + 1);
        write_ucff(fp, v, (uint32_t)TLEN[v], F);
        free(fp);
        char *dst = v < 4 ? tr : te;
        if (v < 4)
            sprintf(dst + strlen(dst), "%s %d\r\n", line, c + 1);
        else
            sprintf(dst + strlen(dst), "%s\r\n", line);
    }
    strcat(tr, "\r\n"); /* trailing blank line */
    char *trp = t_path(dir, "ucfTrainTestlist/trainlist01.txt"),
         *tep = t_path(dir, "ucfTrainTestlist/testlist01.txt");
    t_write(trp, tr, strlen(tr));
    t_write(tep, te, strlen(te));

    data_spec_t sp = {.kind = DATA_UCF101, .path = dir, .split = DATA_TRAIN, .seed = 3};
    data_set_t *s = data_open(&sp, err, sizeof err);
    CHECKF(s, "%s", err);
    if (!s) return t_done("ucf");
    int dims[3];
    CHECK(data_count(s) == 4 && data_num_classes(s) == 3);
    CHECK(data_sample_shape(s, dims) == 2 && dims[0] == 12 && dims[1] == F);
    CHECK(data_sample_numel(s) == 12 * F);
    CHECK(!strcmp(data_class_name(s, 2), "YoYo"));
    for (int v = 0; v < 4; v++)
        CHECK(data_sample_length(s, v) == TLEN[v] && data_sample_cost(s, v) == TLEN[v]);
    data_batch_t *b = data_batch_new(s, 4);
    memset(b->x, 0x7f, sizeof(float) * 4 * 12 * F); /* padding must be zeroed */
    int64_t idx[3] = {2, 0, 1};
    CHECKF(data_load_indices(s, idx, 3, 0, 1, 2, b, err, sizeof err) == 0, "%s", err);
    CHECK(b->t_pad == 7 && b->x_stride == 7 * F && b->cost == 11.0);
    for (int k = 0; k < 3; k++) {
        int v = (int)idx[k];
        CHECK(b->lengths[k] == TLEN[v] && b->y[k] == v % 3);
        for (int t = 0; t < 7; t++)
            for (int f = 0; f < F; f++)
                CHECK(b->x[(size_t)k * 7 * F + t * F + f] == (t < TLEN[v] ? val(v, t, f) : 0.f));
    }
    data_batch_free(b);
    data_close(s);

    /* test split (no labels in the list), max_t truncation, lists in the root folder */
    sp.split = DATA_TEST;
    sp.max_t = 6;
    s = data_open(&sp, err, sizeof err);
    CHECKF(s && data_count(s) == 2, "%s", err);
    if (s) {
        CHECK(data_sample_shape(s, dims) == 2 && dims[0] == 6);
        CHECK(data_sample_length(s, 0) == 5 && data_sample_length(s, 1) == 6);
        b = data_batch_new(s, 2);
        int64_t i2[2] = {1, 0};
        CHECK(data_load_indices(s, i2, 2, 0, 0, 1, b, err, sizeof err) == 0);
        CHECK(b->y[0] == 2 && b->y[1] == 1 && b->t_pad == 6 && b->cost == 11.0);
        CHECK(b->x[5 * F + 4] == val(5, 5, 4) && b->x[6 * F + 5 * F] == 0.f);
        data_batch_free(b);
        data_close(s);
    }
    sp.max_t = 0;
    sp.split = DATA_TRAIN;

    /* wrong feature dimension (vs the first file, and vs spec feat_dim) */
    char *f1 = t_path(dir, "features/Basketball/v_Basketball_g02_c01.ucff");
    write_ucff(f1, 1, 7, F + 1);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "v_Basketball_g02_c01.ucff", "F=6", "byte offset 12");
    write_ucff(f1, 1, 7, F);
    sp.feat_dim = 8;
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "v_ApplyEyeMakeup_g01_c01.ucff", "F=5", "want 8");
    sp.feat_dim = 0;
    /* truncated / trailing / bad magic / bad version / short header */
    size_t len;
    uint8_t *fb = t_read(f1, &len);
    t_write(f1, fb, len - 6);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "v_Basketball_g02_c01.ucff", "truncated", "byte offset");
    t_write(f1, fb, 10);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "v_Basketball_g02_c01.ucff", "truncated UCFF header");
    fb[0] = 'X';
    t_write(f1, fb, len);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "v_Basketball_g02_c01.ucff", "magic", "byte offset 0");
    fb[0] = 'U';
    fb[4] = 2;
    t_write(f1, fb, len);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "v_Basketball_g02_c01.ucff", "version", "byte offset 4");
    fb[4] = 1;
    float nan = NAN;
    memcpy(fb + 16 + 4 * 13, &nan, 4);
    t_write(f1, fb, len); /* opens fine (headers only); the load names the bad value */
    s = data_open(&sp, err, sizeof err);
    CHECKF(s, "%s", err);
    if (s) {
        b = data_batch_new(s, 4);
        int64_t all[4] = {0, 1, 2, 3};
        CHECK(data_load_indices(s, all, 4, 0, 0, 1, b, err, sizeof err) == DATA_ERR_FORMAT);
        CHECK_ERR(err, "v_Basketball_g02_c01.ucff", "non-finite", "byte offset 68");
        data_batch_free(b);
        data_close(s);
    }
    unlink(f1);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "v_Basketball_g02_c01.ucff", "cannot open");
    free(fb);
    free(f1);

    /* split lists: label not matching the folder, unknown class, bad classInd, missing list */
    char bad[256];
    snprintf(bad, sizeof bad,
             "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi 1\r\nYoYo/v_YoYo_g03_c01.avi 2\r\n");
    t_write(trp, bad, strlen(bad));
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "trainlist01.txt", "line 2", "byte offset 47", "label does not match");
    snprintf(bad, sizeof bad, "Juggling/v_Juggling_g01_c01.avi 1\n");
    t_write(trp, bad, strlen(bad));
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "trainlist01.txt", "line 1", "not in classInd");
    snprintf(bad, sizeof bad, "v_YoYo_g03_c01.avi 3\n");
    t_write(trp, bad, strlen(bad));
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "trainlist01.txt", "line 1");
    t_write(trp, "", 0);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "trainlist01.txt", "no videos");
    t_write(ci, "1 A\n3 B\n", 8);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "classInd.txt", "line 2", "expected \"2 ClassName\"", "got \"3 B\"");
    unlink(ci);
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "classInd.txt", "cannot open");
    sp.split = DATA_TEST;
    sp.ucf_split = 2;
    t_write(ci, cis, strlen(cis));
    CHECK(data_open(&sp, err, sizeof err) == NULL);
    CHECK_ERR(err, "testlist02.txt", "cannot open");
    free(ci);
    free(trp);
    free(tep);
    return t_done("ucf");
}
