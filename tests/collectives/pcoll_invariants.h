/* pcoll_invariants.h -- the run and the checks that the host (tests/collectives/test_pcoll.c) and
 * device (tests/cuda/test_pcoll_device.c) libpcoll invariant tests share, under mpirun (DESIGN.md
 * section 3). Each program is a short main that supplies how a rank deposits a gradient and reads a
 * round's result (pinv_io_t: host memory as is, or cudaMemcpy to and from GPU memory), its own
 * options (pinv_option_fn) and its own extra checks. Header-only like round_check.h, whose
 * per-program globals (P, me, fails, CHECK) it uses: one translation unit, one failure count.
 *
 * Every rank runs `steps` steps: sleep a delay that is a pure function of (seed, step, rank),
 * deposit an integer-valued gradient that encodes (rank, step), wait, apply every completed round
 * to a double-precision replica. At the end (after finalize flushed everything) it checks:
 *   1 agreement     hash of every round's (index, rule, F_r, flags, step times, result bits)
 *                   equal on all ranks; each cost and step time (pcoll_set_cost) and loss (pcoll_set_loss)
 *                   arrives with its deposit
 *   2 conservation  each (rank, step) deposit is in exactly one round; sum of results = deposits
 *   (drain)         every rank applied the same number of rounds (checked: 1 and 2 never skip)
 *   3 trigger       F_r satisfies the round's rule (sync, quorum, majority initiator, wait set)
 *   4 staleness     with --tau, no rejection streak exceeds tau
 *   5 liveness      the run ends (the test runner's timeout catches a hang)
 *   6 replicas      the replicas (weights) are bitwise equal on all ranks
 * and, once after pcoll_create, that a negative or a NaN step time is refused, and a NaN or
 * infinite loss or bad samples (pcoll_set_loss), naming the rank; each loss and its samples arrive
 * with the deposit likewise (odd ranks report none: 0). The per-round part
 * of 1-4 is rcheck_round (round_check.h). --mode mixed posts a static schedule of rule changes
 * (cfg.horizon = 1, then the horizon released for every round); --mode dynamic a controller-like
 * thread (dyn_ctl). --mismatch FIELD instead checks that pcoll_create fails on every rank with a
 * clean error naming the field and the last rank (n, seed, mode: PCOLL_ERR_MISMATCH; arg: a bad
 * cfg.ring on the last rank, PCOLL_ERR_ARG), and no hang.
 * Options of both programs (pinv_parse): --mode sync|solo|majority|quorum:Q|mixed|dynamic
 *          --steps N  --n N  --delay-us U  --seed S  --slow RANK --slow-factor F  --tau T
 *          --newer (WAIT_NEWER + ACCUMULATE)  --expect-streak-growth  --mismatch n|seed|mode|arg|reduce
 *          --reduce rd|iallreduce (cfg.reduce; default auto: recursive doubling up to 2 KiB)
 *          --div p|fresh
 * A main calls, in this order: pinv_init (MPI_Init_thread, defaults), pinv_parse, then either
 * pinv_mismatch, or pinv_start, pinv_run (steps, drain, finalize) and pinv_verify (the checks
 * across ranks, the report); then returns pinv_exit of what pinv_mismatch/pinv_verify returned
 * (MPI_Finalize; 0 = all checks passed on every rank). */
#ifndef TESTS_PCOLL_INVARIANTS_H
#define TESTS_PCOLL_INVARIANTS_H
#include "collectives/pcoll.h"
#include "common/hash.h"
#include "tests/collectives/round_check.h"
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pinv pinv_t;

/* One of a program's own options: a, with its value v ("" after the last argument). Returns 1 if
 * it took a alone, 2 if it took v too, 0 if a is not one of its options. */
typedef int (*pinv_option_fn)(pinv_t *t, void *ctx, const char *a, const char *v);

/* How a program's ranks move data in and out of libpcoll, and its hooks in the step loop. A NULL
 * member: host memory as is, nothing extra. */
typedef struct {
    void *ctx;
    /* the buffer to deposit, holding g[0..n) (NULL member: g itself); NULL after printing why */
    const void *(*stage)(void *ctx, const float *g, size_t n);
    /* a host copy of round r's result res[0..n) (NULL member: res itself); NULL after printing why */
    const float *(*fetch)(void *ctx, uint64_t r, const float *res, size_t n);
    int deposit_flags; /* or'ed into every pcoll_deposit's flags (e.g. PCOLL_WAIT_NEXT) */
    /* after the last step's wait, before pcoll_join (the drain's waits may sleep) */
    void (*steps_done)(void *ctx, pcoll_t *h, int steps, double elapsed_s);
    /* at step s (s = steps: each turn of the drain), after pcoll_wait, before pcoll_next */
    void (*before_next)(void *ctx, int s);
} pinv_io_t;

struct pinv {
    const char *prog; /* name in messages */
    pcoll_mem_t mem;
    /* options */
    const char *mode, *mismatch, *div, *reduce;
    int steps, tau, slow, newer, growth;
    size_t n;
    double delay_us, slow_factor;
    uint64_t seed;
    int ring, ring_default, records; /* cfg.ring: ring if set, else tau + 8 with tau, else ring_default */
    /* from the options (pinv_parse) */
    pcoll_config_t cfg;
    int dynamic, mixed;
    /* the run (pinv_start) */
    pcoll_t *h;
    ctl_t ctl;
    pthread_t cth;
    float *g;        /* [n] the gradient of this step */
    double *dep_sum; /* [n] this rank's deposits, summed */
    pcoll_record_t rec;
    rcheck_t rc; /* the per-round checks; its w (replica: w += result of every round), all_sum,
                    seen and streak_at are freed by pinv_verify */
};

/* MPI_Init_thread (MPI_THREAD_MULTIPLE), P and me, and the options' defaults. ring_default: the
 * results ring without --tau (or the program's --ring). */
static void pinv_init(pinv_t *t, const char *prog, pcoll_mem_t mem, int ring_default, int *argc,
                      char ***argv) {
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    memset(t, 0, sizeof *t);
    t->prog = prog;
    t->mem = mem;
    t->mode = "sync";
    t->steps = 200;
    t->slow = -1;
    t->n = 64;
    t->delay_us = 500;
    t->slow_factor = 4;
    t->seed = 7;
    t->ring_default = ring_default;
    t->records = 1 << 16;
}

/* The options (own: the program's own ones, may be NULL; an unknown option aborts), then cfg. */
static void pinv_parse(pinv_t *t, int argc, char **argv, pinv_option_fn own, void *ctx) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        int took = 2;
        if (!strcmp(a, "--mode"))
            t->mode = v;
        else if (!strcmp(a, "--steps"))
            t->steps = atoi(v);
        else if (!strcmp(a, "--n"))
            t->n = (size_t)atol(v);
        else if (!strcmp(a, "--delay-us"))
            t->delay_us = atof(v);
        else if (!strcmp(a, "--seed"))
            t->seed = (uint64_t)atoll(v);
        else if (!strcmp(a, "--slow"))
            t->slow = atoi(v);
        else if (!strcmp(a, "--slow-factor"))
            t->slow_factor = atof(v);
        else if (!strcmp(a, "--tau"))
            t->tau = atoi(v);
        else if (!strcmp(a, "--mismatch"))
            t->mismatch = v;
        else if (!strcmp(a, "--div"))
            t->div = v;
        else if (!strcmp(a, "--reduce"))
            t->reduce = v;
        else if (!strcmp(a, "--newer"))
            t->newer = 1, took = 1;
        else if (!strcmp(a, "--expect-streak-growth"))
            t->growth = 1, took = 1;
        else if (!own || !(took = own(t, ctx, a, v))) {
            if (!me) fprintf(stderr, "%s: unknown option %s\n", t->prog, a);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        i += took - 1;
    }
    if (t->n < (size_t)P + 2) t->n = (size_t)P + 2;

    pcoll_config_t *cfg = &t->cfg;
    pcoll_config_default(cfg);
    cfg->seed = t->seed;
    cfg->tau = t->tau;
    cfg->ring = t->ring  ? t->ring
                : t->tau ? t->tau + 8
                         : t->ring_default; /* a lagging rank holds the others back */
    cfg->records = t->records;
    if (t->div) cfg->div = !strcmp(t->div, "p") ? PCOLL_DIV_P : PCOLL_DIV_FRESH;
    if (t->reduce) {
        if (strcmp(t->reduce, "rd") && strcmp(t->reduce, "iallreduce")) {
            if (!me) fprintf(stderr, "%s: bad --reduce %s (rd or iallreduce)\n", t->prog, t->reduce);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        cfg->reduce = !strcmp(t->reduce, "rd") ? PCOLL_REDUCE_RD : PCOLL_REDUCE_IALLREDUCE;
    }
    t->dynamic = !strcmp(t->mode, "dynamic");
    t->mixed = !strcmp(t->mode, "mixed");
    if (t->dynamic || t->mixed)
        cfg->horizon = 1; /* rule changes need a horizon */
    else if (pcoll_parse_mode(t->mode, &cfg->rule)) {
        if (!me) fprintf(stderr, "%s: bad --mode %s\n", t->prog, t->mode);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* --mismatch: every rank must get a clean error naming the field; no hang. Returns the exit code. */
static int pinv_mismatch(pinv_t *t) {
    const char *mismatch = t->mismatch;
    pcoll_config_t cfg = t->cfg;
    size_t nn = t->n;
    if (!strcmp(mismatch, "n") && me == P - 1) nn = t->n + 1;
    if (!strcmp(mismatch, "seed") && me == P - 1) cfg.seed = t->seed + 1;
    if (!strcmp(mismatch, "mode") && me == P - 1) cfg.rule.mode = PCOLL_MAJORITY;
    if (!strcmp(mismatch, "arg") && me == P - 1) cfg.ring = 0;
    if (!strcmp(mismatch, "reduce") && me == P - 1)
        cfg.reduce = cfg.reduce == PCOLL_REDUCE_RD ? PCOLL_REDUCE_IALLREDUCE : PCOLL_REDUCE_RD;
    pcoll_t *h = NULL;
    int rc = pcoll_create(MPI_COMM_WORLD, nn, t->mem, &cfg, &h);
    const char *m = pcoll_last_error(NULL);
    printf("rank %d: rc=%d (%s): %s\n", me, rc, pcoll_strerror(rc), m);
    int want = !strcmp(mismatch, "arg") ? PCOLL_ERR_ARG : PCOLL_ERR_MISMATCH;
    CHECK(rc == want, "rc %d, want %d", rc, want);
    CHECK(h == NULL, "handle created despite the mismatch");
    const char *field = !strcmp(mismatch, "mode")  ? "rule.mode"
                        : !strcmp(mismatch, "arg") ? "ring"
                                                   : mismatch;
    if (strcmp(mismatch, "arg") || me == P - 1)
        CHECK(strstr(m, field) != NULL, "message does not name '%s': %s", field, m);
    char rk[32];
    snprintf(rk, sizeof rk, "rank %d", P - 1);
    if (P > 1) CHECK(strstr(m, rk) != NULL, "message does not name %s: %s", rk, m);
    int tot = 0;
    MPI_Allreduce(&fails, &tot, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return tot ? 1 : 0;
}

/* pcoll_create, the step-time argument checks, the rule schedule of --mode mixed or the rule
 * thread of --mode dynamic, and the run's buffers. */
static void pinv_start(pinv_t *t) {
    pcollCheck(pcoll_create(MPI_COMM_WORLD, t->n, t->mem, &t->cfg, &t->h));
    pcoll_t *h = t->h;
    CHECK(pcoll_set_cost(h, -1.0, 0) == PCOLL_ERR_ARG && strstr(pcoll_last_error(h), "pcoll_set_cost"),
          "a negative cost is refused, naming the call: %s", pcoll_last_error(h));
    CHECK(pcoll_set_cost(h, 0, NAN) == PCOLL_ERR_ARG && strstr(pcoll_last_error(h), "step time"),
          "a NaN step time is refused, naming it: %s", pcoll_last_error(h));
    char rk[32];
    snprintf(rk, sizeof rk, "rank %d", me);
    const double bad[][2] = {{NAN, 1}, {INFINITY, 1}, {1, -1}, {1, NAN}, {1, PCOLL_LOSS_SAMPLES_MAX + 1.0}};
    for (int k = 0; k < 5; k++) {
        const int rc = pcoll_set_loss(h, bad[k][0], bad[k][1]);
        const char *m = pcoll_last_error(h);
        CHECK(rc == PCOLL_ERR_ARG && strstr(m, "pcoll_set_loss") && strstr(m, rk),
              "loss %g over %g samples is refused, naming the call and %s: %s", bad[k][0], bad[k][1], rk, m);
    }
    if (t->mixed) { /* a static schedule of rule changes, the same on every rank */
        static int w[1];
        w[0] = P - 1;
        for (int k = 1; k < 400; k++) {
            pcoll_rule_t ru = {0};
            switch (k % 5) {
            case 0: ru.mode = PCOLL_SYNC; break;
            case 1: ru.mode = PCOLL_SOLO; break;
            case 2: ru.mode = PCOLL_MAJORITY; break;
            case 3:
                ru.mode = PCOLL_QUORUM;
                ru.quorum = 2;
                break;
            default:
                ru.mode = PCOLL_SOLO;
                ru.wait = w;
                ru.nwait = 1;
            }
            pcollCheck(pcoll_set_rule(h, (uint64_t)k * 13, &ru));
        }
        pcollCheck(pcoll_set_horizon(h, UINT64_MAX)); /* the schedule is final: every round */
    }
    t->ctl.h = h;
    t->ctl.P = P;
    t->ctl.stop = 0;
    t->ctl.lag = 2;
    if (t->dynamic) pthread_create(&t->cth, NULL, dyn_ctl, &t->ctl);

    size_t n = t->n;
    t->g = malloc(n * sizeof *t->g);
    t->dep_sum = calloc(n, sizeof *t->dep_sum);
    pcoll_record_init(&t->rec, P);
    rcheck_t *c = &t->rc;
    c->w = calloc(n, sizeof *c->w);
    c->all_sum = calloc(n, sizeof *c->all_sum);
    c->seen = calloc((size_t)t->steps, sizeof *c->seen);
    c->streak_at = calloc(8, 4); /* max streak of the slow rank at 1/8 .. 8/8 of the run */

    /* a slow rank runs proportionally fewer steps, so that all ranks finish at about the same
     * time and its streaks are measured while the others are still active */
    if (me == t->slow && t->slow_factor > 1)
        t->steps = (int)(t->steps / t->slow_factor) > 0 ? (int)(t->steps / t->slow_factor) : 1;
    c->P = P;
    c->me = me;
    c->steps = t->steps;
    c->tau = t->tau;
    c->slow = t->slow;
    c->div = (int)t->cfg.div;
    c->n = n;
    c->applied = 0;
    c->hash = HASH_FNV1A64_INIT;
    c->fails = 0;
}

/* This rank's absences from libpcoll during the steps (from pcoll_wait's return to the next
 * deposit) longer than cfg.spin_us: each lets the engine be woken for the next rounds (a busy
 * machine makes them, the test cannot; pinv_run counts them for the counts' checks). */
static int pinv_late_absences;

/* The steps (each: delay, deposit, wait, check every round handed out), pcoll_join, the drain of
 * the rounds that still complete, pcoll_finalize, and each step's deposit seen in one round. */
static void pinv_run(pinv_t *t, const pinv_io_t *io) {
    pcoll_t *h = t->h;
    const int steps = t->steps;
    const size_t n = t->n;
    int joined = 0;
    double t_begin = MPI_Wtime(), t_back = 0;
    for (int s = 0; s <= steps; s++) {
        if (s == steps && !joined && io->steps_done) /* before the drain, whose waits may sleep */
            io->steps_done(io->ctx, h, steps, MPI_Wtime() - t_begin);
        if (s == steps) { /* join, then drain the rounds that still complete */
            pcoll_join(h);
            joined = 1;
        }
        if (!joined) {
            double d = t->delay_us * u01(t->seed, (uint64_t)s, (uint64_t)me);
            if (me == t->slow) d = t->delay_us * t->slow_factor;
            sleep_us(d);
            make_grad(t->g, n, me, s);
            for (size_t k = 0; k < n; k++) t->dep_sum[k] += t->g[k];
            const void *buf = io->stage ? io->stage(io->ctx, t->g, n) : t->g;
            if (!buf) {
                fails++;
                break;
            }
            pcollCheck(pcoll_set_cost(h, cost_of(me, s), step_of(me, s)));
            if (loss_reported(me)) pcollCheck(pcoll_set_loss(h, loss_of(me, s), samples_of(me)));
            if (t_back > 0 && (MPI_Wtime() - t_back) * 1e6 > t->cfg.spin_us + d) pinv_late_absences++;
            int rc = pcoll_deposit(h, buf, (t->newer ? PCOLL_ACCUMULATE : 0) | io->deposit_flags);
            if (rc) {
                fprintf(stderr, "rank %d: deposit: %s\n", me, pcoll_last_error(h));
                fails++;
                break;
            }
            rc = pcoll_wait(h, t->newer ? PCOLL_WAIT_NEWER : PCOLL_WAIT_CONSUMED, 60.0, NULL);
            if (rc) {
                fprintf(stderr, "rank %d: wait: %s\n", me, pcoll_last_error(h));
                fails++;
                break;
            }
            t_back = MPI_Wtime();
        }
        if (io->before_next) io->before_next(io->ctx, s);
        const float *res;
        uint64_t r;
        while (pcoll_next(h, &r, &res, &t->rec) == PCOLL_OK) {
            const float *hres = io->fetch ? io->fetch(io->ctx, r, res, n) : res;
            if (!hres) {
                fails++;
                break;
            }
            rcheck_round(&t->rc, r, hres, &t->rec, s);
        }
        if (joined) {
            int rc = pcoll_wait(h, PCOLL_WAIT_NEWER, 60.0, NULL);
            if (rc == PCOLL_DONE) break;
            if (rc) {
                fprintf(stderr, "rank %d: drain: %s\n", me, pcoll_last_error(h));
                fails++;
                break;
            }
            s--; /* stay in the drain step */
        }
    }
    fails += t->rc.fails;
    t->ctl.stop = 1;
    if (t->dynamic) pthread_join(t->cth, NULL); /* it ends once the engine is done; then free */
    int rc = pcoll_finalize(&t->h, 120.0);
    CHECK(rc == PCOLL_OK, "finalize: %s", pcoll_strerror(rc));
    if (!t->newer && !t->cfg.div)
        for (int s = 0; s < steps; s++) CHECK(t->rc.seen[s] == 1, "step %d seen %d times", s, t->rc.seen[s]);
}

/* Conservation, agreement and replica equality across ranks, the slow rank's streak profile (and
 * its growth with --expect-streak-growth), the report; frees the run's buffers. Returns the exit
 * code: 0 when every check passed on every rank. */
static int pinv_verify(pinv_t *t) {
    const size_t n = t->n;
    const uint64_t applied = t->rc.applied, hash = t->rc.hash;
    const double *w = t->rc.w, *all_sum = t->rc.all_sum;
    /* conservation: sum over rounds = sum over deposits (double sums of integers: exact) */
    double *tot_dep = calloc(n, sizeof *tot_dep);
    MPI_Allreduce(t->dep_sum, tot_dep, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    uint64_t maxapplied = 0;
    MPI_Allreduce(&applied, &maxapplied, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    /* after the drain (pcoll_wait returned PCOLL_DONE: every rank joined, all handed out) every
     * rank has applied every round: the same number on all ranks, checked, so that conservation
     * and agreement below hold over the whole run and are never skipped */
    uint64_t *apl = malloc((size_t)P * 8);
    MPI_Allgather(&applied, 1, MPI_UINT64_T, apl, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int p = 0; p < P; p++)
        CHECK(apl[p] == applied, "drain: rank %d applied %llu rounds, this rank %llu", p,
              (unsigned long long)apl[p], (unsigned long long)applied);
    if (!t->cfg.div) /* --div divides the results: their sum is not the deposits' */
        for (size_t k = 0; k < n; k++)
            CHECK(all_sum[k] == tot_dep[k], "conservation: element %zu: rounds sum %g, deposits %g", k,
                  all_sum[k], tot_dep[k]);
    /* agreement and replica equality with every rank (a rank that applied a different number of
     * rounds has failed the drain check above and differs here too) */
    uint64_t mine[3] = {hash, hash_splitmix64(applied), 0};
    for (size_t k = 0; k < n; k++) {
        uint64_t b;
        memcpy(&b, &w[k], 8);
        mine[2] = hash_fnv1a64_word(mine[2], b);
    }
    uint64_t *all = malloc((size_t)P * sizeof mine);
    MPI_Allgather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int p = 0; p < P; p++) {
        CHECK(all[3 * p] == hash, "agreement: round hash differs from rank %d", p);
        CHECK(all[3 * p + 2] == mine[2], "replicas differ from rank %d", p);
    }
    if (!me) {
        printf("mode=%s P=%d steps=%d rounds=%llu (max over ranks) n=%zu tau=%d\n", t->mode, P, t->steps,
               (unsigned long long)maxapplied, n, t->tau);
    }
    const uint32_t *streak_at = t->rc.streak_at;
    if (t->slow >= 0 && me == t->slow) {
        printf("slow rank %d (x%.0f): longest rejection streak by eighth of the run:", t->slow,
               t->slow_factor);
        for (int o = 0; o < 8; o++) printf(" %u", streak_at[o]);
        printf("\n");
    }
    if (t->slow >= 0 && t->growth && me == t->slow) {
        uint32_t b = 0;
        for (int o = 0; o < 8; o++) b = streak_at[o] > b ? streak_at[o] : b;
        CHECK(b > 4, "expected the slow rank's streak to exceed 4 without a bound (max %u)", b);
    }
    int tot = 0;
    MPI_Allreduce(&fails, &tot, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (!me) printf("%s: %d check failures\n", tot ? "FAIL" : "OK", tot);
    pcoll_record_free(&t->rec);
    free(t->g);
    free(t->dep_sum);
    free(t->rc.w);
    free(t->rc.all_sum);
    free(t->rc.seen);
    free(t->rc.streak_at);
    free(tot_dep);
    free(all);
    free(apl);
    return tot ? 1 : 0;
}

/* MPI_Finalize; returns rc (the exit code of pinv_mismatch or pinv_verify) */
static int pinv_exit(int rc) {
    MPI_Finalize();
    return rc;
}
#endif
