/* test_thread.c -- the controller thread (controller/thread.c) against a mock libpcoll engine.
 *
 * The mock implements the few pcoll calls the thread uses. Its "engine" produces round r (with the
 * probabilistic generator of trace.h, applying the rules posted with pcoll_set_rule) only once the
 * horizon is >= r, exactly as a handle created with cfg.horizon = 1 must; otherwise
 * pcoll_record_get times out. Checks: the lag/horizon protocol, the decisions equal those of a
 * standalone policy on the same records (hash), the switch log, the end when every rank has
 * joined, and the stall watchdog (warning + abort callback; its timer from the first deposit).
 */
#include "tests/controller/trace.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ mock libpcoll */

struct pcoll {
    int P;
    gen_t g;
    phases_t ph;
    uint64_t horizon; /* UINT64_MAX before the first pcoll_set_horizon: "none yet" */
    int have_horizon;
    uint64_t produced;  /* rounds generated */
    uint64_t stall_at;  /* the engine stops producing at this round (UINT64_MAX: never) */
    uint64_t join_at;   /* from this round on every rank is joined */
    uint64_t slow_from; /* records of rounds >= this reach the thread 200 ms late (UINT64_MAX: never) */
    double deposit_at;  /* CLOCK_MONOTONIC s of this rank's first deposit: no round before (0: at once) */
    int rule_calls, late_rules, horizon_back;
    pcoll_record_t *ring; /* every generated record kept (tests are short) */
    size_t nring;
    ctl_decision_t dummy;
};

/* pcoll_record_init and pcoll_record_free are libpcoll's own (collectives/record.o). */
/* The step and cycle times (when s reports them) into d's own arrays, as the library copies them. */
static float *copy_times(float *own, const float *src, int P) {
    if (!src) return free(own), NULL;
    if (!own) own = malloc(P * sizeof(float));
    return memcpy(own, src, P * sizeof(float));
}
static void copy_rec(pcoll_record_t *d, const pcoll_record_t *s) {
    uint8_t *f = d->fresh, *w = d->waited, *fl = d->flags;
    uint32_t *st = d->staleness, *sk = d->streak;
    float *cost = copy_times(d->cost, s->cost, s->P), *step = copy_times(d->step, s->step, s->P);
    *d = *s;
    d->cost = cost;
    d->step = step;
    d->fresh = f;
    d->waited = w;
    d->flags = fl;
    d->staleness = st;
    d->streak = sk;
    memcpy(f, s->fresh, s->P);
    memcpy(w, s->waited, s->P);
    memcpy(fl, s->flags, s->P);
    memcpy(st, s->staleness, 4 * s->P);
    memcpy(sk, s->streak, 4 * s->P);
}
static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
int pcoll_record_get(pcoll_t *h, uint64_t round, pcoll_record_t *rec, double timeout_s) {
    while (mono_s() >= h->deposit_at && h->produced <= round && h->have_horizon &&
           h->produced <= h->horizon && h->produced < h->stall_at) {
        if (h->produced >= h->join_at) memset(h->g.joined, 1, sizeof h->g.joined);
        const pcoll_record_t *r = gen_next(&h->g);
        pcoll_record_t *k = &h->ring[h->nring++];
        pcoll_record_init(k, h->P);
        copy_rec(k, r);
        __atomic_store_n(&h->produced, h->produced + 1, __ATOMIC_RELEASE);
    }
    if (round < h->produced) {
        if (round >= h->slow_from) usleep(200000); /* the thread lags behind the application */
        copy_rec(rec, &h->ring[round]);
        return PCOLL_OK;
    }
    usleep((useconds_t)(timeout_s * 1e6));
    return PCOLL_ERR_TIMEOUT;
}
int pcoll_set_rule(pcoll_t *h, uint64_t from, const pcoll_rule_t *rule) {
    h->rule_calls++;
    if (from < h->produced) {
        h->late_rules++;
        return PCOLL_ERR_LATE;
    }
    ctl_decision_t d = {.effective = from, .new_rule = *rule};
    sched_push(&h->g.sched, &d);
    return PCOLL_OK;
}
int pcoll_set_horizon(pcoll_t *h, uint64_t through) {
    if (h->have_horizon && through < h->horizon) h->horizon_back++;
    h->horizon = through;
    h->have_horizon = 1;
    return PCOLL_OK;
}
int pcoll_size(const pcoll_t *h) { return h->P; }
/* heartbeats: the mock has no peers to hear from (every peer reads as never heard); this rank
 * (0) has a deposit pending from deposit_at on */
int pcoll_heartbeat(pcoll_t *h) { return PCOLL_OK; }
int pcoll_peers(pcoll_t *h, pcoll_peer_t *out) {
    for (int p = 0; p < pcoll_size(h); p++) {
        out[p].heard_s = p ? -1 : 0;
        out[p].pending = p || mono_s() >= h->deposit_at;
        out[p].pending_s = 0;
        out[p].completed = 0;
        out[p].started = 0;
    }
    return PCOLL_OK;
}
int pcoll_rank(const pcoll_t *h) { return 0; }
const char *pcoll_strerror(int code) { return code == PCOLL_ERR_LATE ? "PCOLL_ERR_LATE" : "pcoll error"; }
const char *pcoll_last_error(pcoll_t *h) { return ""; }

static pcoll_t *mock_new(int P, uint64_t N, const phases_t *ph) {
    pcoll_t *h = calloc(1, sizeof *h);
    h->P = P;
    h->ph = *ph;
    pcoll_rule_t dflt = {.mode = PCOLL_SYNC}; /* cfg.rule default; the controller posts its own */
    gen_init(&h->g, P, 99, &dflt);
    h->g.q = q_phases;
    h->g.qarg = &h->ph;
    h->stall_at = h->join_at = h->slow_from = UINT64_MAX;
    h->ring = calloc(N + 8, sizeof *h->ring);
    return h;
}
/* Event time with cycle times (what the rate rule measures): the last rank four times slower. */
static void mock_timed(pcoll_t *h) {
    for (int p = 0; p < h->P; p++) h->g.period[p] = p == h->P - 1 ? 4.0 : 1.0;
    sim_start(&h->g, 0.2, 0.01);
    sim_report_cycles(&h->g);
}
static void mock_free(pcoll_t *h) {
    for (size_t i = 0; i < h->nring; i++) pcoll_record_free(&h->ring[i]);
    free(h->ring);
    gen_free(&h->g);
    free(h);
}

/* ------------------------------------------------------------------ tests */

static char abort_msg[1024];
static int abort_calls;
static void on_abort(void *arg, const char *msg) {
    __atomic_add_fetch(&abort_calls, 1, __ATOMIC_SEQ_CST);
    snprintf(abort_msg, sizeof abort_msg, "%s", msg);
}

static void wait_for(pcoll_t *h, uint64_t n, double max_s) {
    for (int i = 0; i < max_s * 100 && __atomic_load_n(&h->produced, __ATOMIC_RELAXED) < n; i++)
        usleep(10000);
}

/* Starts the adaptive policy's thread on the mock (polling every 1 ms, silent). */
static ctl_t *start_adaptive(pcoll_t *h, ctl_config_t *cfg) {
    ctl_config_default(cfg);
    char err[256];
    CHECK(ctl_policy_parse("adaptive", &cfg->policy, err, sizeof err) == CTL_OK, "%s", err);
    cfg->poll_s = 0.001;
    cfg->log = NULL;
    ctl_t *c = NULL;
    CHECK(ctl_start(h, cfg, &c) == CTL_OK, "ctl_start");
    return c;
}

/* The thread drives the engine to the all-joined round; decisions equal a standalone policy's. */
static void test_drive(void) {
    const int P = 8;
    const uint64_t N = 3000;
    phases_t ph = {
        3, {{300, 0.5, 0, {0}, 0}, {1800, 0.1, 4, {0, 1, 2, 3}, 0.005}, {UINT64_MAX, 0.9, 0, {0}, 0}}};
    pcoll_t *h = mock_new(P, N, &ph);
    h->join_at = N - 1;
    mock_timed(h);
    ctl_config_t cfg;
    ctl_t *c = start_adaptive(h, &cfg);
    wait_for(h, N, 20);
    CHECK(ctl_wait(c, 20) == CTL_OK, "ctl_wait");
    ctl_policy_stats_t st;
    uint64_t hash = 0;
    CHECK(ctl_stats(c, &st, &hash) == CTL_OK, "ctl_stats");
    ctl_switch_t sw[64];
    size_t nsw = ctl_switch_log(c, sw, 64);
    CHECK(ctl_stop(&c) == CTL_OK && c == NULL, "ctl_stop");
    CHECK(h->produced == N,
          "engine produced %llu rounds, expected %llu (the thread should release the horizon "
          "at the all-joined round)",
          (unsigned long long)h->produced, (unsigned long long)N);
    CHECK(h->horizon == UINT64_MAX, "horizon not released after every rank joined (%llu)",
          (unsigned long long)h->horizon);
    CHECK(h->late_rules == 0 && h->horizon_back == 0, "late rules %d, horizon went back %d", h->late_rules,
          h->horizon_back);
    CHECK(st.rounds == N, "policy observed %llu rounds", (unsigned long long)st.rounds);
    /* the same records through a standalone policy */
    ctl_policy_t *pol = mk("adaptive", P, NULL);
    int nd = 0;
    for (uint64_t r = 0; r < h->nring; r++) {
        ctl_decision_t d;
        if (ctl_policy_observe(pol, &h->ring[r], &d) == 1) {
            if (d.what & CTL_DEC_MODE) {
                CHECK((size_t)nd < nsw && sw[nd].effective == d.effective &&
                          sw[nd].new_mode == d.new_rule.mode && !strcmp(sw[nd].reason, d.reason),
                      "switch %d differs from the standalone policy", nd);
                nd++;
            }
        }
    }
    CHECK(hash == ctl_policy_hash(pol), "thread hash %016llx != standalone %016llx", (unsigned long long)hash,
          (unsigned long long)ctl_policy_hash(pol));
    CHECK((size_t)nd == nsw && nsw >= 4, "switch log has %zu entries, standalone %d", nsw, nd);
    /* the records really followed the posted rules */
    int partial_rounds = 0;
    for (uint64_t r = 0; r < h->nring; r++) partial_rounds += h->ring[r].mode != PCOLL_SYNC;
    CHECK(partial_rounds > 100 && h->ring[0].mode == PCOLL_SYNC,
          "rules not applied: %d partial rounds, round 0 %d", partial_rounds, h->ring[0].mode);
    if (verbose)
        for (size_t i = 0; i < nsw; i++)
            printf("    %llu: %s\n", (unsigned long long)sw[i].effective, sw[i].reason);
    ctl_policy_free(pol);
    mock_free(h);
}

/* The application is done (every round produced) while the thread is still behind: a snapshot
 * then misses the last records; after ctl_wait the stats cover every round and equal a standalone
 * policy's (the trainer carries them into the next epoch: a snapshot differing between ranks
 * stalled it). ctl_wait times out on a thread that cannot end. */
static void test_wait(void) {
    const int P = 4;
    const uint64_t N = 400;
    phases_t ph = {2, {{200, 0.5, 0, {0}, 0}, {UINT64_MAX, 0.2, 2, {0, 1}, 0.01}}};
    pcoll_t *h = mock_new(P, N, &ph);
    h->join_at = N - 1;
    h->slow_from = N - 2;
    ctl_config_t cfg;
    ctl_t *c = start_adaptive(h, &cfg);
    wait_for(h, N, 20);
    ctl_policy_stats_t early, st;
    uint64_t hash = 0;
    ctl_stats(c, &early, NULL);
    CHECK(early.rounds < N, "the snapshot taken while the thread lags has %llu rounds (the test needs a lag)",
          (unsigned long long)early.rounds);
    CHECK(ctl_wait(c, 20) == CTL_OK, "ctl_wait");
    ctl_stats(c, &st, &hash);
    CHECK(st.rounds == N, "after ctl_wait the policy observed %llu of %llu rounds",
          (unsigned long long)st.rounds, (unsigned long long)N);
    ctl_policy_t *pol = mk("adaptive", P, NULL);
    for (uint64_t r = 0; r < h->nring; r++) ctl_policy_observe(pol, &h->ring[r], NULL);
    ctl_policy_stats_t ref;
    ctl_policy_stats(pol, &ref);
    CHECK(hash == ctl_policy_hash(pol) && st.mode == ref.mode && st.probe == ref.probe &&
              st.rounds == ref.rounds,
          "final stats differ from the standalone policy's");
    CHECK(ctl_stop(&c) == CTL_OK, "ctl_stop");
    ctl_policy_free(pol);
    mock_free(h);
    /* a thread that cannot end (the engine stalls, no watchdog): ctl_wait gives up */
    h = mock_new(P, 50, &ph);
    h->stall_at = 10;
    cfg.t_warn = cfg.t_abort = 0;
    CHECK(ctl_start(h, &cfg, &c) == CTL_OK, "ctl_start");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = ctl_wait(c, 0.2);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double el = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK(rc == CTL_ERR_TIMEOUT && el >= 0.19 && el < 2, "ctl_wait on a stalled thread: %d after %.2f s", rc,
          el);
    CHECK(ctl_wait(NULL, 0) == CTL_ERR_ARG, "ctl_wait(NULL)");
    CHECK(ctl_stop(&c) == CTL_OK, "ctl_stop after the timeout");
    mock_free(h);
}

/* The watchdog tests' config: policy solo,tau=8, polls every 10 ms, t_warn 0.15 s, t_abort 0.5 s,
 * warnings to lf, on_abort. */
static void watchdog_cfg(ctl_config_t *cfg, FILE *lf) {
    ctl_config_default(cfg);
    char err[256];
    CHECK(ctl_policy_parse("solo,tau=8", &cfg->policy, err, sizeof err) == CTL_OK, "%s", err);
    cfg->poll_s = 0.01;
    cfg->t_warn = 0.15;
    cfg->t_abort = 0.5;
    cfg->log = lf;
    cfg->on_abort = on_abort;
}

/* The engine stalls at round 100: a warning after t_warn, the abort callback after t_abort. */
static void test_watchdog(void) {
    const int P = 8;
    phases_t ph = {1, {{UINT64_MAX, 0.5, 1, {5}, 0.0}}};
    pcoll_t *h = mock_new(P, 200, &ph);
    h->stall_at = 100;
    char *logbuf = NULL;
    size_t loglen = 0;
    FILE *lf = open_memstream(&logbuf, &loglen);
    ctl_config_t cfg;
    watchdog_cfg(&cfg, lf);
    ctl_t *c = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(ctl_start(h, &cfg, &c) == CTL_OK, "ctl_start");
    for (int i = 0; i < 300 && !__atomic_load_n(&abort_calls, __ATOMIC_SEQ_CST); i++) usleep(10000);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int rc = ctl_stop(&c);
    fclose(lf);
    double el = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK(rc == CTL_ERR_STALL, "ctl_stop returned %d, expected CTL_ERR_STALL", rc);
    CHECK(abort_calls == 1, "abort callback called %d times", abort_calls);
    CHECK(el >= 0.5 && el < 2.5, "abort after %.2f s (t_abort 0.5)", el);
    CHECK(strstr(abort_msg, "waiting for round 100") && strstr(abort_msg, "aborting after t_abort=0.5"),
          "abort message: %s", abort_msg);
    CHECK(strstr(abort_msg, " 5 (streak "), "abort message does not name the never-fresh rank 5: %s",
          abort_msg);
    int warns = 0;
    for (char *p = logbuf; p && (p = strstr(p, "no round completed")); p++) warns++;
    CHECK(warns >= 2 && warns <= 4, "%d warnings in %.2f s with t_warn 0.15:\n%s", warns, el,
          logbuf ? logbuf : "");
    if (verbose) printf("    log:\n%s    abort: %s\n", logbuf, abort_msg);
    free(logbuf);
    mock_free(h);
}

/* The stall timer runs from the first deposit: a first step longer than t_abort (the mock's
 * first deposit at 0.8 s, t_abort 0.4 s) is no stall, and a stall after it (round 30) still
 * aborts after t_abort; a first deposit that never comes aborts after t_first. Before the first
 * deposit a warning every t_abort, never the stall warning of round 0. */
static void test_first_deposit(void) {
    phases_t ph = {1, {{UINT64_MAX, 0.5, 1, {5}, 0.0}}};
    for (int never = 0; never < 2; never++) {
        pcoll_t *h = mock_new(8, 100, &ph);
        h->stall_at = 30;
        char *logbuf = NULL;
        size_t loglen = 0;
        FILE *lf = open_memstream(&logbuf, &loglen);
        ctl_config_t cfg;
        watchdog_cfg(&cfg, lf);
        CHECK(cfg.t_first == 600.0, "t_first default %g", cfg.t_first);
        cfg.t_abort = 0.4;
        cfg.t_first = 1.0;
        __atomic_store_n(&abort_calls, 0, __ATOMIC_SEQ_CST);
        double t0 = mono_s();
        h->deposit_at = never ? 1e300 : t0 + 0.8;
        ctl_t *c = NULL;
        CHECK(ctl_start(h, &cfg, &c) == CTL_OK, "ctl_start");
        for (int i = 0; i < 400 && !__atomic_load_n(&abort_calls, __ATOMIC_SEQ_CST); i++) usleep(10000);
        double el = mono_s() - t0;
        int rc = ctl_stop(&c);
        fclose(lf);
        CHECK(rc == CTL_ERR_STALL && abort_calls == 1, "ctl_stop %d, %d abort calls", rc, abort_calls);
        if (!never) {
            CHECK(strstr(abort_msg, "waiting for round 30") && el >= 1.2 && el < 3.5,
                  "first deposit at 0.8 s, t_abort 0.4: abort after %.2f s: %s", el, abort_msg);
            CHECK(!strstr(logbuf ? logbuf : "", "waiting for round 0"),
                  "a stall warned about before the first deposit:\n%s", logbuf ? logbuf : "");
        }
        int warns = 0; /* before the first deposit: at 0.4 s, at 0.8 s (and never: at 0.4 s) */
        for (char *p = logbuf; p && (p = strstr(p, "no rank has deposited")); p++) warns++;
        if (never) {
            CHECK(strstr(abort_msg, "no rank has deposited") &&
                      strstr(abort_msg, "aborting after t_first=1.0") && el >= 1.0 && el < 3.5,
                  "no deposit, t_first 1.0: abort after %.2f s: %s", el, abort_msg);
        }
        CHECK(warns >= 1 && warns <= 2, "%d warnings before the first deposit (t_abort 0.4):\n%s", warns,
              logbuf ? logbuf : "");
        if (verbose) printf("    log:\n%s    abort: %s\n", logbuf, abort_msg);
        free(logbuf);
        mock_free(h);
    }
}

/* Bad arguments. */
static void test_args(void) {
    phases_t ph = {1, {{UINT64_MAX, 0.5, 0, {0}, 0}}};
    pcoll_t *h = mock_new(4, 10, &ph);
    ctl_config_t cfg;
    ctl_config_default(&cfg);
    CHECK(cfg.t_warn == 10.0 && cfg.t_abort == 60.0, "watchdog defaults %g/%g", cfg.t_warn, cfg.t_abort);
    ctl_t *c = NULL;
    cfg.policy.window = 0;
    CHECK(ctl_start(h, &cfg, &c) == CTL_ERR_ARG && c == NULL, "bad policy accepted");
    ctl_config_default(&cfg);
    cfg.poll_s = 0;
    CHECK(ctl_start(h, &cfg, &c) == CTL_ERR_ARG, "poll_s=0 accepted");
    ctl_config_default(&cfg);
    cfg.t_first = -1;
    CHECK(ctl_start(h, &cfg, &c) == CTL_ERR_ARG, "t_first=-1 accepted");
    CHECK(ctl_stop(&c) == CTL_ERR_ARG, "ctl_stop(NULL)");
    mock_free(h);
}

/* Two handles (two epochs): the second thread resumes the state the first ended with
 * (ctl_state after ctl_wait, ctl_config_t.resume) and decides as a standalone policy resumed from
 * the same state on the same records; ctl_state is NULL while the thread runs; a state of another
 * P is refused by ctl_start. */
static void test_resume(void) {
    const int P = 8;
    const uint64_t N = 700;
    phases_t ph = {2, {{300, 0.5, 0, {0}, 0}, {UINT64_MAX, 0.1, 4, {0, 1, 2, 3}, 0.005}}};
    pcoll_t *h = mock_new(P, N, &ph);
    h->join_at = N - 1;
    mock_timed(h);
    ctl_config_t cfg;
    ctl_t *c = start_adaptive(h, &cfg);
    CHECK(ctl_state(c) == NULL || h->produced == N, "ctl_state while the thread runs");
    wait_for(h, N, 20);
    CHECK(ctl_wait(c, 20) == CTL_OK, "ctl_wait (first handle)");
    ctl_state_t *st = ctl_state(c);
    CHECK(st != NULL && ctl_state_rounds(st) == N, "state after the first handle: %llu rounds",
          st ? (unsigned long long)ctl_state_rounds(st) : 0ULL);
    CHECK(ctl_stop(&c) == CTL_OK, "ctl_stop");
    mock_free(h);
    if (!st) return;
    /* second handle: the thread resumes st */
    h = mock_new(P, N, &ph);
    h->join_at = N - 1;
    mock_timed(h);
    cfg.resume = st;
    CHECK(ctl_start(h, &cfg, &c) == CTL_OK, "ctl_start with resume");
    wait_for(h, N, 20);
    CHECK(ctl_wait(c, 20) == CTL_OK, "ctl_wait (second handle)");
    uint64_t hash = 0;
    ctl_stats(c, NULL, &hash);
    CHECK(ctl_stop(&c) == CTL_OK, "ctl_stop");
    char err[256];
    ctl_policy_t *pol = ctl_policy_resume(&cfg.policy, P, st, err, sizeof err);
    CHECK(pol != NULL, "%s", err);
    int nd = 0;
    for (uint64_t r = 0; pol && r < h->nring; r++) nd += ctl_policy_observe(pol, &h->ring[r], NULL) == 1;
    CHECK(pol && hash == ctl_policy_hash(pol) && nd >= 1,
          "resumed thread hash %016llx, standalone %016llx (%d decisions)", (unsigned long long)hash,
          pol ? (unsigned long long)ctl_policy_hash(pol) : 0ULL, nd);
    ctl_policy_free(pol);
    mock_free(h);
    /* the state of 8 ranks on a handle of 4 */
    h = mock_new(4, 10, &ph);
    CHECK(ctl_start(h, &cfg, &c) == CTL_ERR_ARG && c == NULL, "a state of P=8 resumed on P=4");
    mock_free(h);
    ctl_state_free(st);
}

int main(int argc, char **argv) {
    verbose = argc > 1 && !strcmp(argv[1], "-v");
    test_args();
    printf("args done\n");
    test_drive();
    printf("drive done\n");
    test_wait();
    printf("wait done\n");
    test_watchdog();
    printf("watchdog done\n");
    test_first_deposit();
    printf("first deposit done\n");
    test_resume();
    printf("resume done\n");
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
