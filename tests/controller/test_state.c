/* test_state.c -- the policy's carried state (controller.h section 6) and the decision hashes it
 * must not change:
 *   golden      the decision hashes of fixed scenarios, pinned: of the threshold rule (computed
 *               before the state type existed) and of rule=rate (pinned at i54-start)
 *   roundtrip   save -> load -> save gives the same bytes; policies resumed from the original and
 *               from the loaded state decide alike
 *   v6          a version-6 state of the rate rule still loads; one of rule=thresholds is refused
 *   corrupt     every flipped byte, every truncation, a wrong version, out-of-range fields (with a
 *               valid checksum) and a shape mismatch give an error and a message, never a crash
 *   split       a run of several handles (epochs) whose state goes through bytes between two of
 *               them (a checkpoint and a restart) makes the same decisions, handle by handle, as
 *               the uninterrupted run; and a run cut into handles decides as one handle does
 *   bytes       the saved bytes of five states, pinned (the byte format, its level numbering included)
 * Usage: test_state [-v]    (CTL_TEST=name runs one test)
 */
#include "common/hash.h"
#include "controller/policy_impl.h" /* struct ctl_state: where a field lies in the saved bytes */
#include "tests/controller/trace.h"

/* ------------------------------------------------------------------ golden hashes */

static uint64_t prob_hash(const char *spec, int P, uint64_t seed, phases_t *ph, uint64_t N, int lib_tau) {
    declog_t L = {0};
    ctl_policy_t *pol = run_phases_tau(spec, P, seed, ph, N, lib_tau, &L);
    uint64_t h = ctl_policy_hash(pol);
    ctl_policy_free(pol);
    free(L.d);
    return h;
}

/* costs: 0 none, 1 step times, 2 cycle times with the step times beside them (rule=rate) */
static uint64_t sim_hash(const char *spec, int P, const double *per, double jit, int costs, uint64_t N,
                         double to, uint64_t at) {
    ctl_policy_t *pol = mk(spec, P, NULL);
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    gen_t g;
    gen_init(&g, P, 77, &init);
    for (int p = 0; p < P; p++) g.period[p] = per[p];
    sim_start(&g, jit, 0.01);
    if (costs == 2)
        sim_report_cycles(&g);
    else if (costs)
        sim_report_costs(&g);
    declog_t L = {0};
    if (at) {
        run_loop(&g, pol, at, &L);
        g.period[0] = to;
        run_loop(&g, pol, N - at, &L);
    } else
        run_loop(&g, pol, N, &L);
    uint64_t h = ctl_policy_hash(pol);
    ctl_policy_free(pol);
    gen_free(&g);
    free(L.d);
    return h;
}

static void test_golden(void) {
    phases_t a = {3,
                  {{300, 0.5, 0, {0}, 0}, {1800, 0.1, 4, {0, 1, 2, 3}, 0.005}, {UINT64_MAX, 0.9, 0, {0}, 0}}};
    phases_t b = {3, {{400, 0.5, 0, {0}, 0}, {1500, 0.05, 1, {2}, 0.0}, {UINT64_MAX, 0.8, 0, {0}, 0}}};
    phases_t c = {1, {{UINT64_MAX, 0.8, 2, {3, 5}, 0.0}}};
    phases_t d = {1, {{UINT64_MAX, 0.35, 0, {0}, 0}}};
    phases_t e = {2, {{100, 0.4, 2, {6, 7}, 0.02}, {UINT64_MAX, 0.35, 0, {0}, 0}}};
    phases_t f = {1, {{UINT64_MAX, 0.9, 0, {0}, 0}}};
    const double al[4] = {1, 1, 1, 1}, sk[4] = {1, 2, 3, 4}, st[4] = {1, 1, 1, 6};
    const double p8[8] = {1, 1, 1, 1, 1, 1, 1, 10};
    struct {
        const char *name;
        uint64_t got, want;
    } g[] = {
        /* rule=rate (the default) on the same scenarios, without the options only thresholds has,
         * reporting cycle times as the trainer does for it (sim_hash costs=2); pinned at i54-start */
        {"rate_nocost", prob_hash("adaptive", 8, 51, &a, 5000, 0), 0x14650fb0739d0383ULL},
        {"rate_taupol_ad", prob_hash("adaptive,start=solo,tau=4,tau_by=policy,lag=3", 8, 42, &c, 3000, 0),
         0x0dc5ee8dae06e93dULL},
        {"rate_alike", sim_hash("adaptive", 4, al, 0.1, 2, 3000, 0, 0), 0x14650fb0739d0383ULL},
        {"rate_appears", sim_hash("adaptive", 4, al, 0.1, 2, 3000, 4.0, 1000), 0xcca2abb026a08ac1ULL},
        {"rate_skew", sim_hash("adaptive", 4, sk, 0.1, 2, 3000, 0, 0), 0xe8e4e2b2e8bb8f4aULL},
        {"rate_probe", sim_hash("adaptive,probe=64,probe_max=1024", 4, sk, 0.1, 2, 3000, 0, 0),
         0x37f72825d24d515eULL},
        {"rate_strag_tau", sim_hash("adaptive,tau=4", 4, st, 0.3, 2, 4000, 0, 0), 0x873edf3933fc8baaULL},
        {"rate_start_solo", sim_hash("adaptive,start=solo", 4, st, 0.1, 2, 3000, 0, 0),
         0xab32564d691e4e4bULL},
        {"rate_quorum", sim_hash("adaptive,start=quorum:2,window=16", 8, p8, 0.2, 2, 4000, 1.0, 2000),
         0xf426e2c2ed092f4bULL},
        {"rate_p8", sim_hash("adaptive", 8, p8, 0.2, 2, 4000, 1.0, 2000), 0xdbf76a991d2f3212ULL},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        CHECK(g[i].got == g[i].want, "%s: decision hash %016llx, pinned %016llx", g[i].name,
              (unsigned long long)g[i].got, (unsigned long long)g[i].want);
        if (verbose) printf("    %-14s %016llx\n", g[i].name, (unsigned long long)g[i].got);
    }
}

/* ------------------------------------------------------------------ handles */

typedef struct {
    const char *spec;
    int P, nh, len, tail; /* handles of len rounds; in the last `tail` rounds ranks join one by one */
    int save_at;     /* after this handle the state goes through bytes and all else is freed (-1: never) */
    int every_bytes; /* every carry goes through bytes */
    const double *period; /* event time with cycle times (NULL: probabilistic phases) */
    double jitter;
    phases_t *ph;
} hrun_t;

typedef struct {
    uint64_t hash[16];
    declog_t L;
    size_t state_bytes;
} hres_t;

/* Carries st through ctl_state_save / ctl_state_load (a checkpoint); returns the loaded state. */
static ctl_state_t *through_bytes(ctl_state_t *st, size_t *nbytes) {
    size_t n = 0;
    CHECK(ctl_state_save(st, NULL, 0, &n) == CTL_OK && n > 0, "save size");
    uint8_t *buf = malloc(n);
    CHECK(ctl_state_save(st, buf, n, &n) == CTL_OK, "save");
    ctl_state_free(st);
    ctl_state_t *out = NULL;
    char err[256];
    CHECK(ctl_state_load(buf, n, &out, err, sizeof err) == CTL_OK && out, "load: %s", err);
    free(buf);
    if (nbytes) *nbytes = n;
    return out;
}

/* Runs the handles on one closed-loop generator (global round numbers); the policy of handle h > 0
 * resumes the state handle h-1 ended with. Decisions go to res->L with global rounds. */
static void run_handles(const hrun_t *hr, hres_t *res) {
    memset(res, 0, sizeof *res);
    ctl_policy_cfg_t cfg;
    char err[256];
    CHECK(ctl_policy_parse(hr->spec, &cfg, err, sizeof err) == CTL_OK, "%s", err);
    ctl_policy_t *pol = ctl_policy_new(&cfg, hr->P);
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    gen_t g;
    gen_init(&g, hr->P, 91, &init);
    if (hr->period) {
        for (int p = 0; p < hr->P; p++) g.period[p] = hr->period[p];
        sim_start(&g, hr->jitter, 0.01);
        sim_report_cycles(&g);
    } else {
        g.q = q_phases;
        g.qarg = hr->ph;
    }
    for (int h = 0; h < hr->nh; h++) {
        uint64_t base = g.r;
        if (h > 0) { /* the new handle's first rounds run the carried rule */
            ctl_decision_t d;
            memset(&d, 0, sizeof d);
            d.effective = base;
            ctl_policy_initial(pol, &d.new_rule);
            sched_push(&g.sched, &d);
            for (int p = 0; p < hr->P; p++) g.joined[p] = 0;
        }
        for (int i = 0; i < hr->len; i++) {
            int k = i - (hr->len - hr->tail); /* the epoch's tail: rank k joins */
            if (k >= 0 && k < hr->P - 1) g.joined[k] = 1;
            pcoll_record_t *rec = (pcoll_record_t *)gen_next(&g);
            rec->round -= base;
            ctl_decision_t d;
            int rc = ctl_policy_observe(pol, rec, &d);
            CHECK(rc == 0 || rc == 1, "handle %d round %d: observe %d", h, i, rc);
            if (rc == 1) {
                d.round += base;
                d.effective += base;
                sched_push(&g.sched, &d);
                declog_add(&res->L, &d);
            }
        }
        res->hash[h] = ctl_policy_hash(pol);
        ctl_state_t *st = ctl_policy_state(pol);
        ctl_policy_free(pol);
        if (h == hr->save_at || hr->every_bytes) st = through_bytes(st, &res->state_bytes);
        pol = ctl_policy_resume(&cfg, hr->P, st, err, sizeof err);
        CHECK(pol != NULL, "resume after handle %d: %s", h, err);
        ctl_state_free(st);
        if (!pol) break;
    }
    ctl_policy_free(pol);
    gen_free(&g);
}

static int same_decisions(const declog_t *a, const declog_t *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (a->d[i].round != b->d[i].round || a->d[i].eff != b->d[i].eff || a->d[i].what != b->d[i].what ||
            a->d[i].to != b->d[i].to || strcmp(a->d[i].reason, b->d[i].reason))
            return 0;
    return 1;
}

static void test_split(void) {
    const double skew[4] = {1, 1.5, 2, 6}, strag[8] = {1, 1, 1, 1, 1, 1, 1, 5};
    hrun_t runs[] = {
        {"adaptive,rule=rate", 4, 8, 400, 6, -1, 0, skew, 0.2, NULL},
        {"adaptive,rule=rate,tau=4", 8, 6, 700, 10, -1, 0, strag, 0.3, NULL},
        {"adaptive,tau=4,cost_n=8", 4, 6, 500, 5, -1, 0, skew, 0.2, NULL},
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        hrun_t a = runs[k], b = runs[k], c = runs[k];
        b.save_at = a.nh / 2 - 1;
        c.every_bytes = 1;
        hres_t A, B, C;
        run_handles(&a, &A);
        run_handles(&b, &B);
        run_handles(&c, &C);
        int mode_changes = 0;
        for (int i = 0; i < A.L.n; i++) mode_changes += !!(A.L.d[i].what & CTL_DEC_MODE);
        CHECK(mode_changes >= 3, "%s: too tame a run (%d mode changes)", a.spec, mode_changes);
        for (int h = 0; h < a.nh; h++)
            CHECK(A.hash[h] == B.hash[h] && A.hash[h] == C.hash[h],
                  "%s: handle %d hash %016llx, restarted after "
                  "handle %d %016llx, through bytes every time %016llx",
                  a.spec, h, (unsigned long long)A.hash[h], b.save_at, (unsigned long long)B.hash[h],
                  (unsigned long long)C.hash[h]);
        CHECK(same_decisions(&A.L, &B.L) && same_decisions(&A.L, &C.L), "%s: decisions differ (%d / %d / %d)",
              a.spec, A.L.n, B.L.n, C.L.n);
        if (verbose)
            printf("    %s: %d decisions (%d mode), state %zu bytes\n", a.spec, A.L.n, mode_changes,
                   C.state_bytes);
        /* one handle of nh*len rounds decides as the cut run does (no tails; a decision in the last
         * lag rounds of a handle would take effect earlier in the cut run, so none may fall there) */
        if (!a.tail) {
            hrun_t one = a;
            one.nh = 1;
            one.len = a.nh * a.len;
            hres_t O;
            run_handles(&one, &O);
            int edge = 0;
            for (int i = 0; i < A.L.n; i++)
                edge += A.L.d[i].eff % (uint64_t)a.len < 2 && A.L.d[i].eff % (uint64_t)a.len;
            CHECK(edge || same_decisions(&A.L, &O.L), "%s: cut into %d handles: %d decisions, one handle: %d",
                  a.spec, a.nh, A.L.n, O.L.n);
            free(O.L.d);
        }
        free(A.L.d);
        free(B.L.d);
        free(C.L.d);
    }
}

/* ------------------------------------------------------------------ bytes */

static uint64_t fnv64(const uint8_t *b, size_t n) { return hash_fnv1a64(HASH_FNV1A64_INIT, b, n); }
static void reseal(uint8_t *b, size_t n) {
    uint64_t h = fnv64(b, n - 8);
    for (int i = 0; i < 8; i++) b[n - 8 + i] = (uint8_t)(h >> (8 * i));
}

/* Bytes version 9 appends: worth=measured's loss sums of the measurement (a count, 6 doubles). */
#define V9_TAIL (4 + 6 * 8)

/* The version-8 bytes of a version-9 state (a, n bytes): without the loss sums. *n8: the length.
 * Free the result. */
static uint8_t *as_v8(const uint8_t *a, size_t n, size_t *n8) {
    uint8_t *b = malloc(n - V9_TAIL);
    memcpy(b, a, n - V9_TAIL - 8);
    b[8] = 8;
    *n8 = n - V9_TAIL;
    reseal(b, *n8);
    return b;
}

/* The version-7 bytes of a version-9 state of P ranks (a, n bytes): without the loss sums and
 * change=steps' fields, which version 8 appends (the log step sums of the measurement, n and 4
 * sums per rank; the reference: k, 3 x 2 doubles, 3 arrays of P doubles, 3 doubles, 3 counts,
 * beyond). *n7: the length. Free the result. */
static uint8_t *as_v7(const uint8_t *a, size_t n, int P, size_t *n7) {
    const size_t tail = (size_t)P * (4 + 4 * 8) + 4 + 6 * 8 + (size_t)P * 3 * 8 + 3 * 8 + 3 * 4 + 4 + V9_TAIL;
    uint8_t *b = malloc(n - tail);
    memcpy(b, a, n - tail - 8);
    b[8] = 7;
    *n7 = n - tail;
    reseal(b, *n7);
    return b;
}

/* A state with something in every part: a rate-rule run over a skew, a couple of handles. */
/* The state of a rate-rule run of `rounds` rounds, ranks 1..P times slower, library tau 3. */
static ctl_state_t *state_after(int P, ctl_policy_cfg_t *cfg, uint64_t rounds) {
    char err[256];
    CHECK(ctl_policy_parse("adaptive,rule=rate,tau=3,window=16,cost_n=8", cfg, err, sizeof err) == CTL_OK,
          "%s", err);
    ctl_policy_t *pol = ctl_policy_new(cfg, P);
    pcoll_rule_t init;
    ctl_policy_initial(pol, &init);
    gen_t g;
    gen_init(&g, P, 3, &init);
    for (int p = 0; p < P; p++) g.period[p] = 1 + p;
    sim_start(&g, 0.2, 0.01);
    sim_report_cycles(&g);
    g.lib_tau = 3;
    declog_t L = {0};
    run_loop(&g, pol, rounds, &L);
    ctl_state_t *st = ctl_policy_state(pol);
    ctl_policy_free(pol);
    gen_free(&g);
    free(L.d);
    return st;
}

static ctl_state_t *rich_state(int P, ctl_policy_cfg_t *cfg) { return state_after(P, cfg, 777); }

/* The saved bytes do not change with the build: states after 40, 150, 400, 777 and 2000 rounds (probing,
 * settled, levels in the queue, the rival) save to bytes whose checksums were pinned at i54e-start
 * (before the levels were renumbered in memory; the byte format keeps light 0, majority 1, sync 2);
 * since version 8 (change=steps' fields appended) its version-7 part is what is pinned, and a
 * version-7 state loads and saves again as the state it was (change=score leaves those fields 0);
 * so does a version-8 one (version 9 appends worth=measured's loss sums, 0 under worth=assumed). */
static void test_bytes(void) {
    const uint64_t rounds[5] = {40, 150, 400, 777, 2000};
    const uint64_t want[5] = {0xc45de890bec8f559ULL, 0xa3e9e82760e0e417ULL, 0x4e232c8d25537f2bULL,
                              0x9568d904a33ef9d6ULL, 0x6e92b3b25db3cc3fULL};
    for (int k = 0; k < 5; k++) {
        ctl_policy_cfg_t cfg;
        ctl_state_t *st = state_after(4, &cfg, rounds[k]);
        size_t n = 0;
        ctl_state_save(st, NULL, 0, &n);
        uint8_t *a = malloc(n);
        ctl_state_save(st, a, n, &n);
        size_t n7 = 0;
        uint8_t *b = as_v7(a, n, 4, &n7), *c = malloc(n);
        uint64_t sum = 0;
        for (int i = 0; i < 8; i++) sum |= (uint64_t)b[n7 - 8 + i] << (8 * i);
        ctl_state_t *l = NULL;
        char err[256] = "";
        size_t m = 0;
        CHECK(ctl_state_load(b, n7, &l, err, sizeof err) == CTL_OK, "version 7: %s", err);
        if (l) ctl_state_save(l, c, n, &m);
        CHECK(l && m == n && !memcmp(a, c, n), "version 7 read back differs from the state it was");
        ctl_state_free(l);
        free(b);
        /* version 8 likewise (worth=assumed leaves the loss sums 0) */
        size_t n8 = 0;
        b = as_v8(a, n, &n8), l = NULL, m = 0;
        CHECK(ctl_state_load(b, n8, &l, err, sizeof err) == CTL_OK, "version 8: %s", err);
        if (l) ctl_state_save(l, c, n, &m);
        CHECK(l && m == n && !memcmp(a, c, n), "version 8 read back differs from the state it was");
        ctl_state_free(l);
        free(b), free(c);
        CHECK(sum == want[k],
              "state after %llu rounds: bytes with checksum %016llx, pinned %016llx (level %u)",
              (unsigned long long)rounds[k], (unsigned long long)sum, (unsigned long long)want[k], a[32]);
        free(a);
        ctl_state_free(st);
    }
}

static void test_roundtrip(void) {
    const int P = 4;
    ctl_policy_cfg_t cfg;
    ctl_state_t *st = rich_state(P, &cfg);
    size_t n = 0, n2 = 0;
    ctl_state_save(st, NULL, 0, &n);
    uint8_t *a = malloc(n), *b = malloc(n);
    CHECK(ctl_state_save(st, a, n - 1, &n2) == CTL_ERR_ARG, "save into a buffer one byte short accepted");
    CHECK(ctl_state_save(st, a, n, &n2) == CTL_OK && n2 == n, "save");
    ctl_state_t *ld = NULL;
    char err[256];
    CHECK(ctl_state_load(a, n, &ld, err, sizeof err) == CTL_OK, "load: %s", err);
    CHECK(ld && ctl_state_save(ld, b, n, &n2) == CTL_OK && n2 == n && !memcmp(a, b, n), "save(load(x)) != x");
    CHECK(ld && ctl_state_rounds(ld) == 777, "rounds %llu", (unsigned long long)ctl_state_rounds(ld));
    /* the two states continue alike */
    uint64_t h[2];
    for (int k = 0; k < 2; k++) {
        ctl_policy_t *pol = ctl_policy_resume(&cfg, P, k ? ld : st, err, sizeof err);
        CHECK(pol != NULL, "resume: %s", err);
        if (!pol) return;
        pcoll_rule_t init;
        ctl_policy_initial(pol, &init);
        gen_t g;
        gen_init(&g, P, 4, &init);
        for (int p = 0; p < P; p++) g.period[p] = 1; /* the skew is gone: the rule reacts */
        sim_start(&g, 0.2, 0.01);
        sim_report_cycles(&g);
        declog_t L = {0};
        run_loop(&g, pol, 1500, &L);
        CHECK(L.n >= 1, "the continuation made no decision");
        h[k] = ctl_policy_hash(pol);
        ctl_policy_free(pol);
        gen_free(&g);
        free(L.d);
    }
    CHECK(h[0] == h[1], "resumed from the state %016llx, from its bytes %016llx", (unsigned long long)h[0],
          (unsigned long long)h[1]);
    if (verbose) printf("    state of P=%d, window 16, cost_n 8: %zu bytes\n", P, n);
    ctl_state_free(st);
    ctl_state_free(ld);
    free(a);
    free(b);
}

static void expect_bad(const uint8_t *b, size_t n, const char *must, const char *what) {
    ctl_state_t *s = (ctl_state_t *)1;
    char err[256] = "";
    int rc = ctl_state_load(b, n, &s, err, sizeof err);
    CHECK(rc == CTL_ERR_ARG && s == NULL && strstr(err, "controller state") && strstr(err, must),
          "%s: rc %d, message '%s' (want '%s')", what, rc, err, must);
    if (rc == CTL_OK) ctl_state_free(s);
}

/* Where a field lies in saved state a (n bytes): the first byte, past the header and before the
 * checksum, at which a differs from the state saved again after poke changed that field's low
 * byte. The layout is the saver's (state.c's field list), not the test's to repeat. */
static void poke_w_pos(ctl_state_t *s) { s->w_pos ^= 0x5a; }
static void poke_np0(ctl_state_t *s) { s->m.np[0] ^= 0x5a; }
static size_t field_pos(const uint8_t *a, size_t n, void (*poke)(ctl_state_t *)) {
    ctl_state_t *s = NULL;
    char err[256];
    CHECK(ctl_state_load(a, n, &s, err, sizeof err) == CTL_OK, "load: %s", err);
    if (!s) return 0;
    poke(s);
    size_t m = 0, at = 0;
    ctl_state_save(s, NULL, 0, &m);
    uint8_t *c = malloc(m);
    ctl_state_save(s, c, m, &m);
    CHECK(m == n, "saved again: %zu bytes, %zu before", m, n);
    for (size_t i = 24; i + 8 < n && i < m && !at; i++)
        if (a[i] != c[i]) at = i;
    CHECK(at > 0, "the poked field is not in the saved bytes");
    free(c);
    ctl_state_free(s);
    return at;
}

/* The version-6 bytes of a state saved as version 7 (a): rule=thresholds' fields spliced in (the
 * previous level, the dwell, the sync probe's round, the LIGHT interval, block and return round),
 * with probe_at as given (NONE: as the rate rule left them). *n6: the length. Free the result. */
static uint8_t *as_v6(const uint8_t *a, size_t n, uint64_t probe_at, size_t *n6) {
    const size_t add = 4 + 4 + 8 + 4 + 8 + 8, h = 24; /* header: magic, version, P, window, cost_n */
    uint8_t *b = calloc(1, n + add), *o = b;
    const uint8_t *r = a;
    uint32_t v32;
#define COPY(k)   (memcpy(o, r, k), o += k, r += k)
#define PUT(v, k) (memcpy(o, &(v), k), o += k)
    COPY(h + 8 + 4);                 /* header, base, level */
    v32 = (uint32_t)-1, PUT(v32, 4); /* prev_level */
    COPY(8);                         /* mode_from */
    v32 = 32, PUT(v32, 4);           /* dwell */
    COPY(4);                         /* probe */
    PUT(probe_at, 8);
    v32 = 256, PUT(v32, 4); /* lprobe */
    uint64_t z = 0, none = NONE;
    PUT(z, 8);    /* lblock */
    PUT(none, 8); /* lprobe_at */
    COPY(n - (size_t)(r - a));
#undef COPY
#undef PUT
    b[8] = 6;
    *n6 = n + add;
    reseal(b, *n6);
    return b;
}

/* A version-6 state (before rule=thresholds was removed) of the rate rule loads and decides as the
 * state it was; one of rule=thresholds is refused with a message naming the rule. */
static void test_v6(void) {
    const int P = 4;
    ctl_policy_cfg_t cfg;
    ctl_state_t *st = rich_state(P, &cfg);
    size_t n = 0, n6 = 0;
    ctl_state_save(st, NULL, 0, &n);
    uint8_t *a = malloc(n), *c = malloc(n);
    ctl_state_save(st, a, n, &n);
    size_t n7 = 0;
    uint8_t *a7 = as_v7(a, n, P, &n7);
    uint8_t *b = as_v6(a7, n7, NONE, &n6);
    ctl_state_t *l = NULL;
    char err[256] = "";
    CHECK(ctl_state_load(b, n6, &l, err, sizeof err) == CTL_OK, "version 6 of rule=rate: %s", err);
    size_t m = 0;
    if (l) ctl_state_save(l, c, n, &m);
    CHECK(l && m == n && !memcmp(a, c, n), "version 6 read back differs from the state it was");
    ctl_state_free(l);
    free(b);
    b = as_v6(a7, n7, 1000, &n6);
    free(a7);
    expect_bad(b, n6, "rule=thresholds", "version 6 of rule=thresholds");
    free(b);
    free(a);
    free(c);
    ctl_state_free(st);
}

static void test_corrupt(void) {
    const int P = 4;
    ctl_policy_cfg_t cfg;
    ctl_state_t *st = rich_state(P, &cfg);
    size_t n = 0;
    ctl_state_save(st, NULL, 0, &n);
    uint8_t *a = malloc(n), *b = malloc(n);
    ctl_state_save(st, a, n, &n);
    char what[64];
    for (size_t i = 0; i < n; i++) { /* every byte flipped */
        memcpy(b, a, n);
        b[i] ^= (uint8_t)(1u << (i % 8));
        snprintf(what, sizeof what, "byte %zu flipped", i);
        /* byte 8's low bit makes version 7 the version 6 that is still read: its checksum fails */
        expect_bad(b, n, i < 8 ? "magic" : i == 8 ? "" : i < 12 ? "version" : i < 24 ? "" : "checksum", what);
    }
    for (size_t k = 0; k < n; k += 1 + k / 16) { /* truncated */
        snprintf(what, sizeof what, "truncated to %zu bytes", k);
        expect_bad(a, k, "", what);
    }
    expect_bad(NULL, n, "no bytes", "NULL buffer");
    /* valid checksums, bad contents */
    memcpy(b, a, n);
    b[8] = 99; /* a version this build does not read */
    reseal(b, n);
    expect_bad(b, n, "version 99", "version 99");
    memcpy(b, a, n);
    b[12] = 0;
    b[13] = 0;
    reseal(b, n);
    expect_bad(b, n, "P=0", "P = 0");
    memcpy(b, a, n);
    b[12] = 5;
    reseal(b, n);
    expect_bad(b, n, "expected", "P = 5 with the bytes of P = 4");
    memcpy(b, a, n);
    b[32] = 7;
    reseal(b, n); /* level: after header (24) and base (8) */
    expect_bad(b, n, "level 7", "level 7");
    memcpy(b, a, n);
    size_t wpos = field_pos(a, n, poke_w_pos);
    b[wpos] = 16;
    reseal(b, n);
    expect_bad(b, n, "window", "window position = window");
    memcpy(b, a, n);
    size_t npos = field_pos(a, n, poke_np0); /* rank 0's consecutive pairs (m.np[0]) */
    if (verbose) printf("    %zu bytes: w_pos at byte %zu, m.np[0] at %zu\n", n, wpos, npos);
    b[npos] = b[npos + 1] = 0xff;
    reseal(b, n);
    expect_bad(b, n, "consecutive pairs", "more pairs of cycles than deposits");
    /* a state resumed under another shape or a static policy */
    ctl_policy_cfg_t other;
    char err[256];
    ctl_policy_parse("adaptive,rule=rate,tau=3,window=32,cost_n=8", &other, err, sizeof err);
    CHECK(ctl_policy_resume(&other, P, st, err, sizeof err) == NULL && strstr(err, "window=16") &&
              strstr(err, "window=32"),
          "window mismatch: %s", err);
    CHECK(ctl_policy_resume(&cfg, P + 1, st, err, sizeof err) == NULL && strstr(err, "P=4") &&
              strstr(err, "P=5"),
          "P mismatch: %s", err);
    ctl_policy_parse("sync", &other, err, sizeof err);
    CHECK(ctl_policy_resume(&other, P, st, err, sizeof err) == NULL && strstr(err, "adaptive"), "static: %s",
          err);
    ctl_state_free(st);
    free(a);
    free(b);
}

/* ctl_state_continue, every resume's steps: sound bytes continue (resized on another P, as
 * ctl_state_resize makes it); bad bytes are CTL_ERR_ARG, a policy that does not continue them
 * CTL_ERR_STATE, each with its message and *out NULL. */
static void test_continue(void) {
    ctl_policy_cfg_t cfg, other;
    char err[512];
    ctl_state_t *st = rich_state(4, &cfg), *out = NULL;
    size_t n = 0;
    ctl_state_save(st, NULL, 0, &n);
    uint8_t *a = malloc(n);
    ctl_state_save(st, a, n, &n);
    int resized = -1;
    CHECK(ctl_state_continue(a, n, 4, &cfg, 4, &out, &resized, err, sizeof err) == CTL_OK && out && !resized,
          "same P: %s", err);
    CHECK(out && ctl_state_rounds(out) == ctl_state_rounds(st), "same P: the state's rounds kept");
    ctl_state_free(out);
    CHECK(ctl_state_continue(a, n, 4, &cfg, 6, &out, &resized, err, sizeof err) == CTL_OK && out && resized,
          "4 -> 6 ranks: %s", err);
    ctl_state_t *want = ctl_state_resize(st, 6);
    size_t n1 = 0, n2 = 0;
    ctl_state_save(out, NULL, 0, &n1), ctl_state_save(want, NULL, 0, &n2);
    uint8_t *b1 = malloc(n1), *b2 = malloc(n2);
    ctl_state_save(out, b1, n1, &n1), ctl_state_save(want, b2, n2, &n2);
    CHECK(n1 == n2 && !memcmp(b1, b2, n1), "4 -> 6 ranks: not the state ctl_state_resize makes");
    ctl_state_free(out), ctl_state_free(want), free(b1), free(b2);
    a[n / 2] ^= 0x5a;
    out = (ctl_state_t *)1;
    CHECK(ctl_state_continue(a, n, 4, &cfg, 4, &out, &resized, err, sizeof err) == CTL_ERR_ARG && !out &&
              strstr(err, "checksum"),
          "bad bytes: want CTL_ERR_ARG naming the checksum, got '%s'", err);
    a[n / 2] ^= 0x5a;
    CHECK(ctl_policy_parse("adaptive,rule=rate,tau=3,window=32,cost_n=8", &other, err, sizeof err) == CTL_OK,
          "%s", err);
    CHECK(ctl_state_continue(a, n, 4, &other, 4, &out, &resized, err, sizeof err) == CTL_ERR_STATE && !out &&
              strstr(err, "window=16"),
          "another window: want CTL_ERR_STATE naming window=16, got '%s'", err);
    CHECK(ctl_policy_parse("solo", &other, err, sizeof err) == CTL_OK, "%s", err);
    CHECK(ctl_state_continue(a, n, 4, &other, 4, &out, &resized, err, sizeof err) == CTL_ERR_STATE && !out &&
              strstr(err, "adaptive"),
          "solo: want CTL_ERR_STATE naming adaptive, got '%s'", err);
    ctl_state_free(st), free(a);
}

int main(int argc, char **argv) {
    verbose = argc > 1 && !strcmp(argv[1], "-v");
    const named_test_t tests[] = {
        {"golden", test_golden}, {"roundtrip", test_roundtrip}, {"corrupt", test_corrupt},   {"v6", test_v6},
        {"split", test_split},   {"bytes", test_bytes},         {"continue", test_continue},
    };
    return run_tests(tests, sizeof tests / sizeof tests[0]);
}
