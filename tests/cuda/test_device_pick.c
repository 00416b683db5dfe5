/* test_device_pick: nn_cuda_pick_device, the rank -> GPU choice (runs without a GPU).
 * One GPU per rank on nodes with 1, 2, 4 and 8 GPUs; round-robin sharing when a node has more
 * ranks than GPUs; invalid input gives -1 with a non-empty reason (the trainer prints it). */
#include "trainer/cuda/nn_cuda.h"

#include <stdio.h>
#include <string.h>

static int fails;
#define EXPECT(cond, ...)                               \
    do {                                                \
        if (!(cond)) {                                  \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                        \
            printf("\n");                               \
            fails++;                                    \
        }                                               \
    } while (0)

int main(void) {
    char why[256];
    const int gpus[] = {1, 2, 4, 8};
    for (int g = 0; g < 4; g++) {
        int ndev = gpus[g];
        /* as many ranks as GPUs: every rank its own GPU, every GPU used once */
        int used[8] = {0};
        for (int r = 0; r < ndev; r++) {
            int d = nn_cuda_pick_device(r, ndev, ndev, why, sizeof why);
            EXPECT(d == r, "%d GPUs, local rank %d of %d: device %d, want %d (%s)", ndev, r, ndev, d, r, why);
            if (d >= 0 && d < 8) used[d]++;
        }
        for (int d = 0; d < ndev; d++)
            EXPECT(used[d] == 1, "%d GPUs: device %d used by %d ranks", ndev, d, used[d]);
        /* fewer ranks than GPUs: still distinct devices, the first ones */
        for (int r = 0; r + 1 < ndev; r++)
            EXPECT(nn_cuda_pick_device(r, ndev - 1, ndev, why, sizeof why) == r, "%d GPUs, %d ranks, rank %d",
                   ndev, ndev - 1, r);
        /* more ranks than GPUs (2x and 2x+1): valid devices, loads differ by at most one */
        for (int mult = 0; mult < 2; mult++) {
            int size = 2 * ndev + mult, load[8] = {0};
            for (int r = 0; r < size; r++) {
                int d = nn_cuda_pick_device(r, size, ndev, why, sizeof why);
                EXPECT(d >= 0 && d < ndev, "%d GPUs, %d ranks, rank %d: device %d (%s)", ndev, size, r, d,
                       why);
                if (d >= 0 && d < ndev) load[d]++;
            }
            int lo = size, hi = 0;
            for (int d = 0; d < ndev; d++) {
                lo = load[d] < lo ? load[d] : lo;
                hi = load[d] > hi ? load[d] : hi;
            }
            EXPECT(hi - lo <= 1, "%d GPUs, %d ranks: loads %d..%d", ndev, size, lo, hi);
        }
    }
    /* a non-zero device is a success (the trainer once treated "== 0" as success) */
    EXPECT(nn_cuda_pick_device(3, 4, 4, why, sizeof why) == 3 && why[0] == 0, "rank 3 of 4 on 4 GPUs");
    /* errors: -1 and a reason */
    struct {
        int r, s, n;
        const char *word;
    } bad[] = {{0, 1, 0, "no CUDA device"},
               {1, 4, -1, "no CUDA device"},
               {-1, 4, 4, "outside"},
               {4, 4, 4, "outside"},
               {0, 0, 2, "outside"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = 0;
        int d = nn_cuda_pick_device(bad[i].r, bad[i].s, bad[i].n, why, sizeof why);
        EXPECT(d == -1, "rank %d of %d, %d GPUs: device %d, want -1", bad[i].r, bad[i].s, bad[i].n, d);
        EXPECT(strstr(why, bad[i].word) != NULL, "rank %d of %d, %d GPUs: reason \"%s\" lacks \"%s\"",
               bad[i].r, bad[i].s, bad[i].n, why, bad[i].word);
    }
    if (fails) {
        printf("%d failures\n", fails);
        return 1;
    }
    printf("ok: device choice for 1, 2, 4, 8 GPUs, more ranks than GPUs, invalid input\n");
    return 0;
}
