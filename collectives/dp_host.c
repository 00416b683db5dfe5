/* dp_host.c -- the data path of host memory (pcoll_impl.h: pcoll_datapath_t): buffers from the C
 * heap, a round's data summed by MPI_Iallreduce on the data communicator, or by recursive doubling
 * (rd.c) up to PCOLL_RD_MAX_BYTES; neither blocks, so application threads may drive rounds. */
#include "collectives/pcoll_impl.h"
#include <stdlib.h>
#include <string.h>

static int host_usable(char *key, size_t klen, char *msg, size_t mlen) {
    (void)msg, (void)mlen;
    if (klen) key[0] = 0;
    return 1;
}

static float *host_alloc(size_t nfloats) { return calloc(nfloats, sizeof(float)); }

static void host_free(float *p) { free(p); }

static int host_open(struct pcoll *h) {
    size_t bytes = h->nbuf * sizeof(float);
    h->rd = h->cfg.reduce == PCOLL_REDUCE_RD ||
            (h->cfg.reduce == PCOLL_REDUCE_AUTO && bytes <= PCOLL_RD_MAX_BYTES);
    if (h->rd && !(h->rd_tmp = calloc(1, bytes))) return PCOLL_ERR_NOMEM;
    return PCOLL_OK;
}

static int host_setup(struct pcoll *h, MPI_Comm comm, const char *key) {
    (void)h, (void)comm, (void)key;
    return PCOLL_OK;
}

static void host_close(struct pcoll *h, int broken) {
    (void)broken;
    free(h->rd_tmp);
    h->rd_tmp = NULL;
}

static int host_thread_init(struct pcoll *h) {
    (void)h;
    return PCOLL_OK;
}

static int host_deposit(struct pcoll *h, int slot, float *dst, const float *g, int accumulate, char *msg,
                        size_t mlen) {
    (void)slot, (void)msg, (void)mlen;
    if (accumulate)
        for (size_t i = 0; i < h->n; i++) dst[i] += g[i];
    else
        memcpy(dst, g, h->n * sizeof(float));
    return PCOLL_OK;
}

static int host_start(struct pcoll *h, round_t *c, int send_slot, const float *mine) {
    (void)send_slot;
    pcoll_put_meta(h, c->send + h->n, mine);
    c->t_start = pcoll_now();
    int rc;
    if (h->rd) { /* small buffers: recursive doubling in the result buffer (rd.c) */
        memcpy(c->recv, c->send, h->nbuf * sizeof(float));
        rc = pcoll_rd_start(&c->rd, c->recv, h->rd_tmp, (int)h->nbuf, h->data, h->P, h->me);
    } else
        rc = MPI_Iallreduce(c->send, c->recv, (int)h->nbuf, MPI_FLOAT, MPI_SUM, h->data, &c->req);
    if (rc != MPI_SUCCESS)
        return pcoll_mpi_fail(h, rc,
                              h->rd ? "MPI_Isend/MPI_Irecv (round data)" : "MPI_Iallreduce (round data)");
    return 0;
}

static int host_test(struct pcoll *h, round_t *c) {
    int done = 0;
    int rc = h->rd ? pcoll_rd_test(&c->rd, &done) : MPI_Test(&c->req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return pcoll_mpi_fail(h, rc,
                              h->rd ? "recursive doubling (round data)" : "MPI_Iallreduce (round data)");
    if (!done) return 0;
    c->t_end = pcoll_now();
    c->rm = c->recv + h->n;
    return 1;
}

static int host_scale(struct pcoll *h, float *recv, float s) {
    for (size_t i = 0; i < h->n; i++) recv[i] *= s;
    return PCOLL_OK;
}

const pcoll_datapath_t pcoll_dp_host = {
    .name = "host",
    .blocking = 0,
    .lend = 1,
    .usable = host_usable,
    .alloc = host_alloc,
    .free = host_free,
    .open = host_open,
    .setup = host_setup,
    .close = host_close,
    .thread_init = host_thread_init,
    .deposit = host_deposit,
    .start = host_start,
    .test = host_test,
    .scale = host_scale,
};
