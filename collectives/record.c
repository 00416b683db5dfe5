/* record.c -- pcoll_record_t storage: allocated for P ranks, copied, freed (pcoll.h). */
#include "collectives/pcoll_impl.h"
#include <stdlib.h>
#include <string.h>

int pcoll_record_init(pcoll_record_t *rec, int P) {
    memset(rec, 0, sizeof *rec);
    if (P < 1) return PCOLL_ERR_ARG;
    rec->P = P;
    rec->fresh = calloc((size_t)P, 1);
    rec->waited = calloc((size_t)P, 1);
    rec->flags = calloc((size_t)P, 1);
    rec->staleness = calloc((size_t)P, 4);
    rec->streak = calloc((size_t)P, 4);
    rec->cost = calloc((size_t)P, sizeof *rec->cost);
    rec->step = calloc((size_t)P, sizeof *rec->step);
    rec->loss = calloc((size_t)P, sizeof *rec->loss);
    rec->samples = calloc((size_t)P, sizeof *rec->samples);
    if (!rec->fresh || !rec->waited || !rec->flags || !rec->staleness || !rec->streak || !rec->cost ||
        !rec->step || !rec->loss || !rec->samples) {
        pcoll_record_free(rec);
        return PCOLL_ERR_NOMEM;
    }
    return PCOLL_OK;
}

void pcoll_record_free(pcoll_record_t *rec) {
    free(rec->fresh);
    free(rec->waited);
    free(rec->flags);
    free(rec->staleness);
    free(rec->streak);
    free(rec->cost);
    free(rec->step);
    free(rec->loss);
    free(rec->samples);
    rec->fresh = rec->waited = rec->flags = NULL;
    rec->staleness = rec->streak = NULL;
    rec->cost = rec->step = rec->loss = rec->samples = NULL;
    rec->P = 0;
}

/* Copies P floats of s into d, or zeros where s is NULL (a record a caller built); d may be NULL. */
static void copy_or_zero(float *d, const float *s, int P) {
    if (!d) return;
    if (s)
        memcpy(d, s, (size_t)P * sizeof *d);
    else
        memset(d, 0, (size_t)P * sizeof *d);
}

/* Copies a record into one the caller allocated for d->P >= s->P ranks; d->P becomes s->P. */
void pcoll_record_copy(pcoll_record_t *d, const pcoll_record_t *s) {
    uint8_t *f = d->fresh, *w = d->waited, *fl = d->flags;
    uint32_t *st = d->staleness, *sk = d->streak;
    float *c = d->cost, *sp = d->step, *lo = d->loss, *sa = d->samples;
    int P = s->P;
    *d = *s;
    d->fresh = f;
    d->waited = w;
    d->flags = fl;
    d->staleness = st;
    d->streak = sk;
    d->cost = c;
    d->step = sp;
    d->loss = lo;
    d->samples = sa;
    memcpy(f, s->fresh, (size_t)P);
    memcpy(w, s->waited, (size_t)P);
    memcpy(fl, s->flags, (size_t)P);
    memcpy(st, s->staleness, (size_t)P * 4);
    memcpy(sk, s->streak, (size_t)P * 4);
    copy_or_zero(c, s->cost, P);
    copy_or_zero(sp, s->step, P);
    copy_or_zero(lo, s->loss, P);
    copy_or_zero(sa, s->samples, P);
}

void pcoll_agg_reset(pcoll_agg_t *a) {
    memset(a, 0, sizeof *a);
    a->min_fresh = 1 << 30;
}

void pcoll_agg_add(pcoll_agg_t *a, const pcoll_record_t *r) {
    if (!a->n) a->from = r->round;
    a->to = r->round;
    a->n++;
    a->mode = r->mode;
    a->fresh_sum += r->nfresh;
    if (r->nfresh < a->min_fresh) a->min_fresh = r->nfresh;
    a->lat_sum += (r->t_end - r->t_start) * 1e3;
    for (int p = 0; p < r->P; p++) {
        if (r->streak[p] > a->max_streak) a->max_streak = r->streak[p];
        if (r->fresh[p]) {
            a->stale_sum += r->staleness[p];
            a->stale_n++;
            if (r->staleness[p] > a->max_stale) a->max_stale = r->staleness[p];
        }
    }
}
