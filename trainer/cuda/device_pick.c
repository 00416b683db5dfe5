/* device_pick.c: which GPU a rank uses, as a pure function (no CUDA: compiled in every build and
 * unit-tested without a GPU by tests/cuda/test_device_pick.c).  See nn_cuda.h. */
#include "trainer/cuda/nn_cuda.h"

#include <stdio.h>
#include <string.h>

int nn_cuda_pick_device(int local_rank, int local_size, int ndev, char *why, size_t n) {
    if (why && n) why[0] = 0;
    if (ndev < 1) {
        if (why) snprintf(why, n, "no CUDA device visible to local rank %d", local_rank);
        return -1;
    }
    if (local_size < 1 || local_rank < 0 || local_rank >= local_size) {
        if (why)
            snprintf(why, n, "local rank %d outside 0..%d (node-local communicator of %d ranks)", local_rank,
                     local_size - 1, local_size);
        return -1;
    }
    /* one GPU per rank while there are enough; then round-robin, so that the ranks sharing a GPU
   * differ in local rank by a multiple of ndev and every GPU carries at most ceil(size/ndev) */
    return local_rank % ndev;
}

/* Appends ", " and the name of local rank i (its world rank when ranks is given). */
static void add_rank(char *buf, size_t n, const int *ranks, int i, int first) {
    size_t l = strlen(buf);
    if (l < n) snprintf(buf + l, n - l, "%s%d", first ? "" : ",", ranks ? ranks[i] : i);
}

int nn_cuda_share_check(const char *ids, size_t stride, int local_size, int node_gpus, const int *ranks,
                        const char *node, int allow, char *why, size_t n) {
    if (why && n) why[0] = 0;
    int users = 0, distinct = 0, shared = -1; /* shared: the first local rank whose GPU an earlier rank has */
    for (int i = 0; i < local_size; i++) {
        const char *id = ids + (size_t)i * stride;
        if (!id[0]) continue;
        users++;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = !strncmp(id, ids + (size_t)j * stride, stride);
        if (!seen)
            distinct++;
        else if (shared < 0)
            shared = i;
    }
    if (shared < 0) return 0;
    const char *gpu = ids + (size_t)shared * stride;
    char who[256] = "";
    int first = 1;
    for (int i = 0; i < local_size; i++)
        if (!strncmp(gpu, ids + (size_t)i * stride, stride))
            add_rank(who, sizeof who, ranks, i, first), first = 0;
    int gpus = node_gpus > distinct ? node_gpus : distinct;
    int need = users < gpus ? users : gpus; /* GPUs a one-GPU-per-rank-first choice would use */
    if (distinct >= need || allow) {
        if (why)
            snprintf(why, n, "%d ranks on node %s share %d GPU%s (%s; ranks %s on %.*s)", users, node,
                     distinct, distinct == 1 ? "" : "s",
                     allow && distinct < need ? "--share-gpu" : "more ranks than the node's GPUs", who,
                     (int)stride, gpu);
        return 1;
    }
    if (why)
        snprintf(
            why, n,
            "ranks %s on node %s share GPU %.*s while the node has %d GPUs and only %d carry a rank (every "
            "rank sees only some GPUs: a launcher that binds each task or daemon to one GPU?); pass "
            "--share-gpu to allow it",
            who, node, (int)stride, gpu, gpus, distinct);
    return -1;
}
