/* trigger.c -- which rule a round has, and how the engines activate it (pure, no MPI).
 *
 * plan_round() turns the rule in force at round r, the agreed per-rank state (joined, streaks)
 * and tau into an activation path that every rank computes identically:
 *
 *   PATH_SYNC   every active rank must be fresh (sync, quorum Q >= active, W = all active):
 *               no messages; an active rank enters the reduction once it is ready, a joined
 *               rank enters at once; the reduction itself is the barrier.
 *   PATH_ANY    solo with an empty wait set: any ready rank starts the round. ACT(r) floods a
 *               binomial tree over all P ranks rooted at r % P: an activated rank sends it to
 *               its tree neighbours (parent and children) except the one it came from, then
 *               enters. Every rank is reached whichever ranks start (the tree is fixed), and
 *               each sends and receives at most ceil(log2 P) + 1 messages per round.
 *
 *         3 ready: ACT -> its children and its parent; each of them on to the rest of the tree
 *
 *   PATH_COORD  quorum Q > 1, majority, or any wait set: one coordinator c decides, and ACT(r)
 *               goes down the binomial tree rooted at c.
 *                 majority: c = initiator i_r = active[mix(seed, r) % nactive];
 *                 solo + W: c = lowest rank of W;  quorum: c = active[r % nactive].
 *               Quorum: each rank sends its parent COUNT(r, ready ranks in its subtree) when
 *               that number grows (children's counts combined), so c receives at most one
 *               stream per child. Wait-set members send READY(r) straight to c (|W| messages).
 *
 *         leaves -- COUNT --> ... --> c  (c: >= Q ready, i_r ready, W ready)
 *         c -- ACT(r) --> children --> ...  everybody enters allreduce(r)
 *
 * "Ready" = a pending deposit, or finalize requested (a joining rank must not block rounds;
 * it contributes no data and is marked joined in the round, exempting it from the rule).
 */
#include "collectives/pcoll_impl.h"
#include "common/hash.h"
#include <string.h>

int pcoll_initiator(uint64_t seed, uint64_t round, int nactive) {
    if (nactive <= 0) return -1;
    return (int)(hash_splitmix64(seed ^ hash_splitmix64(round)) % (uint64_t)nactive);
}

const rule_ent_t *rule_at(const struct pcoll *h, uint64_t r) {
    const rule_ent_t *best = &h->rules[0];
    for (int i = 1; i < h->nrules; i++)
        if (h->rules[i].from <= r) best = &h->rules[i];
    return best;
}

void plan_round(struct pcoll *h, uint64_t r, plan_t *pl) {
    const rule_ent_t *ru = rule_at(h, r);
    int P = h->P, na = h->nactive;
    memset(pl->inwait, 0, (size_t)P);
    pl->nwait = 0;
    for (int i = 0; i < ru->nwait; i++) {
        int p = ru->wait[i];
        if (p >= 0 && p < P && !h->joined[p] && !pl->inwait[p]) {
            pl->inwait[p] = 1;
            pl->nwait++;
        }
    }
    for (int p = 0; p < P; p++)
        if (!h->joined[p] && !pl->inwait[p] && pcoll_must_wait(h->streak[p], h->cfg.tau)) {
            pl->inwait[p] = 1;
            pl->nwait++;
        }
    pl->mode = ru->mode;
    pl->initiator = -1;
    pl->coord = -1;
    pl->need_ready = 0;
    pl->count_up = 0;
    int q = ru->mode == PCOLL_SOLO ? 1 : ru->mode == PCOLL_QUORUM ? ru->quorum : na;
    if (q > na) q = na;
    if (q < 1) q = 1;
    pl->quorum = q;
    int me_active = !h->joined[h->me];
    if (ru->mode == PCOLL_MAJORITY && na > 0) {
        pl->initiator = h->active[pcoll_initiator(h->cfg.seed, r, na)];
        pl->path = PATH_COORD;
        pl->coord = pl->initiator;
        pl->need_ready = me_active && pl->inwait[h->me];
    } else if (ru->mode == PCOLL_SYNC || q >= na || pl->nwait >= na) {
        pl->path = PATH_SYNC;
    } else if (q == 1 && pl->nwait == 0) {
        pl->path = PATH_ANY;
    } else {
        pl->path = PATH_COORD;
        if (q == 1) { /* solo + W: the lowest member of W decides */
            for (int p = 0; p < P; p++)
                if (pl->inwait[p]) {
                    pl->coord = p;
                    break;
                }
            pl->need_ready = me_active && pl->inwait[h->me];
        } else {
            pl->coord = h->active[r % (uint64_t)na];
            pl->need_ready = me_active && pl->inwait[h->me];
            pl->count_up = 1;
        }
    }
    if (pl->path == PATH_COORD && pl->coord == h->me) pl->need_ready = 0;
}

/* Coordinator only: does the rule hold, given READY messages (wait set), this rank's own
 * readiness and, with count_up, the ready ranks counted up the tree (tree_cnt, self included)? */
int plan_satisfied(const struct pcoll *h, const plan_t *pl, uint64_t r, int self_ready, uint64_t tree_cnt) {
    int cnt = 0;
    for (int i = 0; i < h->nactive; i++) {
        int p = h->active[i];
        int rd = p == h->me ? self_ready : h->ready_round[p] == r + 1;
        if (pl->inwait[p] && !rd) return 0;
        cnt += rd;
    }
    if (pl->mode == PCOLL_MAJORITY) {
        int i = pl->initiator;
        return i == h->me ? self_ready : h->ready_round[i] == r + 1;
    }
    return (pl->count_up ? (int)tree_cnt : cnt) >= pl->quorum;
}
