/* sim.c -- the discrete-event model of sim.h: one event queue, engines and applications of P
 * ranks, rounds in order. Times are microseconds. */
#include "collectives/sim/sim.h"
#include "collectives/pcoll.h" /* pcoll_initiator: majority's initiator, as the engine */
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { EV_BARRIER, EV_DEPOSIT, EV_FLAT, EV_ACT, EV_READY, EV_READY_DONE, EV_ENTER, EV_COMPLETE };
enum { PATH_S_SYNC, PATH_S_ANY, PATH_S_COORD };

typedef struct {
    double t, t0;
    long seq;
    int type, p, a;
    uint64_t r;
} ev_t;

typedef struct {
    const sim_cfg_t *c;
    const sim_cost_t *k;
    int P;
    ev_t *heap;
    long n, cap, seq, events;
    double now;
    /* the round every engine is in, and its plan */
    uint64_t r;
    int path, coord, quorum, nwait, nentered, nfresh;
    uint8_t *inwait;
    uint32_t *streak;
    double busy_coord; /* flat READY: the coordinator receives one at a time */
    /* per rank, stamped with round + 1 so that nothing is reset between rounds */
    uint64_t *act_stamp, *uf_stamp, *ready_stamp, *sent_stamp, *fresh_stamp;
    int *uf; /* next rank not activated in this round (union-find) */
    /* applications */
    int *pending, *waiting;
    long *dep_seq, *cons_seq;
    uint64_t *cons_round, *handed, completed;
    double *dep_time;
    int it, arrived, done;
    double *lat;
    long nlat, cap_lat;
    /* loop 1: each rank's own step count; steps consumed in all, and the clock and count at the
     * end of the warm-up */
    uint64_t *pit;
    long steps;
    double t_warm, t_end;
    long fresh_sum, rounds;
    uint32_t max_streak;
} sim_t;

/* ---- event queue (binary heap ordered by time, then insertion) ---------------------------- */
static int ev_less(const ev_t *a, const ev_t *b) { return a->t < b->t || (a->t == b->t && a->seq < b->seq); }

static int push(sim_t *s, double t, int type, int p, int a, double t0) {
    if (s->n == s->cap) {
        long cap = s->cap ? 2 * s->cap : 1024;
        ev_t *v = realloc(s->heap, (size_t)cap * sizeof *v);
        if (!v) return SIM_ERR_NOMEM;
        s->heap = v;
        s->cap = cap;
    }
    ev_t e = {t, t0, s->seq++, type, p, a, s->r};
    long i = s->n++;
    while (i > 0 && ev_less(&e, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = e;
    return SIM_OK;
}

static ev_t pop(sim_t *s) {
    ev_t top = s->heap[0], last = s->heap[--s->n];
    long i = 0;
    for (;;) {
        long l = 2 * i + 1, m = i;
        if (l < s->n && ev_less(&s->heap[l], &last)) m = l;
        if (l + 1 < s->n && ev_less(&s->heap[l + 1], m == i ? &last : &s->heap[l])) m = l + 1;
        if (m == i) break;
        s->heap[i] = s->heap[m];
        i = m;
    }
    if (s->n) s->heap[i] = last;
    return top;
}

/* ---- cost model and tree ---------------------------------------------------------------- */
static int ceil_log2(int P) {
    int l = 0;
    while ((1 << l) < P) l++;
    return l;
}

double sim_allreduce_us(const sim_cost_t *c, int P, size_t b) {
    if (P <= 1) return 0;
    return 2.0 * ceil_log2(P) * c->alpha_us + 2.0 * (P - 1) / P * (double)b * c->beta_us;
}

int sim_tree_parent(int v) {
    if (v <= 0) return -1;
    int hb = 1;
    while (hb * 2 <= v) hb *= 2;
    return v - hb;
}

int sim_tree_children(int v, int P, int *child, int max) {
    int n = 0, step = 1;
    while (step <= v) step *= 2; /* children: v + 2^j for 2^j > v */
    for (; v + step < P; step *= 2) {
        if (n < max) child[n] = v + step;
        n++;
    }
    return n;
}

static int any_root(const sim_t *s) { return (int)(s->r % (uint64_t)s->P); }

static int tree_depth(int v) {
    int d = 0;
    while (v) {
        v &= v - 1;
        d++;
    }
    return d;
}

_Static_assert((int)SIM_SYNC == (int)PCOLL_SYNC && (int)SIM_SOLO == (int)PCOLL_SOLO &&
                   (int)SIM_MAJORITY == (int)PCOLL_MAJORITY && (int)SIM_QUORUM == (int)PCOLL_QUORUM,
               "sim_rule_t mirrors pcoll_mode_t");
const char *sim_rule_name(sim_rule_t r) { return pcoll_mode_name((pcoll_mode_t)r); }

/* ---- engines ------------------------------------------------------------------------------ */
static int uf_find(sim_t *s, int i) { /* first rank >= i not activated in this round */
    uint64_t st = s->r + 1;
    int root = i;
    while (root < s->P && s->uf_stamp[root] == st) root = s->uf[root];
    while (i < s->P && s->uf_stamp[i] == st) {
        int nx = s->uf[i];
        s->uf[i] = root;
        i = nx;
    }
    return root;
}

static int next_target(sim_t *s, int a, int from) { /* a's next target >= from, not activated */
    int j = uf_find(s, from);
    if (j == a) j = uf_find(s, a + 1);
    return j;
}

static void mark(sim_t *s, int p) {
    s->act_stamp[p] = s->uf_stamp[p] = s->r + 1;
    s->uf[p] = p + 1;
}

static int enter_at(sim_t *s, int p, int sends) {
    return push(s, s->now + sends * s->k->o_us, EV_ENTER, p, 0, 0);
}

/* Rank p passes ACT(r) on in the binomial tree rooted at `root`: to its children and, when
 * `flood`, to its parent too, except `from` (the rank it heard ACT(r) from; -1: none). */
static int tree_send(sim_t *s, int p, int root, int flood, int from) {
    int P = s->P, ch[33], v = (p - root + P) % P, n = sim_tree_children(v, P, ch, 32), sends = 0, rc;
    if (flood && v != 0) ch[n++] = sim_tree_parent(v);
    for (int i = 0; i < n; i++) {
        int q = (ch[i] + root) % P;
        if (q == from) continue;
        if ((rc = push(s, s->now + ++sends * s->k->o_us + s->k->L_us, EV_ACT, q, p, 0))) return rc;
    }
    return enter_at(s, p, sends);
}

/* Rank a activates round r: marks itself, sends ACT(r), enters after its sends. */
static int broadcast(sim_t *s, int a) {
    mark(s, a);
    if (s->c->act == SIM_ACT_TREE)
        return s->path == PATH_S_ANY ? tree_send(s, a, any_root(s), 1, -1) : tree_send(s, a, a, 0, -1);
    int j = next_target(s, a, 0), rc;
    if (j < s->P) {
        int k = j < a ? j : j - 1;
        if ((rc = push(s, s->now + (k + 1) * s->k->o_us + s->k->L_us, EV_FLAT, j, a, s->now))) return rc;
    }
    return enter_at(s, a, s->P - 1);
}

static int coord_satisfied(sim_t *s) {
    int cnt = 0, c = s->coord;
    for (int p = 0; p < s->P; p++) {
        int rd = p == c ? s->pending[p] > 0 : s->ready_stamp[p] == s->r + 1;
        if (s->inwait[p] && !rd) return 0;
        cnt += rd;
    }
    if (s->c->rule == SIM_MAJORITY) return s->pending[c] > 0;
    return cnt >= s->quorum;
}

static int need_ready(const sim_t *s, int p) {
    if (s->path != PATH_S_COORD || p == s->coord) return 0;
    if (s->c->rule == SIM_MAJORITY || s->quorum == 1) return s->inwait[p];
    return 1;
}

/* Engine p looks at its state at s->now (engine.c's activate loop, without its idle back-off). */
static int engine_check(sim_t *s, int p) {
    if (s->act_stamp[p] == s->r + 1) return SIM_OK;
    int ready = s->pending[p] > 0;
    switch (s->path) {
    case PATH_S_SYNC:
        if (!ready) return SIM_OK;
        mark(s, p);
        return enter_at(s, p, 0);
    case PATH_S_ANY: return ready ? broadcast(s, p) : SIM_OK;
    default:
        if (p == s->coord) return coord_satisfied(s) ? broadcast(s, p) : SIM_OK;
        if (ready && need_ready(s, p) && s->sent_stamp[p] != s->r + 1) {
            s->sent_stamp[p] = s->r + 1;
            if (s->c->act == SIM_ACT_TREE) {
                int d = tree_depth((p - s->coord + s->P) % s->P);
                return push(s, s->now + d * (s->k->o_us + s->k->L_us), EV_READY_DONE, s->coord, p, 0);
            }
            return push(s, s->now + s->k->o_us + s->k->L_us, EV_READY, s->coord, p, 0);
        }
        return SIM_OK;
    }
}

static void plan(sim_t *s) { /* trigger.c's plan_round for P active ranks (no joins here) */
    int P = s->P;
    s->nwait = 0;
    for (int p = 0; p < P; p++) {
        s->inwait[p] = (uint8_t)pcoll_must_wait(s->streak[p], s->c->tau);
        s->nwait += s->inwait[p];
    }
    sim_rule_t ru = s->c->rule;
    int q = ru == SIM_SOLO ? 1 : ru == SIM_QUORUM ? s->c->quorum : P;
    s->quorum = q > P ? P : q < 1 ? 1 : q;
    s->coord = -1;
    if (ru == SIM_MAJORITY) {
        s->path = PATH_S_COORD;
        s->coord = pcoll_initiator(s->c->seed, s->r, P);
    } else if (ru == SIM_SYNC || s->quorum >= P || s->nwait >= P) {
        s->path = PATH_S_SYNC;
    } else if (s->quorum == 1 && s->nwait == 0) {
        s->path = PATH_S_ANY;
    } else {
        s->path = PATH_S_COORD;
        if (s->quorum == 1) {
            for (int p = 0; p < P; p++)
                if (s->inwait[p]) {
                    s->coord = p;
                    break;
                }
        } else
            s->coord = (int)(s->r % (uint64_t)P);
    }
    s->nentered = s->nfresh = 0;
    s->busy_coord = 0;
}

/* ---- applications --------------------------------------------------------------------------- */
static double delay_us(const sim_t *s, uint64_t it, int p) {
    return s->c->delay ? 1e3 * s->c->delay(s->c->delay_arg, it, p, s->P) : 0;
}

/* loop 1: rank p's deposit was consumed: count the step, start its next one */
static int loop_step(sim_t *s, int p) {
    long warm = (long)s->P * s->c->warmup, end = warm + (long)s->P * s->c->iters;
    if (++s->steps > warm && s->nlat < s->cap_lat) s->lat[s->nlat++] = s->now - s->dep_time[p];
    if (s->steps == warm) s->t_warm = s->now; /* warm 0: the clock's start */
    if (s->steps >= end) {
        s->t_end = s->now;
        s->done = 1;
        return SIM_OK;
    }
    uint64_t it = ++s->pit[p];
    return push(s, s->now + 1e3 * s->c->compute_ms + delay_us(s, it, p), EV_DEPOSIT, p, 0, 0);
}

static int check_wait(sim_t *s, int p) {
    if (!s->waiting[p]) return SIM_OK;
    int consumed = s->cons_seq[p] == s->dep_seq[p] && s->completed > s->cons_round[p];
    int newer = s->completed > s->handed[p];
    int ok = s->c->loop ? (s->c->go ? newer : consumed) : s->c->rule == SIM_SYNC ? consumed : newer;
    if (!ok) return SIM_OK;
    s->waiting[p] = 0;
    if (s->c->loop) {
        s->handed[p] = s->completed;
        return loop_step(s, p);
    }
    if (s->it >= s->c->warmup) s->lat[s->nlat++] = s->now - s->dep_time[p];
    s->handed[p] = s->completed;
    if (++s->arrived < s->P) return SIM_OK;
    s->arrived = 0;
    double barrier = ceil_log2(s->P) * (s->k->o_us + s->k->L_us);
    return push(s, s->now + barrier, EV_BARRIER, 0, 0, 0);
}

/* ---- events ---------------------------------------------------------------------------------- */
static int on_flat(sim_t *s, const ev_t *e) { /* a's message to e->p arrives */
    int q = e->p, a = e->a, rc;
    if (s->act_stamp[q] != s->r + 1) {
        mark(s, q);
        if ((rc = enter_at(s, q, 0))) return rc;
    }
    int j = next_target(s, a, q + 1);
    if (j >= s->P) return SIM_OK;
    int k = j < a ? j : j - 1;
    return push(s, e->t0 + (k + 1) * s->k->o_us + s->k->L_us, EV_FLAT, j, a, e->t0);
}

static int on_enter(sim_t *s, int p) {
    if (s->pending[p] > 0) {
        s->fresh_stamp[p] = s->r + 1;
        s->nfresh++;
        s->pending[p] = 0;
        s->cons_seq[p] = s->dep_seq[p];
        s->cons_round[p] = s->r;
    }
    if (++s->nentered < s->P) return SIM_OK;
    size_t b = s->c->bytes + (size_t)s->P * 5 * sizeof(float);
    return push(s, s->now + sim_allreduce_us(s->k, s->P, b), EV_COMPLETE, 0, 0, 0);
}

static int on_complete(sim_t *s) {
    int rc;
    s->rounds++;
    s->fresh_sum += s->nfresh;
    for (int p = 0; p < s->P; p++) {
        s->streak[p] = s->fresh_stamp[p] == s->r + 1 ? 0 : s->streak[p] + 1;
        if (s->streak[p] > s->max_streak) s->max_streak = s->streak[p];
    }
    s->completed = ++s->r;
    plan(s);
    for (int p = 0; p < s->P && !s->done; p++)
        if ((rc = check_wait(s, p))) return rc;
    for (int p = 0; p < s->P; p++)
        if ((rc = engine_check(s, p))) return rc;
    return SIM_OK;
}

static int on_barrier(sim_t *s) {
    s->it++; /* the first barrier starts iteration 0 */
    if (s->it >= s->c->warmup + s->c->iters) {
        s->done = 1;
        return SIM_OK;
    }
    for (int p = 0; p < s->P; p++) {
        int rc = push(s, s->now + delay_us(s, (uint64_t)s->it, p), EV_DEPOSIT, p, 0, 0);
        if (rc) return rc;
    }
    return SIM_OK;
}

static int on_event(sim_t *s, const ev_t *e) {
    int p = e->p;
    int stale = e->r != s->r &&
                (e->type == EV_FLAT || e->type == EV_ACT || e->type == EV_READY || e->type == EV_READY_DONE);
    if (stale) return SIM_OK; /* a message of a finished round: absorbed */
    switch (e->type) {
    case EV_BARRIER: return on_barrier(s);
    case EV_DEPOSIT: {
        s->pending[p]++;
        s->dep_seq[p]++;
        s->dep_time[p] = s->now;
        s->waiting[p] = 1;
        int rc = check_wait(s, p);
        return rc ? rc : engine_check(s, p);
    }
    case EV_FLAT: return on_flat(s, e);
    case EV_ACT:
        if (s->act_stamp[p] == s->r + 1) return SIM_OK;
        mark(s, p);
        return s->path == PATH_S_ANY ? tree_send(s, p, any_root(s), 1, e->a)
                                     : tree_send(s, p, s->coord, 0, e->a);
    case EV_READY: { /* flat: the coordinator takes them one at a time */
        double done = (s->busy_coord > s->now ? s->busy_coord : s->now) + s->k->o_us;
        s->busy_coord = done;
        return push(s, done, EV_READY_DONE, p, e->a, 0);
    }
    case EV_READY_DONE: s->ready_stamp[e->a] = s->r + 1; return engine_check(s, s->coord);
    case EV_ENTER: return on_enter(s, p);
    default: return on_complete(s);
    }
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *v, long n, double q) {
    if (n == 0) return 0;
    long i = (long)ceil(q * (double)n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void summarise(sim_t *s, sim_result_t *out) {
    memset(out, 0, sizeof *out);
    qsort(s->lat, (size_t)s->nlat, sizeof *s->lat, cmp_d);
    double sum = 0;
    for (long i = 0; i < s->nlat; i++) sum += s->lat[i];
    out->mean_us = s->nlat ? sum / (double)s->nlat : 0;
    out->p50_us = pct(s->lat, s->nlat, 0.50);
    out->p90_us = pct(s->lat, s->nlat, 0.90);
    out->p99_us = pct(s->lat, s->nlat, 0.99);
    out->min_us = s->nlat ? s->lat[0] : 0;
    out->max_us = s->nlat ? s->lat[s->nlat - 1] : 0;
    out->fresh_frac = s->rounds ? (double)s->fresh_sum / ((double)s->rounds * s->P) : 1.0;
    out->rounds = s->rounds;
    out->max_streak = s->max_streak;
    out->events = s->events;
    const long warm = (long)s->P * s->c->warmup;
    if (s->c->loop && s->steps > warm)
        out->step_us = s->P * (s->t_end - s->t_warm) / (double)(s->steps - warm);
}

static void sim_free(sim_t *s) {
    free(s->heap);
    free(s->inwait);
    free(s->streak);
    free(s->act_stamp);
    free(s->uf_stamp);
    free(s->ready_stamp);
    free(s->sent_stamp);
    free(s->fresh_stamp);
    free(s->uf);
    free(s->pending);
    free(s->waiting);
    free(s->dep_seq);
    free(s->cons_seq);
    free(s->cons_round);
    free(s->handed);
    free(s->dep_time);
    free(s->lat);
    free(s->pit);
}

int sim_run(const sim_cfg_t *c, const sim_cost_t *k, sim_result_t *out) {
    if (!c || !k || !out || c->P < 1 || c->iters < 1 || c->warmup < 0 || c->tau < 0 ||
        (c->rule == SIM_QUORUM && (c->quorum < 1 || c->quorum > c->P)) || k->o_us < 0 || k->L_us < 0 ||
        k->alpha_us < 0 || k->beta_us < 0 || !(c->compute_ms >= 0))
        return SIM_ERR_ARG;
    sim_t s = {0};
    s.c = c;
    s.k = k;
    s.P = c->P;
    size_t P = (size_t)c->P;
    s.inwait = calloc(P, 1);
    s.streak = calloc(P, sizeof *s.streak);
    s.act_stamp = calloc(P, 8);
    s.uf_stamp = calloc(P, 8);
    s.ready_stamp = calloc(P, 8);
    s.sent_stamp = calloc(P, 8);
    s.fresh_stamp = calloc(P, 8);
    s.uf = calloc(P, sizeof(int));
    s.pending = calloc(P, sizeof(int));
    s.waiting = calloc(P, sizeof(int));
    s.dep_seq = calloc(P, sizeof(long));
    s.cons_seq = calloc(P, sizeof(long));
    s.cons_round = calloc(P, 8);
    s.handed = calloc(P, 8);
    s.dep_time = calloc(P, sizeof(double));
    s.cap_lat = (long)P * c->iters;
    s.lat = calloc((size_t)s.cap_lat, sizeof(double));
    s.pit = calloc(P, sizeof *s.pit);
    int rc = SIM_OK;
    if (!s.inwait || !s.streak || !s.act_stamp || !s.uf_stamp || !s.ready_stamp || !s.sent_stamp ||
        !s.fresh_stamp || !s.uf || !s.pending || !s.waiting || !s.dep_seq || !s.cons_seq || !s.cons_round ||
        !s.handed || !s.dep_time || !s.lat || !s.pit)
        rc = SIM_ERR_NOMEM;
    if (!rc) {
        for (int p = 0; p < s.P; p++) s.cons_round[p] = UINT64_MAX; /* nothing consumed yet */
        s.it = -1;
        plan(&s);
        if (!c->loop)
            rc = push(&s, 0, EV_BARRIER, 0, 0, 0);
        else /* every rank's first step; no warm-up: the clock starts at 0 */
            for (int p = 0; p < s.P && !rc; p++)
                rc = push(&s, 1e3 * c->compute_ms + delay_us(&s, 0, p), EV_DEPOSIT, p, 0, 0);
    }
    while (!rc && !s.done) {
        if (s.n == 0) {
            rc = SIM_ERR_DEADLOCK;
            break;
        }
        ev_t e = pop(&s);
        s.now = e.t;
        s.events++;
        rc = on_event(&s, &e);
    }
    if (!rc) summarise(&s, out);
    sim_free(&s);
    return rc;
}
