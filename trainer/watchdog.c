/* watchdog.c -- the trainer's watchdog outside the training rounds: a rank that dies or hangs in
 * a collective of the epoch end, the start-up or the finish is found and named within --t-abort.
 *
 * One thread per process, from MPI_Init to MPI_Finalize. Every `period` (--t-warn / 10) it sends
 * a heartbeat to every peer on a private communicator (never blocking: a peer whose previous
 * heartbeat is still in flight is skipped), reads the peers' heartbeats, and judges:
 *   - a peer silent (no heartbeat) for longer than --t-warn: dead, stopped (SIGSTOP) or not
 *     scheduled; warned about every --t-warn, the job aborted after --t-abort;
 *   - while this rank waits in a collective (watch_enter .. watch_leave, a phase): a peer that
 *     is alive but has not reached the phase (it entered fewer phases) after --t-warn: warned
 *     about, the job aborted once this rank has waited --t-abort;
 *   - this thread's own wake-up, later than its period by more than --t-warn: this process was
 *     not running (SIGSTOP, or starved); it says that it is the silent one, and ends the job if
 *     it was away longer than --t-abort (its peers have then aborted, or are about to).
 * During the training rounds (watch_rounds) peers are judged by libpcoll's liveness thread and
 * the controller's stall watchdog instead; this thread keeps sending heartbeats and judging
 * itself. Time this thread was late is not held against the peers (as in libpcoll's live.c).
 *
 * Every rank enters the same phases in the same order (the trainer is SPMD), so the count of
 * phases entered compares ranks' progress without a clock shared between them.
 */
#include "trainer/watchdog.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Heartbeats per --t-warn: a silence is measured to a tenth of the warning bound. */
#define BEATS_PER_WARN 10.0
#define NAME_LEN       40
#define LIST_MAX       16 /* ranks named in one line; the rest are counted */

enum { BEAT_OK = 0, BEAT_LEAVING = 1 };
typedef struct {    /* one heartbeat (sent as bytes: every rank runs the same binary) */
    int32_t k;      /* phases entered */
    int32_t in;     /* 1: waiting in phase k */
    int32_t state;  /* BEAT_* */
    int32_t rounds; /* 1: in the training rounds */
    char name[NAME_LEN];
} beat_t;

struct watch {
    run_t *r;
    MPI_Comm hb;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, aborting;
    int log_owned; /* the main thread finishes the run log itself: never written from here */
    double t_warn, t_abort, period;
    /* this rank (written by the main thread under mu) */
    int k, in, depth, rounds;
    char name[NAME_LEN];
    double t_phase; /* when phase k was entered (or left) */
    double until;   /* phase k's deadline (watch_enter_until), 0: --t-abort's rules */
    /* this thread */
    double tick;                /* its last wake-up */
    double frozen_s, frozen_at; /* its last absence longer than --t-warn, and when it ended */
    double next_warn;           /* when a standing condition is warned about again */
    double *heard;              /* per peer: when its last heartbeat arrived */
    beat_t *last, *out;         /* per peer: its last heartbeat; the one in flight to it */
    int *left;                  /* per peer: it has finished (BEAT_LEAVING) */
    int64_t *nsent, *nrecv;     /* per peer: heartbeats sent to it, received from it */
    MPI_Request *req;
    /* the test aid EAGER_TEST_PAUSE=RANK:PHASE:SECONDS[:NTH] */
    int pause_rank, pause_nth, pause_seen;
    double pause_s;
    char pause_phase[NAME_LEN];
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The current beat of this rank (caller holds mu). */
static beat_t my_beat(const struct watch *w, int state) {
    beat_t b = {w->k, w->in, state, w->rounds, ""};
    memcpy(b.name, w->name, NAME_LEN);
    return b;
}

static void send_all(struct watch *w, int state) {
    pthread_mutex_lock(&w->mu);
    beat_t b = my_beat(w, state);
    pthread_mutex_unlock(&w->mu);
    for (int p = 0; p < w->r->P; p++) {
        if (p == w->r->me) continue;
        if (w->req[p] != MPI_REQUEST_NULL) {
            int done = 0;
            MPI_Test(&w->req[p], &done, MPI_STATUS_IGNORE);
            if (!done) continue; /* the peer is slow or gone: never block on it */
        }
        w->out[p] = b;
        if (MPI_Isend(&w->out[p], sizeof b, MPI_BYTE, p, 0, w->hb, &w->req[p]) != MPI_SUCCESS)
            w->req[p] = MPI_REQUEST_NULL;
        else
            w->nsent[p]++;
    }
}

static void receive_all(struct watch *w) {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, 0, w->hb, &flag, &st) != MPI_SUCCESS || !flag) return;
        beat_t b;
        if (MPI_Recv(&b, sizeof b, MPI_BYTE, st.MPI_SOURCE, 0, w->hb, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        w->nrecv[st.MPI_SOURCE]++;
        b.name[NAME_LEN - 1] = 0;
        pthread_mutex_lock(&w->mu);
        w->heard[st.MPI_SOURCE] = now_s();
        w->last[st.MPI_SOURCE] = b;
        if (b.state == BEAT_LEAVING) w->left[st.MPI_SOURCE] = 1;
        pthread_mutex_unlock(&w->mu);
    }
}

/* Where a peer was when last heard (its heartbeat). */
static int where(char *s, size_t n, const beat_t *b) {
    if (b->rounds) return snprintf(s, n, "in the training rounds");
    if (!*b->name) return snprintf(s, n, "starting");
    return snprintf(s, n, "%s '%s'", b->in ? "waiting in" : "past", b->name);
}

/* Appends the silent peers (silent for more than --t-warn) and, while this rank waits in a phase,
 * the live peers that have not reached it; returns how many, *worst: the longest silence. */
static int suspects(struct watch *w, double t, char *s, size_t n, double *worst) {
    int P = w->r->P, k = (int)strlen(s), nsil = 0, nlag = 0;
    *worst = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int p = 0, shown = 0; p < P; p++) {
            if (p == w->r->me || w->left[p]) continue;
            double age = t - w->heard[p];
            int silent = age > w->t_warn, lag = !silent && w->in && w->last[p].k < w->k;
            if (pass == 0 ? !silent : !lag) continue;
            if (pass == 0 && age > *worst) *worst = age;
            int i = pass == 0 ? nsil++ : nlag++;
            if (k >= (int)n - 120) continue;
            if (i == 0)
                k += snprintf(s + k, n - k, "%s",
                              pass == 0 ? "; silent (no heartbeat: dead, stopped or not scheduled):"
                                        : "; alive but not in it yet:");
            if (shown++ < LIST_MAX) {
                char at[NAME_LEN + 32];
                where(at, sizeof at, &w->last[p]);
                if (pass == 0)
                    k += snprintf(s + k, n - k, " rank %d for %.1f s (last heard %s)", p, age, at);
                else
                    k += snprintf(s + k, n - k, " rank %d (%s)", p, at);
            } else if (shown == LIST_MAX + 1)
                k += snprintf(s + k, n - k, " ...");
        }
    if (nsil + nlag > LIST_MAX && k < (int)n - 40) snprintf(s + k, n - k, " (%d ranks in all)", nsil + nlag);
    return nsil + nlag;
}

/* Ends the job from this thread: the message, rank 0's run log when the main thread is parked
 * in a collective (it cannot touch the log: watch_leave holds it), every rank aborted. */
static _Noreturn void abort_job(struct watch *w, const char *msg, int log_free) {
    run_t *r = w->r;
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    if (r->me == 0 && log_free && r->log) run_close(r, msg + strlen("eager-train: "), 0);
    run_abort(r, 3);
}

/* The peers judged at time t (caller holds mu; unlocks it before an abort). */
static void judge_peers(struct watch *w, double t) {
    if (w->rounds || w->aborting) return;
    char s[2048];
    int k;
    if (w->in)
        k = snprintf(s, sizeof s, "eager-train: rank %d: waiting in '%s' for %.1f s", w->r->me, w->name,
                     t - w->t_phase);
    else
        k = snprintf(s, sizeof s, "eager-train: rank %d (%s%s%s)", w->r->me, *w->name ? "past '" : "starting",
                     w->name, *w->name ? "'" : "");
    double worst;
    int nsus = suspects(w, t, s + k, sizeof s - k, &worst);
    /* a phase with a deadline: peers late into it are waited for up to the deadline (warned about
     * after the same share of it as --t-warn is of --t-abort), and this rank ends the job itself
     * once it has been in the phase that long, whoever it waits for */
    const double bound = w->in && w->until > 0 ? w->until : w->t_abort;
    const double warn = w->in && w->until > 0 ? w->t_warn * w->until / w->t_abort : w->t_warn;
    const int over = w->in && w->until > 0 && t - w->t_phase > w->until;
    int lagging = w->in && t - w->t_phase > warn;
    if (!over && (!nsus || (!lagging && worst == 0))) { /* nobody silent; nobody late for long */
        w->next_warn = 0;
        return;
    }
    if (over || worst > w->t_abort || (w->in && t - w->t_phase > bound)) {
        size_t m = strlen(s);
        if (w->in && w->until > 0)
            snprintf(s + m, sizeof s - m, "; aborting the job (the phase's deadline %g s)", w->until);
        else
            snprintf(s + m, sizeof s - m, "; aborting the job (--t-abort %g s)", w->t_abort);
        w->aborting = 1;
        int log_free = w->in && !w->log_owned;
        pthread_mutex_unlock(&w->mu);
        abort_job(w, s, log_free);
    }
    if (t < w->next_warn) return;
    w->next_warn = t + warn;
    fprintf(stderr, "%s\n", s);
    fflush(stderr);
}

/* This thread woke `late` seconds after it was due (caller holds mu; may abort). */
static void judge_self(struct watch *w, double t, double late) {
    if (late <= 0) return;
    for (int p = 0; p < w->r->P; p++) w->heard[p] += late; /* not the peers' silence */
    if (late <= w->t_warn) return;
    w->frozen_s = late, w->frozen_at = t;
    char s[512];
    snprintf(s, sizeof s,
             "eager-train: rank %d: this rank was not running for %.1f s (stopped, e.g. SIGSTOP, or not "
             "scheduled): it is the rank that went silent%s",
             w->r->me, late,
             late > w->t_abort ? ", longer than --t-abort: the other ranks have ended the job; ending it here"
                               : "; the other ranks may have warned about it");
    if (late > w->t_abort && !w->aborting) {
        w->aborting = 1;
        pthread_mutex_unlock(&w->mu);
        abort_job(w, s, 0);
    }
    fprintf(stderr, "%s\n", s);
    fflush(stderr);
}

static void *watch_main(void *arg) {
    struct watch *w = arg;
    pthread_mutex_lock(&w->mu);
    double t_prev = w->tick = now_s();
    for (int p = 0; p < w->r->P; p++) w->heard[p] = t_prev; /* silence counts from the start */
    while (!w->stop) {
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        double d = dl.tv_sec + dl.tv_nsec * 1e-9 + w->period;
        dl.tv_sec = (time_t)d, dl.tv_nsec = (long)((d - (double)dl.tv_sec) * 1e9);
        pthread_cond_timedwait(&w->cv, &w->mu, &dl);
        if (w->stop) break;
        double t = w->tick = now_s();
        judge_self(w, t, t - t_prev - 2 * w->period);
        t_prev = t;
        pthread_mutex_unlock(&w->mu);
        send_all(w, BEAT_OK);
        receive_all(w);
        pthread_mutex_lock(&w->mu);
        judge_peers(w, now_s());
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* EAGER_TEST_PAUSE=RANK:PHASE:SECONDS[:NTH]; 0, or -1 when malformed. */
static int parse_pause(struct watch *w, const char *v) {
    w->pause_rank = -1;
    if (!v || !*v) return 0;
    const char *c1 = strchr(v, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2 || c2 - c1 - 1 >= NAME_LEN || c2 == c1 + 1) return -1;
    char *e;
    long rank = strtol(v, &e, 10);
    if (e != c1 || rank < 0) return -1;
    double s = strtod(c2 + 1, &e);
    long nth = 1;
    if (*e == ':') nth = strtol(e + 1, &e, 10);
    if (*e || !(s >= 0) || nth < 1) return -1;
    w->pause_rank = (int)rank, w->pause_s = s, w->pause_nth = (int)nth;
    memcpy(w->pause_phase, c1 + 1, (size_t)(c2 - c1 - 1));
    return 0;
}

int watch_start(run_t *r) {
    struct watch *w = calloc(1, sizeof *w);
    int P = r->P;
    if (!w) return -1;
    w->r = r;
    w->heard = calloc((size_t)P, sizeof *w->heard);
    w->last = calloc((size_t)P, sizeof *w->last);
    w->out = calloc((size_t)P, sizeof *w->out);
    w->left = calloc((size_t)P, sizeof *w->left);
    w->req = malloc((size_t)P * sizeof *w->req);
    w->nsent = calloc((size_t)P, sizeof *w->nsent);
    w->nrecv = calloc((size_t)P, sizeof *w->nrecv);
    if (!w->heard || !w->last || !w->out || !w->left || !w->req || !w->nsent || !w->nrecv) return -1;
    for (int p = 0; p < P; p++) w->req[p] = MPI_REQUEST_NULL;
    if (parse_pause(w, getenv("EAGER_TEST_PAUSE"))) {
        if (!r->me)
            fprintf(stderr, "eager-train: EAGER_TEST_PAUSE '%s': expected RANK:PHASE:SECONDS[:NTH]\n",
                    getenv("EAGER_TEST_PAUSE"));
        return -1;
    }
    ctl_config_t d; /* the bounds until the options are read: the controller's defaults */
    ctl_config_default(&d);
    w->t_warn = d.t_warn, w->t_abort = d.t_abort, w->period = d.t_warn / BEATS_PER_WARN;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->mu, NULL);
    w->t_phase = now_s();
    if (MPI_Comm_dup(MPI_COMM_WORLD, &w->hb) != MPI_SUCCESS) return -1;
    r->watch = w;
    if (pthread_create(&w->th, NULL, watch_main, w)) {
        r->watch = NULL;
        return -1;
    }
    return 0;
}

void watch_bounds(run_t *r, double t_warn, double t_abort) {
    struct watch *w = r->watch;
    pthread_mutex_lock(&w->mu);
    w->t_warn = t_warn, w->t_abort = t_abort, w->period = t_warn / BEATS_PER_WARN;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* The test aid: this rank sleeps before the NTH entry into PHASE, alive (heartbeats go on). */
static void test_pause(struct watch *w, const char *phase) {
    if (w->pause_rank != w->r->me || strcmp(phase, w->pause_phase) || ++w->pause_seen != w->pause_nth) return;
    fprintf(stderr,
            "eager-train: rank %d (pid %d): EAGER_TEST_PAUSE: pausing %g s before '%s' (a test aid)\n",
            w->r->me, (int)getpid(), w->pause_s, phase);
    fflush(stderr);
    struct timespec ts = {(time_t)w->pause_s, (long)((w->pause_s - (double)(time_t)w->pause_s) * 1e9)};
    while (nanosleep(&ts, &ts)) continue;
}

void watch_enter_until(run_t *r, const char *phase, double deadline) {
    struct watch *w = r->watch;
    if (!w) return;
    if (w->depth++) return; /* inside a phase already: it goes on */
    test_pause(w, phase);
    pthread_mutex_lock(&w->mu);
    w->k++, w->in = 1, w->t_phase = now_s(), w->next_warn = 0;
    w->until = deadline > 0 ? deadline : 0;
    snprintf(w->name, NAME_LEN, "%s", phase);
    pthread_mutex_unlock(&w->mu);
}

void watch_enter(run_t *r, const char *phase) { watch_enter_until(r, phase, 0); }

void watch_leave(run_t *r) {
    struct watch *w = r->watch;
    if (!w || --w->depth) return;
    pthread_mutex_lock(&w->mu);
    while (w->aborting) pthread_cond_wait(&w->cv, &w->mu); /* the job ends from the watchdog */
    w->in = 0, w->t_phase = now_s();
    pthread_mutex_unlock(&w->mu);
}

void watch_rounds(run_t *r, int on) {
    struct watch *w = r->watch;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->rounds = on, w->next_warn = 0;
    pthread_mutex_unlock(&w->mu);
}

void watch_log_owned(run_t *r) {
    struct watch *w = r->watch;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->log_owned = 1;
    pthread_mutex_unlock(&w->mu);
}

int watch_self_silent(run_t *r, char *s, size_t n) {
    struct watch *w = r->watch;
    if (!w) return 0;
    pthread_mutex_lock(&w->mu);
    double t = now_s(), away = t - w->tick - 2 * w->period; /* this thread has not run since */
    if (!(away > w->t_warn) && w->frozen_at > 0 && t - w->frozen_at < w->t_abort) away = w->frozen_s;
    pthread_mutex_unlock(&w->mu);
    if (!(away > w->t_warn)) return 0;
    snprintf(s, n,
             "this rank was not running for %.1f s (stopped, e.g. SIGSTOP, or not scheduled): it is the rank "
             "that went silent, the others are not to blame",
             away);
    return 1;
}

/* Completes request *rq by deadline dl, or ends the job naming what it waited for. */
static void finish_wait(struct watch *w, MPI_Request *rq, double dl, const char *what, int peer) {
    for (;;) {
        int done = 0;
        if (MPI_Test(rq, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) return;
        if (now_s() > dl) break;
        usleep(200);
    }
    char s[256];
    if (peer >= 0)
        snprintf(
            s, sizeof s,
            "eager-train: rank %d: finishing: rank %d did not %s within --t-abort (%g s); aborting the job",
            w->r->me, peer, what, w->t_abort);
    else
        snprintf(
            s, sizeof s,
            "eager-train: rank %d: finishing: a rank did not %s within --t-abort (%g s); aborting the job",
            w->r->me, what, w->t_abort);
    abort_job(w, s, 0);
}

/* Every heartbeat sent is received before MPI_Finalize (a message never received is erroneous
 * MPI; MPICH over UCX warns about each one). Every rank calls watch_stop at the same point, so:
 *
 *   send LEAVING -> exchange counts sent (Ialltoall) -> receive what is missing from each peer
 *                -> complete this rank's own sends -> free the communicator
 *
 * each step bounded by --t-abort: a rank that does not take part is hung, and the job ends. */
static void drain(struct watch *w) {
    int P = w->r->P;
    int64_t *expect = calloc((size_t)P, sizeof *expect);
    if (!expect) return;
    double dl = now_s() + w->t_abort;
    MPI_Request rq;
    if (MPI_Ialltoall(w->nsent, 1, MPI_INT64_T, expect, 1, MPI_INT64_T, w->hb, &rq) == MPI_SUCCESS)
        finish_wait(w, &rq, dl, "join the final count of heartbeats", -1);
    for (int p = 0; p < P; p++)
        for (; w->nrecv[p] < expect[p]; w->nrecv[p]++) {
            beat_t b;
            if (MPI_Irecv(&b, sizeof b, MPI_BYTE, p, 0, w->hb, &rq) != MPI_SUCCESS) break;
            finish_wait(w, &rq, dl, "deliver its last heartbeats", p);
        }
    for (int p = 0; p < P; p++)
        if (w->req[p] != MPI_REQUEST_NULL)
            finish_wait(w, &w->req[p], dl, "receive this rank's last heartbeats", p);
    free(expect);
    run_unreceived(w->r, w->hb, "the watchdog's communicator");
    MPI_Comm_free(&w->hb);
}

void watch_stop(run_t *r) {
    struct watch *w = r->watch;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    send_all(w, BEAT_LEAVING); /* the peers stop watching this rank */
    drain(w);
    r->watch = NULL;
    free(w->heard), free(w->last), free(w->out), free(w->left), free(w->req), free(w->nsent), free(w->nrecv);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}
