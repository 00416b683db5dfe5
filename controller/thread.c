/* thread.c -- controller thread: feeds round records to the policy, posts rules and the horizon,
 * and hosts the stall watchdog (controller.h, "Controller thread"). */
#include "controller/controller.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ctl {
    pcoll_t *h;
    ctl_config_t cfg;
    ctl_policy_t *pol;
    int P, rank;
    pthread_t th;
    atomic_int stop;
    pthread_mutex_t mu;      /* guards log, st, hash, err, status, ended */
    pthread_cond_t ended_cv; /* signalled when the thread ends (ctl_wait) */
    int ended;
    ctl_switch_t *log;
    size_t nlog, caplog;
    ctl_policy_stats_t st;
    uint64_t hash;
    int status;
    char err[512];
    /* watchdog view of the last completed round (thread-private) */
    uint8_t *last_fresh, *last_flags;
    uint32_t *last_streak;
    int have_last;
    /* pending decisions (effective > observed round) for the watchdog's rule of the stalled round */
    struct pend {
        uint64_t effective;
        pcoll_mode_t mode;
        int quorum, nwait;
    } * pend;
    size_t npend, cappend;
    pcoll_mode_t cur_mode;
    int cur_quorum, cur_nwait;
    /* heartbeats: liveness of the peers for the watchdog (pcoll_heartbeat / pcoll_peers) */
    pcoll_peer_t *peers;
    double hb_every, hb_last;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ctl_config_default(ctl_config_t *c) {
    memset(c, 0, sizeof *c);
    ctl_policy_default(&c->policy);
    c->t_warn = 10.0;
    c->t_abort = 60.0;
    c->t_first = 600.0;
    c->poll_s = 0.1;
    c->log = stderr;
    c->log_switches = 0;
    c->on_abort = NULL;
    c->abort_arg = NULL;
}

static void default_abort(void *arg, const char *msg) {
    (void)arg;
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static void set_err(struct ctl *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(struct ctl *c, int status, const char *fmt, ...) {
    pthread_mutex_lock(&c->mu);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    c->status = status;
    pthread_mutex_unlock(&c->mu);
}

static int log_switch(struct ctl *c, const ctl_decision_t *d) {
    pthread_mutex_lock(&c->mu);
    if (c->nlog == c->caplog) {
        size_t cap = c->caplog ? 2 * c->caplog : 64;
        ctl_switch_t *n = realloc(c->log, cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&c->mu);
            return CTL_ERR_NOMEM;
        }
        c->log = n;
        c->caplog = cap;
    }
    ctl_switch_t *s = &c->log[c->nlog++];
    memset(s, 0, sizeof *s);
    s->round = d->round;
    s->effective = d->effective;
    s->what = d->what;
    s->old_mode = d->old_rule.mode;
    s->new_mode = d->new_rule.mode;
    s->old_quorum = d->old_rule.quorum;
    s->new_quorum = d->new_rule.quorum;
    s->new_nwait = d->new_rule.nwait;
    s->L = d->L;
    s->A = d->A;
    s->F = d->F;
    s->T = d->T;
    snprintf(s->reason, sizeof s->reason, "%s", d->reason);
    pthread_mutex_unlock(&c->mu);
    return CTL_OK;
}

static int push_pend(struct ctl *c, const ctl_decision_t *d) {
    if (c->npend == c->cappend) {
        size_t cap = c->cappend ? 2 * c->cappend : 8;
        struct pend *n = realloc(c->pend, cap * sizeof *n);
        if (!n) return CTL_ERR_NOMEM;
        c->pend = n;
        c->cappend = cap;
    }
    c->pend[c->npend++] =
        (struct pend){d->effective, d->new_rule.mode, d->new_rule.quorum, d->new_rule.nwait};
    return CTL_OK;
}

/* Brings the watchdog's view of the rule in force (cur_*) to round r: applies, then drops, the
 * posted decisions that are in effect by r. */
static void pend_advance(struct ctl *c, uint64_t r) {
    size_t k = 0;
    while (k < c->npend && c->pend[k].effective <= r) {
        c->cur_mode = c->pend[k].mode;
        c->cur_quorum = c->pend[k].quorum;
        c->cur_nwait = c->pend[k].nwait;
        k++;
    }
    if (k) {
        memmove(c->pend, c->pend + k, (c->npend - k) * sizeof *c->pend);
        c->npend -= k;
    }
}

/* Appends what the heartbeats say: silent ranks (dead or hung) and ranks still computing (they
 * have not deposited) are the ones a stalled round waits for. */
static void peer_report(struct ctl *c, char *buf, size_t n, int k) {
    if (!c->peers || pcoll_peers(c->h, c->peers) != PCOLL_OK) return;
    double silent_after = 3 * c->hb_every + 1.0;
    int nsil = 0, ncomp = 0;
    for (int p = 0; p < c->P; p++) {
        const pcoll_peer_t *q = &c->peers[p];
        if (p != c->rank && (q->heard_s < 0 || q->heard_s > silent_after))
            nsil++;
        else if (!q->pending)
            ncomp++;
    }
    if (nsil && k < (int)n) {
        k += snprintf(buf + k, n - k, "; SILENT (dead or hung, no heartbeat):");
        for (int p = 0; p < c->P && k < (int)n - 48; p++) {
            const pcoll_peer_t *q = &c->peers[p];
            if (p == c->rank || !(q->heard_s < 0 || q->heard_s > silent_after)) continue;
            if (q->heard_s < 0)
                k += snprintf(buf + k, n - k, " rank %d (never heard)", p);
            else
                k += snprintf(buf + k, n - k, " rank %d (for %.1f s)", p, q->heard_s);
        }
    }
    /* the others, grouped: inside a reduction (waiting for its peers), waiting with a deposit,
     * computing (no deposit: the ones a round waits for) */
    const char *what[3] = {
        "inside the reduction of a started round:", "deposit pending:", "computing (no deposit pending):"};
    for (int g = 0; g < 3 && ncomp + c->P; g++) {
        int any = 0;
        for (int p = 0; p < c->P && k < (int)n - 48; p++) {
            const pcoll_peer_t *q = &c->peers[p];
            if (p != c->rank && (q->heard_s < 0 || q->heard_s > silent_after)) continue;
            int grp = q->started > q->completed ? 0 : q->pending ? 1 : 2;
            if (grp != g) continue;
            if (!any++) k += snprintf(buf + k, n - k, "; %s", what[g]);
            if (g == 0)
                k += snprintf(buf + k, n - k, " %d (round %llu)", p, (unsigned long long)q->completed);
            else
                k += snprintf(buf + k, n - k, " %d (%.1f s)", p, q->pending_s);
        }
    }
}

static void stall_message(struct ctl *c, uint64_t r, double stalled, char *buf, size_t n) {
    pend_advance(c, r);
    char mode[32];
    pcoll_format_mode(c->cur_mode, c->cur_quorum, mode, sizeof mode);
    int k = snprintf(buf, n,
                     "controller (rank %d): no round completed for %.1f s; waiting for round %llu "
                     "(rule %s, %d in policy wait set",
                     c->rank, stalled, (unsigned long long)r, mode, c->cur_nwait);
    int tw[16];
    uint64_t tr;
    int ntw = ctl_policy_tau_wait(c->pol, &tr, tw, 16);
    if (ntw > 0 && tr == r && k < (int)n) {
        k += snprintf(buf + k, n - k, ", tau wait set");
        for (int i = 0; i < ntw && i < 16 && k < (int)n; i++) k += snprintf(buf + k, n - k, " %d", tw[i]);
        if (ntw > 16 && k < (int)n) k += snprintf(buf + k, n - k, " ...");
    }
    if (k < (int)n) k += snprintf(buf + k, n - k, ")");
    if (!c->have_last) {
        if (k < (int)n)
            snprintf(buf + k, n - k,
                     "; no round has completed yet: some rank has not deposited "
                     "(or not started its engine)");
        return;
    }
    if (k < (int)n)
        k += snprintf(buf + k, n - k,
                      "; ranks not fresh in round %llu (likely not deposited):", (unsigned long long)(r - 1));
    int shown = 0, total = 0;
    for (int i = 0; i < c->P; i++) {
        if (c->last_flags[i] & (PCOLL_F_JOINED | PCOLL_F_FAILED) || c->last_fresh[i]) continue;
        total++;
        if (shown < 32 && k < (int)n - 40) {
            k += snprintf(buf + k, n - k, " %d (streak %u)", i, c->last_streak[i]);
            shown++;
        }
    }
    if (total > shown && k < (int)n) k += snprintf(buf + k, n - k, " ... (%d in all)", total);
    if (total == 0 && k < (int)n)
        k += snprintf(buf + k, n - k,
                      " none (every active rank was fresh; the stalled "
                      "round waits for new deposits)");
    peer_report(c, buf, n, k);
}

/* The watchdog's end: CTL_ERR_STALL with msg, then on_abort (or the default: MPI_Abort). */
static void stall_abort(struct ctl *c, const char *msg) {
    set_err(c, CTL_ERR_STALL, "%s", msg);
    if (c->cfg.on_abort)
        c->cfg.on_abort(c->cfg.abort_arg, msg);
    else
        default_abort(NULL, msg);
}
static void warn_line(struct ctl *c, const char *msg) {
    if (!c->cfg.log) return;
    fprintf(c->cfg.log, "%s\n", msg);
    fflush(c->cfg.log);
}

/* 1 once some rank has deposited: this rank (pcoll_peers' own entry) or a peer heard from (its
 * heartbeat says it has a deposit pending, or its engine has started or completed a round). */
static int any_deposit(struct ctl *c) {
    if (pcoll_peers(c->h, c->peers) != PCOLL_OK) return 0;
    for (int p = 0; p < c->P; p++) {
        const pcoll_peer_t *q = &c->peers[p];
        if ((p == c->rank || q->heard_s >= 0) && (q->pending || q->started || q->completed)) return 1;
    }
    return 0;
}

/* Before any deposit: how long the handle has waited for one, and the peers' state. */
static void first_message(struct ctl *c, double waited, double bound, char *buf, size_t n) {
    int k = snprintf(buf, n,
                     "controller (rank %d): no rank has deposited %.1f s after the start (a first step: "
                     "cuDNN searches, graph capture, NCCL's connect, the first batch; bound %.1f s)",
                     c->rank, waited, bound);
    peer_report(c, buf, n, k);
}

static void *run(void *arg) {
    struct ctl *c = arg;
    const int lag = c->cfg.policy.lag;
    pcoll_record_t rec;
    if (pcoll_record_init(&rec, c->P) != PCOLL_OK) {
        set_err(c, CTL_ERR_NOMEM, "controller: pcoll_record_init failed");
        return NULL;
    }
    uint64_t r = 0;
    const double t0 = now_s();
    double last = t0;
    double next_warn = c->cfg.t_warn;
    /* the stall timer runs from the first deposit (without the peer table: from the start) */
    int deposited = !c->peers;
    const double t_first = c->cfg.t_first > c->cfg.t_abort ? c->cfg.t_first : c->cfg.t_abort;
    double next_first = c->cfg.t_abort;
    while (!atomic_load(&c->stop)) {
        if (c->peers && now_s() - c->hb_last >= c->hb_every) {
            pcoll_heartbeat(c->h);
            c->hb_last = now_s();
        }
        if (!deposited && (deposited = any_deposit(c))) last = now_s();
        int rc = pcoll_record_get(c->h, r, &rec, c->cfg.poll_s);
        if (rc == PCOLL_OK) {
            ctl_decision_t d;
            int k = ctl_policy_observe(c->pol, &rec, &d);
            if (k < 0) {
                set_err(c, CTL_ERR_PCOLL, "controller: record of round %llu rejected by the policy (%d)",
                        (unsigned long long)r, k);
                break;
            }
            if (k == 1) {
                int e = pcoll_set_rule(c->h, d.effective, &d.new_rule);
                if (e < 0) {
                    set_err(c, CTL_ERR_PCOLL, "controller: pcoll_set_rule(round %llu) failed: %s: %s",
                            (unsigned long long)d.effective, pcoll_strerror(e), pcoll_last_error(c->h));
                    break;
                }
                if (push_pend(c, &d) || ((d.what & CTL_DEC_MODE) && log_switch(c, &d))) {
                    set_err(c, CTL_ERR_NOMEM, "controller: out of memory");
                    break;
                }
                if ((d.what & CTL_DEC_MODE) && c->cfg.log_switches && c->cfg.log)
                    fprintf(c->cfg.log, "controller (rank %d): round %llu: %s\n", c->rank,
                            (unsigned long long)d.effective, d.reason);
            }
            int e = pcoll_set_horizon(c->h, r + (uint64_t)lag);
            if (e < 0) {
                set_err(c, CTL_ERR_PCOLL, "controller: pcoll_set_horizon(%llu) failed: %s: %s",
                        (unsigned long long)(r + lag), pcoll_strerror(e), pcoll_last_error(c->h));
                break;
            }
            memcpy(c->last_fresh, rec.fresh, c->P);
            memcpy(c->last_flags, rec.flags, c->P);
            memcpy(c->last_streak, rec.streak, c->P * sizeof(uint32_t));
            c->have_last = 1;
            pthread_mutex_lock(&c->mu);
            ctl_policy_stats(c->pol, &c->st);
            c->hash = ctl_policy_hash(c->pol);
            pthread_mutex_unlock(&c->mu);
            int all_joined = 1;
            for (int i = 0; i < c->P && all_joined; i++) all_joined = (rec.flags[i] & PCOLL_F_JOINED) != 0;
            if (all_joined) {
                /* every rank has joined (agreed): rules no longer matter; let the flush run */
                pcoll_set_horizon(c->h, UINT64_MAX);
                break;
            }
            pend_advance(c, r + 1);
            r++;
            last = now_s();
            next_warn = c->cfg.t_warn;
            deposited = 1;
        } else if (rc == PCOLL_ERR_TIMEOUT && !deposited) {
            double waited = now_s() - t0;
            if (c->cfg.t_abort > 0 && c->cfg.t_first > 0 && waited >= t_first) {
                char msg[2048];
                first_message(c, waited, t_first, msg, sizeof msg);
                size_t k = strlen(msg);
                snprintf(msg + k, sizeof msg - k, "; aborting after t_first=%.1f s", t_first);
                stall_abort(c, msg);
                break;
            }
            if (c->cfg.t_abort > 0 && c->cfg.t_first > 0 && waited >= next_first) {
                char msg[2048];
                first_message(c, waited, t_first, msg, sizeof msg);
                warn_line(c, msg);
                next_first += c->cfg.t_abort;
            }
        } else if (rc == PCOLL_ERR_TIMEOUT) {
            double stalled = now_s() - last;
            if (c->cfg.t_abort > 0 && stalled >= c->cfg.t_abort) {
                char msg[2048];
                stall_message(c, r, stalled, msg, sizeof msg);
                size_t k = strlen(msg);
                snprintf(msg + k, sizeof msg - k, "; aborting after t_abort=%.1f s", c->cfg.t_abort);
                stall_abort(c, msg);
                break;
            }
            if (c->cfg.t_warn > 0 && stalled >= next_warn) {
                char msg[2048];
                stall_message(c, r, stalled, msg, sizeof msg);
                warn_line(c, msg);
                next_warn += c->cfg.t_warn;
            }
        } else if (rc == PCOLL_ERR_STATE) {
            break; /* finalize started: normal end */
        } else {
            set_err(c, CTL_ERR_PCOLL, "controller: pcoll_record_get(round %llu) failed: %s: %s",
                    (unsigned long long)r, pcoll_strerror(rc), pcoll_last_error(c->h));
            break;
        }
    }
    pcoll_record_free(&rec);
    pthread_mutex_lock(&c->mu);
    c->ended = 1;
    pthread_cond_broadcast(&c->ended_cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int ctl_wait(ctl_t *c, double timeout_s) {
    if (!c) return CTL_ERR_ARG;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    if (timeout_s >= 0) {
        double t = (double)dl.tv_sec + 1e-9 * (double)dl.tv_nsec + timeout_s;
        dl.tv_sec = (time_t)t;
        dl.tv_nsec = (long)((t - (double)dl.tv_sec) * 1e9);
    }
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    while (!c->ended && rc == 0)
        rc = timeout_s < 0 ? pthread_cond_wait(&c->ended_cv, &c->mu)
                           : pthread_cond_timedwait(&c->ended_cv, &c->mu, &dl);
    int st = c->ended ? c->status : CTL_ERR_TIMEOUT;
    pthread_mutex_unlock(&c->mu);
    return st;
}

/* Frees c and everything it owns (the thread, if any, has ended). */
static void ctl_free(struct ctl *c) {
    ctl_policy_free(c->pol);
    free(c->log);
    free(c->pend);
    free(c->last_fresh);
    free(c->last_flags);
    free(c->last_streak);
    free(c->peers);
    pthread_cond_destroy(&c->ended_cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int ctl_start(pcoll_t *h, const ctl_config_t *cfg, ctl_t **out) {
    if (!h || !cfg || !out) return CTL_ERR_ARG;
    *out = NULL;
    if (ctl_policy_check(&cfg->policy, NULL, 0)) return CTL_ERR_ARG;
    if (!(cfg->poll_s > 0) || cfg->t_warn < 0 || cfg->t_abort < 0 || cfg->t_first < 0) return CTL_ERR_ARG;
    struct ctl *c = calloc(1, sizeof *c);
    if (!c) return CTL_ERR_NOMEM;
    c->h = h;
    c->cfg = *cfg;
    c->P = pcoll_size(h);
    c->rank = pcoll_rank(h);
    char rerr[256] = "";
    c->pol = cfg->resume ? ctl_policy_resume(&cfg->policy, c->P, cfg->resume, rerr, sizeof rerr)
                         : ctl_policy_new(&cfg->policy, c->P);
    if (!c->pol && cfg->resume && c->P >= 1) {
        if (cfg->log) fprintf(cfg->log, "controller: cannot resume the policy: %s\n", rerr);
        free(c);
        return CTL_ERR_ARG;
    }
    c->last_fresh = calloc(c->P > 0 ? c->P : 1, 1);
    c->last_flags = calloc(c->P > 0 ? c->P : 1, 1);
    c->last_streak = calloc(c->P > 0 ? c->P : 1, sizeof(uint32_t));
    c->peers = calloc(c->P > 0 ? c->P : 1, sizeof(pcoll_peer_t)); /* NULL: no peer report */
    c->hb_every = cfg->t_warn > 0 && cfg->t_warn / 4 < 1.0 ? cfg->t_warn / 4 : 1.0;
    if (c->hb_every < cfg->poll_s) c->hb_every = cfg->poll_s;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->ended_cv, NULL);
    if (!c->pol || !c->last_fresh || !c->last_flags || !c->last_streak) {
        int bad_p = c->P < 1;
        ctl_free(c);
        return bad_p ? CTL_ERR_ARG : CTL_ERR_NOMEM;
    }
    pcoll_rule_t init;
    ctl_policy_initial(c->pol, &init);
    c->cur_mode = init.mode;
    c->cur_quorum = init.quorum;
    int rc = pcoll_set_rule(h, 0, &init);
    if (rc >= 0) rc = pcoll_set_horizon(h, (uint64_t)cfg->policy.lag - 1);
    if (rc >= 0 && pthread_create(&c->th, NULL, run, c)) rc = CTL_ERR_NOMEM;
    if (rc < 0) {
        ctl_free(c);
        return rc == CTL_ERR_NOMEM ? rc : CTL_ERR_PCOLL;
    }
    *out = c;
    return CTL_OK;
}

int ctl_stop(ctl_t **cp) {
    if (!cp || !*cp) return CTL_ERR_ARG;
    struct ctl *c = *cp;
    atomic_store(&c->stop, 1);
    pthread_join(c->th, NULL);
    int st = c->status;
    ctl_free(c);
    *cp = NULL;
    return st;
}

size_t ctl_switch_log(ctl_t *c, ctl_switch_t *out, size_t max) {
    pthread_mutex_lock(&c->mu);
    size_t n = c->nlog;
    if (out)
        for (size_t i = 0; i < n && i < max; i++) out[i] = c->log[i];
    pthread_mutex_unlock(&c->mu);
    return n;
}

int ctl_stats(ctl_t *c, ctl_policy_stats_t *st, uint64_t *hash) {
    if (!c) return CTL_ERR_ARG;
    pthread_mutex_lock(&c->mu);
    if (st) *st = c->st;
    if (hash) *hash = c->hash;
    pthread_mutex_unlock(&c->mu);
    return CTL_OK;
}

ctl_state_t *ctl_state(ctl_t *c) {
    if (!c) return NULL;
    pthread_mutex_lock(&c->mu);
    int ended = c->ended; /* the policy is the thread's until it has ended */
    pthread_mutex_unlock(&c->mu);
    return ended ? ctl_policy_state(c->pol) : NULL;
}

const char *ctl_last_error(ctl_t *c) {
    static __thread char copy[512];
    if (!c) return "";
    pthread_mutex_lock(&c->mu);
    snprintf(copy, sizeof copy, "%s", c->err);
    pthread_mutex_unlock(&c->mu);
    return copy;
}
