/* device_pick.c: which GPU a rank uses, as a pure function (no CUDA: compiled in every build and
 * unit-tested without a GPU by tests/cuda/test_device_pick.c).  See nn_cuda.h. */
#include "trainer/cuda/nn_cuda.h"

#include <stdio.h>

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
