/* backend.c -- the backends known at run time and the host-model steps they share. */
#include "trainer/backend.h"
#include <string.h>

/* trainer/backend_cuda.c, linked only into CUDA builds: its absence is an address of NULL. */
extern const backend_ops_t backend_cuda __attribute__((weak));

backend_t *backend_open(const char *device, nn_model_t *host, const cfg_t *c, int local_rank, int local_ranks,
                        char *err, size_t n) {
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
    return ops->open(host, c, local_rank, local_ranks, err, n);
}

int backend_host_average_bn(nn_model_t *m, MPI_Comm comm) {
    if (!m->nbn_stats) return 0;
    int P = 1;
    MPI_Comm_size(comm, &P);
    if (MPI_Allreduce(MPI_IN_PLACE, m->bn_stats, (int)m->nbn_stats, MPI_FLOAT, MPI_SUM, comm)) return -1;
    for (size_t i = 0; i < m->nbn_stats; i++) m->bn_stats[i] /= (float)P;
    return 0;
}

uint64_t backend_host_hash(const nn_model_t *m) {
    uint64_t h = FNV1A64_INIT;
    h = fnv1a64(h, m->params, m->nparams * sizeof(float));
    h = fnv1a64(h, m->mom, m->nparams * sizeof(float));
    return fnv1a64(h, m->bn_stats, m->nbn_stats * sizeof(float));
}
