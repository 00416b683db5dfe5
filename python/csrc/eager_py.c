/* eager_py.c -- the C side of the PyTorch package python/eager_sgd (docs/DESIGN.md#13-the-pytorch-package),
 * linked with libpcoll and the controller into the one shared library $(B)/libeager.so that the
 * package loads with ctypes. Flat functions over plain types (no struct layout shared with Python).
 *
 * What eager-train does per epoch (trainer/epoch.c run_part), here split into calls the package
 * makes around PyTorch's own forward, backward and optimizer step:
 *   eg_begin   pcoll_create (one handle per epoch, horizon on) + ctl_start (adaptive: the carried state)
 *   eg_step    pcoll_set_cost, pcoll_deposit(PCOLL_WAIT_NEXT), pcoll_wait(PCOLL_WAIT_CONSUMED)
 *   eg_next    pcoll_next: every completed round in round order (join-only rounds skipped), counted
 *   eg_join, eg_drain  pcoll_join, pcoll_wait(PCOLL_WAIT_NEWER) until PCOLL_DONE
 *   eg_finish  ctl_wait, the controller's hash checked equal on every rank, the state carried,
 *              ctl_stop, pcoll_finalize
 *   eg_state_* the carried state saved and loaded between epochs (eager-train's checkpoint's
 *              ctl.state; trainer/setup.c resume_controller)
 * The library never exits or prints: calls return 0 (or a documented count) or a negative code
 * with the message in eg_error(). Agreement calls (eg_agree, eg_same) are collective over
 * MPI_COMM_WORLD and give every rank the same answer.
 */
#include "collectives/pcoll.h"
#include "common/cpu.h"
#include "common/hash.h"
#include "controller/controller.h"
#include "trainer/nn/nn.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EG_AGG_MAX = 64 }; /* rounds per aggregated record at most (the run file's rounds.aggregation) */

typedef struct { /* one record of the run file's rounds.records[]: libpcoll's summary, its epoch and mode */
    int epoch;
    char mode[24];
    pcoll_agg_t r;
} eg_agg_t;

typedef struct eg {
    int P, me, mem, tau;
    size_t n;
    double t_abort, t_dep;
    char err[1024];
    char policy[256];
    ctl_policy_cfg_t pol;
    pcoll_config_t pc;
    ctl_config_t cc;
    ctl_state_t *carried;
    pcoll_t *h;
    ctl_t *ctl;
    pcoll_record_t rec;
    int epoch;
    /* the run's counters (eg_counts) */
    double c[16];
    uint64_t dhash; /* the controller's decision hashes chained over the epochs */
    eg_agg_t *agg;
    size_t nagg, capagg;
    ctl_switch_t *sw;
    int *sw_epoch;
    size_t nsw, capsw;
} eg_t;

/* Names of eg_counts' values, in order; epoch_ counters restart at each eg_begin. */
static const char *const COUNT_NAMES =
    "rounds,grads,deposits,stale_n,stale_sum,max_stale,max_streak,deposited_sum,applied_sum,"
    "epoch_rounds,epoch_grads,epoch_stale_n,epoch_stale_sum,epoch_max_stale,epoch_max_streak,tau_violations";
enum {
    C_ROUNDS,
    C_GRADS,
    C_DEPOSITS,
    C_STALE_N,
    C_STALE_SUM,
    C_MAX_STALE,
    C_MAX_STREAK,
    C_DEP_SUM,
    C_APP_SUM,
    C_E_ROUNDS,
    C_E_GRADS,
    C_E_STALE_N,
    C_E_STALE_SUM,
    C_E_MAX_STALE,
    C_E_MAX_STREAK,
    C_TAU_VIOL,
    C_N
};

static int we_initialized;

const char *eg_count_names(void) { return COUNT_NAMES; }
const char *eg_error(eg_t *g) { return g ? g->err : ""; }

/* g->err = "rank R: CALL: libpcoll's message" (the rank left out where the message names it first);
 * returns -1. */
static int pcoll_fail(eg_t *g, const char *call) {
    const char *m = pcoll_last_error(g->h);
    char own[16];
    snprintf(own, sizeof own, "rank %d:", g->me);
    if (!strncmp(m, own, strlen(own))) m += strlen(own) + (m[strlen(own)] == ' ');
    snprintf(g->err, sizeof g->err, "rank %d: %s: %s", g->me, call, m);
    return -1;
}
uint64_t eg_hash_init(void) { return HASH_FNV1A64_INIT; }
/* h extended by the n bytes at p (common/hash.h's FNV-1a): the package's weights hash. */
uint64_t eg_hash(uint64_t h, const void *p, size_t n) { return hash_fnv1a64(h, p, n); }

/* The SGD step of a round carrying share s of a whole step's gradients, as eager-train applies it
 * by default (--momentum-per sample, --wd-per sample: trainer/apply.c sgd_of, nn_sgd_share):
 * out = {lr, momentum, weight decay, gradient factor} for torch.optim.SGD's formula. */
void eg_share(double lr, double momentum, double wd, double s, double out[4]) {
    nn_sgd_t in = {0}, o;
    in.lr = (float)lr, in.momentum = (float)momentum, in.wd = (float)wd, in.wd_all = 1;
    nn_sgd_share(&in, s, &o);
    out[0] = o.lr, out[1] = o.momentum, out[2] = o.wd, out[3] = nn_sgd_gscale(&o);
}

/* MPI_Init_thread(MPI_THREAD_MULTIPLE) unless MPI is initialised (mpi4py, torch's MPI backend);
 * then every rank checks the level it has. Returns 0, or -1 with a line in err (the same on every
 * rank where MPI is up). */
int eg_mpi_init(int *rank, int *size, char *err, size_t n) {
    int init = 0, fin = 0, provided = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (fin) return snprintf(err, n, "MPI was finalized before eager_sgd.init"), -1;
    if (!init) {
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return snprintf(err, n, "MPI_Init_thread failed"), -1;
        we_initialized = 1;
    } else
        MPI_Query_thread(&provided);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    struct {
        int level, rank;
    } mine = {provided, *rank}, low;
    MPI_Allreduce(&mine, &low, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD);
    if (low.level < MPI_THREAD_MULTIPLE)
        return snprintf(err, n,
                        "MPI provides thread level %d on rank %d, below MPI_THREAD_MULTIPLE (libpcoll's "
                        "threads call MPI at once)%s",
                        low.level, low.rank,
                        we_initialized ? "" : " (initialised elsewhere: ask for MULTIPLE)"),
               -1;
    return 0;
}

/* MPI_Finalize if eg_mpi_init initialised MPI (not after an error: eg_abort). */
void eg_mpi_finalize(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (we_initialized && !fin) MPI_Finalize();
}
void eg_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }
const char *eg_mpi_version(char *buf, size_t n) {
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(v, &len);
    v[strcspn(v, "\n,")] = 0;
    snprintf(buf, n, "%s", v);
    return buf;
}
/* The run file's environment.cpu (common/cpu.h cpu_describe): buf, or NULL where /proc/cpuinfo
 * names neither model nor flags. */
const char *eg_cpu(char *buf, size_t n) { return cpu_describe(buf, n) ? buf : NULL; }

/* Collective: 0 if ok on every rank; else 1 and out = the line of the lowest failing rank (msg),
 * "rank R: msg", or "msg (on every rank)" when every rank failed. */
int eg_agree(int ok, const char *msg, char *out, size_t n) {
    int P, me, first, from;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int bad = !ok, nbad = 0;
    MPI_Allreduce(&bad, &nbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (!nbad) return 0;
    first = ok ? P : me;
    MPI_Allreduce(&first, &from, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    char line[1024] = "";
    if (me == from) {
        if (nbad == P)
            snprintf(line, sizeof line, "%s%s", msg, P > 1 ? " (on every rank)" : "");
        else
            snprintf(line, sizeof line, "rank %d: %s", me, msg);
    }
    MPI_Bcast(line, sizeof line, MPI_CHAR, from, MPI_COMM_WORLD);
    snprintf(out, n, "%s", line);
    return 1;
}

/* Collective: 0 if v is the same on every rank; else 1 and out = "WHAT differs across ranks: rank 0
 * has V, rank R has V' (ranks differing from rank 0: ...)". */
int eg_same(uint64_t v, const char *what, char *out, size_t n) {
    int P;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    uint64_t *all = malloc((size_t)P * sizeof *all);
    if (!all) return snprintf(out, n, "%s: out of memory", what), 1;
    MPI_Allgather(&v, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    int first = -1;
    size_t k = 0;
    for (int p = 1; p < P; p++)
        if (all[p] != all[0]) {
            if (first < 0) {
                first = p;
                k = (size_t)snprintf(out, n,
                                     "%s differs across ranks: rank 0 has %016llx, rank %d has %016llx "
                                     "(ranks differing from rank 0:",
                                     what, (unsigned long long)all[0], p, (unsigned long long)all[p]);
            }
            if (k < n) k += (size_t)snprintf(out + k, n - k, " %d", p);
        }
    if (first >= 0 && k < n) snprintf(out + k, n - k, ")");
    free(all);
    return first >= 0;
}

int eg_bcast(void *buf, size_t bytes, int root) {
    return MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}
/* In place: the sum over ranks of x[0..n) (float32 or float64). */
int eg_allreduce_sum(void *x, size_t n, int is_double) {
    return MPI_Allreduce(MPI_IN_PLACE, x, (int)n, is_double ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM,
                         MPI_COMM_WORLD) == MPI_SUCCESS
               ? 0
               : -1;
}

/* Reads mode (eager-train's names: sync | solo | majority | quorum:Q | adaptive, optionally with
 * the controller's ",key=value" options as --policy-opts; the bound is tau, not an option) for a
 * gradient of n floats (device: PCOLL_MEM_DEVICE). Collective: a bad mode or quorum on any rank,
 * or arguments that differ across ranks, fail on every rank with the same line in err. t_abort:
 * seconds without a completed round before the controller aborts the job (a stall), as
 * eager-train --t-abort; every wait is bounded by t_abort + 5. */
int eg_new(const char *mode, int tau, uint64_t seed, size_t n, int device, double t_abort, char *err,
           size_t errn, eg_t **out) {
    *out = NULL;
    eg_t *g = calloc(1, sizeof *g);
    char e[600] = "";
    int ok = g != NULL;
    if (!ok) snprintf(e, sizeof e, "out of memory");
    if (ok) {
        MPI_Comm_size(MPI_COMM_WORLD, &g->P);
        MPI_Comm_rank(MPI_COMM_WORLD, &g->me);
        snprintf(g->policy, sizeof g->policy, "%s", mode ? mode : "");
    }
    char pe[300] = "";
    if (ok && strstr(g->policy, "tau")) {
        snprintf(e, sizeof e, "mode '%s': the staleness bound is set by tau= only", g->policy);
        ok = 0;
    } else if (ok && ctl_policy_parse(g->policy, &g->pol, pe, sizeof pe)) {
        snprintf(e, sizeof e, "mode '%s': %s", g->policy, pe);
        ok = 0;
    } else if (ok && tau < 0) {
        snprintf(e, sizeof e, "tau %d: must be >= 0 (0: no bound)", tau);
        ok = 0;
    } else if (ok) {
        g->pol.tau = tau;
        if (ctl_policy_check(&g->pol, pe, sizeof pe)) {
            snprintf(e, sizeof e, "tau %d with mode '%s': %s", tau, g->policy, pe);
            ok = 0;
        } else if (g->pol.base.mode == PCOLL_QUORUM && g->pol.base.quorum > g->P) {
            snprintf(e, sizeof e, "mode '%s': quorum %d is more than the %d ranks of this run (1..%d)",
                     g->policy, g->pol.base.quorum, g->P, g->P);
            ok = 0;
        } else if (!(t_abort > 0)) {
            snprintf(e, sizeof e, "t_abort %g: must be > 0 seconds", t_abort);
            ok = 0;
        }
    }
    if (eg_agree(ok, e, err, errn)) {
        free(g);
        return -1;
    }
    /* the same mode, tau, seed and n on every rank (pcoll_create would name n, mode and seed too,
     * but only after the controller's options: one check here names all of them) */
    char desc[400];
    snprintf(desc, sizeof desc, "%s|%d|%llu|%zu|%d", g->policy, tau, (unsigned long long)seed, n, device);
    if (eg_same(hash_fnv1a64(HASH_FNV1A64_INIT, desc, strlen(desc)),
                "the arguments (mode, tau, seed, gradient size, device)", err, errn)) {
        char all[1024];
        snprintf(all, sizeof all, "%s: this rank has mode '%s' tau %d seed %llu and %zu gradient floats", err,
                 g->policy, tau, (unsigned long long)seed, n);
        snprintf(err, errn, "%s", all);
        free(g);
        return -1;
    }
    g->n = n, g->mem = device ? PCOLL_MEM_DEVICE : PCOLL_MEM_HOST, g->tau = tau, g->t_abort = t_abort;
    ctl_config_default(&g->cc); /* as trainer/setup.c run_set_rounds */
    g->cc.policy = g->pol;
    g->cc.t_abort = t_abort;
    g->cc.log = stderr;
    pcoll_config_default(&g->pc);
    g->pc.div = PCOLL_DIV_P;
    g->pc.seed = seed;
    g->pc.tau = g->pol.tau_by == CTL_TAU_LIBRARY ? tau : 0;
    g->pc.ring = 2 * tau + 2 > 16 ? 2 * tau + 2 : 16;
    g->pc.horizon = 1;
    g->pc.poll_max_us = 2000;
    g->pc.records = 1024;
    pcoll_record_init(&g->rec, g->P);
    g->dhash = HASH_FNV1A64_INIT;
    g->epoch = -1;
    *out = g;
    return 0;
}

/* The policy string as the controller formats it (the run file's controller.policy). */
const char *eg_policy(eg_t *g, char *buf, size_t n) { return ctl_policy_format(&g->pol, buf, n); }
int eg_rank(eg_t *g) { return g->me; }
int eg_size(eg_t *g) { return g->P; }
const char *eg_data_path(eg_t *g) { return g->h ? pcoll_data_path(g->h) : ""; }

/* Collective: the epoch's handle and controller; since_s: how long ago this rank's step began
 * (the first deposit's cycle time counts from there, as eager-train's from the epoch's start).
 * Returns 0, or -1 with the line in eg_error (the same on every rank). */
int eg_begin(eg_t *g, int epoch, double since_s) {
    if (g->h) return snprintf(g->err, sizeof g->err, "eg_begin: the epoch %d is still open", g->epoch), -1;
    int rc = pcoll_create(MPI_COMM_WORLD, g->n, g->mem, &g->pc, &g->h);
    char e[600];
    snprintf(e, sizeof e, "pcoll_create: %s", rc ? pcoll_last_error(NULL) : "");
    if (eg_agree(rc == PCOLL_OK, e, g->err, sizeof g->err)) {
        if (rc == PCOLL_OK) pcoll_finalize(&g->h, g->t_abort + 5);
        g->h = NULL;
        return -1;
    }
    g->cc.resume = g->pol.kind == CTL_ADAPTIVE ? g->carried : NULL;
    if (ctl_start(g->h, &g->cc, &g->ctl))
        return snprintf(g->err, sizeof g->err, "ctl_start failed on rank %d", g->me), -1;
    g->epoch = epoch;
    g->t_dep = MPI_Wtime() - (since_s > 0 ? since_s : 0);
    for (int i = C_E_ROUNDS; i <= C_E_MAX_STREAK; i++) g->c[i] = 0;
    return 0;
}

/* Deposits g (n floats; host or, with device, device memory written and synchronised) with the
 * step's own time step_s, and waits until the round that takes it has completed. 0 or -1 (a
 * peer died or hung, a stall: the message names it; end the job with eg_abort). */
int eg_step(eg_t *g, const float *grad, double step_s, double dep_sum) {
    if (!g->h) return snprintf(g->err, sizeof g->err, "eg_step: no epoch open (eg_begin)"), -1;
    double now = MPI_Wtime();
    if (pcoll_set_cost(g->h, ctl_step_cost(&g->pol, step_s, now - g->t_dep), step_s) ||
        pcoll_deposit(g->h, grad, PCOLL_WAIT_NEXT) ||
        pcoll_wait(g->h, PCOLL_WAIT_CONSUMED, g->t_abort + 5, NULL))
        return pcoll_fail(g, "the step's round");
    g->t_dep = now;
    g->c[C_DEPOSITS] += 1;
    g->c[C_DEP_SUM] += dep_sum;
    return 0;
}

static void aggregate(eg_t *g, const pcoll_record_t *rec) {
    char m[24];
    pcoll_format_mode(rec->mode, rec->quorum, m, sizeof m);
    eg_agg_t *a = g->nagg ? &g->agg[g->nagg - 1] : NULL;
    if (!a || a->epoch != g->epoch || strcmp(a->mode, m) || a->r.to - a->r.from + 1 >= EG_AGG_MAX) {
        if (g->nagg == g->capagg) {
            size_t cap = g->capagg ? 2 * g->capagg : 64;
            eg_agg_t *na = realloc(g->agg, cap * sizeof *na);
            if (!na) return; /* the records are a report: a missing one is not an error */
            g->agg = na, g->capagg = cap;
        }
        a = &g->agg[g->nagg++];
        a->epoch = g->epoch;
        snprintf(a->mode, sizeof a->mode, "%s", m);
        pcoll_agg_reset(&a->r);
    }
    pcoll_agg_add(&a->r, rec);
}

/* The next completed round not yet applied, in round order (rounds that only carried joins are
 * skipped: no SGD step): 1 with *res (n floats: the sum of the round's gradients / P; valid until
 * the next call) and *share = its gradients / P; 0 when none is left; -1 on an error. *sum: the sum
 * of res's floats times P (host memory; 0 for device memory: the caller sums it and adds it with
 * eg_add_applied). Device memory: res is a device address; work that reads it must have completed
 * before the next call (pcoll_next's contract), with this rank's GPU current at the call. */
int eg_next(eg_t *g, const float **res, double *share, double *sum) {
    uint64_t round;
    int rc;
    while ((rc = pcoll_next(g->h, &round, res, &g->rec)) == PCOLL_OK) {
        const pcoll_record_t *r = &g->rec;
        if (r->nfresh == 0) continue;
        int ng = 0;
        for (int p = 0; p < r->P; p++) {
            ng += r->fresh[p];
            if (r->streak[p] > g->c[C_MAX_STREAK]) g->c[C_MAX_STREAK] = r->streak[p];
            if (r->streak[p] > g->c[C_E_MAX_STREAK]) g->c[C_E_MAX_STREAK] = r->streak[p];
            if (g->tau > 0 && r->streak[p] > (uint32_t)g->tau) g->c[C_TAU_VIOL]++;
            if (!r->fresh[p]) continue;
            g->c[C_STALE_N]++, g->c[C_E_STALE_N]++;
            g->c[C_STALE_SUM] += r->staleness[p], g->c[C_E_STALE_SUM] += r->staleness[p];
            if (r->staleness[p] > g->c[C_MAX_STALE]) g->c[C_MAX_STALE] = r->staleness[p];
            if (r->staleness[p] > g->c[C_E_MAX_STALE]) g->c[C_E_MAX_STALE] = r->staleness[p];
        }
        g->c[C_ROUNDS]++, g->c[C_E_ROUNDS]++;
        g->c[C_GRADS] += ng, g->c[C_E_GRADS] += ng;
        double s = 0;
        if (g->mem == PCOLL_MEM_HOST)
            for (size_t i = 0; i < g->n; i++) s += (*res)[i];
        *sum = s * g->P;
        g->c[C_APP_SUM] += *sum;
        *share = (double)ng / g->P;
        aggregate(g, r);
        return 1;
    }
    if (rc == PCOLL_EMPTY) return 0;
    return pcoll_fail(g, "pcoll_next");
}

/* Device memory: the caller's sum of a round's result floats times P (eg_next reports 0 there, since
 * the result is on the GPU), added to the applied_sum counter that conservation is checked with. */
void eg_add_applied(eg_t *g, double sum) { g->c[C_APP_SUM] += sum; }

/* The epoch's end: no more deposits from this rank. Then eg_drain until it returns 0, applying the
 * rounds eg_next hands out after each 1. */
int eg_join(eg_t *g) {
    if (!g->h) return snprintf(g->err, sizeof g->err, "eg_join: no epoch open"), -1;
    return pcoll_join(g->h) ? pcoll_fail(g, "pcoll_join") : 0;
}
/* 1: rounds to apply (eg_next); 0: every rank has joined and every round was handed out; -1 error. */
int eg_drain(eg_t *g) {
    int rc = pcoll_wait(g->h, PCOLL_WAIT_NEWER, g->t_abort + 5, NULL);
    if (rc == PCOLL_OK) return 1;
    if (rc == PCOLL_DONE) return 0;
    return pcoll_fail(g, "pcoll_wait (epoch end)");
}

/* Collective, after eg_drain returned 0: the controller's end (its decisions checked equal on every
 * rank, its switches kept, adaptive: its state carried into the next epoch) and the handle freed.
 * 0, or -1 (a controller that disagrees across ranks is an internal error: the same line on every
 * rank). */
int eg_finish(eg_t *g) {
    int cw = ctl_wait(g->ctl, g->t_abort + 5);
    char e[600] = "";
    if (cw != CTL_OK)
        snprintf(e, sizeof e, "controller: %s",
                 cw == CTL_ERR_TIMEOUT ? "the thread did not end after the all-joined round"
                                       : ctl_last_error(g->ctl));
    if (eg_agree(cw == CTL_OK, e, g->err, sizeof g->err)) return -1;
    ctl_policy_stats_t st;
    uint64_t ch = 0;
    ctl_stats(g->ctl, &st, &ch);
    if (eg_same(ch, "the controller's decision hash (internal)", g->err, sizeof g->err)) return -1;
    g->dhash = hash_fnv1a64(g->dhash, &ch, sizeof ch);
    ctl_switch_t sw[64];
    size_t k = ctl_switch_log(g->ctl, sw, 64);
    if (k > 64) k = 64;
    if (g->nsw + k > g->capsw) {
        size_t cap = (g->nsw + k) * 2;
        ctl_switch_t *ns = realloc(g->sw, cap * sizeof *ns);
        int *ne = ns ? realloc(g->sw_epoch, cap * sizeof *ne) : NULL;
        if (ns) g->sw = ns;
        if (ne) g->sw_epoch = ne, g->capsw = cap;
    }
    for (size_t i = 0; i < k && g->nsw < g->capsw; i++)
        g->sw_epoch[g->nsw] = g->epoch, g->sw[g->nsw++] = sw[i];
    if (g->pol.kind == CTL_ADAPTIVE) {
        ctl_state_free(g->carried);
        g->carried = ctl_state(g->ctl);
    }
    int rs = ctl_stop(&g->ctl);
    int rc = pcoll_finalize(&g->h, g->t_abort + 5);
    g->h = NULL;
    if (rs != CTL_OK || rc)
        return snprintf(g->err, sizeof g->err, "rank %d: %s", g->me,
                        rs != CTL_OK ? "the controller thread ended with an error" : pcoll_strerror(rc)),
               -1;
    return 0;
}

/* ---- the controller's carried state in a checkpoint (the package's state_dict) ----------------
 * Between epochs only: while an epoch is open the controller thread owns the state (these return
 * -1 with a line in eg_error, or NULL with the line in err).
 * eg_state_save: the carried state's bytes (ctl_state_save) as eager-train's checkpoint holds them;
 * buf NULL: *len = the size needed. *len = 0: nothing carried (a static mode, or adaptive before
 * its first epoch has ended: a controller loading it starts afresh). Local (every rank holds the
 * same state after eg_finish). */
int eg_state_save(eg_t *g, void *buf, size_t cap, size_t *len) {
    *len = 0;
    if (g->h)
        return snprintf(g->err, sizeof g->err,
                        "epoch %d is open: the controller's state is saved between epochs (after end_epoch)",
                        g->epoch),
               -1;
    if (!g->carried) return 0;
    if (ctl_state_save(g->carried, buf, cap, len) != CTL_OK)
        return snprintf(g->err, sizeof g->err, "ctl_state_save: %zu bytes are too few", cap), -1;
    return 0;
}
uint64_t eg_state_rounds(eg_t *g) { return g->carried ? ctl_state_rounds(g->carried) : 0; }

/* The state in buf (ctl_state_save's bytes, saved on saved_P ranks) read for this handle's policy
 * by ctl_state_continue (as eager-train's resume: resized where saved_P differs, *resized = 1; the
 * policy adaptive with the same window and cost_n). Local: the caller agrees on the result over the
 * ranks, then adopts it (eg_state_adopt) or frees it (eg_state_free). NULL with a line in err. */
void *eg_state_read(eg_t *g, const void *buf, size_t len, int saved_P, char *err, size_t n, int *resized) {
    char e[600] = "";
    *resized = 0;
    if (g->h)
        return snprintf(err, n, "epoch %d is open: a state is loaded between epochs (after end_epoch)",
                        g->epoch),
               NULL;
    if (g->pol.kind != CTL_ADAPTIVE)
        return snprintf(err, n, "an adaptive controller's state, and this optimizer's mode is '%s'",
                        g->policy),
               NULL;
    ctl_state_t *st = NULL;
    const int rc = ctl_state_continue(buf, len, saved_P, &g->pol, g->P, &st, resized, e, sizeof e);
    if (rc == CTL_ERR_STATE) return snprintf(err, n, "does not continue mode '%s': %s", g->policy, e), NULL;
    if (rc != CTL_OK) return snprintf(err, n, "%s", e), NULL;
    return st;
}
/* The next epoch's controller continues st (NULL: starts afresh); the run's decision hash continues
 * from dhash (eg_decision_hash of the saved run), as eager-train's checkpoint carries both. */
void eg_state_adopt(eg_t *g, void *st, uint64_t dhash) {
    ctl_state_free(g->carried);
    g->carried = st;
    g->dhash = dhash;
}
void eg_state_free(void *st) { ctl_state_free(st); }

/* The counters named by eg_count_names, up to max of them into out; returns how many there are. */
int eg_counts(eg_t *g, double *out, int max) {
    for (int i = 0; i < C_N && i < max; i++) out[i] = g->c[i];
    return C_N;
}
uint64_t eg_decision_hash(eg_t *g) { return g->dhash; }

/* Aggregated round record i (of eg_nrecords): {epoch, from, to, mean_fresh, min_fresh,
 * mean_latency_ms, max_streak, max_staleness, mean_staleness} into v[9], its mode into mode. */
size_t eg_nrecords(eg_t *g) { return g->nagg; }
int eg_record(eg_t *g, size_t i, double v[9], char *mode, size_t n) {
    if (i >= g->nagg) return -1;
    const pcoll_agg_t *a = &g->agg[i].r;
    double k = (double)(a->to - a->from + 1);
    v[0] = g->agg[i].epoch, v[1] = (double)a->from, v[2] = (double)a->to, v[3] = a->fresh_sum / k,
    v[4] = a->min_fresh;
    v[5] = a->lat_sum / k, v[6] = a->max_streak, v[7] = a->max_stale,
    v[8] = a->stale_n ? a->stale_sum / (double)a->stale_n : 0;
    snprintf(mode, n, "%s", g->agg[i].mode);
    return 0;
}

/* Mode switch i (of eg_nswitches): {epoch, round, effective} into v[3], the modes before and after,
 * and the controller's reason. */
size_t eg_nswitches(eg_t *g) { return g->nsw; }
int eg_switch(eg_t *g, size_t i, double v[3], char *from, char *to, size_t n, char *reason, size_t rn) {
    if (i >= g->nsw) return -1;
    const ctl_switch_t *s = &g->sw[i];
    v[0] = g->sw_epoch[i], v[1] = (double)s->round, v[2] = (double)s->effective;
    pcoll_format_mode(s->old_mode, s->old_quorum, from, n);
    pcoll_format_mode(s->new_mode, s->new_quorum, to, n);
    snprintf(reason, rn, "%s", s->reason);
    return 0;
}

/* Frees g; an epoch still open is finalised first (bounded by t_abort + 5). */
void eg_free(eg_t *g) {
    if (!g) return;
    if (g->ctl) ctl_stop(&g->ctl);
    if (g->h) pcoll_finalize(&g->h, g->t_abort + 5);
    pcoll_record_free(&g->rec);
    ctl_state_free(g->carried);
    free(g->agg);
    free(g->sw);
    free(g->sw_epoch);
    free(g);
}
