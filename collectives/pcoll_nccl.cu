// pcoll_nccl.cu -- libpcoll's device-memory data path (PCOLL_MEM_DEVICE), built into
// build/libpcoll_cuda.a only (called by dp_nccl.c); the host-only libpcoll.a does not contain it.
//
// Buffers (deposits, zeros, results ring) live in device memory.  Two data paths, chosen at
// pcoll_create by every rank together (dp_nccl.c):
//   NCCL   : one GPU per rank: ncclAllReduce(sum, float) of the n + META*P floats on the engine's
//            own stream (communicator bootstrapped over MPI: ncclGetUniqueId on rank 0, MPI_Bcast,
//            non-blocking ncclCommInitRankConfig, polled to a deadline).  NCCL refuses two ranks of one communicator on the same GPU
//            ("Duplicate GPU detected", since NCCL 2.5), so ...
//            The communicator outlives the handle: the process keeps it (comm cache below) and a
//            later handle over the same ranks and GPUs reuses it (the trainer creates a handle per
//            epoch; NCCL is bootstrapped once per run).  pcoll_dev_shutdown, run from MPI_Finalize,
//            closes every cached communicator with ncclCommFinalize + ncclCommDestroy.
//   STAGED : ranks sharing a GPU (or PCOLL_DEVICE_PATH=staged): device -> pinned host copy,
//            MPI_Allreduce on the engine's data communicator, pinned host -> device copy.
// The per-rank metadata slots travel in the same reduced buffer in both paths (pinned host
// copies in and out), so the record is decoded from exactly the reduced values.
// No MPI calls and no access to struct pcoll here: dp_nccl.c calls the functions below (pcoll_dev.h).
#define OMPI_SKIP_MPICXX  1 /* C API of mpi.h only */
#define MPICH_SKIP_MPICXX 1
#include "collectives/pcoll_dev.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct pcoll_dev {
    int path, device, P, me;
    size_t nbuf, nmeta;
    cudaStream_t st;  /* engine: reductions, metadata copies, scaling */
    cudaStream_t cst; /* application: deposit copies */
    cudaEvent_t dep_ev[2], done_ev;
    ncclComm_t comm;
    int cached;                   /* comm belongs to the comm cache (slot index), -1: own */
    int broken;                   /* the handle failed: its comm may be out of step, never cached again */
    int live;                     /* counted in g_live_nccl */
    float *meta_in, *meta_out;    /* pinned, nmeta floats (NCCL path) */
    float *host_send, *host_recv; /* pinned, nbuf floats (staged path) */
    double wait_s;                /* bound on one wait for the device (PCOLL_NCCL_WAIT_S) */
};

/* ---- bounded waits: pcoll_dev_poll (dev_wait.c) over these queries ---------------------------
 * Communicators are non-blocking (ncclConfig_t.blocking = 0): their initialisation and every call
 * on them may return ncclInProgress, and ncclCommGetAsyncError says when it is done or failed. */
enum { SPIN = 200 };       /* polls before the first sleep: a round ends within microseconds */
#define MAX_SLEEP_S 200e-6 /* a round's end is seen at most this late */
#define INIT_S      120.0  /* default bound on ncclCommInitRankConfig (PCOLL_NCCL_INIT_S) */
#define WAIT_S      600.0  /* default bound on one wait for a round (PCOLL_NCCL_WAIT_S) */
static void nccl_why(ncclComm_t c, ncclResult_t r, const char *call, char *why, size_t n) {
    const char *last = ncclGetLastError(c);
    snprintf(why, n, "%s: %s%s%s", call, ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
}
/* done: the communicator's pending call (initialisation, an enqueue, finalize) has ended */
static int q_comm(void *arg, char *why, size_t n) {
    ncclComm_t c = (ncclComm_t)arg;
    ncclResult_t st = ncclSuccess, r = ncclCommGetAsyncError(c, &st);
    if (r != ncclSuccess) st = r;
    if (st == ncclInProgress) return 0;
    if (st == ncclSuccess) return 1;
    nccl_why(c, st, "ncclCommGetAsyncError", why, n);
    return -1;
}
/* async: an error of the communicator (a failed peer or network) while a round waits */
static int q_async(void *arg, char *why, size_t n) {
    int d = q_comm(((pcoll_dev_t *)arg)->comm, why, n);
    return d < 0;
}
static int q_event(void *arg, char *why, size_t n) {
    cudaError_t e = cudaEventQuery(((pcoll_dev_t *)arg)->done_ev);
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) return 0;
    snprintf(why, n, "cudaEventQuery: %s", cudaGetErrorString(e));
    cudaGetLastError();
    return -1;
}
/* Waits for the communicator's pending call (bound timeout_s; 0: none). */
static int comm_wait(ncclComm_t c, double timeout_s, const char *what, char *msg, size_t mlen) {
    pcoll_dev_poll_t p = {q_comm, NULL, NULL, NULL, (void *)c, timeout_s, 1e-3, SPIN};
    return pcoll_dev_poll(&p, what, msg, mlen);
}

#define CU(call)                                                                   \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess) {                                                   \
            if (msg) snprintf(msg, mlen, "%s: %s", #call, cudaGetErrorString(e_)); \
            return PCOLL_ERR_MPI;                                                  \
        }                                                                          \
    } while (0)

__global__ static void k_acc(float *d, const float *g, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        d[i] += g[i];
}
__global__ static void k_scale(float *d, size_t n, float s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        d[i] *= s;
}
static unsigned blocks(size_t n) {
    size_t b = (n + 255) / 256;
    return (unsigned)(b > 4096 ? 4096 : (b ? b : 1));
}

extern "C" {

int pcoll_dev_local(int *device, char *key, size_t klen, char *msg, size_t mlen) {
    int cnt = 0, d = 0;
    cudaError_t e = cudaGetDeviceCount(&cnt);
    if (e != cudaSuccess || cnt < 1) {
        snprintf(msg, mlen, "no CUDA device (cudaGetDeviceCount: %s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        cudaGetLastError();
        return 0;
    }
    if ((e = cudaGetDevice(&d)) != cudaSuccess) {
        snprintf(msg, mlen, "cudaGetDevice: %s", cudaGetErrorString(e));
        return 0;
    }
    char bus[64] = "", host[128] = "";
    if ((e = cudaDeviceGetPCIBusId(bus, (int)sizeof bus, d)) != cudaSuccess) {
        snprintf(msg, mlen, "cudaDeviceGetPCIBusId(%d): %s", d, cudaGetErrorString(e));
        return 0;
    }
    /* the GPU's UUID: unique across hosts and containers (which may share a host name); the
     * host and bus id only where the device has no UUID */
    cudaDeviceProp p;
    unsigned char any = 0;
    if (cudaGetDeviceProperties(&p, d) == cudaSuccess)
        for (int i = 0; i < 16; i++) any |= (unsigned char)p.uuid.bytes[i];
    cudaGetLastError();
    if (any) {
        const unsigned char *u = (const unsigned char *)p.uuid.bytes;
        snprintf(key, klen, "uuid/%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                 u[15]);
    } else {
        gethostname(host, sizeof host - 1);
        snprintf(key, klen, "%s/%s", host, bus);
    }
    *device = d;
    return 1;
}

size_t pcoll_dev_id_bytes(void) { return sizeof(ncclUniqueId); }

int pcoll_dev_nccl_id(void *id, char *msg, size_t mlen) {
    ncclResult_t r = ncclGetUniqueId((ncclUniqueId *)id);
    if (r != ncclSuccess) {
        snprintf(msg, mlen, "ncclGetUniqueId: %s", ncclGetErrorString(r));
        return PCOLL_ERR_MPI;
    }
    return PCOLL_OK;
}

/* zeroed on this thread's per-thread stream and waited for: done before any stream uses it */
float *pcoll_dev_calloc(size_t nfloats) {
    float *p = NULL;
    if (cudaMalloc((void **)&p, nfloats * sizeof(float)) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (cudaMemsetAsync(p, 0, nfloats * sizeof(float), cudaStreamPerThread) != cudaSuccess ||
        cudaStreamSynchronize(cudaStreamPerThread) != cudaSuccess) {
        cudaFree(p);
        cudaGetLastError();
        return NULL;
    }
    return p;
}

/* ---- comm cache: the process's NCCL communicators, by unique id, ranks and GPU ---------------- */
enum { COMM_CACHE = 8 };
static struct {
    ncclComm_t comm;
    ncclUniqueId id;
    int P, me, device, busy, used; /* used: creation order, newest highest */
} g_comm[COMM_CACHE];
static int g_comm_seq;
static long g_comm_inits;
static int g_live_nccl; /* handles of this process with an NCCL communicator now */
static pthread_mutex_t g_comm_mu = PTHREAD_MUTEX_INITIALIZER;

static void close_comm(ncclComm_t c) { /* non-blocking: finalize ends once its operations are flushed */
    char m[256];
    ncclResult_t r = ncclCommFinalize(c);
    if ((r != ncclSuccess && r != ncclInProgress) || comm_wait(c, WAIT_S, "ncclCommFinalize", m, sizeof m)) {
        ncclCommAbort(c);
        return;
    }
    ncclCommDestroy(c);
}

int pcoll_dev_cached_id(void *id, int P, int me) {
    int dev = -1, best = -1;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    pthread_mutex_lock(&g_comm_mu);
    for (int i = 0; i < COMM_CACHE; i++)
        if (g_comm[i].comm && !g_comm[i].busy && g_comm[i].P == P && g_comm[i].me == me &&
            g_comm[i].device == dev && (best < 0 || g_comm[i].used > g_comm[best].used))
            best = i;
    if (best >= 0) memcpy(id, &g_comm[best].id, sizeof(ncclUniqueId));
    pthread_mutex_unlock(&g_comm_mu);
    return best >= 0;
}

int pcoll_dev_live_nccl(void) {
    pthread_mutex_lock(&g_comm_mu);
    int n = g_live_nccl;
    pthread_mutex_unlock(&g_comm_mu);
    return n;
}
long pcoll_dev_comm_inits(void) {
    pthread_mutex_lock(&g_comm_mu);
    long n = g_comm_inits;
    pthread_mutex_unlock(&g_comm_mu);
    return n;
}

void pcoll_dev_shutdown(void) {
    pthread_mutex_lock(&g_comm_mu);
    for (int i = 0; i < COMM_CACHE; i++)
        if (g_comm[i].comm && !g_comm[i].busy) { /* a busy one belongs to a handle never freed: left alone */
            int dev = 0;
            cudaGetDevice(&dev);
            cudaSetDevice(g_comm[i].device);
            close_comm(g_comm[i].comm);
            cudaSetDevice(dev);
            memset(&g_comm[i], 0, sizeof g_comm[i]);
        }
    pthread_mutex_unlock(&g_comm_mu);
}

/* d->comm for rank me of P with unique id uid: the cached communicator of that id (collectively
 * agreed by dp_nccl.c) or a new, non-blocking one, kept in the cache when it has room. Its
 * initialisation is bounded by PCOLL_NCCL_INIT_S (120 s): past that, or on NCCL's error, it is
 * aborted here (ncclCommAbort) and the reason is in msg. */
static int take_comm(pcoll_dev_t *d, const ncclUniqueId *uid, char *msg, size_t mlen) {
    pthread_mutex_lock(&g_comm_mu);
    for (int i = 0; i < COMM_CACHE; i++)
        if (g_comm[i].comm && !g_comm[i].busy && g_comm[i].P == d->P && g_comm[i].me == d->me &&
            g_comm[i].device == d->device && !memcmp(&g_comm[i].id, uid, sizeof *uid)) {
            g_comm[i].busy = 1;
            d->comm = g_comm[i].comm;
            d->cached = i;
            pthread_mutex_unlock(&g_comm_mu);
            return PCOLL_OK;
        }
    pthread_mutex_unlock(&g_comm_mu);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    char what[160], why[400];
    snprintf(what, sizeof what,
             "ncclCommInitRankConfig (rank %d of %d, device %d; waited for the NCCL bootstrap and "
             "connection of all %d ranks)",
             d->me, d->P, d->device, d->P);
    ncclResult_t r = ncclCommInitRankConfig(&d->comm, d->P, *uid, d->me, &cfg);
    int rc = PCOLL_OK;
    if (r != ncclSuccess && r != ncclInProgress) {
        nccl_why(d->comm, r, "ncclCommInitRankConfig", why, sizeof why);
        snprintf(msg, mlen, "%s: %s", what, why);
        rc = PCOLL_ERR_MPI;
    } else {
        rc = comm_wait(d->comm, pcoll_dev_env_s("PCOLL_NCCL_INIT_S", INIT_S), what, msg, mlen);
    }
    if (rc != PCOLL_OK) {
        if (d->comm) ncclCommAbort(d->comm);
        d->comm = NULL;
        return rc;
    }
    pthread_mutex_lock(&g_comm_mu);
    g_comm_inits++;
    for (int i = 0; i < COMM_CACHE; i++)
        if (!g_comm[i].comm) {
            g_comm[i].comm = d->comm;
            g_comm[i].id = *uid;
            g_comm[i].P = d->P;
            g_comm[i].me = d->me;
            g_comm[i].device = d->device;
            g_comm[i].busy = 1;
            g_comm[i].used = ++g_comm_seq;
            d->cached = i;
            break;
        }
    pthread_mutex_unlock(&g_comm_mu);
    return PCOLL_OK;
}
void pcoll_dev_free(float *p) {
    if (p) cudaFree(p);
}

void pcoll_dev_close(pcoll_dev_t *d) {
    if (!d) return;
    if (d->live) {
        pthread_mutex_lock(&g_comm_mu);
        g_live_nccl--;
        pthread_mutex_unlock(&g_comm_mu);
    }
    cudaSetDevice(d->device);
    if (d->comm && d->broken) { /* abort first: a reduction stuck on a failed peer must not block the sync */
        if (d->cached >= 0) {
            pthread_mutex_lock(&g_comm_mu);
            memset(&g_comm[d->cached], 0, sizeof g_comm[d->cached]);
            pthread_mutex_unlock(&g_comm_mu);
        }
        ncclCommAbort(d->comm);
        d->comm = NULL;
    }
    if (d->st) cudaStreamSynchronize(d->st);
    if (d->comm && d->cached >= 0) { /* back to the cache for the next handle over these ranks */
        pthread_mutex_lock(&g_comm_mu);
        g_comm[d->cached].busy = 0;
        pthread_mutex_unlock(&g_comm_mu);
    } else if (d->comm) {
        close_comm(d->comm);
    }
    if (d->st) cudaStreamDestroy(d->st);
    if (d->cst) cudaStreamDestroy(d->cst);
    for (int i = 0; i < 2; i++)
        if (d->dep_ev[i]) cudaEventDestroy(d->dep_ev[i]);
    if (d->done_ev) cudaEventDestroy(d->done_ev);
    if (d->meta_in) cudaFreeHost(d->meta_in);
    if (d->meta_out) cudaFreeHost(d->meta_out);
    if (d->host_send) cudaFreeHost(d->host_send);
    if (d->host_recv) cudaFreeHost(d->host_recv);
    free(d);
}

/* The device data path's CUDA resources (streams, events, pinned buffers); local. */
pcoll_dev_t *pcoll_dev_open(int path, int P, int me, size_t nbuf, size_t nmeta, char *msg, size_t mlen) {
    pcoll_dev_t *d = (pcoll_dev_t *)calloc(1, sizeof *d);
    if (!d) {
        snprintf(msg, mlen, "out of memory");
        return NULL;
    }
    d->path = path;
    d->P = P;
    d->me = me;
    d->nbuf = nbuf;
    d->nmeta = nmeta;
    d->cached = -1;
    d->wait_s = pcoll_dev_env_s("PCOLL_NCCL_WAIT_S", WAIT_S);
    cudaError_t e = cudaGetDevice(&d->device);
    const unsigned evf = cudaEventBlockingSync | cudaEventDisableTiming; /* waits sleep: no spinning */
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&d->st, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&d->cst, cudaStreamNonBlocking);
    for (int i = 0; i < 2 && e == cudaSuccess; i++) e = cudaEventCreateWithFlags(&d->dep_ev[i], evf);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&d->done_ev, evf);
    if (e == cudaSuccess) e = cudaMallocHost((void **)&d->meta_in, nmeta * sizeof(float));
    if (e == cudaSuccess) e = cudaMallocHost((void **)&d->meta_out, nmeta * sizeof(float));
    if (e == cudaSuccess && path == PCOLL_DEVPATH_STAGED)
        e = cudaMallocHost((void **)&d->host_send, nbuf * sizeof(float));
    if (e == cudaSuccess && path == PCOLL_DEVPATH_STAGED)
        e = cudaMallocHost((void **)&d->host_recv, nbuf * sizeof(float));
    if (e != cudaSuccess) {
        snprintf(msg, mlen, "CUDA setup of the device data path: %s", cudaGetErrorString(e));
        cudaGetLastError();
        pcoll_dev_close(d);
        return NULL;
    }
    return d;
}

/* Collective, NCCL path (see pcoll_impl.h). */
int pcoll_dev_connect(pcoll_dev_t *d, const void *id, char *msg, size_t mlen) {
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    int rc = take_comm(d, &uid, msg, mlen);
    if (rc != PCOLL_OK) return rc;
    pthread_mutex_lock(&g_comm_mu);
    g_live_nccl++;
    d->live = 1;
    pthread_mutex_unlock(&g_comm_mu);
    return PCOLL_OK;
}
void pcoll_dev_mark_broken(pcoll_dev_t *d) {
    if (d) d->broken = 1;
}

int pcoll_dev_path(const pcoll_dev_t *d) { return d ? d->path : 0; }
float *pcoll_dev_meta_in(pcoll_dev_t *d) { return d->meta_in; }
float *pcoll_dev_meta_out(pcoll_dev_t *d) { return d->meta_out; }
float *pcoll_dev_host_send(pcoll_dev_t *d) { return d->host_send; }
float *pcoll_dev_host_recv(pcoll_dev_t *d) { return d->host_recv; }

int pcoll_dev_thread_init(pcoll_dev_t *d, char *msg, size_t mlen) {
    CU(cudaSetDevice(d->device));
    return PCOLL_OK;
}

/* Application thread: dst (device, pending contribution slot `slot`) = g (or += g), on the copy
 * stream; records dep_ev[slot] (the engine waits on it before reading dst) and returns once the
 * copy is done, so the caller may reuse g at once (the contract of pcoll_deposit).  g may be
 * device or host memory (cudaMemcpyDefault; unified addressing). */
static int deposit_on(pcoll_dev_t *d, int slot, float *dst, const float *g, size_t n, int accumulate,
                      char *msg, size_t mlen) {
    if (accumulate) {
        cudaPointerAttributes a;
        memset(&a, 0, sizeof a);
        CU(cudaPointerGetAttributes(&a, g));
        if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) {
            snprintf(msg, mlen, "pcoll_deposit(PCOLL_ACCUMULATE) on a device handle needs a device pointer");
            return PCOLL_ERR_ARG;
        }
        k_acc<<<blocks(n), 256, 0, d->cst>>>(dst, g, n);
        CU(cudaGetLastError());
    } else {
        CU(cudaMemcpyAsync(dst, g, n * sizeof(float), cudaMemcpyDefault, d->cst));
    }
    CU(cudaEventRecord(d->dep_ev[slot], d->cst));
    CU(cudaEventSynchronize(d->dep_ev[slot]));
    return PCOLL_OK;
}

int pcoll_dev_deposit(pcoll_dev_t *d, int slot, float *dst, const float *g, size_t n, int accumulate,
                      char *msg, size_t mlen) {
    int cur = -1;
    CU(cudaGetDevice(&cur));
    if (cur != d->device) CU(cudaSetDevice(d->device)); /* a kernel launches only on its stream's device */
    int rc = deposit_on(d, slot, dst, g, n, accumulate, msg, mlen);
    if (cur != d->device) cudaSetDevice(cur);
    return rc;
}

/* Waits for the engine's stream, polling its event and (NCCL path) the communicator's
 * asynchronous error, at most d->wait_s: a failed peer or network is NCCL's error, named. */
static int wait_stream(pcoll_dev_t *d, char *msg, size_t mlen) {
    CU(cudaEventRecord(d->done_ev, d->st));
    pcoll_dev_poll_t p = {q_event, d->comm ? q_async : NULL, NULL, NULL, d, d->wait_s, MAX_SLEEP_S, SPIN};
    return pcoll_dev_poll(&p, "device data path: waiting for the round's stream", msg, mlen);
}

/* Engine, NCCL path: meta_in -> send[n..), allreduce send -> recv (nbuf floats), recv[n..) ->
 * meta_out; returns when all is done.  slot >= 0: send is deposit slot `slot` (wait for its copy). */
int pcoll_dev_allreduce(pcoll_dev_t *d, int slot, float *send, float *recv, size_t n, char *msg,
                        size_t mlen) {
    if (slot >= 0) CU(cudaStreamWaitEvent(d->st, d->dep_ev[slot], 0));
    CU(cudaMemcpyAsync(send + n, d->meta_in, d->nmeta * sizeof(float), cudaMemcpyHostToDevice, d->st));
    ncclResult_t r = ncclAllReduce(send, recv, d->nbuf, ncclFloat, ncclSum, d->comm, d->st);
    char what[64];
    snprintf(what, sizeof what, "ncclAllReduce (%zu floats)", d->nbuf);
    if (r != ncclSuccess && r != ncclInProgress) {
        char why[400];
        nccl_why(d->comm, r, "ncclAllReduce", why, sizeof why);
        snprintf(msg, mlen, "%s: %s", what, why);
        return PCOLL_ERR_MPI;
    }
    if (r == ncclInProgress && comm_wait(d->comm, d->wait_s, what, msg, mlen)) return PCOLL_ERR_MPI;
    CU(cudaMemcpyAsync(d->meta_out, recv + n, d->nmeta * sizeof(float), cudaMemcpyDeviceToHost, d->st));
    return wait_stream(d, msg, mlen);
}

/* Engine, staged path: send[0..n) -> host_send[0..n) (the caller fills host_send[n..) with the
 * metadata and runs MPI_Allreduce(host_send -> host_recv)), then host_recv -> recv. */
int pcoll_dev_stage_out(pcoll_dev_t *d, int slot, const float *send, size_t n, char *msg, size_t mlen) {
    if (slot >= 0) CU(cudaStreamWaitEvent(d->st, d->dep_ev[slot], 0));
    CU(cudaMemcpyAsync(d->host_send, send, n * sizeof(float), cudaMemcpyDeviceToHost, d->st));
    return wait_stream(d, msg, mlen);
}
int pcoll_dev_stage_in(pcoll_dev_t *d, float *recv, char *msg, size_t mlen) {
    CU(cudaMemcpyAsync(recv, d->host_recv, d->nbuf * sizeof(float), cudaMemcpyHostToDevice, d->st));
    return wait_stream(d, msg, mlen);
}

/* Engine: recv[0..n) *= s (division by P or by the number of fresh deposits). */
int pcoll_dev_scale(pcoll_dev_t *d, float *recv, size_t n, float s, char *msg, size_t mlen) {
    k_scale<<<blocks(n), 256, 0, d->st>>>(recv, n, s);
    CU(cudaGetLastError());
    return wait_stream(d, msg, mlen);
}

} // extern "C"
