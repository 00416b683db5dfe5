/* cuda_test_util.h: helpers for the GPU tests (skip without a device, GPU-vs-CPU comparisons). */
#ifndef CUDA_TEST_UTIL_H
#define CUDA_TEST_UTIL_H
#include "tests/nn/nn_test_util.h"
#include "trainer/cuda/nn_cuda.h"

/* exit 77 (skip) with one line naming the reason when there is no usable CUDA device */
static inline void ct_require_gpu(void) {
    char why[256];
    if (nn_cuda_available(why, sizeof why) < 1) {
        printf("SKIP: no CUDA device (%s)\n", why);
        fflush(stdout);
        exit(77);
    }
    char d[512];
    if (nn_cuda_select_device(0, why, sizeof why) < 0) {
        printf("SKIP: no usable CUDA device (%s)\n", why);
        fflush(stdout);
        exit(77);
    }
    nn_cuda_describe(d, sizeof d);
    printf("device: %s\n", d);
}

#define CT_CHECK(call, m)                                                                               \
    do {                                                                                                \
        int ct_rc_ = (call);                                                                            \
        if (ct_rc_) {                                                                                   \
            printf("FAIL %s:%d: %s: rc %d: %s\n", __FILE__, __LINE__, #call, ct_rc_, nn_cuda_error(m)); \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)
#endif
