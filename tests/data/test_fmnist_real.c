/* test_fmnist_real.c: smoke test on Debian's dataset-fashion-mnist files (skips if absent). */
#include "tests/data/testutil.h"
#include "trainer/data/data.h"

#include <math.h>
#include <unistd.h>

int main(void) {
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK) != 0) {
        printf("skip: /usr/share/datasets/fashion-mnist absent (apt-get install dataset-fashion-mnist)\n");
        return 77;
    }
    char err[512];
    for (int split = 0; split < 2; split++) {
        data_spec_t sp = {.kind = DATA_FMNIST, .split = split, .seed = 1};
        data_set_t *s = data_open(&sp, err, sizeof err);
        CHECKF(s, "%s", err);
        if (!s) continue;
        int64_t n = data_count(s);
        CHECK(n == (split == DATA_TRAIN ? 60000 : 10000));
        int hist[10] = {0}, B = 1000;
        data_iter_t *it = data_iter_new(s, 0, 1, B, 0, DATA_EVAL_FLAGS, err, sizeof err);
        const data_batch_t *b;
        int rc;
        double sum = 0, sq = 0;
        int64_t seen = 0;
        while ((rc = data_iter_next(it, &b, err, sizeof err)) == 1) {
            for (int k = 0; k < b->n; k++) {
                CHECK(b->y[k] >= 0 && b->y[k] <= 9);
                if (b->y[k] >= 0 && b->y[k] <= 9) hist[b->y[k]]++;
            }
            for (size_t p = 0; p < (size_t)b->n * 784; p++) {
                sum += b->x[p];
                sq += (double)b->x[p] * b->x[p];
            }
            seen += b->n;
        }
        CHECKF(rc == 0, "%s", err);
        CHECK(seen == n);
        for (int c = 0; c < 10; c++) CHECK(hist[c] == n / 10); /* balanced classes */
        double mean = sum / (seen * 784.0), sd = sqrt(sq / (seen * 784.0) - mean * mean);
        printf("%s: n=%lld normalised mean %.4f std %.4f\n", split ? "t10k" : "train", (long long)n, mean,
               sd);
        CHECK(fabs(mean) < 0.02 && fabs(sd - 1) < 0.03);
        data_iter_free(it);
        data_close(s);
    }
    return t_done("fmnist_real");
}
