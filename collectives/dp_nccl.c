/* dp_nccl.c -- the data path of device memory (pcoll_impl.h: pcoll_datapath_t) over the CUDA and
 * NCCL functions of pcoll_nccl.cu (pcoll_dev.h); only in build/libpcoll_cuda.a. A round runs to
 * its end in start (blocking), so only the engine thread drives device rounds:
 *   NCCL   ncclAllReduce on the engine's stream; this rank's metadata goes into the send buffer
 *          from pinned host memory, the reduced metadata comes back to pinned host memory.
 *   STAGED (ranks share a GPU) device -> pinned host, MPI_Allreduce on the data communicator,
 *          pinned host -> device.
 * Every CUDA or NCCL failure of a round is the sticky PCOLL_ERR_MPI "rank R: device data path: ...";
 * a round's wait polls NCCL's asynchronous error and is bounded (PCOLL_NCCL_WAIT_S, 600 s), the
 * NCCL initialisation too (PCOLL_NCCL_INIT_S, 120 s): pcoll_nccl.cu, over dev_wait.c. */
#include "collectives/pcoll_dev.h"
#include "collectives/pcoll_impl.h"
#include <stdlib.h>
#include <string.h>

static int dev_fail(struct pcoll *h, const char *m) {
    pthread_mutex_lock(&h->mu);
    pcoll_set_error(h, PCOLL_ERR_MPI, "rank %d: device data path: %s", h->me, m);
    pthread_mutex_unlock(&h->mu);
    return PCOLL_ERR_MPI;
}

static int dev_usable(char *key, size_t klen, char *msg, size_t mlen) {
    return pcoll_dev_local(&(int){-1}, key, klen, msg, mlen);
}

static int dev_open(struct pcoll *h) {
    (void)h;
    return PCOLL_OK;
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first: there, every rank closes its cached
 * NCCL communicators together (ncclCommFinalize + ncclCommDestroy, pcoll_nccl.cu). */
static int dev_at_finalize(MPI_Comm c, int kv, void *attr, void *extra) {
    (void)c;
    (void)kv;
    (void)attr;
    (void)extra;
    pcoll_dev_shutdown();
    return MPI_SUCCESS;
}
static void dev_finalize_hook(void) {
    static int done;
    int kv;
    if (done || MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, dev_at_finalize, &kv, NULL) != MPI_SUCCESS)
        return;
    done = MPI_Comm_set_attr(MPI_COMM_SELF, kv, NULL) == MPI_SUCCESS;
}

/* Device data path, collective: NCCL when every rank has its own GPU and no rank has another live
 * handle on NCCL, else STAGED (NCCL refuses two ranks of a communicator on one GPU, and two
 * communicators driven by two engine threads have no order between their kernels).
 * PCOLL_DEVICE_PATH=nccl|staged forces a path (if any rank asks for staged, all use it). Every
 * rank returns the same code. */
static int dev_setup(struct pcoll *h, MPI_Comm comm, const char *key) {
    int P = h->P, me = h->me;
    char msg[400] = "";
    enum { KEY = 192 };
    char *keys = malloc((size_t)P * KEY);
    if (!keys) return PCOLL_ERR_NOMEM;
    char mine[KEY];
    memset(mine, 0, sizeof mine);
    snprintf(mine, sizeof mine, "%s", key);
    MPI_Allgather(mine, KEY, MPI_CHAR, keys, KEY, MPI_CHAR, comm);
    int dup = 0;
    for (int p = 0; p < P && !dup; p++)
        for (int q = p + 1; q < P && !dup; q++)
            dup = !strncmp(keys + (size_t)p * KEY, keys + (size_t)q * KEY, KEY);
    free(keys);
    const char *env = getenv("PCOLL_DEVICE_PATH");
    int want = env && !strcmp(env, "staged") ? 2 : env && !strcmp(env, "nccl") ? 1 : 0, any = 0;
    int busy = pcoll_dev_live_nccl() > 0, anybusy = 0; /* another live handle has NCCL already */
    MPI_Allreduce(&want, &any, 1, MPI_INT, MPI_MAX, comm);
    MPI_Allreduce(&busy, &anybusy, 1, MPI_INT, MPI_MAX, comm);
    int path = any == 2         ? PCOLL_DEVPATH_STAGED
               : any == 1       ? PCOLL_DEVPATH_NCCL
               : dup || anybusy ? PCOLL_DEVPATH_STAGED
                                : PCOLL_DEVPATH_NCCL;
    unsigned char id[256];
    memset(id, 0, sizeof id);
    size_t idn = pcoll_dev_id_bytes();
    int ok = idn <= sizeof id, all_ok = 0;
    int reuse = 0; /* NCCL once per run: the communicator rank 0 names, if every rank holds it */
    if (ok && path == PCOLL_DEVPATH_NCCL) {
        unsigned char cid[256] = {0};
        int have = pcoll_dev_cached_id(cid, P, me);
        if (me == 0) memcpy(id, cid, idn);
        MPI_Bcast(id, (int)idn, MPI_BYTE, 0, comm);
        have = have && !memcmp(id, cid, idn);
        MPI_Allreduce(&have, &reuse, 1, MPI_INT, MPI_LAND, comm);
        if (!reuse) dev_finalize_hook();
    }
    if (ok && path == PCOLL_DEVPATH_NCCL && !reuse) {
        if (me == 0) ok = pcoll_dev_nccl_id(id, msg, sizeof msg) == PCOLL_OK;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, comm);
        if (!all_ok) {
            snprintf(pcoll_create_err, sizeof pcoll_create_err, "pcoll_create: rank 0: %s",
                     msg[0] ? msg : "NCCL id");
            return PCOLL_ERR_MPI;
        }
        MPI_Bcast(id, (int)idn, MPI_BYTE, 0, comm);
    }
    h->dev = pcoll_dev_open(path, P, me, h->nbuf, (size_t)META * (size_t)P, msg, sizeof msg);
    ok = h->dev != NULL;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, comm);
    if (all_ok && path == PCOLL_DEVPATH_NCCL) { /* only once every rank has its CUDA resources */
        /* bounded (PCOLL_NCCL_INIT_S): a peer that never arrives ends here, named, on every rank */
        ok = pcoll_dev_connect(h->dev, id, msg, sizeof msg) == PCOLL_OK;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, comm);
        /* agreed: every rank aborts its communicator (ncclCommAbort in dev_close); none is cached */
        if (!all_ok) pcoll_dev_mark_broken(h->dev);
    }
    if (!all_ok) {
        if (!ok)
            snprintf(pcoll_create_err, sizeof pcoll_create_err,
                     "pcoll_create: rank %d: device data path (%s): %s", me,
                     path == PCOLL_DEVPATH_NCCL ? "NCCL" : "staged", msg);
        else
            snprintf(pcoll_create_err, sizeof pcoll_create_err,
                     "pcoll_create: another rank failed to set up the "
                     "device data path (see its message)");
        return PCOLL_ERR_MPI;
    }
    return PCOLL_OK;
}

static void dev_close(struct pcoll *h, int broken) {
    if (!h->dev) return;
    if (broken) pcoll_dev_mark_broken(h->dev); /* failed: its NCCL communicator is not reused */
    pcoll_dev_close(h->dev);
    h->dev = NULL;
}

static int dev_thread_init(struct pcoll *h) { /* the engine thread works on the application's GPU */
    char m[256] = "";
    return pcoll_dev_thread_init(h->dev, m, sizeof m) ? dev_fail(h, m) : PCOLL_OK;
}

static int dev_deposit(struct pcoll *h, int slot, float *dst, const float *g, int accumulate, char *msg,
                       size_t mlen) { /* device copy (or add) on the copy stream, completed here */
    return pcoll_dev_deposit(h->dev, slot, dst, g, h->n, accumulate, msg, mlen);
}

/* NCCL path: meta_in -> send[n..), ncclAllReduce, recv[n..) -> meta_out (pcoll_dev_allreduce).
 * STAGED path: send[0..n) -> host_send, metadata into host_send[n..), MPI_Allreduce, host_recv ->
 * recv. Both run to the end: 1 with c->rm in pinned host memory. */
static int dev_start(struct pcoll *h, round_t *c, int send_slot, const float *mine) {
    size_t n = h->n;
    char m[512] = "";
    int staged = pcoll_dev_path(h->dev) == PCOLL_DEVPATH_STAGED;
    float *meta = staged ? pcoll_dev_host_send(h->dev) + n : pcoll_dev_meta_in(h->dev);
    c->t_start = pcoll_now();
    if (staged && pcoll_dev_stage_out(h->dev, send_slot, c->send, n, m, sizeof m)) return dev_fail(h, m);
    pcoll_put_meta(h, meta, mine);
    if (staged) {
        float *hr = pcoll_dev_host_recv(h->dev);
        int rc = MPI_Allreduce(pcoll_dev_host_send(h->dev), hr, (int)h->nbuf, MPI_FLOAT, MPI_SUM, h->data);
        if (rc != MPI_SUCCESS) return pcoll_mpi_fail(h, rc, "MPI_Allreduce (round data, staged from device)");
        if (pcoll_dev_stage_in(h->dev, c->recv, m, sizeof m)) return dev_fail(h, m);
        c->rm = hr + n;
    } else {
        if (pcoll_dev_allreduce(h->dev, send_slot, c->send, c->recv, n, m, sizeof m)) return dev_fail(h, m);
        c->rm = pcoll_dev_meta_out(h->dev);
    }
    c->t_end = pcoll_now();
    return 1;
}

static int dev_test(struct pcoll *h, round_t *c) { /* never called: dev_start completes the round */
    (void)h, (void)c;
    return 1;
}

static int dev_scale(struct pcoll *h, float *recv, float s) {
    char m[256] = "";
    return pcoll_dev_scale(h->dev, recv, h->n, s, m, sizeof m) ? dev_fail(h, m) : PCOLL_OK;
}

static const char *dev_path(const struct pcoll *h) {
    return h->dev && pcoll_dev_path(h->dev) == PCOLL_DEVPATH_NCCL ? "nccl" : "staged";
}

static const pcoll_datapath_t dp_device = {
    .path = dev_path,
    .name = "device",
    .blocking = 1,
    .lend = 0,
    .usable = dev_usable,
    .alloc = pcoll_dev_calloc,
    .free = pcoll_dev_free,
    .open = dev_open,
    .setup = dev_setup,
    .close = dev_close,
    .thread_init = dev_thread_init,
    .deposit = dev_deposit,
    .start = dev_start,
    .test = dev_test,
    .scale = dev_scale,
};
const pcoll_datapath_t *const pcoll_dp_device = &dp_device;
