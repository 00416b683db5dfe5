/* epoch.c -- one epoch of eager-SGD on this rank (docs/DESIGN.md: rounds, the join).
 *
 *   for each of my batches:  forward/backward (backend) -> injected delay -> pcoll_deposit
 *                            -> pcoll_wait(consumed) -> apply every completed round in order
 *   join: keep taking part until every rank has joined; apply every remaining round
 *
 * Shard epochs: each rank runs its 1/P of the data. Global epochs: one permutation of the whole
 * set, batches dealt from the round history (dealer.c). One libpcoll handle and one controller
 * per epoch; the controller's state at the end is checked equal on every rank and carried into
 * the next epoch's policy.
 */
#include "trainer/run.h"
#include "trainer/runlog.h"
#include <math.h>
#include <time.h>

static void sleep_ms(double ms) {
    if (ms <= 0) return;
    struct timespec ts = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
    nanosleep(&ts, NULL);
}

typedef struct {      /* what one epoch's steps work with */
    data_iter_t *it;  /* the training batches */
    dealer_t dl;      /* global epochs: who trains which batch */
    pcoll_t *h;       /* the epoch's libpcoll handle */
    ctl_config_t *cc; /* the epoch's controller configuration */
} epoch_io_t;

/* The epoch's training iterator; sets e->steps and e->nbatches (global: deals the first batches). */
static data_iter_t *open_epoch(run_t *r, int epoch, epoch_t *e, dealer_t *dl) {
    const cfg_t *c = &r->cfg;
    char err[1024] = "";
    data_iter_t *it;
    if (!r->global) {
        it = data_iter_new(r->train, r->me, r->P, c->batch, epoch,
                           DATA_TRAIN_FLAGS | DATA_DROP_LAST | DATA_EVEN_SHARDS, err, sizeof err);
        run_agree(r, it != NULL, "training data", err);
        e->steps = data_iter_num_batches(it);
        if (c->max_steps && e->steps > c->max_steps) e->steps = c->max_steps;
        run_agree(r, e->steps > 0, "training data", "no full batch per rank: lower --batch or use more data");
        e->nbatches = (int64_t)e->steps * r->P;
        return it;
    }
    const int64_t ntrain = data_count(r->train);
    it = data_iter_new_global(r->train, c->batch, DATA_AUGMENT | DATA_PREFETCH, err, sizeof err);
    run_agree(r, it != NULL, "training data", err);
    e->nbatches = ntrain / c->batch;
    if (c->max_steps && e->nbatches > (int64_t)c->max_steps * r->P)
        e->nbatches = (int64_t)c->max_steps * r->P;
    run_agree(r, e->nbatches > 0, "training data", "no full batch: lower --batch or use more data");
    e->steps = (long)((e->nbatches + r->P - 1) / r->P);
    data_permutation(ntrain, c->seed, epoch, r->perm);
    if (dealer_init(dl, e->nbatches, r->P, r->me, 2)) run_die(r, "global epoch", "dealer_init (internal)");
    submit_dealt(r, it, dl, epoch);
    return it;
}

/* One step: batch s of the epoch through the backend, the injected delay, the deposit, the
 * wait, the rounds completed meanwhile. Returns 0 when a global epoch has no batch left for me. */
static int step(run_t *r, int epoch, long s, epoch_t *e, epoch_io_t *x) {
    const cfg_t *c = &r->cfg;
    backend_t *be = r->be;
    char err[1024] = "";
    const data_batch_t *b;
    int64_t gb;
    if (r->global && !dealer_take(&x->dl, &gb)) return 0; /* nothing more dealt to me: join */
    double t0 = run_now();
    int got = data_iter_next(x->it, &b, err, sizeof err);
    if (got < 0) run_die(r, "training data", err);
    if (got == 0) run_die(r, "training data", "shard ended before its batch count (internal)");
    e->mysteps++;
    nn_batch_t nb;
    to_batch(&nb, b);
    if (be->ops->train_step(be, &nb, (long)epoch * e->steps + s, err, sizeof err))
        run_die(r, "training", err);
    double t1 = run_now();
    uint64_t per_epoch = (uint64_t)(r->global ? e->nbatches : e->steps);
    double d = imb_delay_ms(&r->imb, c->seed, (uint64_t)epoch * per_epoch + (uint64_t)s, r->me, r->P,
                            (t1 - t0) * 1e3, b->cost);
    if (r->imb.busy)
        imb_busy_ms(d); /* busy=1: the delay is computed */
    else
        sleep_ms(d);
    double t2 = run_now();
    e->loss_sum += be->ops->loss(be);
    e->loss_n++;
    e->correct += be->ops->top1(be);
    e->seen += b->n;
    /* the step time (or, for rule=rate, the time since the previous deposit) travels with the
     * deposit: the controller measures from it what each mode costs (ctl_step_cost) */
    if (pcoll_set_cost(x->h, ctl_step_cost(&x->cc->policy, t2 - t0, t2 - e->t_dep)))
        run_die(r, "pcoll_set_cost", pcoll_last_error(x->h));
    e->t_dep = t2;
    if (pcoll_deposit(x->h, be->ops->grads(be), 0)) run_die(r, "pcoll_deposit", pcoll_last_error(x->h));
    if (pcoll_wait(x->h, PCOLL_WAIT_CONSUMED, c->t_abort + 5, NULL))
        run_die(r, "pcoll_wait", pcoll_last_error(x->h));
    double t3 = run_now();
    apply_rounds(r, x->h, epoch, e, r->global ? &x->dl : NULL);
    if (r->global) submit_dealt(r, x->it, &x->dl, epoch);
    double t4 = run_now();
    rank_stats_t *rs = &r->rs;
    rs->compute += t1 - t0, rs->inject += t2 - t1, rs->wait += t3 - t2, rs->apply += t4 - t3;
    rs->steps++;
    runlog_progress(r, epoch, s, e);
    return 1;
}

/* Fingerprint of what the epoch's JSON and console report of the controller (runlog_epoch): its
 * level, choice, switches, probes, rounds per level and every level's measurement. */
static uint64_t report_hash(const ctl_policy_stats_t *st) {
    const int ints[5] = {(int)st->mode, st->quorum, st->choice, st->probing, st->light_quorum};
    const uint64_t counts[2] = {st->mode_switches, st->probes};
    uint64_t h = fnv1a64(1469598103934665603ULL, ints, sizeof ints);
    h = fnv1a64(h, counts, sizeof counts);
    h = fnv1a64(h, st->lv_rounds, sizeof st->lv_rounds);
    h = fnv1a64(h, st->samples, sizeof st->samples);
    h = fnv1a64(h, st->rate, sizeof st->rate);
    h = fnv1a64(h, st->lag, sizeof st->lag);
    h = fnv1a64(h, st->score, sizeof st->score);
    return fnv1a64(h, st->score_se, sizeof st->score_se);
}

/* The controller thread ends by itself once it saw the all-joined round, but may still be some
 * records behind pcoll_wait's DONE: its stats are final, and the same on every rank, only then.
 * They are checked equal across ranks (the decisions, the rounds and what the epoch's record
 * reports of them), logged, and carried into the next epoch's policy. */
static void end_controller(run_t *r, int epoch, ctl_t *ctl, ctl_config_t *cc, epoch_t *e) {
    char err[512];
    int cw = ctl_wait(ctl, r->cfg.t_abort + 5);
    if (cw != CTL_OK)
        run_die(r, "controller",
                cw == CTL_ERR_TIMEOUT ? "the thread did not end after the all-joined round"
                                      : ctl_last_error(ctl));
    uint64_t ch = 0;
    ctl_stats(ctl, &e->ctl, &ch);
    uint64_t v[3] = {ch, e->ctl.rounds, report_hash(&e->ctl)}, lo[3], hi[3];
    watch_enter(r, "controller check");
    MPI_Allreduce(v, lo, 3, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(v, hi, 3, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    watch_leave(r);
    snprintf(err, sizeof err,
             "epoch %d: the ranks' controllers disagree (decision hash %016llx..%016llx, "
             "rounds observed %llu..%llu, measurements %016llx..%016llx; internal)",
             epoch + 1, (unsigned long long)lo[0], (unsigned long long)hi[0], (unsigned long long)lo[1],
             (unsigned long long)hi[1], (unsigned long long)lo[2], (unsigned long long)hi[2]);
    run_agree(r, lo[0] == hi[0] && lo[1] == hi[1] && lo[2] == hi[2], "controller", err);
    r->tot.decision_hash = fnv1a64(r->tot.decision_hash, &ch, sizeof ch);
    ctl_switch_t sw[64];
    size_t nsw = ctl_switch_log(ctl, sw, 64);
    runlog_switches(r, epoch, sw, nsw < 64 ? nsw : 64);
    /* adaptive: the next epoch continues the controller's whole state (ctl_state_t: mode, probes,
     * window, measurements); the policy is a pure function of the records, so every rank carries
     * over the same */
    if (cc == &r->ctl && cc->policy.kind == CTL_ADAPTIVE) {
        ctl_state_free(r->carried);
        if (!(r->carried = ctl_state(ctl))) run_die(r, "controller", "out of memory (controller state)");
        cc->resume = r->carried;
    }
    if (ctl_stop(&ctl) != CTL_OK) run_die(r, "controller", "the controller thread ended with an error");
}

void train_epoch(run_t *r, int epoch, epoch_t *e) {
    const cfg_t *c = &r->cfg;
    *e = (epoch_t){.t0 = run_now()};
    epoch_io_t x = {0};
    x.it = open_epoch(r, epoch, e, &x.dl);
    watch_enter(r, "pcoll_create");
    int rc = pcoll_create(MPI_COMM_WORLD, r->model->nparams, r->be->ops->mem, &r->pcoll, &x.h);
    run_agree(r, rc == PCOLL_OK, "pcoll_create", pcoll_last_error(NULL));
    watch_leave(r);
    const int forced_sync = epoch < c->initial_sync || epoch >= c->epochs - c->final_sync;
    x.cc = forced_sync ? &r->ctl_sync : &r->ctl;
    ctl_t *ctl = NULL;
    if (ctl_start(x.h, x.cc, &ctl)) run_die(r, "controller", "ctl_start failed");
    e->t_dep = run_now();
    watch_rounds(r, 1); /* libpcoll's liveness and the controller judge the peers */
    for (long s = 0; r->global || s < e->steps; s++)
        if (!step(r, epoch, s, e, &x)) break;
    pcoll_join(x.h);
    while ((rc = pcoll_wait(x.h, PCOLL_WAIT_NEWER, c->t_abort + 5, NULL)) == PCOLL_OK)
        apply_rounds(r, x.h, epoch, e, r->global ? &x.dl : NULL);
    if (rc != PCOLL_DONE) run_die(r, "pcoll_wait (epoch end)", pcoll_last_error(x.h));
    watch_rounds(r, 0);
    runlog_rounds_flush(r, epoch);
    data_iter_free(x.it);
    end_controller(r, epoch, ctl, x.cc, e);
    if ((rc = pcoll_finalize(&x.h, c->t_abort + 5))) run_die(r, "pcoll_finalize", pcoll_strerror(rc));
}
