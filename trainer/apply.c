/* apply.c -- applying completed rounds: every rank applies every round, in round order, with the
 * same learning rate and weight decay, so the replicas stay bitwise equal. */
#include "trainer/apply.h"
#include "trainer/curve.h"
#include "trainer/end.h"
#include "trainer/gradstats.h"
#include "trainer/runlog.h"
#include <string.h>

/* The gradients a round carries: one per deposit, which is one per fresh rank unless a rank merged
 * deposits into a pending one (--late go; the record counts them per rank). */
int round_grads(const pcoll_record_t *rec) {
    int n = 0;
    for (int p = 0; p < rec->P; p++) n += rec->fresh[p];
    return n;
}

/* The lr of a round: a function of the epoch and of the fraction of the epoch's gradients that
 * the rounds before it applied (the sum of their gradient counts over the epoch's batches: P x steps
 * with even shards, or all batches dealt in a global epoch). Every rank holds the same records,
 * so every replica uses the same lr, and the schedule advances with the samples learnt, not with
 * the round count: a solo epoch has several times more rounds than a sync one, and a round index
 * would move a milestone or warm-up that far ahead of its place. */
static double lr_of(const nn_lr_sched_t *s, int epoch, uint64_t fresh_before, int64_t nbatches) {
    double f = nbatches > 0 ? (double)fresh_before / (double)nbatches : 0;
    return nn_lr_at(s, epoch + (f < 1 ? f : 1));
}

/* The weight decay of a round (--wd-per sample): --wd times the share of a whole round's
 * gradients that it carries, |F_r| / P, so that every mode decays by --wd x batches / P per
 * epoch, as sync does, whatever its round sizes. Decayed in full (--wd-per round), a partial
 * round of |F| gradients would decay the weights as much as a whole sync round. --div fresh makes
 * every round a whole step (full decay). */
static float wd_of(const cfg_t *c, int ngrads, int P) {
    if (!strcmp(c->wd_per, "round") || !strcmp(c->div, "fresh")) return (float)c->wd;
    return (float)(c->wd * (double)ngrads / (double)P);
}

/* The SGD step that applies a round: the schedule's lr and the weight decay of wd_of, as a whole
 * momentum step (--momentum-per round, or a round of every rank, or --div fresh, whose rounds are
 * whole steps), or (--momentum-per sample) advanced by the round's share s = |F_r| / P of a step
 * (nn_sgd_share: momentum decays by momentum^s, the step is lr x s with the mean of the fresh
 * gradients, decay by wd x (1 - momentum^s) / (1 - momentum) ~ wd x s). */
static void sgd_of(const run_t *r, int ngrads, nn_sgd_t *o) {
    const double s = (double)ngrads / (double)r->P;
    if (strcmp(r->cfg.mom_per, "sample") || !strcmp(r->cfg.div, "fresh") || s >= 1) {
        *o = r->sgd;
        return;
    }
    nn_sgd_t whole = r->sgd;
    whole.wd = (float)r->cfg.wd;
    nn_sgd_share(&whole, s, o);
}

/* The record's gradients, staleness and streaks into the epoch's counters. */
static void count_round(epoch_t *e, const pcoll_record_t *rec, int ngrads, int P) {
    e->rounds++;
    e->fresh_sum += (uint64_t)rec->nfresh;
    e->grads += (uint64_t)ngrads;
    for (int p = 0; p < P; p++) {
        if (rec->streak[p] > e->max_streak) e->max_streak = rec->streak[p];
        if (!rec->fresh[p]) continue;
        e->stale_n++;
        e->stale_sum += rec->staleness[p];
        if (rec->staleness[p] > e->max_stale) e->max_stale = rec->staleness[p];
    }
}

int apply_rounds(run_t *r, pcoll_t *h, int epoch, epoch_t *e, dealer_t *dl) {
    pcoll_record_t *rec = &r->rec;
    uint64_t round;
    const float *res;
    char err[512];
    int rc, k = 0;
    while ((rc = pcoll_next(h, &round, &res, rec)) == PCOLL_OK) {
        if (rec->nfresh == 0) continue; /* a round that only carried joins: not an SGD step */
        if (dl && dealer_round(dl, rec->fresh))
            run_die(r, "global epoch", "a rank deposited without a batch (internal)");
        const int ng = round_grads(rec);
        r->sgd.lr = (float)lr_of(&r->sched, epoch, e->grads, e->nbatches);
        r->sgd.wd = wd_of(&r->cfg, ng, r->P);
        nn_sgd_t step;
        sgd_of(r, ng, &step);
        if (r->be->ops->apply(r->be, res, &step, err, sizeof err)) run_die(r, "apply a round", err);
        count_round(e, rec, ng, r->P);
        gstats_round(r, round, epoch, rec, res);
        curve_round(r, epoch, e, ng);
        runlog_round(r, rec, r->sgd.lr, r->sgd.wd, epoch);
        k++;
    }
    if (rc < 0) run_die(r, "pcoll_next", pcoll_last_error(h));
    return k;
}
