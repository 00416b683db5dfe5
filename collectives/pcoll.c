/* pcoll.c -- libpcoll application side: deposit, wait, next, rules, records, stats, join,
 * finalize, error strings. Handles are made in create.c, rounds run in engine.c. */
#include "collectives/pcoll_impl.h"
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every public call on a handle: enter() counts it in (0: the handle is closing, return
 * PCOLL_ERR_STATE without touching anything else), leave() / leave_locked() counts it out and
 * wakes pcoll_finalize, which waits for the count to reach 0 before it frees the handle. The
 * count is taken before the mutex, so finalize never frees a mutex a caller is waiting for. */
static int enter(struct pcoll *h) {
    __atomic_fetch_add(&h->inflight, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&h->closing, __ATOMIC_SEQ_CST)) return 1;
    __atomic_fetch_sub(&h->inflight, 1, __ATOMIC_SEQ_CST);
    return 0;
}
static void leave_locked(struct pcoll *h) {
    if (__atomic_sub_fetch(&h->inflight, 1, __ATOMIC_SEQ_CST) == 0 &&
        __atomic_load_n(&h->closing, __ATOMIC_SEQ_CST))
        pthread_cond_broadcast(&h->cv_app);
}
static void leave(struct pcoll *h) {
    pthread_mutex_lock(&h->mu);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
}

/* pcoll_deposit and pcoll_lend: lend != NULL is the caller's buffer to reduce in place (g). */
static int deposit(pcoll_t *h, const float *g, float *lend, int flags) {
    if (!h || !g) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    pthread_mutex_lock(&h->mu);
    int rc = PCOLL_OK;
    if (h->err)
        rc = h->err;
    else if (h->join_req) {
        rc = PCOLL_ERR_STATE;
        pcoll_call_error(h, "rank %d: pcoll_deposit after pcoll_join/pcoll_finalize", h->me);
    } else if (h->pending && !(flags & PCOLL_ACCUMULATE)) {
        rc = PCOLL_ERR_PENDING;
        pcoll_call_error(h,
                         "rank %d: deposit while the previous one is still pending (call "
                         "pcoll_wait first, or pass PCOLL_ACCUMULATE)",
                         h->me);
    } else if (lend && !h->dp->lend) {
        rc = PCOLL_ERR_ARG;
        pcoll_call_error(
            h, "rank %d: pcoll_lend needs host memory (device deposits are copied on the copy stream)",
            h->me);
    }
    if (rc) {
        leave_locked(h);
        pthread_mutex_unlock(&h->mu);
        return rc;
    }
    /* the engine reads dep[dep_cur] only after taking it under mu in run_round, and swaps
     * dep_cur at that moment, so this buffer is ours until the engine takes it */
    float *d = h->dep[h->dep_cur];
    if (h->pending && h->lent) { /* from now on the pending deposit is a sum in our own buffer */
        memcpy(d, h->lent, h->n * sizeof(float));
        h->lent = NULL;
    }
    if (lend && !h->pending)
        h->lent = lend;
    else { /* d = g, or d += g onto the pending deposit (the data path's copy, completed here) */
        char m[256] = "";
        rc = h->dp->deposit(h, h->dep_cur, d, g, h->pending > 0, m, sizeof m);
        if (rc) {
            pcoll_call_error(h, "rank %d: pcoll_deposit: %s", h->me, m);
            leave_locked(h);
            pthread_mutex_unlock(&h->mu);
            return rc;
        }
    }
    if (h->pending) {
        if (h->pending < 255) h->pending++;
        h->dep_cost += h->next_cost;
        h->dep_step += h->next_step;
        h->dep_loss += h->next_loss;
        h->dep_smp += h->next_smp;
    } else {
        h->pending = 1;
        h->dep_cost = h->next_cost;
        h->dep_step = h->next_step;
        h->dep_loss = h->next_loss;
        h->dep_smp = h->next_smp;
        h->t_dep = pcoll_now();
        h->applied_at_dep = h->handed;
    }
    h->next_cost = h->next_step = h->next_loss = h->next_smp = 0;
    h->dep_seq++;
    h->t_last_dep = pcoll_now();
    h->events++;
    int wake = !(flags & PCOLL_WAIT_NEXT) || h->dp->blocking;
    h->wait_next = wake ? 0 : pcoll_now();
    pthread_mutex_unlock(&h->mu);
    /* after unlocking: the engine, woken, does not block at once on the mutex held here */
    if (wake) pthread_cond_signal(&h->cv_eng);
    leave(h);
    return PCOLL_OK;
}

int pcoll_deposit(pcoll_t *h, const float *g, int flags) { return deposit(h, g, NULL, flags); }

int pcoll_lend(pcoll_t *h, float *g, int flags) { return deposit(h, g, g, flags); }

size_t pcoll_lend_len(const pcoll_t *h) { return h ? h->nbuf : 0; }

static int is_time(double s) { return s >= 0 && s <= 1e9; } /* also false for NaN */

int pcoll_set_cost(pcoll_t *h, double cost, double step) {
    if (!h) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    pthread_mutex_lock(&h->mu);
    int rc = PCOLL_OK;
    if (!is_time(cost) || !is_time(step)) {
        pcoll_call_error(h, "rank %d: pcoll_set_cost: %g s is not a %s (finite, >= 0)", h->me,
                         is_time(cost) ? step : cost, is_time(cost) ? "step time" : "cost");
        rc = PCOLL_ERR_ARG;
    } else
        h->next_cost = (float)cost, h->next_step = (float)step;
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int pcoll_set_loss(pcoll_t *h, double loss, double samples) {
    if (!h) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    pthread_mutex_lock(&h->mu);
    int rc = PCOLL_OK;
    if (!(samples >= 0 && samples <= PCOLL_LOSS_SAMPLES_MAX)) {
        pcoll_call_error(h, "rank %d: pcoll_set_loss: %g samples is out of range (0 .. %d)", h->me, samples,
                         PCOLL_LOSS_SAMPLES_MAX);
        rc = PCOLL_ERR_ARG;
    } else if (!(fabs(loss) <= PCOLL_LOSS_MAX)) {
        pcoll_call_error(h, "rank %d: pcoll_set_loss: loss %g is not finite or beyond +-%g", h->me, loss,
                         PCOLL_LOSS_MAX);
        rc = PCOLL_ERR_ARG;
    } else
        h->next_loss = samples > 0 ? (float)(loss * samples) : 0.0f, h->next_smp = (float)samples;
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static int abs_deadline(double timeout_s, struct timespec *ts) {
    if (timeout_s < 0) return 0;
    clock_gettime(CLOCK_REALTIME, ts);
    double t = (double)ts->tv_sec + 1e-9 * ts->tv_nsec + timeout_s;
    ts->tv_sec = (time_t)t;
    ts->tv_nsec = (long)((t - (double)ts->tv_sec) * 1e9);
    return 1;
}

/* The application thread sleeps on cv_app (mu held) until signalled or, when timed, until the
 * absolute CLOCK_REALTIME deadline *ts: returns 0, or -1 when the deadline passed. */
static int app_sleep(struct pcoll *h, int timed, const struct timespec *ts) {
    if (!timed) return pthread_cond_wait(&h->cv_app, &h->mu), 0;
    return pthread_cond_timedwait(&h->cv_app, &h->mu, ts) != 0 ? -1 : 0;
}

static int peer_error(struct pcoll *h) {
    pcoll_call_error(h,
                     "rank %d: rank %d failed (its engine reported an error and left the "
                     "rounds); see its own message",
                     h->me, h->peer_failed);
    return PCOLL_ERR_PEER;
}

/* pcoll_finalize has set closing: a blocked call returns this (caller holds mu). */
static int closing_error(struct pcoll *h) {
    pcoll_call_error(h, "rank %d: the handle is being finalized", h->me);
    return PCOLL_ERR_STATE;
}

static int past(const struct timespec *ts) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec > ts->tv_sec || (t.tv_sec == ts->tv_sec && t.tv_nsec >= ts->tv_nsec);
}

static int wait_timeout(struct pcoll *h, double timeout_s) { /* caller holds mu */
    pcoll_call_error(h, "rank %d: pcoll_wait timed out after %.1f s (rounds completed: %llu)", h->me,
                     timeout_s, (unsigned long long)h->completed);
    return PCOLL_ERR_TIMEOUT;
}

/* An application thread gives the drive token back (caller holds mu); pass: its last
 * pcoll_drive result. Returns 1 if the engine must be woken (the caller signals cv_eng, after
 * unlocking if it can): unless only a local event can move the round on (then that event wakes
 * it), so after a synchronous round the engine is not woken at all. */
static int give_back(struct pcoll *h, int pass) {
    h->driver = DRV_NONE;
    if (pass == PASS_IDLE_LOCAL) return 0;
    h->events++;
    h->idle_remote = pass == PASS_IDLE_REMOTE;
    h->idle_events = h->events;
    return 1;
}

/* The waiting thread drives the rounds itself (engine.c: pcoll_drive) while it can (host memory),
 * instead of sleeping until the engine has done them: no thread hand-off in a round. If the
 * engine holds the token, it gives it up after its current step (app_want); this thread yields
 * meanwhile. It sleeps only when the round waits for a local event (another thread's deposit, a
 * horizon, pcoll_next), when every rank has joined, or after polling for other ranks' activation
 * messages for spin_us (as the engine does before it sleeps); the engine then drives, and this
 * thread drives again once woken. Every step is non-blocking, so the timeout and a peer's failure
 * are checked between steps. */
int pcoll_wait(pcoll_t *h, int how, double timeout_s, uint64_t *round) {
    if (!h || (how != PCOLL_WAIT_CONSUMED && how != PCOLL_WAIT_NEWER)) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    struct timespec ts;
    int timed = abs_deadline(timeout_s, &ts), rc = PCOLL_OK, counted = 0;
    int drove = 0, gave_up = 0, pass = 0, wake = 0;
    double t_idle = -1;
    pthread_mutex_lock(&h->mu);
    h->wait_next = 0;    /* the reservation of a PCOLL_WAIT_NEXT deposit is used up */
    if (h->t_back > 0) { /* the application is back: how long was it away? */
        h->away[1] = h->away[0];
        h->away[0] = pcoll_now() - h->t_back;
        h->t_back = 0;
        h->quick = h->away[0] < h->cfg.spin_us * 1e-6 && h->away[1] < h->cfg.spin_us * 1e-6;
    }
    for (;;) {
        if (h->err) {
            rc = h->err;
            break;
        }
        if (h->peer_failed >= 0) {
            rc = peer_error(h);
            break;
        }
        if (__atomic_load_n(&h->closing, __ATOMIC_SEQ_CST)) {
            rc = closing_error(h);
            break;
        }
        if (how == PCOLL_WAIT_CONSUMED) {
            if (h->consumed_seq == h->dep_seq && h->completed > h->consumed_round) {
                if (round) *round = h->consumed_round;
                break;
            }
            if (!counted) { /* this thread cannot call pcoll_next now: the engine must not
                                hold back waiting for it (engine.c: ring_slot) */
                counted = 1;
                h->waiting_consumed++;
                if (h->held_back) pcoll_wake_engine(h);
            }
        } else if (h->completed > h->handed) {
            if (round) *round = h->completed - 1;
            break;
        }
        if (h->done) {
            rc = h->join_req ? PCOLL_DONE : PCOLL_ERR_STATE;
            break;
        }
        if (timed && past(&ts)) {
            rc = wait_timeout(h, timeout_s);
            break;
        }
        if (!h->dp->blocking && !h->drive_end && !gave_up) {
            if (!drove && h->driver == DRV_NONE) {
                h->driver = DRV_APP;
                drove = 1;
            }
            if (drove) {
                pthread_mutex_unlock(&h->mu);
                pass = pcoll_drive(h);
                pthread_mutex_lock(&h->mu);
                if (pass < 0 || pass == PASS_ROUND || pass == PASS_INFLIGHT) {
                    t_idle = -1;
                    if (pass == PASS_INFLIGHT) pcoll_inflight_yield(h);
                    continue;
                }
                if (pass == PASS_IDLE_REMOTE && pcoll_spinning(h, &t_idle)) {
                    pthread_mutex_unlock(&h->mu);
                    sched_yield();
                    pthread_mutex_lock(&h->mu);
                    continue;
                }
                if (give_back(h, pass)) pthread_cond_signal(&h->cv_eng);
                drove = 0;
                gave_up = 1;
            } else if (h->driver == DRV_ENGINE) {
                h->app_want++;
                pthread_mutex_unlock(&h->mu);
                sched_yield();
                pthread_mutex_lock(&h->mu);
                h->app_want--;
                continue;
            }
        }
        h->wait_sleeps++;
        if (app_sleep(h, timed, &ts)) {
            rc = wait_timeout(h, timeout_s);
            break;
        }
        gave_up = 0;
        t_idle = -1;
    }
    if (drove) {
        if (rc == PCOLL_OK) { /* one more step: does the next round need the engine? */
            pthread_mutex_unlock(&h->mu);
            pass = pcoll_drive(h);
            pthread_mutex_lock(&h->mu);
        }
        wake = give_back(h, pass);
        double now = pcoll_now();
        h->t_back = now;
        /* an engine in a short park watches again within park_max unsignalled */
        if (wake && h->eng_parked && h->park_short && h->park_until - now <= pcoll_park_max(h)) wake = 0;
        h->engine_signals += (uint64_t)wake;
    }
    if (counted) h->waiting_consumed--;
    pthread_mutex_unlock(&h->mu);
    /* after unlocking: the engine, woken, does not block at once on the mutex held here */
    if (wake) pthread_cond_signal(&h->cv_eng);
    leave(h);
    return rc;
}

static int record_too_small(struct pcoll *h, const pcoll_record_t *rec, const char *fn) {
    pthread_mutex_lock(&h->mu);
    pcoll_call_error(h,
                     "rank %d: %s: record allocated for %d ranks, the handle has %d "
                     "(pcoll_record_init(rec, pcoll_size(h)))",
                     h->me, fn, rec->P, h->P);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return PCOLL_ERR_ARG;
}

int pcoll_next(pcoll_t *h, uint64_t *round, const float **result, pcoll_record_t *rec) {
    if (!h) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    if (rec && (rec->P < h->P || !rec->fresh)) return record_too_small(h, rec, "pcoll_next");
    pthread_mutex_lock(&h->mu);
    int rc = PCOLL_OK;
    if (h->err)
        rc = h->err;
    else if (h->handed >= h->completed)
        rc = PCOLL_EMPTY;
    else {
        uint64_t r = h->handed;
        ring_slot_t *sl = &h->ring[r % (uint64_t)h->K];
        if (round) *round = r;
        if (result) *result = sl->buf;
        if (rec) pcoll_record_copy(rec, &sl->rec);
        h->handed = r + 1;
        if (h->held_back) pcoll_wake_engine(h); /* it may go on */
    }
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int pcoll_set_rule(pcoll_t *h, uint64_t from, const pcoll_rule_t *rule) {
    if (!h || !rule) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    char msg[200];
    int rc = PCOLL_OK;
    int valid = pcoll_rule_check(rule, h->P, msg, sizeof msg);
    pthread_mutex_lock(&h->mu);
    /* Only decisions every rank makes alike: the horizon is posted by the same program on every
     * rank, while how far the engine has got differs between ranks. */
    if (!valid) {
        rc = PCOLL_ERR_ARG;
        pcoll_call_error(h, "pcoll_set_rule: %s", msg);
    } else if (!h->cfg.horizon) {
        rc = PCOLL_ERR_STATE;
        pcoll_call_error(h,
                         "rank %d: pcoll_set_rule needs cfg.horizon = 1 (without a horizon "
                         "some ranks may already have started round %llu and others not); the "
                         "rule of a handle without a horizon is cfg.rule",
                         h->me, (unsigned long long)from);
    } else if (from < h->horizon) {
        rc = PCOLL_ERR_LATE;
        pcoll_call_error(h,
                         "rank %d: pcoll_set_rule: round %llu is below the horizon (rules of "
                         "rounds < %llu are final)",
                         h->me, (unsigned long long)from, (unsigned long long)h->horizon);
    } else {
        while (h->nrules > 1 && h->rules[h->nrules - 1].from >= from) free(h->rules[--h->nrules].wait);
        /* drop entries fully in the past: keep the last one in force at `resolved` */
        int keep = 0;
        for (int i = 0; i < h->nrules; i++)
            if (h->rules[i].from <= h->resolved) keep = i;
        if (keep > 0) {
            for (int i = 0; i < keep; i++) free(h->rules[i].wait);
            memmove(h->rules, h->rules + keep, (size_t)(h->nrules - keep) * sizeof *h->rules);
            h->nrules -= keep;
        }
        if (h->nrules == 1 && from == 0) {
            free(h->rules[0].wait);
            h->nrules = 0;
        }
        if (h->nrules == h->caprules) {
            rule_ent_t *q = realloc(h->rules, (size_t)h->caprules * 2 * sizeof *q);
            if (!q)
                rc = PCOLL_ERR_NOMEM;
            else {
                h->rules = q;
                h->caprules *= 2;
            }
        }
        if (!rc) rc = pcoll_rule_copy(&h->rules[h->nrules], from, rule);
        if (!rc) h->nrules++;
    }
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int pcoll_set_horizon(pcoll_t *h, uint64_t through) {
    if (!h) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    pthread_mutex_lock(&h->mu);
    /* h->horizon = rounds below it are final; UINT64_MAX: all (no wrap to 0) */
    uint64_t hz = through == UINT64_MAX ? UINT64_MAX : through + 1;
    if (hz > h->horizon) h->horizon = hz;
    pcoll_wake_engine(h);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return PCOLL_OK;
}

int pcoll_record_get(pcoll_t *h, uint64_t round, pcoll_record_t *rec, double timeout_s) {
    if (!h || !rec) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    if (rec->P < h->P || !rec->fresh) return record_too_small(h, rec, "pcoll_record_get");
    struct timespec ts;
    int timed = abs_deadline(timeout_s, &ts), rc = PCOLL_OK;
    pthread_mutex_lock(&h->mu);
    while (h->completed <= round) {
        if (h->done || h->err) {
            rc = h->err ? h->err : PCOLL_ERR_STATE;
            break;
        }
        if (__atomic_load_n(&h->closing, __ATOMIC_SEQ_CST)) {
            rc = closing_error(h);
            break;
        }
        if (app_sleep(h, timed, &ts)) {
            rc = PCOLL_ERR_TIMEOUT;
            break;
        }
    }
    /* round + R is written into the same slot before `completed` passes it: check the slot */
    const pcoll_record_t *src = &h->recs[round % (uint64_t)h->R].r;
    if (!rc && (round + (uint64_t)h->R < h->started || src->round != round)) {
        rc = PCOLL_ERR_EVICTED;
        pcoll_call_error(h,
                         "rank %d: record of round %llu no longer kept (records = %d, round "
                         "%llu started)",
                         h->me, (unsigned long long)round, h->R, (unsigned long long)h->started);
    }
    if (!rc) pcoll_record_copy(rec, src);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int pcoll_stats(pcoll_t *h, pcoll_stats_t *st) {
    if (!h || !st) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    pthread_mutex_lock(&h->mu);
    st->rounds = h->completed;
    st->applied = h->handed;
    st->deposits = h->dep_seq;
    st->fresh_total = h->fresh_total;
    st->max_streak_all = h->max_streak_all;
    st->max_staleness = h->max_staleness;
    st->mean_staleness = h->stale_count ? h->stale_sum / (double)h->stale_count : 0.0;
    st->driven = h->driven;
    st->wait_sleeps = h->wait_sleeps;
    st->engine_wakes = h->engine_wakes;
    st->engine_polls = h->engine_polls;
    st->result_buffers = h->result_buffers;
    st->lent = h->lent_rounds;
    st->engine_signals = h->engine_signals;
    if (st->max_streak) memcpy(st->max_streak, h->max_streak, (size_t)h->P * 4);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return PCOLL_OK;
}

int pcoll_size(const pcoll_t *h) { return h ? h->P : 0; }
int pcoll_rank(const pcoll_t *h) { return h ? h->me : -1; }
uint64_t pcoll_rounds(pcoll_t *h) {
    if (!h || !enter(h)) return 0;
    pthread_mutex_lock(&h->mu);
    uint64_t r = h->completed;
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return r;
}

/* The liveness thread (live.c) sends and reads the heartbeats; this call only checks the
 * handle, for callers written against the interface in which the application drove them. */
int pcoll_heartbeat(pcoll_t *h) {
    if (!h) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    leave(h);
    return PCOLL_OK;
}

int pcoll_peers(pcoll_t *h, pcoll_peer_t *out) {
    if (!h || !out) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    pthread_mutex_lock(&h->mu);
    double t = pcoll_now();
    for (int p = 0; p < h->P; p++) {
        out[p] = h->peers[p];
        out[p].heard_s = h->heard_at[p] > 0 ? t - h->heard_at[p] : -1;
        if (p == h->me) {
            out[p].heard_s = 0;
            out[p].pending = h->pending > 0;
            out[p].pending_s = t - (h->pending > 0 ? h->t_dep : h->t_last_dep);
            out[p].completed = h->completed;
            out[p].started = h->started;
        }
    }
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return PCOLL_OK;
}

/* Finalize: receive every heartbeat still in flight, so the communicator is empty when freed
 * (every rank is here: all of them joined; the liveness threads have ended). */
static void hb_drain(struct pcoll *h) {
    uint64_t *expect = calloc((size_t)h->P, 8);
    if (!expect) return;
    MPI_Alltoall(h->hb_sent, 1, MPI_UINT64_T, expect, 1, MPI_UINT64_T, h->hb);
    for (int p = 0; p < h->P; p++)
        while (h->hb_recv[p] < expect[p]) {
            double m[HB_LEN];
            MPI_Recv(m, HB_LEN, MPI_DOUBLE, p, 3, h->hb, MPI_STATUS_IGNORE);
            h->hb_recv[p]++;
        }
    free(expect);
}

int pcoll_unreceived(MPI_Comm c, void (*each)(void *arg, int source, int tag, int bytes), void *arg) {
    int n = 0, flag = 1, len = 0;
    MPI_Status st;
    while (n < 1000 && MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &flag, &st) == MPI_SUCCESS && flag) {
        MPI_Get_count(&st, MPI_BYTE, &len);
        char *b = malloc(len > 0 ? (size_t)len : 1);
        if (!b) return n + 1;
        MPI_Recv(b, len, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, c, MPI_STATUS_IGNORE);
        free(b);
        if (each) each(arg, st.MPI_SOURCE, st.MPI_TAG, len);
        n++;
    }
    return n;
}

int pcoll_join(pcoll_t *h) {
    if (!h) return PCOLL_ERR_ARG;
    if (!enter(h)) return PCOLL_ERR_STATE;
    pthread_mutex_lock(&h->mu);
    h->join_req = 1;
    pcoll_wake_engine(h);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return PCOLL_OK;
}

/* Two phases. 1: join, drop the results not handed out, and wait until the engine has left its
 * loop (every rank joined) -- other threads may still call in (a controller posting rules).
 * 2: closing: every call now returns PCOLL_ERR_STATE; wait for those in progress to leave, end
 * the threads, drain, free. If the engine may be blocked in MPI for ever (a dead peer) or the
 * timeout passes, return the error and leave the handle as it is: the process must MPI_Abort. */
int pcoll_finalize(pcoll_t **hp, double timeout_s) {
    if (!hp || !*hp) return PCOLL_ERR_ARG;
    struct pcoll *h = *hp;
    if (!enter(h)) return PCOLL_ERR_STATE;
    struct timespec ts;
    int timed = abs_deadline(timeout_s, &ts), rc = PCOLL_OK;
    pthread_mutex_lock(&h->mu);
    h->join_req = 1;
    h->drop = 1; /* nobody will hand these out: the ring need not hold them */
    h->handed = h->completed;
    pcoll_wake_engine(h);
    while (!h->done && !h->peer_dead) {
        if (app_sleep(h, timed, &ts)) {
            rc = PCOLL_ERR_TIMEOUT;
            break;
        }
    }
    if (rc == PCOLL_ERR_TIMEOUT)
        pcoll_call_error(h,
                         "rank %d: pcoll_finalize timed out after %.1f s waiting for the other "
                         "ranks to join (round %llu); the engine is still running: end the job "
                         "with MPI_Abort",
                         h->me, timeout_s, (unsigned long long)h->completed);
    else if (!h->done)
        rc = h->err ? h->err : PCOLL_ERR_PEER; /* engine may be stuck in MPI */
    if (rc) {
        leave_locked(h);
        pthread_mutex_unlock(&h->mu);
        return rc;
    }
    int err = h->err, clean = h->clean;
    __atomic_store_n(&h->closing, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_sub(&h->inflight, 1, __ATOMIC_SEQ_CST); /* this call */
    pthread_cond_broadcast(&h->cv_app);
    while (__atomic_load_n(&h->inflight, __ATOMIC_SEQ_CST) > 0) pthread_cond_wait(&h->cv_app, &h->mu);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->thread, NULL);
    pcoll_live_stop(h);
    int left = 0;
    if (clean) {
        hb_drain(h);
        left = pcoll_unreceived(h->ctl, NULL, NULL) + pcoll_unreceived(h->data, NULL, NULL) +
               pcoll_unreceived(h->hb, NULL, NULL);
    }
    pcoll_destroy(h, clean, 1);
    *hp = NULL;
    return err ? err : left ? PCOLL_ERR_UNRECEIVED : PCOLL_OK;
}
const char *pcoll_strerror(int code) {
    switch (code) {
    case PCOLL_OK: return "success";
    case PCOLL_EMPTY: return "no completed round to hand out";
    case PCOLL_DONE: return "every rank has joined; all rounds handed out";
    case PCOLL_ERR_ARG: return "invalid argument";
    case PCOLL_ERR_MISMATCH: return "arguments differ across ranks";
    case PCOLL_ERR_THREAD_LEVEL: return "MPI thread level below MPI_THREAD_MULTIPLE";
    case PCOLL_ERR_MPI: return "MPI call failed";
    case PCOLL_ERR_NOMEM: return "out of memory";
    case PCOLL_ERR_PENDING: return "a deposit is already pending";
    case PCOLL_ERR_RING: return "rank fell more than K rounds behind (results ring full)";
    case PCOLL_ERR_LATE: return "rule change for a round already started";
    case PCOLL_ERR_TIMEOUT: return "timed out";
    case PCOLL_ERR_EVICTED: return "round record no longer kept";
    case PCOLL_ERR_PEER: return "another rank failed";
    case PCOLL_ERR_STATE: return "call not allowed in this state";
    case PCOLL_ERR_UNSUPPORTED: return "not supported by this build";
    case PCOLL_ERR_UNRECEIVED:
        return "a message of libpcoll's was left unreceived at finalize (a libpcoll bug)";
    default: return "unknown pcoll error";
    }
}

const char *pcoll_hint(int code) {
    switch (code) {
    case PCOLL_ERR_THREAD_LEVEL: return "call MPI_Init_thread with MPI_THREAD_MULTIPLE";
    case PCOLL_ERR_MISMATCH: return "pass the same n, mode, seed, ring, tau on every rank";
    case PCOLL_ERR_PENDING: return "call pcoll_wait between deposits";
    case PCOLL_ERR_RING: return "apply rounds with pcoll_next sooner, raise cfg.ring or set cfg.tau";
    case PCOLL_ERR_LATE: return "post rules ahead (cfg.horizon) so no rank has started the round";
    case PCOLL_ERR_PEER: return "read the failed rank's own error message";
    case PCOLL_ERR_UNSUPPORTED: return "rebuild with CUDA and NCCL, or use host memory";
    default: return "see pcoll_last_error() for the details";
    }
}

/* Copied into a buffer of the calling thread under the mutex: another thread's error cannot
 * change the string this thread is reading (until this thread's next call). */
static __thread char tl_err[512];
const char *pcoll_last_error(pcoll_t *h) {
    if (!h) {
        snprintf(tl_err, sizeof tl_err, "%s", pcoll_create_err);
        return tl_err;
    }
    if (!enter(h)) {
        snprintf(tl_err, sizeof tl_err, "the handle is finalized");
        return tl_err;
    }
    pthread_mutex_lock(&h->mu);
    snprintf(tl_err, sizeof tl_err, "%s", h->err ? h->errmsg : h->callmsg);
    leave_locked(h);
    pthread_mutex_unlock(&h->mu);
    return tl_err;
}
