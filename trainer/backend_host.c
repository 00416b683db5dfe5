/* backend_host.c -- the host-model steps the backends share: the BN average and the hash. */
#include "common/hash.h"
#include "trainer/backend.h"

int backend_host_average_bn(nn_model_t *m, MPI_Comm comm) {
    if (!m->nbn_stats) return 0;
    int P = 1;
    MPI_Comm_size(comm, &P);
    if (MPI_Allreduce(MPI_IN_PLACE, m->bn_stats, (int)m->nbn_stats, MPI_FLOAT, MPI_SUM, comm)) return -1;
    for (size_t i = 0; i < m->nbn_stats; i++) m->bn_stats[i] /= (float)P;
    return 0;
}

uint64_t backend_host_hash(const nn_model_t *m) {
    uint64_t h = HASH_FNV1A64_INIT;
    h = hash_fnv1a64(h, m->params, m->nparams * sizeof(float));
    h = hash_fnv1a64(h, m->mom, m->nparams * sizeof(float));
    return hash_fnv1a64(h, m->bn_stats, m->nbn_stats * sizeof(float));
}
