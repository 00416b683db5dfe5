/* test_pcoll_device.c -- libpcoll invariants with DEVICE buffers (PCOLL_MEM_DEVICE), under mpirun.
 * The host test (tests/collectives/test_pcoll.c) with gradients deposited from GPU memory and
 * rounds read back from GPU memory (cudaMemcpyAsync on a non-blocking stream of this test, waited
 * for); the same run and checks, shared through tests/collectives/pcoll_invariants.h (it says each
 * in full): 1 agreement (with each step time), 2 conservation, 3 trigger rule, 4 staleness
 * (--tau), 5 liveness, 6 bitwise equal replicas; a negative or NaN step time is refused;
 * --mismatch: a clean error on every rank. The results ring holds 64 rounds without --tau.
 * Rank r uses GPU (local rank % devices), so several ranks may share one GPU: libpcoll then
 * reduces through the host (STAGED path; NCCL refuses two ranks on one GPU), else with NCCL.
 * Without a GPU on every rank: prints "SKIP: ..." and exits 77.
 * Options: --mode sync|solo|majority|quorum:Q|mixed|dynamic  --steps N  --n N  --delay-us U
 *          --seed S  --slow RANK --slow-factor F  --tau T  --newer (WAIT_NEWER + ACCUMULATE)
 *          --expect-streak-growth  --mismatch n|seed|mode|arg  --div p|fresh  (pcoll_invariants.h)
 *          and this program's own:
 *          --path nccl|staged  force one device path (sets PCOLL_DEVICE_PATH)
 *          --reuse (then a second handle: it must reuse the first one's NCCL communicator)
 * Exit 0 = all checks passed on every rank.
 */
#include "collectives/pcoll.h"
#include "tests/collectives/pcoll_invariants.h"
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long pcoll_dev_comm_inits(void); /* libpcoll_cuda.a (collectives/pcoll_impl.h): ncclCommInitRank calls */

typedef struct {
    int reuse;        /* --reuse */
    float *gd, *resh; /* [n] the gradient in GPU memory, a round's result back in host memory */
    cudaStream_t ts;  /* this test's copies: a non-blocking stream, waited for (never the legacy stream) */
} gpu_t;

static int gpu_option(pinv_t *t, void *ctx, const char *a, const char *v) {
    gpu_t *d = ctx;
    if (!strcmp(a, "--path")) {
        setenv("PCOLL_DEVICE_PATH", v, 1);
        return 2;
    }
    if (!strcmp(a, "--reuse")) return d->reuse = 1;
    return 0;
}

/* bytes dst <- src on stream st, returns when the copy is done */
static cudaError_t copy_wait(cudaStream_t st, void *dst, const void *src, size_t bytes) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st);
    return e == cudaSuccess ? cudaStreamSynchronize(st) : e;
}

/* pinv_io_t.stage: the gradient g copied into GPU memory */
static const void *gpu_stage(void *ctx, const float *g, size_t n) {
    gpu_t *d = ctx;
    if (copy_wait(d->ts, d->gd, g, n * sizeof *g) != cudaSuccess) {
        fprintf(stderr, "rank %d: cudaMemcpy failed\n", me);
        return NULL;
    }
    return d->gd;
}

/* pinv_io_t.fetch: round r's result (GPU memory) copied back to the host */
static const float *gpu_fetch(void *ctx, uint64_t r, const float *res, size_t n) {
    gpu_t *d = ctx;
    if (copy_wait(d->ts, d->resh, res, n * sizeof *d->resh) != cudaSuccess) {
        fprintf(stderr, "rank %d: result %llu: cudaMemcpy failed\n", me, (unsigned long long)r);
        return NULL;
    }
    return d->resh;
}

/* a GPU on every rank (rank r on local rank % devices), else 0: every rank skips */
static int gpu_pick(void) {
    int ndev = 0, mindev = 0, local = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess) ndev = 0;
    MPI_Allreduce(&ndev, &mindev, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (mindev < 1) {
        if (!me)
            printf("SKIP: no CUDA device (cudaGetDeviceCount: %s)\n",
                   e != cudaSuccess ? cudaGetErrorString(e) : "0 devices on some rank");
        fflush(stdout);
        return 0;
    }
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    if (cudaSetDevice(local % ndev) != cudaSuccess) {
        fprintf(stderr, "rank %d: cudaSetDevice(%d) failed\n", me, local % ndev);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return 1;
}

/* --reuse: a second handle over the same ranks (the trainer's next epoch) bootstraps no NCCL */
static void check_reuse(pinv_t *t, const gpu_t *d) {
    long before = pcoll_dev_comm_inits();
    CHECK(before <= 1, "%ld NCCL communicators created by one handle", before);
    pcoll_t *h2 = NULL;
    pcollCheck(pcoll_create(MPI_COMM_WORLD, t->n, PCOLL_MEM_DEVICE, &t->cfg, &h2));
    pcollCheck(pcoll_deposit(h2, d->gd, 0));
    pcoll_join(h2);
    const float *r2;
    uint64_t rr;
    int w2;
    while ((w2 = pcoll_wait(h2, PCOLL_WAIT_NEWER, 60.0, NULL)) == PCOLL_OK)
        while (pcoll_next(h2, &rr, &r2, &t->rec) == PCOLL_OK) {}
    CHECK(w2 == PCOLL_DONE, "second handle: wait: %s", pcoll_strerror(w2));
    CHECK(pcoll_finalize(&h2, 120.0) == PCOLL_OK, "second handle: finalize");
    CHECK(pcoll_dev_comm_inits() == before, "second handle created a new NCCL communicator (%ld -> %ld)",
          before, pcoll_dev_comm_inits());
    const char *path = getenv("PCOLL_DEVICE_PATH");
    if (path && !strcmp(path, "nccl")) /* forced NCCL: exactly one communicator, else nothing was reused */
        CHECK(pcoll_dev_comm_inits() == 1, "--path nccl: %ld NCCL communicators for two handles (want 1)",
              pcoll_dev_comm_inits());
    if (!me && before == 0)
        printf("reuse: n/a (staged path: no NCCL communicator)\n");
    else if (!me)
        printf("reuse: %ld NCCL communicator(s) for two handles\n", pcoll_dev_comm_inits());
}

int main(int argc, char **argv) {
    pinv_t t;
    pinv_init(&t, "test_pcoll_device", PCOLL_MEM_DEVICE, 64, &argc, &argv);
    if (!gpu_pick()) return pinv_exit(77);
    gpu_t d = {0};
    pinv_parse(&t, argc, argv, gpu_option, &d);
    if (t.mismatch) return pinv_exit(pinv_mismatch(&t));
    pinv_start(&t);
    d.resh = malloc(t.n * sizeof *d.resh);
    if (cudaMalloc((void **)&d.gd, t.n * sizeof *d.gd) != cudaSuccess) {
        fprintf(stderr, "rank %d: cudaMalloc failed\n", me);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (cudaStreamCreateWithFlags(&d.ts, cudaStreamNonBlocking) != cudaSuccess) {
        fprintf(stderr, "rank %d: cudaStreamCreate failed\n", me);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    pinv_io_t io = {.ctx = &d, .stage = gpu_stage, .fetch = gpu_fetch};
    pinv_run(&t, &io);
    if (d.reuse) check_reuse(&t, &d);
    int rc = pinv_verify(&t);
    cudaFree(d.gd);
    free(d.resh);
    cudaStreamDestroy(d.ts);
    return pinv_exit(rc);
}
