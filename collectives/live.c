/* live.c -- liveness: each rank tells its peers that it is alive and finds a peer that is dead
 * or hung within a bounded time, whatever its engine and its application are doing (the engine
 * may be blocked in a reduction that the dead peer will never enter).
 *
 * One thread per handle, every cfg.live_period_s: sends a heartbeat (HB_LEN doubles: sequence,
 * pending, pending_s, completed, started, state) to every peer on the private communicator hb
 * (never blocking: a peer whose previous heartbeat is still in flight is skipped), reads what has
 * arrived, and decides:
 *   - a peer that reports LIVE_FAILED (its engine stopped on an error): PCOLL_ERR_PEER here,
 *     naming it, at once;
 *   - a peer silent for more than SILENT_FACTOR times the longest gap seen so far between two
 *     heartbeats of any peer (at least one period): dead or hung, PCOLL_ERR_PEER naming it. The
 *     bound is measured by the run itself: on a loaded machine the gaps grow and so does the
 *     bound. Time this thread itself was not running (it woke late) is not held against peers;
 *   - a peer that reports LIVE_LEAVING is freeing its handle (every rank joined): not watched.
 * The error is sticky; the engine may stay blocked in MPI, so pcoll_finalize then returns the
 * error without waiting for it and the process must end with MPI_Abort.
 */
#include "collectives/pcoll_impl.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A healthy peer's heartbeat gaps vary with scheduling (the periods of two threads, ranks
 * descheduled on an oversubscribed node). Silences of 20 gaps were seen from healthy ranks of
 * 2-node Slurm jobs sharing 2 cores; 100 times the worst gap seen stays well outside that, and a
 * dead peer is still found within 100 gaps (10 s at the default 0.1 s period). Dimensionless. */
#define SILENT_FACTOR 100.0

static void send_all(struct pcoll *h, int state) {
    pthread_mutex_lock(&h->mu);
    double t = pcoll_now();
    double st[HB_LEN] = {0,
                         h->pending > 0,
                         t - (h->pending > 0 ? h->t_dep : h->t_last_dep),
                         (double)h->completed,
                         (double)h->started,
                         state};
    pthread_mutex_unlock(&h->mu);
    for (int p = 0; p < h->P; p++) {
        if (p == h->me) continue;
        if (h->hb_req[p] != MPI_REQUEST_NULL) {
            int done = 0;
            MPI_Test(&h->hb_req[p], &done, MPI_STATUS_IGNORE);
            if (!done) continue; /* still in flight: the peer is slow or gone; never block */
        }
        st[0] = (double)++h->hb_sent[p];
        memcpy(&h->hb_buf[HB_LEN * p], st, sizeof st);
        if (MPI_Isend(&h->hb_buf[HB_LEN * p], HB_LEN, MPI_DOUBLE, p, 3, h->hb, &h->hb_req[p]) !=
            MPI_SUCCESS) {
            h->hb_sent[p]--;
            h->hb_req[p] = MPI_REQUEST_NULL;
        }
    }
}

/* Reads every heartbeat that has arrived; *gap_max: longest gap between two of a peer's. */
static void receive_all(struct pcoll *h, double *gap_max) {
    for (;;) {
        int flag = 0;
        MPI_Status ms;
        if (MPI_Iprobe(MPI_ANY_SOURCE, 3, h->hb, &flag, &ms) != MPI_SUCCESS || !flag) break;
        double m[HB_LEN];
        if (MPI_Recv(m, HB_LEN, MPI_DOUBLE, ms.MPI_SOURCE, 3, h->hb, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        int p = ms.MPI_SOURCE;
        h->hb_recv[p]++;
        pthread_mutex_lock(&h->mu);
        double t = pcoll_now();
        if (h->heard_at[p] > 0 && t - h->heard_at[p] > *gap_max) *gap_max = t - h->heard_at[p];
        h->heard_at[p] = t;
        pcoll_peer_t *q = &h->peers[p];
        q->pending = m[1] != 0;
        q->pending_s = m[2];
        q->completed = (uint64_t)m[3];
        q->started = (uint64_t)m[4];
        if (m[5] == LIVE_LEAVING) h->left[p] = 1;
        if (m[5] == LIVE_FAILED && !h->done && h->peer_failed < 0) {
            h->peer_failed = p;
            h->peer_dead = 1; /* its engine has left: ours may wait for it in MPI for ever */
            pthread_cond_broadcast(&h->cv_app);
        }
        pthread_mutex_unlock(&h->mu);
    }
}

/* A peer silent for longer than the bound: dead or hung (caller holds mu). */
static void check_silence(struct pcoll *h, double t, double gap_max) {
    if (h->done || h->err || h->peer_dead) return;
    double bound = SILENT_FACTOR * gap_max;
    for (int p = 0; p < h->P; p++) {
        if (p == h->me || h->left[p] || t - h->heard_at[p] <= bound) continue;
        pcoll_set_error(h, PCOLL_ERR_PEER,
                        "rank %d: rank %d has been silent for %.1f s (no "
                        "heartbeat; the longest gap seen before was %.2f s, the bound is %.0f x "
                        "that): it is dead or hung; end the job (MPI_Abort)",
                        h->me, p, t - h->heard_at[p], gap_max, SILENT_FACTOR);
        h->peer_failed = p;
        h->peer_dead = 1;
        return;
    }
}

void *pcoll_live_main(void *arg) {
    struct pcoll *h = arg;
    double period = h->cfg.live_period_s, gap_max = period;
    pthread_mutex_lock(&h->mu);
    double t_prev = pcoll_now();
    for (int p = 0; p < h->P; p++) h->heard_at[p] = t_prev; /* silence counts from creation */
    pthread_mutex_unlock(&h->mu);
    for (;;) {
        pthread_mutex_lock(&h->mu);
        int failed = h->err != 0 && !h->peer_dead, stop = h->live_stop;
        pthread_mutex_unlock(&h->mu);
        if (stop) break;
        send_all(h, failed ? LIVE_FAILED : LIVE_OK);
        receive_all(h, &gap_max);
        pthread_mutex_lock(&h->mu);
        if (!h->live_stop) pcoll_cond_wait_s(&h->cv_live, &h->mu, period);
        double t = pcoll_now(), late = t - t_prev - 2 * period;
        if (late > 0) { /* this thread was not running: do not count that against the peers */
            for (int p = 0; p < h->P; p++) h->heard_at[p] += late;
            /* and a machine that descheduled this thread for that long can do the same to a
             * peer's: its own longest wake-up gap counts as a gap seen */
            if (t - t_prev > gap_max) gap_max = t - t_prev;
        }
        t_prev = t;
        check_silence(h, t, gap_max);
        pthread_mutex_unlock(&h->mu);
    }
    return NULL;
}

/* Finalize: ends the thread and sends a last heartbeat (LIVE_LEAVING, or LIVE_FAILED if this
 * rank failed). Only after a clean end (every rank joined, so every peer is alive) does it wait
 * for the sends to complete; otherwise a dead peer could hold them for ever. */
void pcoll_live_stop(struct pcoll *h) {
    if (!h->live_started) return;
    pthread_mutex_lock(&h->mu);
    h->live_stop = 1;
    pthread_cond_signal(&h->cv_live);
    int failed = h->err != 0 && !h->peer_dead, clean = h->clean;
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->live_thread, NULL);
    h->live_started = 0;
    for (int p = 0; clean && p < h->P; p++) /* the previous heartbeat, then the last one */
        if (p != h->me && h->hb_req[p] != MPI_REQUEST_NULL) MPI_Wait(&h->hb_req[p], MPI_STATUS_IGNORE);
    send_all(h, failed ? LIVE_FAILED : LIVE_LEAVING);
    for (int p = 0; clean && p < h->P; p++)
        if (p != h->me && h->hb_req[p] != MPI_REQUEST_NULL) MPI_Wait(&h->hb_req[p], MPI_STATUS_IGNORE);
}
