/* tests/jobs/threads_stall.c: does this MPI hold messages back when several threads call it at once?
 *
 *   make build-all  (builds build/bench/threads_stall; or: mpicc -O2 -pthread tests/jobs/threads_stall.c)
 *   srun -N 2 -n 4 --ntasks-per-node=2 build/bench/threads_stall [THREADS (3)] [BARRIERS (400)]
 *
 * Each rank starts THREADS threads, each on its own MPI_Comm_dup of MPI_COMM_WORLD, that send an
 * 8-double message to every peer every 5 ms (MPI_Isend, the next one once the last completed) and
 * receive what has arrived (MPI_Iprobe + MPI_Recv); the main thread meanwhile runs BARRIERS
 * MPI_Barrier calls, 1-4 ms apart. It prints, per rank, the longest barrier and the longest gap
 * between two messages from one peer on any thread. This is libpcoll's pattern (engine, liveness
 * and application threads) without libpcoll: a stall here is the MPI library's
 * (docs/DESIGN.md#11-mpi-libraries). Needs MPI_THREAD_MULTIPLE. Not part of make test. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int P, me;
static int stop; /* set by the main thread, read by the pingers (__atomic) */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct {
    MPI_Comm c;
    double gap;        /* longest gap between two messages from one peer */
    int *sent, *recvd; /* per peer: messages sent to it, received from it */
} pinger_t;

static void *ping(void *arg) {
    pinger_t *t = arg;
    double *last = malloc((size_t)P * sizeof *last), out[8] = {0}, in[8], next = now();
    MPI_Request *rq = malloc((size_t)P * sizeof *rq);
    for (int p = 0; p < P; p++) last[p] = now(), rq[p] = MPI_REQUEST_NULL;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        if (now() >= next) {
            next += 0.005;
            for (int p = 0; p < P; p++) {
                int done = 1;
                if (p == me) continue;
                if (rq[p] != MPI_REQUEST_NULL) MPI_Test(&rq[p], &done, MPI_STATUS_IGNORE);
                if (done) MPI_Isend(out, 8, MPI_DOUBLE, p, 1, t->c, &rq[p]), t->sent[p]++;
            }
        }
        for (int flag = 1; flag;) {
            MPI_Status st;
            MPI_Iprobe(MPI_ANY_SOURCE, 1, t->c, &flag, &st);
            if (!flag) break;
            MPI_Recv(in, 8, MPI_DOUBLE, st.MPI_SOURCE, 1, t->c, MPI_STATUS_IGNORE);
            t->recvd[st.MPI_SOURCE]++;
            double x = now();
            if (x - last[st.MPI_SOURCE] > t->gap) t->gap = x - last[st.MPI_SOURCE];
            last[st.MPI_SOURCE] = x;
        }
        usleep(200);
    }
    for (int p = 0; p < P; p++)
        if (rq[p] != MPI_REQUEST_NULL) MPI_Wait(&rq[p], MPI_STATUS_IGNORE);
    free(last), free(rq);
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (me == 0) fprintf(stderr, "threads_stall: this MPI does not provide MPI_THREAD_MULTIPLE\n");
        MPI_Finalize();
        return 1;
    }
    int K = argc > 1 ? atoi(argv[1]) : 3, nb = argc > 2 ? atoi(argv[2]) : 400;
    if (K < 0 || K > 16 || nb < 1) {
        if (me == 0) fprintf(stderr, "usage: threads_stall [THREADS 0-16] [BARRIERS >= 1]\n");
        MPI_Finalize();
        return 2;
    }
    pinger_t th[16];
    pthread_t id[16];
    for (int k = 0; k < K; k++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &th[k].c);
        th[k].gap = 0;
        th[k].sent = calloc((size_t)P, sizeof(int));
        th[k].recvd = calloc((size_t)P, sizeof(int));
    }
    for (int k = 0; k < K; k++) pthread_create(&id[k], NULL, ping, &th[k]);
    double bmax = 0;
    for (int i = 0; i < nb; i++) {
        double a = now();
        MPI_Barrier(MPI_COMM_WORLD);
        double d = now() - a;
        if (d > bmax) bmax = d;
        usleep(1000 * (unsigned)(me % 4 + 1));
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    double gap = 0;
    int *expect = calloc((size_t)P, sizeof *expect);
    for (int k = 0; k < K; k++) { /* every message sent is received before MPI_Finalize */
        pthread_join(id[k], NULL);
        if (th[k].gap > gap) gap = th[k].gap;
        MPI_Alltoall(th[k].sent, 1, MPI_INT, expect, 1, MPI_INT, th[k].c);
        for (int p = 0; p < P; p++)
            for (double in[8]; th[k].recvd[p] < expect[p]; th[k].recvd[p]++)
                MPI_Recv(in, 8, MPI_DOUBLE, p, 1, th[k].c, MPI_STATUS_IGNORE);
    }
    free(expect);
    MPI_Barrier(MPI_COMM_WORLD);
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    printf("rank %d (%s): %d threads, %d barriers, longest barrier %.3f s, longest gap %.3f s\n", me, host, K,
           nb, bmax, gap);
    for (int k = 0; k < K; k++) MPI_Comm_free(&th[k].c), free(th[k].sent), free(th[k].recvd);
    MPI_Finalize();
    return 0;
}
