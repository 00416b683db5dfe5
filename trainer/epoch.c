/* epoch.c -- one epoch of eager-SGD on this rank (docs/DESIGN.md: rounds, the join).
 *
 *   for each of my batches:  forward/backward (backend) -> injected delay -> pcoll_deposit
 *                            -> pcoll_wait(consumed) -> apply every completed round in order
 *   --late go:               pcoll_deposit(accumulate) -> pcoll_wait(newer): a rank that missed
 *                            a round while it computed applies it and computes on; its deposit
 *                            stays pending, the next gradient is added to it
 *   join: keep taking part until every rank has joined; apply every remaining round
 *
 * Shard epochs: each rank runs its 1/P of the data. Global epochs: one permutation of the whole
 * set, batches dealt from the round history (dealer.c). One libpcoll handle and one controller
 * per epoch; the controller's state at the end is checked equal on every rank and carried into
 * the next epoch's policy.
 *
 * Mid-epoch checkpoints (--ckpt-every-steps N): the epoch runs in parts, each ended as an epoch is
 * (every rank joins, every round is applied), so that every rank holds the same model and every
 * gradient of the part is in it; then the part's end is checkpointed. The ranks agree on where a
 * part ends without a message: shard epochs after every rank's step N, 2N, ...; global epochs
 * once N x P, 2N x P, ... batches are dealt (the dealer stops there). Either way a part ends with
 * a prefix perm[0..pos) of the epoch's permutation trained, and a resume continues with the rest:
 * global epochs deal it from batch pos / batch on, shard epochs shard it over the ranks there are
 * (on the world size that wrote the checkpoint: the rest of every rank's shard, exactly). A part
 * costs what an epoch end costs: the fast ranks wait at the join for the slowest.
 */
#include "trainer/epoch.h"
#include "collectives/sim/imbalance.h"
#include "common/hash.h"
#include "trainer/apply.h"
#include "trainer/batch.h"
#include "trainer/curve.h"
#include "trainer/end.h"
#include "trainer/epoch_end.h"
#include "trainer/runlog.h"
#include "trainer/watchdog.h"
#include <math.h>
#include <time.h>

/* Global epoch: hands every batch dealt to this rank to the loader. */
static void submit_dealt(run_t *r, data_iter_t *it, dealer_t *dl, int epoch) {
    int64_t b;
    while (dealer_unsubmitted(dl, &b))
        if (data_iter_submit(it, r->perm + b * r->cfg.batch, r->cfg.batch, epoch))
            run_die(r, "training data", "data_iter_submit failed");
}

static void sleep_ms(double ms) {
    if (ms <= 0) return;
    struct timespec ts = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
    nanosleep(&ts, NULL);
}

typedef struct {      /* what one epoch's steps work with */
    data_iter_t *it;  /* the training batches */
    dealer_t dl;      /* global epochs: who trains which batch */
    pcoll_t *h;       /* the part's libpcoll handle */
    ctl_config_t *cc; /* the epoch's controller configuration */
    int64_t pos0;     /* samples of the epoch's permutation trained before this process (resume) */
    long s0, s;       /* this rank's first step in this process, its next step */
    int64_t cursor;   /* global: the next batch to deal */
} epoch_io_t;

/* Shard epoch resumed at sample pos0 of its permutation: the rest, perm[pos0..N), sharded over
 * this run's P ranks as data_iter_new shards a whole epoch (rank q takes the positions i % P == q,
 * the same number each, in batches of --batch, an incomplete last one dropped), through a
 * global-mode iterator fed with those index lists. On the world size that wrote the checkpoint
 * this is exactly the rest of every rank's shard; on another, the rest re-sharded. */
static data_iter_t *open_rest(run_t *r, int epoch, epoch_t *e, epoch_io_t *x) {
    const cfg_t *c = &r->cfg;
    const int64_t N = data_count(r->train), done = x->pos0 / c->batch;
    char err[1024] = "";
    if (!r->perm && !(r->perm = malloc((size_t)N * sizeof *r->perm)))
        run_die(r, "training data", "out of memory for the permutation");
    data_permutation(N, c->seed, epoch, r->perm);
    data_iter_t *it = data_iter_new_global(r->train, c->batch, DATA_AUGMENT | DATA_PREFETCH, err, sizeof err);
    run_agree(r, it != NULL, "training data", err);
    x->s0 = (long)(done / r->P);
    long steps = (long)((N - x->pos0) / r->P / c->batch);
    if (c->max_steps && x->s0 + steps > c->max_steps) steps = c->max_steps > x->s0 ? c->max_steps - x->s0 : 0;
    int64_t *idx = malloc((size_t)c->batch * sizeof *idx);
    if (!idx) run_die(r, "training data", "out of memory");
    for (long k = 0; k < steps; k++) {
        for (int j = 0; j < c->batch; j++)
            idx[j] = r->perm[x->pos0 + ((int64_t)k * c->batch + j) * r->P + r->me];
        if (data_iter_submit(it, idx, c->batch, epoch))
            run_die(r, "training data", "data_iter_submit failed");
    }
    free(idx);
    e->steps = x->s0 + steps;
    e->nbatches = done + (int64_t)steps * r->P;
    return it;
}

/* The epoch's training iterator; sets e->steps, e->nbatches and x->s0 (global: the permutation). */
static data_iter_t *open_epoch(run_t *r, int epoch, epoch_t *e, epoch_io_t *x) {
    const cfg_t *c = &r->cfg;
    char err[1024] = "";
    data_iter_t *it;
    if (!r->global && x->pos0) return open_rest(r, epoch, e, x);
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
    x->cursor = x->pos0 / c->batch;
    x->s0 = (long)(x->cursor / r->P);
    run_agree(
        r, x->cursor <= e->nbatches, "resume",
        "the checkpoint's position is beyond this run's epoch (fewer batches: --limit-train, --max-steps)");
    data_permutation(ntrain, c->seed, epoch, r->perm);
    return it;
}

/* Waits until the round that took this rank's last deposit has completed; applies the rounds. */
static void wait_consumed(run_t *r, int epoch, epoch_t *e, epoch_io_t *x) {
    if (pcoll_wait(x->h, PCOLL_WAIT_CONSUMED, r->cfg.t_abort + 5, NULL))
        run_die(r, "pcoll_wait", pcoll_last_error(x->h));
    apply_rounds(r, x->h, epoch, e, r->global ? &x->dl : NULL);
    if (r->global) submit_dealt(r, x->it, &x->dl, epoch);
}

/* Global epoch: my next batch, or 0 when nothing more is dealt to me (join). With --late go my
 * deposits may still be pending with no batch in hand: the round that takes them deals the next. */
static int next_batch(run_t *r, int epoch, epoch_t *e, epoch_io_t *x, int64_t *gb) {
    if (dealer_take(&x->dl, gb)) return 1;
    if (!r->late_go) return 0;
    wait_consumed(r, epoch, e, x);
    return dealer_take(&x->dl, gb);
}

/* One step: batch s of the epoch through the backend, the injected delay, the deposit, the
 * wait, the rounds completed meanwhile. Returns 0 when a global epoch has no batch left for me. */
static int step(run_t *r, int epoch, long s, epoch_t *e, epoch_io_t *x) {
    const cfg_t *c = &r->cfg;
    backend_t *be = r->be;
    char err[1024] = "";
    const data_batch_t *b;
    int64_t gb;
    const int go = r->late_go;
    if (r->global && !next_batch(r, epoch, e, x, &gb)) return 0; /* nothing more dealt to me: join */
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
    const uint64_t at = (uint64_t)epoch * (uint64_t)(r->global ? e->nbatches : e->steps) + (uint64_t)s;
    const imb_t *im = imb_sched_at(&r->imb, at); /* this step's phase */
    double d = imb_delay_ms(im, c->seed, at, r->me, r->P, (t1 - t0) * 1e3, b->cost);
    if (im->busy)
        imb_busy_ms(d); /* busy=1: the delay is computed */
    else
        sleep_ms(d);
    double t2 = run_now();
    const double loss = be->ops->loss(be);
    e->loss_sum += loss;
    e->loss_n++;
    e->correct += be->ops->top1(be);
    e->seen += b->n;
    /* the step time and the cost (for rule=rate the time since the previous deposit) travel with
     * the deposit: the controller measures from them what each mode costs (ctl_step_cost) */
    if (pcoll_set_cost(x->h, ctl_step_cost(&x->cc->policy, t2 - t0, t2 - e->t_dep), t2 - t0))
        run_die(r, "pcoll_set_cost", pcoll_last_error(x->h));
    /* and the batch's training loss (worth=measured scores a level by how fast it falls); a loss
     * that is not finite is not reported (samples 0) */
    if (pcoll_set_loss(x->h, isfinite(loss) ? loss : 0, isfinite(loss) ? b->n : 0))
        run_die(r, "pcoll_set_loss", pcoll_last_error(x->h));
    e->t_dep = t2;
    /* the wait follows at once: this thread drives the round, the engine is not woken (--late go:
     * it is, since the wait may return at once while the next round needs this deposit) */
    if (pcoll_deposit(x->h, be->ops->grads(be), go ? PCOLL_ACCUMULATE : PCOLL_WAIT_NEXT))
        run_die(r, "pcoll_deposit", pcoll_last_error(x->h));
    if (pcoll_wait(x->h, go ? PCOLL_WAIT_NEWER : PCOLL_WAIT_CONSUMED, c->t_abort + 5, NULL))
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
    const uint64_t counts[3] = {st->mode_switches, st->probes, st->screens};
    uint64_t h = hash_fnv1a64(HASH_FNV1A64_INIT, ints, sizeof ints);
    h = hash_fnv1a64(h, counts, sizeof counts);
    h = hash_fnv1a64(h, st->lv_rounds, sizeof st->lv_rounds);
    h = hash_fnv1a64(h, st->samples, sizeof st->samples);
    h = hash_fnv1a64(h, st->rate, sizeof st->rate);
    h = hash_fnv1a64(h, st->lag, sizeof st->lag);
    h = hash_fnv1a64(h, st->score, sizeof st->score);
    h = hash_fnv1a64(h, st->predicted, sizeof st->predicted);
    return hash_fnv1a64(h, st->score_se, sizeof st->score_se);
}

/* The counts of a handle's stats (per handle: per part of an epoch) summed with an earlier part's,
 * so that the epoch's record counts its rounds, switches, probes and gain over all its parts. */
static void add_counts(ctl_policy_stats_t *s, const ctl_policy_stats_t *b) {
    s->rounds += b->rounds, s->decisions += b->decisions, s->mode_switches += b->mode_switches;
    s->wait_changes += b->wait_changes, s->probes += b->probes;
    s->choices += b->choices, s->choice_changes += b->choice_changes;
    s->screens += b->screens;
    s->tau_waits += b->tau_waits, s->tau_violations += b->tau_violations;
    for (int i = 0; i < CTL_NLV; i++) s->lv_rounds[i] += b->lv_rounds[i];
    if (!b->gain_n) return; /* the gain over the rounds of both (min/max NAN where none) */
    if (!s->gain_n || b->gain_min < s->gain_min) s->gain_min = b->gain_min;
    if (!s->gain_n || b->gain_max > s->gain_max) s->gain_max = b->gain_max;
    s->gain_sum += b->gain_sum, s->gain_n += b->gain_n;
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
    const ctl_policy_stats_t before = e->ctl; /* the epoch's earlier parts (zero: none) */
    ctl_stats(ctl, &e->ctl, &ch);
    add_counts(&e->ctl, &before);
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
    r->tot.decision_hash = hash_fnv1a64(r->tot.decision_hash, &ch, sizeof ch);
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

/* Where the part that starts now ends: shard epochs before this rank's step (a multiple of
 * --ckpt-every-steps N, or the epoch's last), global epochs at batch (a multiple of N x P, or the
 * epoch's last). Without checkpoints (no --ckpt-dir) the epoch is one part. */
static int64_t part_end(const run_t *r, const epoch_t *e, const epoch_io_t *x) {
    const int64_t n = *r->cfg.ckpt_dir ? r->cfg.ckpt_every_steps : 0;
    if (!r->global) return n && (x->s / n + 1) * n < e->steps ? (x->s / n + 1) * n : e->steps;
    return n && (x->cursor / (n * r->P) + 1) * n * r->P < e->nbatches
               ? (x->cursor / (n * r->P) + 1) * n * r->P
               : e->nbatches;
}

/* One part of the epoch (the whole epoch without mid-epoch checkpoints): a libpcoll handle and a
 * controller, the steps up to part_end, the join, every round applied, the controller's end. */
static void run_part(run_t *r, int epoch, epoch_t *e, epoch_io_t *x) {
    const cfg_t *c = &r->cfg;
    const int64_t end = part_end(r, e, x);
    if (r->global) {
        if (dealer_init_at(&x->dl, end, x->cursor, r->P, r->me, 2))
            run_die(r, "global epoch", "dealer_init (internal)");
        submit_dealt(r, x->it, &x->dl, epoch);
    }
    watch_enter(r, "pcoll_create");
    int rc = pcoll_create(MPI_COMM_WORLD, r->model->nparams, r->be->ops->mem, &r->pcoll, &x->h);
    run_agree(r, rc == PCOLL_OK, "pcoll_create", pcoll_last_error(NULL));
    watch_leave(r);
    r->data_path = pcoll_data_path(x->h);
    ctl_t *ctl = NULL;
    if (ctl_start(x->h, x->cc, &ctl)) run_die(r, "controller", "ctl_start failed");
    e->t_dep = run_now();
    watch_rounds(r, 1); /* libpcoll's liveness and the controller judge the peers */
    for (; r->global || x->s < end; x->s++)
        if (!step(r, epoch, x->s, e, x)) break;
    pcoll_join(x->h);
    while ((rc = pcoll_wait(x->h, PCOLL_WAIT_NEWER, c->t_abort + 5, NULL)) == PCOLL_OK)
        apply_rounds(r, x->h, epoch, e, r->global ? &x->dl : NULL);
    if (rc != PCOLL_DONE) run_die(r, "pcoll_wait (epoch end)", pcoll_last_error(x->h));
    watch_rounds(r, 0);
    runlog_rounds_flush(r, epoch);
    end_controller(r, epoch, ctl, x->cc, e);
    if ((rc = pcoll_finalize(&x->h, c->t_abort + 5))) run_die(r, "pcoll_finalize", pcoll_strerror(rc));
    if (r->global) x->cursor = x->dl.cursor;
}

/* The end of a part that is not the epoch's last: the curve's snapshots so far evaluated, the
 * replicas checked equal (BN averaged), the ranks' loss and top-1 counts summed into rank 0's
 * (so that an uninterrupted run and one resumed here add them in the same order), and the
 * checkpoint of the epoch in progress at sample pos of its permutation. */
static void mid_checkpoint(run_t *r, int epoch, epoch_t *e, int64_t pos) {
    curve_end_epoch(r, epoch, e);
    check_replicas(r, epoch);
    double loc[5] = {e->loss_sum, (double)e->loss_n, (double)e->correct, (double)e->seen, (double)e->mysteps};
    double all[5];
    watch_enter(r, "epoch totals");
    MPI_Allreduce(loc, all, 5, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    watch_leave(r);
    const int z = r->me != 0;
    e->loss_sum = z ? 0 : all[0], e->loss_n = z ? 0 : (long)all[1];
    e->correct = z ? 0 : (long)all[2], e->seen = z ? 0 : (long)all[3];
    ckpt_epoch_t part = {.pos = pos,
                         .rounds = e->rounds,
                         .fresh = e->fresh_sum,
                         .stale_n = e->stale_n,
                         .stale = e->stale_sum,
                         .max_stale = e->max_stale,
                         .max_streak = e->max_streak,
                         .loss_sum = all[0],
                         .loss_n = (uint64_t)all[1],
                         .correct = (uint64_t)all[2],
                         .seen = (uint64_t)all[3],
                         .steps = (uint64_t)all[4]};
    checkpoint(r, epoch, &part, run_now() - r->t_start);
}

/* A resumed epoch starts from the checkpoint's part of it: the rounds' counts on every rank (every
 * rank applied them; their fresh share in the checkpoint's world size's units, e->share0), the
 * losses and samples on rank 0 (mid_checkpoint's sums), the steps spread over the ranks. */
static void continue_epoch(run_t *r, epoch_t *e) {
    const ckpt_epoch_t *a = &r->at;
    e->rounds = a->rounds, e->fresh_sum = e->grads = a->fresh, e->stale_n = a->stale_n,
    e->stale_sum = a->stale;
    e->max_stale = a->max_stale, e->max_streak = a->max_streak;
    e->fresh0 = a->fresh, e->share0 = (double)a->fresh / r->at_ranks;
    if (r->me == 0)
        e->loss_sum = a->loss_sum, e->loss_n = (long)a->loss_n, e->correct = (long)a->correct,
        e->seen = (long)a->seen;
    e->mysteps = (long)(a->steps / (uint64_t)r->P + ((uint64_t)r->me < a->steps % (uint64_t)r->P));
}

void train_epoch(run_t *r, int epoch, epoch_t *e) {
    const cfg_t *c = &r->cfg;
    *e = (epoch_t){.t0 = run_now()};
    epoch_io_t x = {0};
    if (epoch == r->epoch0 && r->at.pos) { /* --resume from a mid-epoch checkpoint */
        x.pos0 = r->at.pos;
        continue_epoch(r, e);
        r->at = (ckpt_epoch_t){0};
    }
    x.it = open_epoch(r, epoch, e, &x);
    x.s = x.s0;
    if (epoch == r->epoch0) { /* --imbalance's epochs to steps, once: step() indexes epoch E's steps from
                               * E x steps (global: nbatches), a rank takes e->steps (global: nbatches / P
                               * on average) */
        char err[512] = "";
        run_agree(r,
                  imb_sched_resolve(&r->imb, (uint64_t)(r->global ? e->nbatches : e->steps),
                                    r->global ? (double)e->nbatches / r->P : (double)e->steps, err,
                                    sizeof err) == 0,
                  "injection", err);
    }
    const int forced_sync = epoch < c->initial_sync || epoch >= c->epochs - c->final_sync;
    x.cc = forced_sync ? &r->ctl_sync : &r->ctl;
    for (;;) {
        run_part(r, epoch, e, &x);
        if (r->global ? x.cursor >= e->nbatches : x.s >= e->steps) break;
        mid_checkpoint(r, epoch, e,
                       r->global ? x.cursor * c->batch : x.pos0 + (int64_t)(x.s - x.s0) * c->batch * r->P);
    }
    data_iter_free(x.it);
}
