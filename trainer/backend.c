/* backend.c -- the backends known at run time. */
#include "trainer/backend.h"
#include <string.h>

/* trainer/backend_cuda.c, linked only into CUDA builds: its absence is an address of NULL. */
extern const backend_ops_t backend_cuda __attribute__((weak));

backend_t *backend_open(const char *device, nn_model_t *host, const cfg_t *c, MPI_Comm node, char *err,
                        size_t n) {
    const backend_ops_t *ops = NULL;
    if (!strcmp(device, backend_cpu.name))
        ops = &backend_cpu;
    else if (!strcmp(device, "cuda")) {
        if (!&backend_cuda) {
            snprintf(err, n,
                     "this build has no CUDA backend (nvcc and cuDNN were not found at "
                     "build time); rebuild on a machine with the CUDA toolkit, or use --device cpu");
            return NULL;
        }
        ops = &backend_cuda;
    }
    if (!ops) {
        snprintf(err, n, "--device '%s' is not a backend (cpu | cuda)", device);
        return NULL;
    }
    return ops->open(host, c, node, err, n);
}
