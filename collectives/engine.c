/* engine.c -- the rounds: a state machine (pcoll_drive) and the progress engine thread.
 *
 * For r = 0, 1, 2, ... until every rank has joined, round r goes through the stages of round_t:
 *   1. plan:       wait for the horizon (controller mode), fix the rule of r, plan it (trigger.c)
 *   2. activate:   PATH_SYNC: wait until ready; PATH_ANY: a ready rank floods ACT(r) over a
 *                  binomial tree; PATH_COORD: counts up the tree (READY direct from wait-set
 *                  members) -> coordinator -> ACT(r) down the tree. Stale messages absorbed.
 *   3. start:      take the pending deposit (fresh) or zeros; the handle's data path (h->dp,
 *                  pcoll_impl.h) writes this rank's metadata slots and starts the sum of the
 *                  n + META*P floats into ring slot r % K (host memory: MPI_Iallreduce or
 *                  recursive doubling, dp_host.c; device memory: NCCL, blocking, dp_nccl.c)
 *   4. reduce:     the data path's test until the reduction is complete
 *   5. publish:    decode F_r, flags, staleness, step times; update streaks and the active set;
 *                  divide; store the record; wake the application.
 * pcoll_drive takes one step without ever blocking on other ranks; the thread holding the drive
 * token calls it (pcoll_impl.h). The engine thread drives whenever nobody else does, so rounds
 * progress while the application computes. An application thread blocked in pcoll_wait (host
 * memory) takes the token instead of sleeping (pcoll.c): it drives the round it waits for itself,
 * so a round costs no thread hand-off (no wake-up of the engine by the deposit, none of the
 * application by the engine), and since the reduction is non-blocking it still returns on its
 * timeout or a peer's failure, leaving the reduction to the engine. Every rank uses the
 * non-blocking reduction (blocking and non-blocking collectives do not match in MPI).
 * Idle engines do not spin for long: spin_us of polling with sched_yield, then sleeps that double
 * up to poll_max_us (on a condition variable, so a local event wakes the engine at once).
 */
#include "collectives/pcoll_impl.h"
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The longest the engine sleeps when only a local event (which signals it) or an application
 * thread's drive can move the round on: a safety net against a missed or withheld signal (e.g. a
 * PCOLL_WAIT_NEXT deposit without its pcoll_wait), never a timing the rounds rely on. */
#define SAFETY_NET_S 0.05

static void timed_wait(struct pcoll *h, double sec) { /* the engine; caller holds mu */
    pcoll_cond_wait_s(&h->cv_eng, &h->mu, sec);
    h->engine_wakes++;
}

/* Control messages are two uint64 (the round, a value) and go eagerly: MPI_Send returns at once. */
static int send_ctl(struct pcoll *h, int dst, int tag, uint64_t r, uint64_t val) {
    uint64_t m[2] = {r, val};
    int rc = MPI_Send(m, 2, MPI_UINT64_T, dst, tag, h->ctl);
    if (rc != MPI_SUCCESS) return pcoll_mpi_fail(h, rc, "MPI_Send (activation)");
    h->sent_to[dst]++;
    return PCOLL_OK;
}

/* Receives every control message that has arrived. ACT(r): *act_from = its sender. READY(r):
 * noted per sender (wait-set members, direct to the coordinator). COUNT(r, c): a child's count
 * of ready ranks in its subtree. Messages of earlier rounds are duplicates: absorbed. None can be
 * of a later round: a peer finishes round r only after this rank has entered its reduction. */
static int drain_ctl(struct pcoll *h, uint64_t r, int *act_from) {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        int rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, h->ctl, &flag, &st);
        if (rc != MPI_SUCCESS) return pcoll_mpi_fail(h, rc, "MPI_Iprobe");
        if (!flag) return PCOLL_OK;
        uint64_t m[2] = {0, 0};
        int src = st.MPI_SOURCE;
        rc = MPI_Recv(m, 2, MPI_UINT64_T, src, st.MPI_TAG, h->ctl, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return pcoll_mpi_fail(h, rc, "MPI_Recv (activation)");
        h->recv_from[src]++;
        if (m[0] > r) {
            pthread_mutex_lock(&h->mu);
            pcoll_set_error(h, PCOLL_ERR_STATE,
                            "rank %d: control message (tag %d) for round %llu "
                            "from rank %d while at round %llu (protocol error)",
                            h->me, st.MPI_TAG, (unsigned long long)m[0], src, (unsigned long long)r);
            pthread_mutex_unlock(&h->mu);
            return PCOLL_ERR_STATE;
        }
        if (m[0] < r) continue;
        if (st.MPI_TAG == TAG_ACT && *act_from == NOT_ACTIVATED)
            *act_from = src;
        else if (st.MPI_TAG == TAG_READY)
            h->ready_round[src] = r + 1;
        else if (st.MPI_TAG == TAG_COUNT) {
            if (h->cnt_round[src] != r + 1 || m[1] > h->cnt_val[src]) h->cnt_val[src] = m[1];
            h->cnt_round[src] = r + 1;
        }
    }
}

/* Binomial tree over all P ranks rooted at root, in relative ranks v = (p - root) mod P: the
 * parent of v is v without its highest set bit, the children of v are v + 2^k for every 2^k > v
 * with v + 2^k < P. Depth and degree <= ceil(log2 P). */
static int tree_parent(int P, int root, int p) {
    int v = (p - root + P) % P, hb = 1;
    if (v == 0) return -1;
    while (hb <= v / 2) hb *= 2;
    return (v - hb + root) % P;
}
static int tree_children(int P, int root, int p, int *out) {
    int v = (p - root + P) % P, n = 0;
    long k = 1;
    while (k <= v) k *= 2;
    for (; v + k < P; k *= 2) out[n++] = (int)((v + k + root) % P);
    return n;
}

/* Sends ACT(r) along the tree edges of this rank except the one it came from (from: a rank, or
 * -1 when this rank activates the round itself): to the children, and with up also to the
 * parent. With up (PATH_ANY, any rank may start) this floods the fixed tree: every rank that is
 * activated passes it to all its other neighbours before it enters the reduction, so every rank
 * is reached whichever ranks start, each sends at most degree+1 messages and receives at most
 * as many (duplicates are absorbed). Without up (PATH_COORD) it is a broadcast from the root. */
static int flood(struct pcoll *h, uint64_t r, int root, int from, int up) {
    int kids[32], nk = tree_children(h->P, root, h->me, kids), rc;
    for (int i = 0; i < nk; i++)
        if (kids[i] != from && (rc = send_ctl(h, kids[i], TAG_ACT, r, 0))) return rc;
    int par = tree_parent(h->P, root, h->me);
    if (up && par >= 0 && par != from && (rc = send_ctl(h, par, TAG_ACT, r, 0))) return rc;
    return PCOLL_OK;
}

/* Ready ranks in this rank's subtree: itself and what its children last reported. */
static uint64_t subtree_ready(const struct pcoll *h, uint64_t r, int root, int self_ready) {
    int kids[32], nk = tree_children(h->P, root, h->me, kids);
    uint64_t c = (uint64_t)self_ready;
    for (int i = 0; i < nk; i++)
        if (h->cnt_round[kids[i]] == r + 1) c += h->cnt_val[kids[i]];
    return c;
}

/* Stage ST_ACT, one pass (trigger.c says how round c->r is activated): 1 once it is activated
 * at this rank, 0 not yet (*local = 1: only a local event -- a deposit, join, error -- can change
 * that; 0: messages from other ranks can), < 0 an error. What a pass has sent is kept in c. */
static int activate_pass(struct pcoll *h, round_t *c, int *local) {
    plan_t *pl = &h->plan;
    uint64_t r = c->r;
    int me_active = !h->joined[h->me], rc;
    int root = pl->path == PATH_ANY ? (int)(r % (uint64_t)h->P) : pl->coord;
    pthread_mutex_lock(&h->mu);
    int ready = h->pending > 0 || h->join_req || h->err; /* a failed rank only passes zeros along */
    pthread_mutex_unlock(&h->mu);
    int self_ready = me_active && ready;
    *local = pl->path == PATH_SYNC;
    if (pl->path == PATH_SYNC) return !me_active || ready;
    /* A ready rank activates an any-rank round at once, without first receiving what has arrived
     * (one MPI poll less on the round's path), if it has drained in this round or the one before,
     * so at most two rounds of messages wait; an ACT(r) a neighbour already sent is absorbed by
     * the next drain (and that neighbour gets one back, absorbed likewise). */
    if (pl->path == PATH_ANY && self_ready && h->drained + 1 >= r + 1)
        return (rc = flood(h, r, root, -1, 1)) ? rc : 1;
    if ((rc = drain_ctl(h, r, &c->act_from))) return rc;
    h->drained = r + 1;
    if (c->act_from != NOT_ACTIVATED)
        return (rc = flood(h, r, root, c->act_from, pl->path == PATH_ANY)) ? rc : 1;
    if (pl->path == PATH_ANY && self_ready) return (rc = flood(h, r, root, -1, 1)) ? rc : 1;
    if (pl->path == PATH_COORD) {
        uint64_t cnt = pl->count_up ? subtree_ready(h, r, root, self_ready) : 0;
        if (pl->coord == h->me && plan_satisfied(h, pl, r, self_ready, cnt))
            return (rc = flood(h, r, root, -1, 0)) ? rc : 1;
        if (pl->need_ready && ready && !c->sent_ready) {
            if ((rc = send_ctl(h, pl->coord, TAG_READY, r, 0))) return rc;
            c->sent_ready = 1;
        }
        if (pl->count_up && pl->coord != h->me && cnt > c->sent_cnt) {
            if ((rc = send_ctl(h, tree_parent(h->P, root, h->me), TAG_COUNT, r, cnt))) return rc;
            c->sent_cnt = cnt;
        }
    }
    return 0;
}

/* Doubles the results ring, keeping round q at slot q % K for the rounds the application has
 * not read yet ([lent, r)); the other slots (and their buffers) fill the new places. Caller
 * holds mu. */
static int ring_grow(struct pcoll *h, uint64_t lent, uint64_t r) {
    int K = h->K, K2 = 2 * K;
    ring_slot_t *nr = calloc((size_t)K2, sizeof *nr);
    uint8_t *placed = calloc((size_t)K2, 1), *moved = calloc((size_t)K, 1);
    int rc = nr && placed && moved ? PCOLL_OK : PCOLL_ERR_NOMEM;
    for (int i = 0; !rc && i < K2; i++) rc = pcoll_record_init(&nr[i].rec, h->P);
    if (!rc) {
        for (uint64_t q = lent; q < r; q++) {
            ring_slot_t *o = &h->ring[q % (uint64_t)K], *d = &nr[q % (uint64_t)K2];
            pcoll_record_free(&d->rec);
            *d = *o;
            placed[q % (uint64_t)K2] = 1;
            moved[q % (uint64_t)K] = 1;
        }
        int j = 0;
        for (int i = 0; i < K; i++) {
            if (moved[i]) continue;
            while (placed[j]) j++;
            pcoll_record_free(&nr[j].rec);
            nr[j] = h->ring[i];
            placed[j] = 1;
        }
        free(h->ring);
        h->ring = nr;
        h->K = K2;
        nr = NULL;
    }
    if (nr)
        for (int i = 0; i < K2; i++) pcoll_record_free(&nr[i].rec);
    free(nr);
    free(placed);
    free(moved);
    return rc;
}

/* The ring slot of round r (caller holds mu). Rounds [lent, r) are completed and not yet read
 * by the application; if slot r % K is one of them, this rank is held back: 0, and the round
 * waits for pcoll_next (which wakes the engine), so the other ranks wait for it in round r's
 * reduction (backpressure on the whole job; never a failure). The one exception: while an
 * application thread is blocked in pcoll_wait(CONSUMED) it cannot call pcoll_next before its
 * deposit's round completes, so the ring doubles instead (at most one more round per such
 * wait). The slot takes the buffer of the round the application released last (lent - 1; its
 * slot gets the other buffer, free too): in steady state the rounds reuse two or three buffers
 * that are in cache and mapped, instead of cycling through K cold ones, and only those are
 * allocated. 1: *out is the slot, or NULL when results are dropped (finalize, or this rank
 * failed) or memory ran out (then the error is set). */
static int ring_slot(struct pcoll *h, uint64_t r, ring_slot_t **out) {
    *out = NULL;
    uint64_t lent;
    for (;;) {
        if (h->drop || h->err) return 1;
        lent = h->handed ? h->handed - 1 : 0;
        if (r - lent < (uint64_t)h->K) break;
        if (!h->waiting_consumed) return 0;
        if (ring_grow(h, lent, r)) {
            pcoll_set_error(h, PCOLL_ERR_NOMEM, "rank %d: out of memory growing the results ring to %d slots",
                            h->me, 2 * h->K);
            return 1;
        }
    }
    ring_slot_t *s = &h->ring[r % (uint64_t)h->K];
    if (lent > 0) { /* the last buffer the application released: still in cache, its pages mapped */
        ring_slot_t *f = &h->ring[(lent - 1) % (uint64_t)h->K];
        if (f != s && f->buf) {
            float *b = s->buf;
            s->buf = f->buf;
            f->buf = b;
        }
    }
    if (!s->buf) {
        s->buf = h->dp->alloc(h->nbuf);
        h->result_buffers += s->buf != NULL;
        if (!s->buf) {
            pcoll_set_error(h, PCOLL_ERR_NOMEM,
                            "rank %d: out of memory for a result buffer of "
                            "%zu floats (ring of %d)",
                            h->me, h->nbuf, h->K);
            return 1;
        }
    }
    *out = s;
    return 1;
}

/* Stage ST_START: contribute (the pending deposit, or zeros) and start the reduction. 1: started
 * (host memory: the MPI_Iallreduce is in c->req, or the recursive doubling in c->rd; device
 * memory: the round ran to its end), 0:
 * held back by the results ring, < 0 an error. */
static int start_round(struct pcoll *h, round_t *c) {
    uint64_t r = c->r;
    uint32_t stale = 0;
    float cost = 0, step = 0, loss = 0, samples = 0;
    int fresh_cnt = 0;
    c->t_dep = 0;
    pthread_mutex_lock(&h->mu);
    h->held_back = !ring_slot(h, r, &c->slot);
    if (h->held_back) {
        pthread_mutex_unlock(&h->mu);
        return 0;
    }
    c->failed = h->err != 0;
    int send_slot = -1; /* deposit slot taken (device path: wait for its copy) */
    if (!c->failed && h->pending > 0) {
        send_slot = h->dep_cur;
        c->send = h->lent ? h->lent : h->dep[h->dep_cur];
        fresh_cnt = h->pending;
        c->t_dep = h->t_dep;
        uint64_t s = r - h->applied_at_dep;
        stale = s > META_MAX ? META_MAX : (uint32_t)s;
        cost = h->dep_cost;
        step = h->dep_step;
        loss = h->dep_loss;
        samples = h->dep_smp;
        h->dep_cost = h->dep_step = h->dep_loss = h->dep_smp = 0;
        if (h->lent) { /* the caller's buffer: dep[dep_cur] stays free for the next deposit */
            h->lent = NULL;
            h->lent_rounds++;
        } else
            h->dep_cur ^= 1;
        h->consumed_seq = h->dep_seq;
        h->consumed_round = r;
        h->pending = 0;
    } else {
        c->send = h->zeros;
    }
    int flags = c->failed                          ? (PCOLL_F_FAILED | PCOLL_F_JOINED)
                : (h->join_req && h->pending == 0) ? PCOLL_F_JOINED
                                                   : 0;
    if (h->joined[h->me]) flags |= PCOLL_F_JOINED;
    h->started = r + 1;
    pthread_mutex_unlock(&h->mu);

    c->recv = c->slot && !c->failed ? c->slot->buf : h->scratch;
    const float mine[META] = {(float)fresh_cnt, (float)flags, (float)stale, cost, step, loss, samples};
    int rc = h->dp->start(h, c, send_slot, mine);
    if (rc < 0) return rc;
    c->stage = rc ? ST_PUBLISH : ST_REDUCE;
    return 1;
}

/* Stage ST_PUBLISH: decode F_r, flags, staleness, step times, losses from the reduced metadata c->rm;
 * update streaks and the active set; divide; store the record; wake the application. */
static int publish_round(struct pcoll *h, round_t *c) {
    int P = h->P;
    uint64_t r = c->r;
    const float *rm = c->rm;
    plan_t *pl = &h->plan;
    pthread_mutex_lock(&h->mu);
    pcoll_record_t *rec = &h->recs[r % (uint64_t)h->R].r;
    rec->round = r;
    rec->mode = pl->mode;
    rec->quorum = pl->quorum;
    rec->initiator = pl->initiator;
    rec->nactive = h->nactive;
    rec->P = P;
    rec->t_start = c->t_start;
    rec->t_end = c->t_end;
    rec->t_deposit = c->t_dep;
    int nfresh = 0, ndep = 0;
    for (int p = 0; p < P; p++) {
        int f = (int)rm[META * p + 0], fl = (int)rm[META * p + 1];
        uint32_t st = (uint32_t)rm[META * p + 2];
        rec->fresh[p] = (uint8_t)(f > 255 ? 255 : f);
        rec->flags[p] = (uint8_t)fl;
        rec->waited[p] = pl->inwait[p];
        rec->staleness[p] = f ? st : 0;
        rec->cost[p] = f ? rm[META * p + 3] : 0.0f;
        rec->step[p] = f ? rm[META * p + 4] : 0.0f;
        const float ns = f ? rm[META * p + 6] : 0.0f;
        rec->samples[p] = ns;
        rec->loss[p] = ns > 0 ? rm[META * p + 5] / ns : 0.0f;
        if (f) {
            nfresh++;
            ndep += f;
            h->fresh_total++;
            h->stale_count++;
            h->stale_sum += st;
            if (st > h->max_staleness) h->max_staleness = st;
            h->streak[p] = 0;
        } else if (!h->joined[p] && !(fl & PCOLL_F_JOINED)) {
            h->streak[p]++;
        }
        if (h->streak[p] > h->max_streak[p]) h->max_streak[p] = h->streak[p];
        if (h->streak[p] > h->max_streak_all) h->max_streak_all = h->streak[p];
        rec->streak[p] = h->streak[p];
        if ((fl & PCOLL_F_FAILED) && p != h->me && h->peer_failed < 0) h->peer_failed = p;
        if (fl & PCOLL_F_JOINED) h->joined[p] = 1;
    }
    rec->nfresh = nfresh;
    if (c->slot && !c->failed) pcoll_record_copy(&c->slot->rec, rec);
    h->nactive = 0;
    for (int p = 0; p < P; p++)
        if (!h->joined[p]) h->active[h->nactive++] = p;
    pthread_mutex_unlock(&h->mu);

    float *recv = c->recv;
    if (!c->failed && ndep > 0 && h->cfg.div != PCOLL_DIV_NONE) {
        float s = 1.0f / (float)(h->cfg.div == PCOLL_DIV_P ? P : ndep);
        int rc = h->dp->scale(h, recv, s);
        if (rc) return rc;
    }

    pthread_mutex_lock(&h->mu);
    h->completed = r + 1;
    if (h->drop || !c->slot || c->failed) h->handed = h->completed; /* nothing to hand out */
    if (h->driver == DRV_APP) h->driven++;
    pthread_cond_broadcast(&h->cv_app);
    pthread_mutex_unlock(&h->mu);
    return PCOLL_OK;
}

/* One step of the round state machine (pcoll_impl.h: round_t); the caller holds the drive token,
 * not mu. Never blocks on other ranks (device rounds excepted, which only the engine drives).
 * Returns PASS_ROUND once a round is published, PASS_INFLIGHT while its reduction is in flight
 * (one MPI_Test each call), PASS_IDLE_LOCAL / PASS_IDLE_REMOTE when it must wait for a local
 * event / for other ranks' messages, PASS_END once every rank has joined, < 0 on an error (the
 * sticky error is set; every later call returns the same code). */
int pcoll_drive(struct pcoll *h) {
    round_t *c = &h->cur;
    int rc = 0, local = 0;
    for (;;) {
        switch (c->stage) {
        case ST_PLAN:
            pthread_mutex_lock(&h->mu);
            if (h->nactive == 0) {
                c->stage = ST_END;
                h->drive_end = 1;
                pthread_mutex_unlock(&h->mu);
                return PASS_END;
            }
            if (h->cfg.horizon && h->horizon < c->r + 1 && !h->err) {
                pthread_mutex_unlock(&h->mu);
                return PASS_IDLE_LOCAL;
            }
            plan_round(h, c->r, &h->plan);
            h->resolved = c->r + 1;
            pthread_mutex_unlock(&h->mu);
            c->act_from = NOT_ACTIVATED;
            c->sent_ready = 0;
            c->sent_cnt = 0;
            c->stage = ST_ACT;
            break;
        case ST_ACT:
            if ((rc = activate_pass(h, c, &local)) < 0) break;
            if (!rc) return local ? PASS_IDLE_LOCAL : PASS_IDLE_REMOTE;
            c->stage = ST_START;
            break;
        case ST_START:
            if ((rc = start_round(h, c)) < 0) break;
            if (!rc) return PASS_IDLE_LOCAL;
            break;
        case ST_REDUCE:
            if ((rc = h->dp->test(h, c)) < 0) break;
            if (!rc) return PASS_INFLIGHT;
            c->stage = ST_PUBLISH;
            break;
        case ST_PUBLISH:
            if ((rc = publish_round(h, c)) < 0) break;
            c->r++;
            c->stage = ST_PLAN;
            return PASS_ROUND;
        case ST_END: return PASS_END;
        default: return c->rc; /* ST_FAILED */
        }
        if (rc < 0) {
            c->stage = ST_FAILED;
            c->rc = rc;
            pthread_mutex_lock(&h->mu);
            h->drive_end = 1;
            pthread_mutex_unlock(&h->mu);
            return rc;
        }
    }
}

/* After the last round: receive the control messages still in flight so the communicator is
 * empty when it is freed (counts are exchanged, so nothing is left behind or waited for twice). */
static void final_drain(struct pcoll *h) {
    uint64_t *expect = calloc((size_t)h->P, sizeof *expect);
    if (!expect) return;
    MPI_Alltoall(h->sent_to, 1, MPI_UINT64_T, expect, 1, MPI_UINT64_T, h->ctl);
    for (int p = 0; p < h->P; p++)
        while (h->recv_from[p] < expect[p]) {
            uint64_t m[2];
            MPI_Recv(m, 2, MPI_UINT64_T, p, MPI_ANY_TAG, h->ctl, MPI_STATUS_IGNORE);
            h->recv_from[p]++;
        }
    free(expect);
}

static double reserved(const struct pcoll *h);

/* Whether a thread idle since *t_idle (< 0: from now on, which sets it) is still within its spin_us
 * of polling with sched_yield before it sleeps: the engine between probes for control messages,
 * an application thread in pcoll_wait before it gives the round back to the engine. */
int pcoll_spinning(const struct pcoll *h, double *t_idle) {
    double t = pcoll_now();
    if (*t_idle < 0) *t_idle = t;
    return t - *t_idle < h->cfg.spin_us * 1e-6;
}

/* The engine's wait after a pass that could not go on (caller holds mu, not the token; events:
 * h->events when the pass began, so a local event during the pass is not slept through). Local
 * waits sleep until a local event wakes it (at most 50 ms, a safety net). Remote waits poll for a
 * control message with MPI_Iprobe without holding the token (a hint: the next pass receives it),
 * so an application thread that comes to drive never waits for an idle engine's poll: spin_us of
 * probes with sched_yield, then sleeps between probes that double from 10 us up to poll_max_us.
 * Returns once a message is there, a local event happened or an application thread drives. */
static void engine_idle(struct pcoll *h, int pass, uint64_t events, double *t_idle, double *sleep_s) {
    if (h->events != events) return;
    if (pass == PASS_IDLE_LOCAL) {
        timed_wait(h, SAFETY_NET_S);
        return;
    }
    for (;;) {
        if (*t_idle < 0) *sleep_s = 10e-6;
        if (pcoll_spinning(h, t_idle)) {
            pthread_mutex_unlock(&h->mu);
            sched_yield();
        } else {
            timed_wait(h, *sleep_s);
            *sleep_s *= 2;
            if (*sleep_s > h->cfg.poll_max_us * 1e-6) *sleep_s = h->cfg.poll_max_us * 1e-6;
            pthread_mutex_unlock(&h->mu);
        }
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, h->ctl, &flag, MPI_STATUS_IGNORE);
        pthread_mutex_lock(&h->mu);
        if (flag || h->events != events || h->driver != DRV_NONE || h->app_want > 0 || reserved(h) > 0)
            return;
    }
}

/* A deposit made with PCOLL_WAIT_NEXT keeps the token for the pcoll_wait that follows (which
 * clears this): the engine leaves the round to it, for at most its 50 ms safety-net sleep in case
 * no pcoll_wait comes (caller holds mu). */
static double reserved(const struct pcoll *h) { /* seconds of reservation left, 0: none */
    double left = h->wait_next > 0 ? SAFETY_NET_S - (pcoll_now() - h->wait_next) : 0;
    return left > 0 ? left : 0;
}

/* Whether the next round to start has a partial rule: after it, the engine has to watch for
 * rounds other ranks start (caller holds mu). */
static int partial_next(const struct pcoll *h) { return rule_at(h, h->started)->mode != PCOLL_SYNC; }

/* The engine thread: drives the rounds whenever no application thread does (pcoll_wait may take
 * the token, see pcoll.c), so they progress while the application computes. */
void *pcoll_engine_main(void *arg) {
    struct pcoll *h = arg;
    int pass = h->dp->thread_init(h);
    double t_idle = -1, sleep_s = 10e-6;
    pthread_mutex_lock(&h->mu);
    while (pass >= 0 && pass != PASS_END) {
        int app = h->driver != DRV_NONE || h->app_want > 0;
        double rsv = reserved(h);
        if (app || rsv > 0) { /* an application thread drives, or will */
            t_idle = -1;
            double park = app ? SAFETY_NET_S : rsv;
            /* an application that comes back quickly need not signal the engine after a partial
             * round: the engine parks short and watches again within park_max by itself */
            h->park_short = app && h->quick && h->cores_each && partial_next(h);
            if (h->park_short) park = pcoll_park_max(h);
            h->eng_parked = 1;
            h->park_until = pcoll_now() + park;
            timed_wait(h, park);
            h->eng_parked = 0;
            continue;
        }
        if (h->idle_remote) { /* an application thread left the round waiting for messages */
            h->idle_remote = 0;
            engine_idle(h, PASS_IDLE_REMOTE, h->idle_events, &t_idle, &sleep_s);
            continue;
        }
        uint64_t events = h->events;
        h->driver = DRV_ENGINE;
        pthread_mutex_unlock(&h->mu);
        pass = pcoll_drive(h);
        pthread_mutex_lock(&h->mu);
        h->driver = DRV_NONE;
        if (pass == PASS_IDLE_LOCAL || pass == PASS_IDLE_REMOTE) {
            h->engine_polls++;
            engine_idle(h, pass, events, &t_idle, &sleep_s);
        } else {
            t_idle = -1;
            if (pass == PASS_INFLIGHT) pcoll_inflight_yield(h);
        }
    }
    pthread_mutex_unlock(&h->mu);
    if (pass == PASS_END) final_drain(h);
    pthread_mutex_lock(&h->mu);
    h->clean = pass == PASS_END;
    h->done = 1;
    pthread_cond_broadcast(&h->cv_app);
    pthread_mutex_unlock(&h->mu);
    return NULL;
}
