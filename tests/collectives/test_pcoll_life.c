/* test_pcoll_life.c -- libpcoll's lifecycle and failure semantics under mpirun, one case per run:
 *   --case close    a controller-like thread lags 20 ms per record and a second one is blocked in
 *                   pcoll_record_get while the main thread finalizes without stopping them: both
 *                   get PCOLL_ERR_STATE, nothing crashes, and calls on the finalized handle
 *                   return PCOLL_ERR_STATE
 *   --case nodrain  rank 0 finalizes early without draining (ring 2) while the others run many
 *                   more rounds: every rank's finalize returns OK
 *   --case rule     rule changes: without a horizon every rank gets the same answer
 *                   (PCOLL_ERR_STATE) whatever its engine's progress; with one, a round at or
 *                   below the horizon is PCOLL_ERR_LATE on every rank, and pcoll_set_horizon
 *                   (UINT64_MAX) releases every round
 *   --case args     records too small for P are refused by pcoll_next and pcoll_record_get;
 *                   pcoll_last_error's string is the caller's own copy
 *   --case evict    records = 2 and a thread that keeps reading the oldest record still kept:
 *                   pcoll_record_get returns that round's record or PCOLL_ERR_EVICTED, never
 *                   the record of the round that is overwriting it
 *   --case nowait   deposits made with PCOLL_WAIT_NEXT that no pcoll_wait follows still go into
 *                   rounds (the engine takes them once the reservation for the wait runs out):
 *                   every rank deposits and polls pcoll_next without waiting, 10 times, sync and
 *                   solo; each round completes (the runner's timeout catches a hang)
 *   --case lend     pcoll_lend: sync rounds reduce the lent buffer itself (the library writes
 *                   the metadata after its n floats; pcoll_stats counts every round as lent) with
 *                   exact sums while the caller rewrites it between rounds; in solo, a deposit
 *                   that accumulates onto a lent one (rounds held back by the horizon) gives the
 *                   sum of both in one round, reduced from the library's copy; bad arguments
 *   --case dead     rank P-1 stops itself (SIGSTOP) after 10 rounds: every other rank's call
 *                   returns PCOLL_ERR_PEER naming it within the library's bound, and finalize
 *                   returns an error at once instead of waiting; rank 0 then writes
 *                   ALL-DETECTED to the file named by --marker (stdout may be lost when the job
 *                   is aborted) and, once it is written, the survivors end the job with MPI_Abort
 * Exit 0 = all checks passed on every rank (dead: the runner greps the marker file).
 */
#include "collectives/pcoll.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int P, me, fails;
#define CHECK(c, ...)                                                                         \
    do {                                                                                      \
        if (!(c)) {                                                                           \
            fails++;                                                                          \
            fprintf(stderr, "rank %d: CHECK failed %s:%d: %s: ", me, __FILE__, __LINE__, #c); \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
        }                                                                                     \
    } while (0)

static void sleep_ms(double ms) {
    struct timespec ts = {(time_t)(ms / 1e3), (long)((ms - 1e3 * (double)(time_t)(ms / 1e3)) * 1e6)};
    nanosleep(&ts, NULL);
}

static pcoll_t *make(int mode, int ring, int horizon) {
    pcoll_config_t cfg;
    pcoll_config_default(&cfg);
    cfg.rule.mode = (pcoll_mode_t)mode;
    cfg.ring = ring;
    cfg.horizon = horizon;
    pcoll_t *h = NULL;
    pcollCheck(pcoll_create(MPI_COMM_WORLD, 64, PCOLL_MEM_HOST, &cfg, &h));
    return h;
}

/* steps deposits (each waited for, results applied), then join and drain */
static int run_steps_wait(pcoll_t *h, int steps, int drain, double delay_ms, double wait_s) {
    float g[64];
    for (int k = 0; k < 64; k++) g[k] = (float)(me + 1);
    const float *res;
    for (int s = 0; s < steps; s++) {
        if (delay_ms > 0) sleep_ms(delay_ms);
        int rc = pcoll_deposit(h, g, 0);
        if (!rc) rc = pcoll_wait(h, PCOLL_WAIT_CONSUMED, wait_s, NULL);
        if (rc) {
            fprintf(stderr, "rank %d: step %d: %s: %s\n", me, s, pcoll_strerror(rc), pcoll_last_error(h));
            return rc;
        }
        while (pcoll_next(h, NULL, &res, NULL) == PCOLL_OK) {}
    }
    if (!drain) return PCOLL_OK;
    pcoll_join(h);
    int rc;
    while ((rc = pcoll_wait(h, PCOLL_WAIT_NEWER, 60, NULL)) == PCOLL_OK)
        while (pcoll_next(h, NULL, &res, NULL) == PCOLL_OK) {}
    return rc == PCOLL_DONE ? PCOLL_OK : rc;
}
static int run_steps(pcoll_t *h, int steps, int drain, double delay_ms) {
    return run_steps_wait(h, steps, drain, delay_ms, 60);
}

typedef struct {
    pcoll_t *h;
    int lag_ms;
    int rc;
    uint64_t got;
} reader_t;

static void *lagging_reader(void *arg) { /* like controller/thread.c, 20 ms per record */
    reader_t *r = arg;
    pcoll_record_t rec;
    pcoll_record_init(&rec, P);
    for (uint64_t q = 0;;) {
        int rc = pcoll_record_get(r->h, q, &rec, 0.1);
        if (rc == PCOLL_ERR_TIMEOUT) continue;
        if (rc) {
            r->rc = rc;
            break;
        }
        r->got++;
        q++;
        sleep_ms(r->lag_ms);
    }
    pcoll_record_free(&rec);
    return NULL;
}

static void *blocked_reader(void *arg) {
    reader_t *r = arg;
    pcoll_record_t rec;
    pcoll_record_init(&rec, P);
    r->rc = pcoll_record_get(r->h, 1u << 30, &rec, -1); /* a round that never comes */
    pcoll_record_free(&rec);
    return NULL;
}

static void case_close(void) {
    pcoll_t *h = make(PCOLL_SOLO, 16, 0);
    reader_t lag = {h, 20, 0, 0}, blk = {h, 0, 0, 0};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, lagging_reader, &lag);
    pthread_create(&t2, NULL, blocked_reader, &blk);
    CHECK(run_steps(h, 60, 1, 0.2) == PCOLL_OK, "steps");
    pcoll_t *old = h;
    int rc = pcoll_finalize(&h, 60); /* with both threads still running */
    CHECK(rc == PCOLL_OK, "finalize: %s", pcoll_strerror(rc));
    CHECK(h == NULL, "finalize clears the handle");
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK(lag.rc == PCOLL_ERR_STATE, "lagging reader ended with %s", pcoll_strerror(lag.rc));
    CHECK(blk.rc == PCOLL_ERR_STATE, "blocked reader ended with %s", pcoll_strerror(blk.rc));
    CHECK(pcoll_rounds(old) == 0 && pcoll_join(old) == PCOLL_ERR_STATE &&
              pcoll_finalize(&old, 1) == PCOLL_ERR_STATE,
          "calls after finalize return PCOLL_ERR_STATE");
    printf("rank %d: the lagging reader read %llu records before finalize closed the handle\n", me,
           (unsigned long long)lag.got);
}

static void case_nodrain(void) {
    pcoll_t *h = make(PCOLL_SOLO, 2, 0);
    int rc = run_steps(h, me == 0 ? 3 : 60, 0, me == 0 ? 0 : 1);
    CHECK(rc == PCOLL_OK, "steps: %s", pcoll_strerror(rc));
    if (me != 0) { /* the others keep depositing while rank 0 sits in finalize */
        pcoll_join(h);
    }
    rc = pcoll_finalize(&h, 60);
    CHECK(rc == PCOLL_OK, "finalize without draining: %s", pcoll_strerror(rc));
}

static void case_nowait(void) {
    float g[64];
    for (int k = 0; k < 64; k++) g[k] = (float)(me + 1);
    for (int mode = PCOLL_SYNC; mode <= PCOLL_SOLO; mode++) {
        pcoll_t *h = make(mode, 16, 0);
        double t0 = MPI_Wtime();
        uint64_t got = 0;
        for (int s = 0; s < 10; s++) {
            int fl = PCOLL_WAIT_NEXT | (mode == PCOLL_SOLO ? PCOLL_ACCUMULATE : 0);
            CHECK(pcoll_deposit(h, g, fl) == PCOLL_OK, "deposit %d", s);
            const float *res;
            while (pcoll_next(h, NULL, &res, NULL) != PCOLL_OK) sleep_ms(1); /* never waits */
            got++;
        }
        printf("rank %d: %s: %llu rounds without pcoll_wait in %.2f s\n", me,
               mode == PCOLL_SYNC ? "sync" : "solo", (unsigned long long)got, MPI_Wtime() - t0);
        pcoll_join(h);
        CHECK(pcoll_finalize(&h, 60) == PCOLL_OK, "finalize");
    }
}

static void case_rule(void) {
    pcoll_rule_t maj = {PCOLL_MAJORITY, 1, 0, NULL};
    /* without a horizon: rank 0 asks before its first round, the others after 8 rounds */
    pcoll_t *h = make(PCOLL_SYNC, 16, 0);
    int rc = 0, all[2];
    if (me == 0) rc = pcoll_set_rule(h, 4, &maj);
    CHECK(run_steps(h, 8, 0, 0) == PCOLL_OK, "steps");
    if (me != 0) rc = pcoll_set_rule(h, 4, &maj);
    int mm[2] = {rc, -rc};
    MPI_Allreduce(mm, all, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(all[0] == -all[1], "ranks disagree on pcoll_set_rule without a horizon: codes %d .. %d", -all[1],
          all[0]);
    CHECK(rc == PCOLL_ERR_STATE, "without a horizon: %s", pcoll_strerror(rc));
    CHECK(run_steps(h, 8, 1, 0) == PCOLL_OK, "steps after the refused rule");
    CHECK(pcoll_finalize(&h, 60) == PCOLL_OK, "finalize");
    /* with a horizon */
    h = make(PCOLL_SYNC, 16, 1);
    pcollCheck(pcoll_set_horizon(h, 9));
    rc = pcoll_set_rule(h, 5, &maj);
    CHECK(rc == PCOLL_ERR_LATE, "rule below the horizon: %s", pcoll_strerror(rc));
    rc = pcoll_set_rule(h, 10, &maj);
    CHECK(rc == PCOLL_OK, "rule above the horizon: %s: %s", pcoll_strerror(rc), pcoll_last_error(h));
    pcollCheck(pcoll_set_horizon(h, UINT64_MAX));
    CHECK(pcoll_set_rule(h, 1000, &maj) == PCOLL_ERR_LATE, "every round is final after UINT64_MAX");
    rc = run_steps(h, 30, 1, 0); /* must run past round 10 */
    CHECK(rc == PCOLL_OK, "rounds after pcoll_set_horizon(UINT64_MAX): %s", pcoll_strerror(rc));
    pcoll_record_t rec;
    pcoll_record_init(&rec, P);
    rc = pcoll_record_get(h, 12, &rec, 10);
    CHECK(rc == PCOLL_OK && rec.round == 12 && rec.mode == PCOLL_MAJORITY, "round 12 is majority");
    pcoll_record_free(&rec);
    CHECK(pcoll_finalize(&h, 60) == PCOLL_OK, "finalize");
}

static void *pending_error(void *arg) { /* another thread's failed call */
    pcoll_t *h = arg;
    float g[64] = {0};
    pcoll_deposit(h, g, 0);
    pcoll_deposit(h, g, 0); /* PCOLL_ERR_PENDING */
    (void)pcoll_last_error(h);
    return NULL;
}

static void case_args(void) {
    pcoll_t *h = make(PCOLL_SYNC, 16, 0);
    CHECK(run_steps(h, 3, 0, 0) == PCOLL_OK, "steps");
    pcoll_record_t small;
    pcoll_record_init(&small, P > 1 ? P - 1 : 1);
    if (P > 1) {
        CHECK(pcoll_record_get(h, 0, &small, 1) == PCOLL_ERR_ARG, "pcoll_record_get with a small record");
        float g[64] = {0};
        pcollCheck(pcoll_deposit(h, g, 0));
        pcollCheck(pcoll_wait(h, PCOLL_WAIT_CONSUMED, 60, NULL));
        CHECK(pcoll_next(h, NULL, NULL, &small) == PCOLL_ERR_ARG, "pcoll_next with a small record");
        CHECK(strstr(pcoll_last_error(h), "record") != NULL, "message: %s", pcoll_last_error(h));
    }
    pcoll_record_free(&small);
    CHECK(pcoll_set_cost(h, -1, 0) == PCOLL_ERR_ARG, "negative cost");
    const char *mine = pcoll_last_error(h);
    char copy[512];
    snprintf(copy, sizeof copy, "%s", mine);
    pthread_t t;
    pthread_create(&t, NULL, pending_error, h);
    pthread_join(t, NULL);
    CHECK(!strcmp(mine, copy) && strstr(mine, "pcoll_set_cost"), "this thread's message changed to: %s",
          mine);
    pcoll_join(h);
    int rc;
    const float *res;
    while ((rc = pcoll_wait(h, PCOLL_WAIT_NEWER, 60, NULL)) == PCOLL_OK)
        while (pcoll_next(h, NULL, &res, NULL) == PCOLL_OK) {}
    CHECK(pcoll_finalize(&h, 60) == PCOLL_OK, "finalize");
}

typedef struct {
    pcoll_t *h;
    volatile int stop;
    long ok, evicted, wrong;
} evict_t;

static void *oldest_reader(void *arg) {
    evict_t *e = arg;
    pcoll_record_t rec;
    pcoll_record_init(&rec, P);
    while (!e->stop) {
        uint64_t c = pcoll_rounds(e->h);
        e->ok++;
        if (c < 2) continue;
        int rc = pcoll_record_get(e->h, c - 2, &rec, 0);
        if (rc == PCOLL_ERR_EVICTED)
            e->evicted++;
        else if (rc == PCOLL_OK && rec.round != c - 2)
            e->wrong++;
        else
            break;
    }
    pcoll_record_free(&rec);
    return NULL;
}

static void case_evict(void) {
    pcoll_config_t cfg;
    pcoll_config_default(&cfg);
    cfg.rule.mode = PCOLL_SOLO;
    cfg.records = 2;
    cfg.div = PCOLL_DIV_P; /* the division runs between a record's write and completion */
    pcoll_t *h = NULL;
    size_t n = 200000;
    pcollCheck(pcoll_create(MPI_COMM_WORLD, n, PCOLL_MEM_HOST, &cfg, &h));
    evict_t e = {h, 0, 0, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, oldest_reader, &e);
    float *g = calloc(n, sizeof *g);
    const float *res;
    for (int s = 0; s < 200; s++) {
        pcollCheck(pcoll_deposit(h, g, 0));
        pcollCheck(pcoll_wait(h, PCOLL_WAIT_CONSUMED, 60, NULL));
        while (pcoll_next(h, NULL, &res, NULL) == PCOLL_OK) {}
    }
    e.stop = 1;
    pthread_join(t, NULL);
    printf("rank %d: %ld reads of the oldest record, evicted %ld, wrong round %ld\n", me, e.ok, e.evicted,
           e.wrong);
    CHECK(e.wrong == 0, "pcoll_record_get returned another round's record %ld times", e.wrong);
    pcoll_join(h);
    int rc;
    while ((rc = pcoll_wait(h, PCOLL_WAIT_NEWER, 60, NULL)) == PCOLL_OK)
        while (pcoll_next(h, NULL, &res, NULL) == PCOLL_OK) {}
    CHECK(pcoll_finalize(&h, 60) == PCOLL_OK, "finalize");
    free(g);
}

/* Rounds of the lent buffer L (n = 64 floats): the sum over the ranks of (p + 1) x (s + 1). */
static void case_lend(void) {
    enum { N = 64, STEPS = 12 };
    const float canary = -7.0f;
    pcoll_t *h = make(PCOLL_SYNC, 16, 0);
    const size_t len = pcoll_lend_len(h);
    CHECK(len > N && pcoll_lend_len(NULL) == 0, "pcoll_lend_len %zu", len);
    CHECK(pcoll_lend(h, NULL, 0) == PCOLL_ERR_ARG && pcoll_lend(NULL, NULL, 0) == PCOLL_ERR_ARG,
          "NULL buffer");
    float *L = malloc(len * sizeof *L), g2[N];
    const float *res;
    double tot = P * (P + 1) / 2.0;
    for (int s = 0; s < STEPS; s++) {
        for (int k = 0; k < N; k++) L[k] = (float)((me + 1) * (s + 1));
        for (size_t k = N; k < len; k++) L[k] = canary;
        CHECK(pcoll_lend(h, L, s % 2 ? PCOLL_WAIT_NEXT : 0) == PCOLL_OK, "lend %d: %s", s,
              pcoll_last_error(h));
        CHECK(pcoll_wait(h, PCOLL_WAIT_CONSUMED, 60, NULL) == PCOLL_OK, "wait %d", s);
        size_t kept = 0;
        for (size_t k = N; k < len; k++) kept += L[k] == canary;
        CHECK(kept == 0,
              "step %d: %zu of the %zu metadata floats after the lent data are unwritten: the round "
              "did not reduce the lent buffer",
              s, kept, len - N);
        int got = 0;
        while (pcoll_next(h, NULL, &res, NULL) == PCOLL_OK) {
            got++;
            for (int k = 0; k < N; k++)
                if (res[k] != (float)(tot * (s + 1))) {
                    CHECK(0, "step %d: res[%d] = %g, want %g", s, k, res[k], tot * (s + 1));
                    break;
                }
        }
        CHECK(got == 1, "step %d: %d rounds", s, got);
    }
    pcoll_stats_t st = {0};
    pcollCheck(pcoll_stats(h, &st));
    CHECK(st.lent == STEPS, "%llu lent rounds, want %d", (unsigned long long)st.lent, STEPS);
    CHECK(run_steps(h, 0, 1, 0) == PCOLL_OK, "drain");
    CHECK(pcoll_finalize(&h, 60) == PCOLL_OK, "finalize");

    /* solo, rounds held until the horizon: lend A, accumulate B onto it, then release */
    h = make(PCOLL_SOLO, 16, 1);
    for (int k = 0; k < N; k++) L[k] = (float)(me + 1), g2[k] = (float)(100 * (me + 1));
    CHECK(pcoll_lend(h, L, 0) == PCOLL_OK, "lend: %s", pcoll_last_error(h));
    CHECK(pcoll_lend(h, L, 0) == PCOLL_ERR_PENDING, "a second lend without PCOLL_ACCUMULATE");
    CHECK(pcoll_deposit(h, g2, PCOLL_ACCUMULATE) == PCOLL_OK, "accumulate: %s", pcoll_last_error(h));
    pcollCheck(pcoll_set_horizon(h, UINT64_MAX));
    CHECK(pcoll_wait(h, PCOLL_WAIT_CONSUMED, 60, NULL) == PCOLL_OK, "wait");
    pcoll_record_t rec;
    pcoll_record_init(&rec, P);
    CHECK(pcoll_next(h, NULL, &res, &rec) == PCOLL_OK, "the round");
    CHECK(rec.fresh[me] == 2, "fresh[%d] = %d, want 2 merged deposits", me, rec.fresh[me]);
    for (int k = 0; k < N; k++)
        if (res[k] != (float)(101 * tot)) {
            CHECK(0, "res[%d] = %g, want %g (lent + accumulated)", k, res[k], 101 * tot);
            break;
        }
    pcoll_record_free(&rec);
    pcollCheck(pcoll_stats(h, &st));
    CHECK(st.lent == 0, "%llu lent rounds after accumulating onto the lent deposit, want 0",
          (unsigned long long)st.lent);
    CHECK(run_steps(h, 0, 1, 0) == PCOLL_OK, "drain");
    CHECK(pcoll_finalize(&h, 60) == PCOLL_OK, "finalize");
    free(L);
}

static void case_dead(const char *marker) {
    MPI_Comm alive; /* the survivors, to agree that all of them detected it */
    MPI_Comm_split(MPI_COMM_WORLD, me == P - 1, me, &alive);
    pcoll_t *h = make(PCOLL_SYNC, 16, 0);
    int rc = run_steps(h, 10, 0, 0);
    CHECK(rc == PCOLL_OK, "steps");
    if (me == P - 1) {
        fprintf(stderr, "rank %d: stopping itself (SIGSTOP)\n", me);
        raise(SIGSTOP);
        sleep(3600);
    }
    double t0 = MPI_Wtime();
    /* no timeout of its own: the library's detection bound (100 x the longest heartbeat gap
     * seen, which grows on a loaded machine) is what is tested; the runner's is the hang detector */
    rc = run_steps_wait(h, 1000, 0, 1, -1);
    double dt = MPI_Wtime() - t0;
    const char *m = pcoll_last_error(h);
    char want[32];
    snprintf(want, sizeof want, "rank %d ", P - 1);
    printf("rank %d: after %.1f s: %s: %s\n", me, dt, pcoll_strerror(rc), m);
    CHECK(rc == PCOLL_ERR_PEER && strstr(m, want), "expected PCOLL_ERR_PEER naming rank %d", P - 1);
    t0 = MPI_Wtime();
    int frc = pcoll_finalize(&h, 60);
    printf("rank %d: pcoll_finalize returned %s after %.2f s; message: %s\n", me, pcoll_strerror(frc),
           MPI_Wtime() - t0, pcoll_last_error(h));
    CHECK(frc == PCOLL_ERR_PEER && h != NULL, "finalize: %s", pcoll_strerror(frc));
    CHECK(strstr(pcoll_last_error(h), want) != NULL, "the first error is kept: %s", pcoll_last_error(h));
    int tot = 0;
    MPI_Allreduce(&fails, &tot, 1, MPI_INT, MPI_SUM, alive);
    if (me == 0) {
        printf(tot ? "FAIL: %d check failures\n" : "ALL-DETECTED (%d check failures)\n", tot);
        FILE *f = marker ? fopen(marker, "w") : NULL;
        if (f) {
            fprintf(f, tot ? "FAIL\n" : "ALL-DETECTED\n");
            fclose(f);
        }
    }
    fflush(stdout);
    /* the marker is written before any survivor aborts (MPICH's launcher ends every rank at the
     * first MPI_Abort, and rank 0 may be the last to get here) */
    MPI_Barrier(alive);
    MPI_Abort(MPI_COMM_WORLD, tot ? 1 : 3);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    const char *c = argc >= 3 && !strcmp(argv[1], "--case") ? argv[2] : "";
    const char *marker = argc == 5 && !strcmp(argv[3], "--marker") ? argv[4] : NULL;
    if (!strcmp(c, "close"))
        case_close();
    else if (!strcmp(c, "nodrain"))
        case_nodrain();
    else if (!strcmp(c, "rule"))
        case_rule();
    else if (!strcmp(c, "args"))
        case_args();
    else if (!strcmp(c, "evict"))
        case_evict();
    else if (!strcmp(c, "dead"))
        case_dead(marker);
    else if (!strcmp(c, "nowait"))
        case_nowait();
    else if (!strcmp(c, "lend"))
        case_lend();
    else {
        if (!me)
            fprintf(stderr, "usage: test_pcoll_life --case close|nodrain|rule|args|evict|nowait|lend|dead "
                            "[--marker FILE]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int tot = 0;
    MPI_Allreduce(&fails, &tot, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (!me) printf("%s: %d check failures\n", tot ? "FAIL" : "OK", tot);
    MPI_Finalize();
    return tot ? 1 : 0;
}
