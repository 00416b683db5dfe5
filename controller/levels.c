/* levels.c -- what the policy's parts (policy.c, state.c, rate.c, predict.c) share about the levels
 * and records; contracts in policy_impl.h. Pure: no MPI calls, no threads, no clocks, no globals. */
#include "controller/policy_impl.h"

#include <string.h>

void level_rule(const ctl_policy_t *p, int lv, pcoll_rule_t *r) {
    memset(r, 0, sizeof *r);
    if (p->c.kind == CTL_STATIC) {
        r->mode = p->c.base.mode;
        r->quorum = p->c.base.quorum;
        return;
    }
    if (lv == CTL_LV_LIGHT) {
        *r = p->light;
        return;
    }
    r->mode = lv == CTL_LV_MAJORITY ? PCOLL_MAJORITY : PCOLL_SYNC;
}

const char *level_name(const ctl_policy_t *p, int lv, char *b, size_t n) {
    pcoll_rule_t r;
    level_rule(p, lv, &r);
    return rule_str(&r, b, n);
}

int level_of_mode(pcoll_mode_t m) {
    return m == PCOLL_SYNC ? CTL_LV_SYNC : m == PCOLL_MAJORITY ? CTL_LV_MAJORITY : CTL_LV_LIGHT;
}

int rec_active(const pcoll_record_t *rec, int i) {
    return !(rec->flags[i] & (PCOLL_F_JOINED | PCOLL_F_FAILED));
}

int backoff(int cur, int cap) { return cur > cap / 2 ? cap : cur * 2; }

double gradient_worth(ctl_staleness_t k, double lag) {
    return k == CTL_STALE_LINEAR ? 1 / (1 + lag) : k == CTL_STALE_QUADRATIC ? 1 / (1 + lag * lag) : 1;
}
