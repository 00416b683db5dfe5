/* rd.c -- a round's reduction of a small buffer: recursive doubling over point-to-point messages,
 * non-blocking, for the whole communicator (sum of floats, in place).
 *
 * Accepts: buf (n floats, this rank's contribution, overwritten with the sum), tmp (n floats of
 *   scratch), the handle's private data communicator with its size P and this rank's me; every rank calls it for the same rounds in
 *   the same order with the same n (pcoll_create agrees on n and the algorithm).
 * Returns: pcoll_rd_test sets *done once buf holds the sum; MPI errors as MPI return codes.
 * Assumes: one thread drives a round at a time (the drive token); messages of consecutive rounds
 *   between two ranks are matched in order (MPI's non-overtaking rule, one tag, at most one
 *   message per ordered pair of ranks and round).
 *
 * P2 = the largest power of two <= P; ranks P2.. P-1 ("extra") first fold into rank - P2 and get
 * the result back at the end:
 *
 *     P = 6:  pre     4 -> 0, 5 -> 1          0 += 4, 1 += 5
 *             step 0  0 <-> 1, 2 <-> 3        each: buf = its sum + the partner's
 *             step 1  0 <-> 2, 1 <-> 3
 *             post    0 -> 4, 1 -> 5          4, 5 = the sum
 *
 * Both sides of an exchange add the same two partial sums, and float addition is commutative, so
 * every rank ends with the same bits (as MPI_Iallreduce does; the bits may differ from
 * MPI_Iallreduce's, whose order is its own). Why: libnbc's MPI_Iallreduce of a few hundred bytes
 * costs 2x the blocking MPI_Allreduce (a schedule built per call, progressed by MPI_Test); this
 * costs what the blocking call does (collectives/README.md). */
#include "collectives/pcoll_impl.h"

enum { RD_TAG = 11 };

/* posts the exchanges of the current phase (none for a rank that sits it out) */
static int post(pcoll_rd_t *d) {
    int P2 = d->P2, me = d->me, rc = MPI_SUCCESS;
    d->nrq = 0;
    if (d->phase == RD_PRE) {
        if (me >= P2)
            rc = MPI_Isend(d->buf, d->n, MPI_FLOAT, me - P2, RD_TAG, d->comm, &d->rq[d->nrq++]);
        else if (me < d->P - P2)
            rc = MPI_Irecv(d->tmp, d->n, MPI_FLOAT, me + P2, RD_TAG, d->comm, &d->rq[d->nrq++]);
    } else if (d->phase == RD_POST) {
        if (me >= P2)
            rc = MPI_Irecv(d->buf, d->n, MPI_FLOAT, me - P2, RD_TAG, d->comm, &d->rq[d->nrq++]);
        else if (me < d->P - P2)
            rc = MPI_Isend(d->buf, d->n, MPI_FLOAT, me + P2, RD_TAG, d->comm, &d->rq[d->nrq++]);
    } else if (me < P2) { /* doubling step d->phase: partner me ^ 2^phase */
        int peer = me ^ (1 << d->phase);
        rc = MPI_Irecv(d->tmp, d->n, MPI_FLOAT, peer, RD_TAG, d->comm, &d->rq[d->nrq++]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Isend(d->buf, d->n, MPI_FLOAT, peer, RD_TAG, d->comm, &d->rq[d->nrq++]);
    }
    return rc;
}

/* after the phase's messages: the partner's partial sum added, where one came into tmp */
static void combine(pcoll_rd_t *d) {
    int me = d->me, P2 = d->P2;
    int got = d->phase == RD_PRE ? me < d->P - P2 : d->phase >= 0 && me < P2;
    if (got)
        for (int i = 0; i < d->n; i++) d->buf[i] += d->tmp[i];
}

int pcoll_rd_start(pcoll_rd_t *d, float *buf, float *tmp, int n, MPI_Comm comm, int P, int me) {
    d->P = P;
    d->me = me;
    d->P2 = 1;
    d->steps = 0;
    while (d->P2 * 2 <= d->P) d->P2 *= 2, d->steps++;
    d->buf = buf;
    d->tmp = tmp;
    d->n = n;
    d->comm = comm;
    d->phase = RD_PRE;
    return post(d);
}

/* Progresses the reduction as far as it can go without waiting; *done = 1 once buf is the sum. */
int pcoll_rd_test(pcoll_rd_t *d, int *done) {
    *done = 0;
    for (;;) {
        /* statuses into an array, not MPI_STATUSES_IGNORE: GCC 12 takes MPICH's (MPI_Status *)1 for
         * an empty buffer (-Wstringop-overflow at this call, which -isystem does not silence) */
        MPI_Status st[2];
        int flag = 1, rc = d->nrq ? MPI_Testall(d->nrq, d->rq, &flag, st) : MPI_SUCCESS;
        if (rc != MPI_SUCCESS || !flag) return rc;
        combine(d);
        if (d->phase == RD_POST) {
            *done = 1;
            return MPI_SUCCESS;
        }
        d->phase = d->phase == RD_PRE        ? (d->steps ? 0 : RD_POST)
                   : d->phase + 1 < d->steps ? d->phase + 1
                                             : RD_POST;
        if ((rc = post(d)) != MPI_SUCCESS) return rc;
    }
}
