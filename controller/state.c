/* state.c -- the policy's carried state (ctl_state_t, controller.h section 6): allocation, the
 * snapshot a new handle or a checkpoint continues from, and its versioned byte format.
 * Pure: no MPI calls, no threads, no clocks, no globals. */
#include "common/hash.h"
#include "controller/policy_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_MAGIC   "CTLSTATE"
#define STATE_VERSION 9u
#define V8            8u /* version 9 without worth=measured's loss sums (meas_t ln..lyy); still read */
#define V7 \
    7u                           /* version 8 without change=steps' fields (steps_t, the meas_t sums
                                     of log step times); still read, those start empty */
#define V6           6u          /* version 7 with rule=thresholds' fields (legacy_t); still read */
#define HEADER_BYTES (8 + 4 * 4) /* magic, version, P, window, cost_n */

/* The byte format numbers the levels light 0, majority 1, sync 2 (versions 6 and 7), the reverse of
 * CTL_LV_*. file_level maps a level number either way (its own inverse; values outside 0..2 stay). */
static int32_t file_level(int32_t l) { return l >= 0 && l < CTL_NLV ? CTL_NLV - 1 - l : l; }

int state_alloc(struct ctl_state *s, int P, int window, int cost_n) {
    memset(s, 0, sizeof *s);
    for (int q = 0; q < CTL_NLV; q++) s->queue[q] = file_level(0); /* unused entries save as 0 */
    s->P = P;
    s->window = window;
    s->cost_n = cost_n;
    size_t W = (size_t)window, N = (size_t)P * (size_t)cost_n;
    s->w_max = calloc(W, sizeof(uint32_t));
    s->w_fresh = calloc(W, sizeof(uint32_t));
    s->w_active = calloc(W, sizeof(uint32_t));
    s->w_nmax = calloc(W, sizeof(uint32_t));
    s->w_nfresh = calloc(W, sizeof(uint32_t));
    s->w_nfree = calloc(W, sizeof(uint32_t));
    s->w_tau = calloc(W, 1);
    s->ns = calloc(P, sizeof(uint32_t));
    s->cost = calloc(N, sizeof(float));
    s->cost_cnt = calloc(P, sizeof(int32_t));
    s->cost_pos = calloc(P, sizeof(int32_t));
    s->act = calloc(P, 1);
    s->gsince = calloc(P, sizeof(uint32_t));
    s->m.n = calloc(P, sizeof(uint32_t));
    s->m.d = calloc(P, sizeof(double));
    s->m.d2 = calloc(P, sizeof(double));
    s->m.l = calloc(P, sizeof(double));
    s->m.e = calloc(P, sizeof(double));
    s->m.e2 = calloc(P, sizeof(double));
    s->m.skip = calloc(P, 1);
    s->m.x1 = calloc(P, sizeof(double));
    s->m.w1 = calloc(P, sizeof(double));
    s->m.dd = calloc(P, sizeof(double));
    s->m.ee = calloc(P, sizeof(double));
    s->m.np = calloc(P, sizeof(uint32_t));
    s->m.yn = calloc(P, sizeof(uint32_t));
    s->m.y1 = calloc(P, sizeof(double));
    s->m.y2 = calloc(P, sizeof(double));
    s->m.y3 = calloc(P, sizeof(double));
    s->m.y4 = calloc(P, sizeof(double));
    s->st.rx = calloc(P, sizeof(double));
    s->st.rxx = calloc(P, sizeof(double));
    s->st.rw = calloc(P, sizeof(double));
    if (!s->m.yn || !s->m.y1 || !s->m.y2 || !s->m.y3 || !s->m.y4 || !s->st.rx || !s->st.rxx || !s->st.rw) {
        state_free(s);
        return CTL_ERR_NOMEM;
    }
    if (!s->w_max || !s->w_fresh || !s->w_active || !s->w_nmax || !s->w_nfresh || !s->w_nfree || !s->w_tau ||
        !s->ns || !s->cost || !s->cost_cnt || !s->cost_pos || !s->act || !s->gsince || !s->m.n || !s->m.d ||
        !s->m.d2 || !s->m.l || !s->m.e || !s->m.e2 || !s->m.skip || !s->m.x1 || !s->m.w1 || !s->m.dd ||
        !s->m.ee || !s->m.np) {
        state_free(s);
        return CTL_ERR_NOMEM;
    }
    return CTL_OK;
}

void state_free(struct ctl_state *s) {
    free(s->w_max);
    free(s->w_fresh);
    free(s->w_active);
    free(s->w_nmax);
    free(s->w_nfresh);
    free(s->w_nfree);
    free(s->w_tau);
    free(s->ns);
    free(s->cost);
    free(s->cost_cnt);
    free(s->cost_pos);
    free(s->act);
    free(s->gsince);
    free(s->m.n);
    free(s->m.d);
    free(s->m.d2);
    free(s->m.l);
    free(s->m.e);
    free(s->m.e2);
    free(s->m.skip);
    free(s->m.x1);
    free(s->m.w1);
    free(s->m.dd);
    free(s->m.ee);
    free(s->m.np);
    free(s->m.yn);
    free(s->m.y1);
    free(s->m.y2);
    free(s->m.y3);
    free(s->m.y4);
    free(s->st.rx);
    free(s->st.rxx);
    free(s->st.rw);
    memset(s, 0, sizeof *s);
}

void window_reset(struct ctl_state *s) {
    s->w_len = s->w_pos = 0;
    s->s_max = s->s_fresh = s->s_active = s->s_tau = 0;
    s->s_nmax = s->s_nfresh = s->s_nfree = 0;
}

/* Sums of the window ring, from its rows (exact integer sums). */
static void window_sums(struct ctl_state *s) {
    s->s_max = s->s_fresh = s->s_active = s->s_tau = s->s_nmax = s->s_nfresh = s->s_nfree = 0;
    for (int k = 0; k < s->w_len; k++) {
        s->s_max += s->w_max[k];
        s->s_fresh += s->w_fresh[k];
        s->s_active += s->w_active[k];
        s->s_nmax += s->w_nmax[k];
        s->s_nfresh += s->w_nfresh[k];
        s->s_nfree += s->w_nfree[k];
        s->s_tau += s->w_tau[k];
    }
}

void state_init(struct ctl_state *s, const ctl_policy_cfg_t *c) {
    pcoll_mode_t m = c->base.mode;
    s->level = level_of_mode(m);
    s->mode_from = 0;
    s->probe = c->sync_probe;
    rate_init(s, c);
}

/* ---------------------------------------------------------------- fields */

/* Every field of the state, in the byte format's order: address, count, kind ('1' u8, '4' 32-bit
 * integer, '8' u64, 'f' float, 'd' double). Adding a field here adds it to copy, save and load;
 * bump STATE_VERSION. */
typedef struct {
    void *p;
    size_t n;
    char t;
    char per_level; /* 1: indexed by level (CTL_NLV entries), reversed in the byte format */
} fld_t;
enum { MAXF = 100 };

/* The fields of rule=thresholds that a version-6 state holds between base and w_len. */
typedef struct {
    int32_t prev_level, dwell, lprobe;
    uint64_t probe_at, lblock, lprobe_at;
} legacy_t;

/* The fields of s in the byte order of version ver (6, 7, 8 or 9), of version 6 with lg (not NULL)
 * receiving its rule=thresholds fields. */
static int fields_v(struct ctl_state *s, fld_t *f, legacy_t *lg, uint32_t ver) {
    int k = 0;
    const size_t P = (size_t)s->P, W = (size_t)s->window;
#define ONE(x, t) f[k++] = (fld_t){&s->x, 1, t, 0}
#define OLD(x, t)              \
    if (lg) f[k++] = (fld_t) { \
            &lg->x, 1, t, 0    \
        }
#define ARR(x, n, t) \
    f[k++] = (fld_t) { s->x, n, t, 0 }
#define LVL(x, t) \
    f[k++] = (fld_t) { s->x, CTL_NLV, t, 1 }
    ONE(base, '8');
    ONE(level, '4');
    OLD(prev_level, '4');
    ONE(mode_from, '8');
    OLD(dwell, '4');
    ONE(probe, '4');
    OLD(probe_at, '8');
    OLD(lprobe, '4');
    OLD(lblock, '8');
    OLD(lprobe_at, '8');
    ONE(w_len, '4');
    ONE(w_pos, '4');
    ARR(w_max, W, '4');
    ARR(w_fresh, W, '4');
    ARR(w_active, W, '4');
    ARR(w_nmax, W, '4');
    ARR(w_nfresh, W, '4');
    ARR(w_nfree, W, '4');
    ARR(w_tau, W, '1');
    ARR(ns, P, '4');
    ARR(cost, P * (size_t)s->cost_n, 'f');
    ARR(cost_cnt, P, '4');
    ARR(cost_pos, P, '4');
    ARR(act, P, '1');
    ONE(cost_seen, '4');
    ARR(m.n, P, '4');
    ARR(m.d, P, 'd');
    ARR(m.d2, P, 'd');
    ARR(m.l, P, 'd');
    ARR(m.e, P, 'd');
    ARR(m.e2, P, 'd');
    ARR(m.skip, P, '1');
    ARR(m.x1, P, 'd');
    ARR(m.w1, P, 'd');
    ARR(m.dd, P, 'd');
    ARR(m.ee, P, 'd');
    ARR(m.np, P, '4');
    ONE(m.rounds, '4');
    ARR(gsince, P, '4');
    LVL(score, 'd');
    LVL(pool_w, 'd');
    LVL(pool_n, '8');
    LVL(se_in, 'd');
    LVL(pool_k, '4');
    LVL(pool_sx, 'd');
    LVL(pool_sxx, 'd');
    LVL(last_x, 'd');
    ONE(cv2_sum, 'd');
    ONE(cv2_n, '4');
    ONE(beyond, '4');
    ONE(contest, '4');
    ONE(rival, '4');
    ONE(probe_from, '8');
    LVL(rate, 'd');
    LVL(lag, 'd');
    LVL(scored_at, '8');
    ONE(phase, '4');
    ARR(queue, CTL_NLV, '4');
    ONE(nqueue, '4');
    ONE(incumbent, '4');
    ONE(grads, '8');
    ONE(next_probe, '8');
    ONE(ovh_sum, 'd');
    ONE(ovh_n, '4');
    ONE(screened, '4');
    LVL(pred, 'd');
    if (ver >= 8) {
        ARR(m.yn, P, '4');
        ARR(m.y1, P, 'd');
        ARR(m.y2, P, 'd');
        ARR(m.y3, P, 'd');
        ARR(m.y4, P, 'd');
        ONE(st.k, '4');
        ARR(st.x, 2, 'd');
        ARR(st.xx, 2, 'd');
        ARR(st.w, 2, 'd');
        ARR(st.rx, P, 'd');
        ARR(st.rxx, P, 'd');
        ARR(st.rw, P, 'd');
        ARR(st.bss, 3, 'd');
        ARR(st.bdf, 3, '4');
        ONE(st.beyond, '4');
    }
    if (ver >= 9) {
        ONE(m.ln, '4');
        ONE(m.lx0, 'd');
        ONE(m.lx, 'd');
        ONE(m.ly, 'd');
        ONE(m.lxx, 'd');
        ONE(m.lxy, 'd');
        ONE(m.lyy, 'd');
    }
#undef ONE
#undef OLD
#undef ARR
#undef LVL
    return k;
}

static int fields(struct ctl_state *s, fld_t *f) { return fields_v(s, f, NULL, STATE_VERSION); }

static size_t kind_bytes(char t) { return t == '1' ? 1 : t == '4' || t == 'f' ? 4 : 8; }

/* Converts every level number and per-level field of s between the in-memory numbering and the
 * byte format's (either way). */
static void file_levels(struct ctl_state *s) {
    s->level = file_level(s->level);
    s->rival = file_level(s->rival);
    s->incumbent = file_level(s->incumbent);
    for (int q = 0; q < CTL_NLV; q++) s->queue[q] = file_level(s->queue[q]);
    int32_t scr = s->screened & ~((1 << CTL_NLV) - 1);
    for (int l = 0; l < CTL_NLV; l++)
        if (s->screened >> l & 1) scr |= 1 << file_level(l);
    s->screened = scr;
    fld_t f[MAXF];
    int nf = fields(s, f);
    for (int i = 0; i < nf; i++) {
        if (!f[i].per_level) continue;
        const size_t kb = kind_bytes(f[i].t);
        for (int l = 0; l < CTL_NLV / 2; l++) {
            uint8_t t[8], *a = (uint8_t *)f[i].p + (size_t)l * kb,
                          *b = (uint8_t *)f[i].p + (size_t)file_level(l) * kb;
            memcpy(t, a, kb), memcpy(a, b, kb), memcpy(b, t, kb);
        }
    }
}

static size_t payload_bytes(struct ctl_state *s, legacy_t *lg, uint32_t ver) {
    fld_t f[MAXF];
    int nf = fields_v(s, f, lg, ver);
    size_t b = 0;
    for (int i = 0; i < nf; i++) b += f[i].n * kind_bytes(f[i].t);
    return b;
}

int state_copy(struct ctl_state *dst, const struct ctl_state *src) {
    if (state_alloc(dst, src->P, src->window, src->cost_n)) return CTL_ERR_NOMEM;
    fld_t fd[MAXF], fs[MAXF];
    int nf = fields(dst, fd);
    fields((struct ctl_state *)src, fs);
    for (int i = 0; i < nf; i++) memcpy(fd[i].p, fs[i].p, fs[i].n * kind_bytes(fs[i].t));
    window_sums(dst);
    return CTL_OK;
}

/* ---------------------------------------------------------------- API */

/* On another world size the rate rule's scores are not scaled (by P'/P) but measured again: a level's
 * score is the gradients' worth it delivers per second, and a change of P moves the levels by
 * different factors (sync waits for the slowest of P' ranks, majority for P'/2 + 1 of them, a
 * straggler is 1/P' of the ranks), so one common factor would keep an order between the levels that
 * the new world size may not have; a probe costs one measurement per level. The machine's spread
 * between measurements (cv2, relative) and the chosen level are kept: the run goes on in its mode
 * while the probe measures. */
ctl_state_t *ctl_state_resize(const ctl_state_t *s, int P) {
    if (!s || P < 1) return NULL;
    ctl_state_t *d = malloc(sizeof *d);
    if (!d || state_alloc(d, P, s->window, s->cost_n)) return free(d), NULL;
    fld_t fd[MAXF], fs[MAXF];
    int nf = fields(d, fd);
    fields((struct ctl_state *)s, fs);
    for (int i = 0; i < nf; i++) /* every field not sized by P; those stay as allocated (zero) */
        if (fd[i].n == fs[i].n) memcpy(fd[i].p, fs[i].p, fs[i].n * kind_bytes(fs[i].t));
    if (P == s->P) return window_sums(d), d;
    const size_t W = (size_t)d->window;
    memset(d->w_max, 0, W * sizeof *d->w_max), memset(d->w_fresh, 0, W * sizeof *d->w_fresh);
    memset(d->w_active, 0, W * sizeof *d->w_active), memset(d->w_nmax, 0, W * sizeof *d->w_nmax);
    memset(d->w_nfresh, 0, W * sizeof *d->w_nfresh), memset(d->w_nfree, 0, W * sizeof *d->w_nfree);
    memset(d->w_tau, 0, W);
    window_reset(d);
    d->cost_seen = 0, d->m.rounds = 0;
    memset(d->m.skip, 1, (size_t)P); /* every rank's first deposit begins its cycle elsewhere */
    rate_forget_levels(d);
    d->phase = 1; /* a probe of every level, without an incumbent (it was chosen on other ranks) */
    rate_probe_all(d);
    d->beyond = 0;
    d->st.k = 0, d->st.beyond = 0; /* change=steps: the reference starts again (P-sized sums are zero) */
    return d;
}

ctl_state_t *ctl_policy_state(const ctl_policy_t *p) {
    if (!p) return NULL;
    ctl_state_t *s = malloc(sizeof *s);
    if (!s) return NULL;
    if (state_copy(s, &p->s)) {
        free(s);
        return NULL;
    }
    s->base = p->s.base + p->next; /* the next handle's round 0 */
    return s;
}

void ctl_state_free(ctl_state_t *s) {
    if (!s) return;
    state_free(s);
    free(s);
}

uint64_t ctl_state_rounds(const ctl_state_t *s) { return s ? s->base : 0; }

static uint64_t fnv64(const uint8_t *b, size_t n) { return hash_fnv1a64(HASH_FNV1A64_INIT, b, n); }

static void put(uint8_t **w, uint64_t v, size_t bytes) {
    for (size_t i = 0; i < bytes; i++) *(*w)++ = (uint8_t)(v >> (8 * i));
}

static uint64_t get(const uint8_t **r, size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; i++) v |= (uint64_t) * (*r)++ << (8 * i);
    return v;
}

int ctl_state_save(const ctl_state_t *s, void *buf, size_t cap, size_t *len) {
    if (!s || !len) return CTL_ERR_ARG;
    struct ctl_state t = *s, *w = &t; /* shares s's per-rank arrays, read only here */
    file_levels(w);
    size_t need = HEADER_BYTES + payload_bytes(w, NULL, STATE_VERSION) + 8;
    *len = need;
    if (!buf) return CTL_OK;
    if (cap < need) return CTL_ERR_ARG;
    uint8_t *o = buf;
    memcpy(o, STATE_MAGIC, 8);
    o += 8;
    put(&o, STATE_VERSION, 4);
    put(&o, (uint32_t)s->P, 4);
    put(&o, (uint32_t)s->window, 4);
    put(&o, (uint32_t)s->cost_n, 4);
    fld_t f[MAXF];
    int nf = fields(w, f);
    for (int i = 0; i < nf; i++) {
        size_t kb = kind_bytes(f[i].t);
        for (size_t j = 0; j < f[i].n; j++) {
            const uint8_t *src = (const uint8_t *)f[i].p + j * kb;
            uint64_t v = 0;
            if (kb == 1)
                v = *src;
            else if (kb == 4) {
                uint32_t x;
                memcpy(&x, src, 4);
                v = x;
            } else
                memcpy(&v, src, 8);
            put(&o, v, kb);
        }
    }
    put(&o, fnv64(buf, need - 8), 8);
    return CTL_OK;
}

static int bad(char *err, size_t n, const char *fmt, ...) {
    if (err && n) {
        int k = snprintf(err, n, "controller state: ");
        va_list ap;
        va_start(ap, fmt);
        if (k >= 0 && (size_t)k < n) vsnprintf(err + k, n - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return CTL_ERR_ARG;
}

/* Ranges a saved state must satisfy, so that a loaded one cannot index out of bounds or carry
 * non-finite numbers into decisions. Returns 0 or writes what is wrong. */
static int validate(const struct ctl_state *s, char *err, size_t n) {
    const int P = s->P, W = s->window, N = s->cost_n;
    if (s->level < 0 || s->level >= CTL_NLV) return bad(err, n, "level %d out of range", s->level);
    if (s->probe < 1) return bad(err, n, "probe interval %d must be >= 1", s->probe);
    if (s->w_len < 0 || s->w_len > W || s->w_pos < 0 || s->w_pos >= W ||
        (s->w_len < W && s->w_pos != s->w_len))
        return bad(err, n, "window fill %d / position %d inconsistent with window %d", s->w_len, s->w_pos, W);
    for (int k = 0; k < W; k++)
        if (s->w_fresh[k] > s->w_active[k] || s->w_active[k] > (uint32_t)P ||
            s->w_nfresh[k] > s->w_nfree[k] || s->w_nfree[k] > (uint32_t)P || s->w_tau[k] > 1)
            return bad(err, n, "window row %d out of range for P=%d", k, P);
    for (int i = 0; i < P; i++) {
        if (s->cost_cnt[i] < 0 || s->cost_cnt[i] > N || s->cost_pos[i] < 0 || s->cost_pos[i] >= N ||
            s->act[i] > 1 || s->m.skip[i] > 1)
            return bad(err, n, "rank %d: step-time ring count %d / position %d out of range 0..%d", i,
                       s->cost_cnt[i], s->cost_pos[i], N);
        if (s->m.np[i] > s->m.n[i])
            return bad(err, n, "rank %d: %u consecutive pairs of measured cycles, more than its %u deposits",
                       i, s->m.np[i], s->m.n[i]);
        for (int k = 0; k < N; k++)
            if (!(s->cost[(size_t)i * N + k] >= 0) || !isfinite(s->cost[(size_t)i * N + k]))
                return bad(err, n, "rank %d: step time %d is negative or not finite", i, k);
        const double m[9] = {s->m.d[i],  s->m.d2[i], s->m.l[i],  s->m.e[i], s->m.e2[i],
                             s->m.x1[i], s->m.w1[i], s->m.dd[i], s->m.ee[i]};
        for (int k = 0; k < 9; k++)
            if (!(m[k] >= 0) || !isfinite(m[k]))
                return bad(err, n, "rank %d: measured cycle times or lags are negative or not finite", i);
    }
    if (s->cost_seen < 0 || s->cost_seen > 1) return bad(err, n, "cost_seen %d is not 0 or 1", s->cost_seen);
    for (int l = 0; l < CTL_NLV; l++)
        if (!isfinite(s->score[l]) || !isfinite(s->rate[l]) || !isfinite(s->lag[l]) ||
            !isfinite(s->pool_w[l]) || s->rate[l] < 0 || s->lag[l] < 0 || s->pool_w[l] < 0 ||
            !(s->se_in[l] >= 0) || !isfinite(s->se_in[l]) || !isfinite(s->last_x[l]) ||
            !isfinite(s->pool_sx[l]) || !(s->pool_sxx[l] >= 0) || !isfinite(s->pool_sxx[l]))
            return bad(err, n, "score of level %d is not finite, or its rate, lag or pool negative", l);
    { /* worth=measured's loss sums (scores may be negative there: a loss that rose) */
        const double lm[6] = {s->m.lx0, s->m.lx, s->m.ly, s->m.lxx, s->m.lxy, s->m.lyy};
        for (int k = 0; k < 6; k++)
            if (!isfinite(lm[k]) || ((k == 3 || k == 5) && lm[k] < 0))
                return bad(err, n, "measured losses' sum %d is not finite or a square is negative", k);
    }
    if (!(s->cv2_sum >= 0) || !isfinite(s->cv2_sum) || s->beyond < -1 || s->beyond > 1 || s->contest < 0)
        return bad(err, n, "between-measurement spread %g / side %d / contest %d out of range", s->cv2_sum,
                   s->beyond, s->contest);
    if (s->phase < 0 || s->phase > 1 || s->nqueue < 0 || s->nqueue > CTL_NLV || s->incumbent < -1 ||
        s->incumbent >= CTL_NLV || s->rival < -1 || s->rival >= CTL_NLV || s->probe_from > s->grads)
        return bad(err, n, "probe phase %d / queue %d / incumbent %d / rival %d / start %llu out of range",
                   s->phase, s->nqueue, s->incumbent, s->rival, (unsigned long long)s->probe_from);
    for (int q = 0; q < s->nqueue; q++)
        if (s->queue[q] < 0 || s->queue[q] >= CTL_NLV)
            return bad(err, n, "probe queue entry %d out of range", s->queue[q]);
    return 0;
}

int ctl_state_load(const void *buf, size_t len, ctl_state_t **out, char *err, size_t n) {
    if (err && n) err[0] = 0;
    if (!out) return bad(err, n, "no output pointer");
    *out = NULL;
    if (!buf) return bad(err, n, "no bytes");
    const uint8_t *r = buf;
    if (len < HEADER_BYTES + 8) return bad(err, n, "%zu bytes, shorter than its header", len);
    if (memcmp(r, STATE_MAGIC, 8)) return bad(err, n, "bad magic (not a controller state)");
    r += 8;
    uint32_t ver = (uint32_t)get(&r, 4), P = (uint32_t)get(&r, 4), W = (uint32_t)get(&r, 4),
             N = (uint32_t)get(&r, 4);
    if (ver != STATE_VERSION && ver != V8 && ver != V7 && ver != V6)
        return bad(err, n, "format version %u, this build reads versions %u to %u", ver, V6, STATE_VERSION);
    if (P < 1 || P > PCOLL_MAX_RANKS || W < 1 || W > 65536 || N < 2 || N > 1024)
        return bad(err, n, "shape P=%u, window=%u, cost_n=%u out of range", P, W, N);
    const uint8_t *tail = (const uint8_t *)buf + len - 8;
    if (get(&tail, 8) != fnv64(buf, len - 8)) return bad(err, n, "checksum mismatch (truncated or corrupt)");
    ctl_state_t *s = malloc(sizeof *s);
    if (!s || state_alloc(s, (int)P, (int)W, (int)N)) {
        free(s);
        return bad(err, n, "out of memory");
    }
    legacy_t lg, *lgp = ver == V6 ? &lg : NULL;
    size_t need = HEADER_BYTES + payload_bytes(s, lgp, ver) + 8;
    if (len != need) {
        ctl_state_free(s);
        return bad(err, n, "%zu bytes, expected %zu for P=%u, window=%u, cost_n=%u", len, need, P, W, N);
    }
    fld_t f[MAXF];
    int nf = fields_v(s, f, lgp, ver);
    for (int i = 0; i < nf; i++) {
        size_t kb = kind_bytes(f[i].t);
        for (size_t j = 0; j < f[i].n; j++) {
            uint8_t *dst = (uint8_t *)f[i].p + j * kb;
            uint64_t v = get(&r, kb);
            if (kb == 1)
                *dst = (uint8_t)v;
            else if (kb == 4) {
                uint32_t x = (uint32_t)v;
                memcpy(dst, &x, 4);
            } else
                memcpy(dst, &v, 8);
        }
    }
    /* a version-6 state of rule=thresholds: the rate rule counts the gradients of every round it
     * observes and never sets the threshold rule's schedule, so either shows the other rule */
    int rc = lgp && ((s->base > 0 && s->grads == 0) || lg.probe_at != NONE || lg.lprobe_at != NONE ||
                     lg.lblock != 0)
                 ? bad(err, n,
                       "written by rule=thresholds, which this build no longer has (rate is the one "
                       "adaptive rule): resume without the controller state or from a rule=rate run")
                 : validate(s, err, n);
    if (rc) {
        ctl_state_free(s);
        return rc;
    }
    file_levels(s);
    window_sums(s);
    *out = s;
    return CTL_OK;
}
