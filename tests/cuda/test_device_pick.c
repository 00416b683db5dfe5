/* test_device_pick: nn_cuda_pick_device, the rank -> GPU choice (runs without a GPU).
 * One GPU per rank on nodes with 1, 2, 4 and 8 GPUs; round-robin sharing when a node has more
 * ranks than GPUs; invalid input gives -1 with a non-empty reason (the trainer prints it).
 * nn_cuda_share_check on a simulated 8-GPU node under CUDA_VISIBLE_DEVICES permutations: ranks
 * sharing a GPU while another carries none is an error, sharing by necessity is not. */
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

/* A node with 8 GPUs (physical ids GPU-P0..GPU-P7) and size ranks; rank r's CUDA_VISIBLE_DEVICES
 * is cvd[r] (physical indexes, "" = all 8).  Every rank picks its device by nn_cuda_pick_device
 * among the GPUs it sees; the identities go to nn_cuda_share_check with node_gpus = the most any
 * rank sees or can open (openable).  Returns the rule's verdict, its line in why. */
static int node_verdict(int size, const char *const *cvd, int openable, int allow, char *why, size_t n) {
    char ids[16][48];
    int node_gpus = openable;
    for (int r = 0; r < size; r++) {
        int vis[8], nv = 0;
        if (!cvd[r][0])
            for (nv = 0; nv < 8; nv++) vis[nv] = nv;
        else
            for (const char *p = cvd[r]; *p && nv < 8; p++)
                if (*p >= '0' && *p <= '7') vis[nv++] = *p - '0';
        node_gpus = nv > node_gpus ? nv : node_gpus;
        int d = nn_cuda_pick_device(r, size, nv, why, n);
        snprintf(ids[r], sizeof ids[r], "GPU-P%d", d >= 0 ? vis[d] : -1);
    }
    return nn_cuda_share_check(ids[0], sizeof ids[0], size, node_gpus, NULL, "n1", allow, why, n);
}

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
    /* the sharing rule under CUDA_VISIBLE_DEVICES permutations (8 GPUs on the node) */
    {
        const char *all8[8] = {"", "", "", "", "", "", "", ""};
        const char *perm[8] = {"31572604", "31572604", "31572604", "31572604",
                               "31572604", "31572604", "31572604", "31572604"};
        const char *pertask[8] = {"0", "1", "2", "3", "4", "5", "6", "7"}; /* srun --gpus-per-task=1 */
        const char *rev[8] = {"7", "6", "5", "4", "3", "2", "1", "0"};
        const char *daemon[8] = {"0", "0", "0", "0", "0", "0", "0", "0"}; /* mpirun's daemon bound to GPU 0 */
        const char *daemon3[8] = {"3", "3", "3", "3", "3", "3", "3", "3"};
        const char *halves[8] = {"01", "01", "01", "01", "23", "23", "23", "23"}; /* 4 GPUs, 4 used */
        const char *split[8] = {"0", "0", "0", "0", "1", "1", "1", "1"};
        const char *pairs[8] = {"0", "0", "1", "1", "2", "2", "3", "3"};
        const char *sixteen[16] = {"", "", "", "", "", "", "", "", "", "", "", "", "", "", "", ""};
        EXPECT(node_verdict(8, all8, 8, 0, why, sizeof why) == 0 && !why[0], "8 ranks, all GPUs visible: %s",
               why);
        EXPECT(node_verdict(8, perm, 8, 0, why, sizeof why) == 0, "8 ranks, one permutation: %s", why);
        EXPECT(node_verdict(4, perm, 8, 0, why, sizeof why) == 0, "4 ranks of 8 GPUs: %s", why);
        /* every rank picks device 0, but they are 8 different GPUs: identities, not indexes */
        EXPECT(node_verdict(8, pertask, 8, 0, why, sizeof why) == 0, "one GPU per task: %s", why);
        EXPECT(node_verdict(8, rev, 0, 0, why, sizeof why) == 0, "one GPU per task, reversed: %s", why);
        /* every rank sees GPU 0 only while the node has 8 that it can open: the error, naming all */
        EXPECT(node_verdict(8, daemon, 8, 0, why, sizeof why) == -1, "8 ranks on GPU 0 of 8: %s", why);
        EXPECT(strstr(why, "ranks 0,1,2,3,4,5,6,7 on node n1 share GPU GPU-P0") && strstr(why, "--share-gpu"),
               "message: %s", why);
        EXPECT(node_verdict(8, daemon3, 8, 0, why, sizeof why) == -1 && strstr(why, "GPU-P3"), "GPU 3: %s",
               why);
        EXPECT(node_verdict(8, daemon, 8, 1, why, sizeof why) == 1 && strstr(why, "--share-gpu"),
               "--share-gpu: %s", why);
        /* ... but where it can open only that one (a container with one GPU): sharing by necessity */
        EXPECT(node_verdict(8, daemon, 1, 0, why, sizeof why) == 1 && strstr(why, "more ranks"),
               "8 ranks, 1 GPU: %s", why);
        EXPECT(node_verdict(2, daemon, 0, 0, why, sizeof why) == 1, "2 ranks, 1 GPU: %s", why);
        /* 8 ranks seeing 2 GPUs each, 4 GPUs on the node, all 4 used: by necessity; but on a node
         * with 8 that every rank can open, or with two GPUs of 8 carrying every rank: errors */
        EXPECT(node_verdict(8, halves, 0, 0, why, sizeof why) == 1, "halves, 4 GPUs: %s", why);
        EXPECT(node_verdict(8, halves, 8, 0, why, sizeof why) == -1 && strstr(why, "only 4 carry"),
               "halves, 8 GPUs: %s", why);
        EXPECT(node_verdict(8, split, 8, 0, why, sizeof why) == -1 && strstr(why, "ranks 0,1,2,3 "),
               "split: %s", why);
        /* pairs on 4 GPUs: by necessity on a 4-GPU node, an error on an 8-GPU node */
        EXPECT(node_verdict(8, pairs, 4, 0, why, sizeof why) == 1, "pairs, 4 GPUs: %s", why);
        EXPECT(node_verdict(8, pairs, 8, 0, why, sizeof why) == -1 && strstr(why, "ranks 0,1 "),
               "pairs, 8: %s", why);
        EXPECT(node_verdict(16, sixteen, 8, 0, why, sizeof why) == 1, "16 ranks on 8 GPUs: %s", why);
        /* world ranks name the ranks; ranks without a GPU ("") are not counted */
        char ids[3][8] = {"A", "", "A"};
        int world[3] = {4, 5, 6};
        EXPECT(nn_cuda_share_check(ids[0], 8, 3, 2, world, "h", 0, why, sizeof why) == -1 &&
                   strstr(why, "ranks 4,6 on node h share GPU A "),
               "world ranks: %s", why);
        EXPECT(nn_cuda_share_check(ids[0], 8, 3, 1, world, "h", 0, why, sizeof why) == 1, "one GPU: %s", why);
    }
    if (fails) {
        printf("%d failures\n", fails);
        return 1;
    }
    printf("ok: device choice for 1, 2, 4, 8 GPUs, more ranks than GPUs, invalid input; the sharing rule\n");
    return 0;
}
