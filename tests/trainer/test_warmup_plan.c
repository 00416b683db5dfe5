/* test_warmup_plan.c -- the warm-up's shapes (trainer/warmup_plan.c): the evaluation shards as
 * run_evaluate's iterator deals them (simulated here position by position), every batch size an
 * evaluation or a training step will run present in the plan and nothing else, the training step
 * last, sequence lengths capped at the model's steps, duplicates dropped, bad arguments and a
 * too-small output refused. */
#include "trainer/warmup_plan.h"
#include <stdio.h>
#include <stdlib.h>

static int fails;
#include "tests/trainer/check.h"

/* data_iter_new's shard without DATA_EVEN_SHARDS: positions rank, rank + P, ... < count */
static int64_t dealt(int64_t count, int rank, int P) {
    int64_t m = 0;
    for (int64_t i = rank; i < count; i += P) m++;
    return m;
}

static int has(const warm_shape_t *s, int k, int n, int t, int training) {
    for (int i = 0; i < k; i++)
        if (s[i].n == n && s[i].t == t && s[i].training == training) return 1;
    return 0;
}

int main(void) {
    warm_shape_t s[WARM_MAX_SHAPES];
    /* the shard against the iterator's dealing */
    for (int P = 1; P <= 9; P++)
        for (int64_t count = 0; count < 60; count++)
            for (int rank = 0; rank < P; rank++)
                CHECK(warm_eval_shard(count, rank, P) == dealt(count, rank, P),
                      "count %lld rank %d P %d: %lld", (long long)count, rank, P,
                      (long long)warm_eval_shard(count, rank, P));
    CHECK(warm_eval_shard(10, 2, 2) == 0 && warm_eval_shard(10, -1, 2) == 0 && warm_eval_shard(10, 0, 0) == 0,
          "bad rank or P");
    /* images: 512 test samples over 2 ranks at batch 128: one full evaluation batch, the step */
    int64_t ev[2] = {warm_eval_shard(512, 0, 2), 0};
    int k = warm_plan(128, 1, 1, 0, ev, 1, s, WARM_MAX_SHAPES);
    CHECK(k == 2 && has(s, k, 128, 1, 0) && s[1].n == 128 && s[1].training, "k %d", k);
    /* 10000 over 3 ranks: rank 0 has 3334 = 26 x 128 + 6; a curve subset of 100: 34 on rank 0 */
    ev[0] = warm_eval_shard(10000, 0, 3), ev[1] = warm_eval_shard(100, 0, 3);
    k = warm_plan(128, 1, 1, 0, ev, 2, s, WARM_MAX_SHAPES);
    CHECK(k == 4 && has(s, k, 128, 1, 0) && has(s, k, 6, 1, 0) && has(s, k, 34, 1, 0), "k %d", k);
    CHECK(k > 0 && s[k - 1].training && s[k - 1].n == 128, "the training step is last");
    for (int i = 0; i + 1 < k; i++) CHECK(!s[i].training, "shape %d is an evaluation", i);
    /* sequences: capped at the model's steps; evaluation at the evaluation set's longest */
    ev[0] = 70, ev[1] = 70; /* the same partial batch twice: once */
    k = warm_plan(32, 300, 35, 40, ev, 2, s, WARM_MAX_SHAPES);
    CHECK(k == 3 && has(s, k, 32, 35, 0) && has(s, k, 6, 35, 0) && has(s, k, 32, 40, 1), "k %d", k);
    k = warm_plan(32, 300, 300, 0, ev, 1, s, WARM_MAX_SHAPES);
    CHECK(k == 3 && has(s, k, 32, 300, 1) && has(s, k, 6, 300, 0), "no cap: k %d", k);
    /* nothing to evaluate on this rank: the training step alone */
    ev[0] = 0;
    k = warm_plan(16, 1, 1, 0, ev, 1, s, WARM_MAX_SHAPES);
    CHECK(k == 1 && s[0].n == 16 && s[0].training, "k %d", k);
    /* every batch size the iterator deals, and the training one, is in the plan; nothing else */
    for (int P = 1; P <= 5; P++)
        for (int batch = 1; batch <= 9; batch++)
            for (int64_t count = 0; count < 40; count++)
                for (int rank = 0; rank < P; rank++) {
                    ev[0] = warm_eval_shard(count, rank, P);
                    k = warm_plan(batch, 1, 1, 0, ev, 1, s, WARM_MAX_SHAPES);
                    for (int64_t done = 0; done < ev[0]; done += batch) {
                        int n = (int)(ev[0] - done < batch ? ev[0] - done : batch);
                        CHECK(has(s, k, n, 1, 0), "P %d batch %d count %lld rank %d: no shape %d", P, batch,
                              (long long)count, rank, n);
                    }
                    int want = 1 + (ev[0] >= batch) + (ev[0] % batch != 0);
                    CHECK(k == want, "P %d batch %d count %lld rank %d: %d shapes, want %d", P, batch,
                          (long long)count, rank, k, want);
                }
    /* refused */
    CHECK(warm_plan(0, 1, 1, 0, ev, 1, s, WARM_MAX_SHAPES) == -1, "batch 0");
    CHECK(warm_plan(8, 0, 1, 0, ev, 1, s, WARM_MAX_SHAPES) == -1, "t_train 0");
    CHECK(warm_plan(8, 1, 1, -1, ev, 1, s, WARM_MAX_SHAPES) == -1, "t_model -1");
    ev[0] = -1;
    CHECK(warm_plan(8, 1, 1, 0, ev, 1, s, WARM_MAX_SHAPES) == -1, "a negative shard");
    ev[0] = 13, ev[1] = 11;
    CHECK(warm_plan(8, 1, 1, 0, ev, 2, s, 3) == -1, "out too small (4 shapes, cap 3)");
    CHECK(warm_plan(8, 1, 1, 0, ev, 2, s, 4) == 4, "cap exactly enough");
    CHECK(warm_plan(8, 1, 1, 0, NULL, 2, s, 4) == -1, "eval NULL");
    if (fails) return fprintf(stderr, "test_warmup_plan: %d checks failed\n", fails), 1;
    printf("test_warmup_plan: ok\n");
    return 0;
}
