/* pcoll_dev.h -- libpcoll's device memory (PCOLL_MEM_DEVICE), private: the functions of
 * pcoll_nccl.cu (CUDA, NCCL; no MPI, no struct pcoll) that dp_nccl.c calls. Only in
 * build/libpcoll_cuda.a (pcoll_dev_poll and pcoll_dev_env_s: dev_wait.c, pure C, tested alone).
 *
 * Every buffer of a device handle (dep, zeros, scratch, ring) is device memory; pcoll_next hands
 * out device pointers. Data path agreed at creation: NCCL (one GPU per rank) or STAGED (ranks
 * share a GPU: NCCL forbids that; device -> pinned host, MPI_Allreduce, host -> device).
 * PCOLL_DEVICE_PATH=nccl|staged in the environment forces one. The application thread must have
 * the rank's GPU current (cudaSetDevice) when it calls pcoll_create and pcoll_deposit. Functions
 * with msg return PCOLL_OK or an error code with the reason in msg. */
#ifndef PCOLL_DEV_H
#define PCOLL_DEV_H

#include "collectives/pcoll.h"

#ifdef __cplusplus
extern "C" {
#endif
enum { PCOLL_DEVPATH_NCCL = 1, PCOLL_DEVPATH_STAGED = 2 };
typedef struct pcoll_dev pcoll_dev_t;
/* 1 with the current GPU in *device and its identity in key ("uuid/<UUID>", or "<host>/<bus id>"
 * where the device reports no UUID), else 0 with the reason in msg. */
int pcoll_dev_local(int *device, char *key, size_t klen, char *msg, size_t mlen);
size_t pcoll_dev_id_bytes(void);
int pcoll_dev_nccl_id(void *id, char *msg, size_t mlen);
/* NCCL communicators are kept per process and reused by later handles over the same ranks and
 * GPUs.  cached_id: 1 and the id of the newest idle cached communicator of rank me of P on the
 * current GPU, else 0 (dp_nccl.c reuses it when every rank has the one rank 0 names).
 * shutdown: ncclCommFinalize + ncclCommDestroy of every idle cached communicator (MPI_Finalize).
 * comm_inits: communicators initialised so far (tests). */
int pcoll_dev_cached_id(void *id, int P, int me);
void pcoll_dev_shutdown(void);
long pcoll_dev_comm_inits(void);
/* Handles of this process that hold an NCCL communicator now: a second one takes the STAGED path
 * (two communicators used by two engine threads have no order between their kernels across
 * ranks, which NCCL does not allow). */
int pcoll_dev_live_nccl(void);
pcoll_dev_t *pcoll_dev_open(int path, int P, int me, size_t nbuf, size_t nmeta, char *msg, size_t mlen);
void pcoll_dev_close(pcoll_dev_t *d);
/* Collective, NCCL path only, once every rank's pcoll_dev_open has succeeded (the caller agrees
 * on that first: NCCL initialisation waits for every rank, so a rank that failed before it must not
 * leave the others there). Non-blocking NCCL initialisation bounded by PCOLL_NCCL_INIT_S (120 s):
 * past it, or on NCCL's error, the communicator is aborted and msg names what was waited for. */
int pcoll_dev_connect(pcoll_dev_t *d, const void *id, char *msg, size_t mlen);
/* The handle failed: pcoll_dev_close aborts its NCCL communicator (whose operations may be out of
 * step between ranks) instead of keeping it for the next handle. */
void pcoll_dev_mark_broken(pcoll_dev_t *d);
int pcoll_dev_path(const pcoll_dev_t *d);
float *pcoll_dev_calloc(size_t nfloats);
void pcoll_dev_free(float *p);
float *pcoll_dev_meta_in(pcoll_dev_t *d);
float *pcoll_dev_meta_out(pcoll_dev_t *d);
float *pcoll_dev_host_send(pcoll_dev_t *d);
float *pcoll_dev_host_recv(pcoll_dev_t *d);
int pcoll_dev_thread_init(pcoll_dev_t *d, char *msg, size_t mlen);
int pcoll_dev_deposit(pcoll_dev_t *d, int slot, float *dst, const float *g, size_t n, int accumulate,
                      char *msg, size_t mlen);
int pcoll_dev_allreduce(pcoll_dev_t *d, int slot, float *send, float *recv, size_t n, char *msg, size_t mlen);
int pcoll_dev_stage_out(pcoll_dev_t *d, int slot, const float *send, size_t n, char *msg, size_t mlen);
int pcoll_dev_stage_in(pcoll_dev_t *d, float *recv, char *msg, size_t mlen);
int pcoll_dev_scale(pcoll_dev_t *d, float *recv, size_t n, float s, char *msg, size_t mlen);

/* ---- bounded waits (dev_wait.c; pure: no CUDA, no NCCL, no MPI) ------------------------------
 * pcoll_dev_poll polls one device operation until it ends: done(arg, why, n) says 1 (done), 0
 * (pending) or < 0 (failed, the reason in why); async (may be NULL) says 0 or, non-zero, an
 * asynchronous error (NCCL's ncclCommGetAsyncError, the reason in why), checked after every
 * pending done. The first `spin` polls follow each other at once, then the thread sleeps 1 us,
 * doubling up to max_sleep_s, between polls. now/sleep: NULL for CLOCK_MONOTONIC and nanosleep
 * (a test passes its own clock). Returns PCOLL_OK; PCOLL_ERR_MPI with "<what>: <why>" in msg; or,
 * timeout_s > 0 after that long pending, PCOLL_ERR_TIMEOUT with "<what>: not done after T s". */
typedef struct {
    int (*done)(void *arg, char *why, size_t n);
    int (*async)(void *arg, char *why, size_t n);
    double (*now)(void *arg);
    void (*sleep)(void *arg, double s);
    void *arg;
    double timeout_s, max_sleep_s;
    long spin;
} pcoll_dev_poll_t;
int pcoll_dev_poll(const pcoll_dev_poll_t *p, const char *what, char *msg, size_t mlen);
/* Seconds from the environment variable name (a number >= 0), else dflt. */
double pcoll_dev_env_s(const char *name, double dflt);
#ifdef __cplusplus
}
#endif
#endif
