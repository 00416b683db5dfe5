/* nn_test_util.h: helpers for the nn tests (norm-wise relative error, random fills, checks). */
#ifndef NN_TEST_UTIL_H
#define NN_TEST_UTIL_H
#include "trainer/nn/nn.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static int nt_fail = 0;

/* norm-wise relative error ||a-b|| / max(||b||, floor) */
static inline double nt_relerr(const float *a, const float *b, size_t n, double floor) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        d += e * e;
        s += (double)b[i] * b[i];
    }
    s = sqrt(s);
    return sqrt(d) / (s > floor ? s : floor);
}

static inline void nt_check(int ok, const char *what, double val, double tol) {
    if (!ok) nt_fail++;
    printf("%s %-52s %.3e (tol %.1e)\n", ok ? "ok  " : "FAIL", what, val, tol);
}

static inline void nt_fill(nn_rng_t *r, float *p, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) p[i] = nn_rng_uniform(r, lo, hi);
}
/* Checks not judged: each printed as a "skip" line naming the check, its value and the reason;
 * the mains report the count beside the failures. */
static int nt_notjudged = 0;
static inline void nt_skip(const char *what, double val, const char *why) {
    nt_notjudged++;
    printf("skip %-52s %.3e (not judged: %s)\n", what, val, why);
}

/* After a reference file's SGD steps: the worst relative error of the model's parameters against
 * the "final.<name>" tensors (*nfin: how many the file has; 0: none, the caller says so) */
static inline double nt_final_params_worst(const nn_model_t *m, const nn_tfile_t *f, int *nfin) {
    char what[160];
    double worst = 0, e;
    *nfin = 0;
    for (int t = 0; t < m->nptensors; t++) {
        snprintf(what, sizeof what, "final.%s", m->ptensors[t].name);
        const nn_tensor_t *g = nn_tfile_find(f, what);
        if (!g) continue;
        (*nfin)++;
        e = nt_relerr(m->params + m->ptensors[t].off, g->data, g->n, 1e-6);
        if (e > worst) worst = e;
    }
    return worst;
}

/* ... and of its BN running statistics ("buf.<bn>.running_mean/var", all required: a missing one
 * is a FAIL line and a failure) */
static inline double nt_final_bn_worst(const nn_model_t *m, const nn_tfile_t *f) {
    char what[160];
    double worst = 0, e;
    for (int i = 0; i < m->nbns; i++)
        for (int j = 0; j < 2; j++) {
            snprintf(what, sizeof what, "buf.%s.%s", m->bns[i].name, j ? "running_var" : "running_mean");
            const nn_tensor_t *g = nn_tfile_find(f, what);
            if (!g) {
                printf("FAIL %s missing\n", what);
                nt_fail++;
                continue;
            }
            e = nt_relerr(m->bn_stats + m->bns[i].off + (j ? m->bns[i].c : 0), g->data, g->n, 1e-6);
            if (e > worst) worst = e;
        }
    return worst;
}

/* A PyTorch reference-state file (trainer/ref/make_ref.py): the model description, input, labels or
 * targets, lengths, hyper-parameters, step losses, and tt[i] = 3 x PyTorch's own fp32 error of
 * check i (0 if not recorded). Prints FAIL and returns 1 if the file is unreadable or incomplete. */
typedef struct {
    char path[512];
    nn_tfile_t *f;
    const char *desc;
    const nn_tensor_t *x, *lab, *tg, *len, *hy, *sl;
    int N;
    double tt[6];
    int *labels, *lens; /* nt_ref_batch: labels and lengths as int */
} nt_ref_t;

static inline int nt_ref_open(nt_ref_t *r, const char *dir, const char *file) {
    char err[512];
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s/%s", dir, file);
    r->f = nn_tfile_load(r->path, err, sizeof err);
    if (!r->f) {
        printf("FAIL %s\n", err);
        return 1;
    }
    for (int i = 0; i < r->f->count; i++)
        if (!strncmp(r->f->t[i].name, "desc=", 5)) r->desc = r->f->t[i].name + 5;
    r->x = nn_tfile_find(r->f, "x");
    r->lab = nn_tfile_find(r->f, "labels");
    r->tg = nn_tfile_find(r->f, "targets");
    r->len = nn_tfile_find(r->f, "lengths");
    r->hy = nn_tfile_find(r->f, "hyper");
    r->sl = nn_tfile_find(r->f, "step_losses");
    if (!r->desc || !r->x || !r->hy || !r->sl || !(r->lab || r->tg)) {
        printf("FAIL %s: incomplete reference file\n", r->path);
        nn_tfile_free(r->f);
        return 1;
    }
    r->N = r->x->shape[0];
    const nn_tensor_t *t32 = nn_tfile_find(r->f, "torch32_err");
    for (int i = 0; t32 && i < 6 && i < (int)t32->n; i++) r->tt[i] = 3.0 * t32->data[i];
    return 0;
}

static inline void nt_ref_close(nt_ref_t *r) {
    nn_tfile_free(r->f);
    free(r->labels);
    free(r->lens);
    r->f = NULL;
    r->labels = r->lens = NULL;
}

/* Copies the reference parameters into m (host), checking that their names, shapes and order are
 * torch's named_parameters() (one FAIL line per mismatch, then one check for them all). */
static inline void nt_ref_load_params(const nt_ref_t *r, nn_model_t *m) {
    const nn_tfile_t *f = r->f;
    int fails0 = nt_fail, k = 0;
    for (int i = 0; i < f->count; i++) {
        if (strncmp(f->t[i].name, "param.", 6)) continue;
        const nn_tensor_t *t = &f->t[i];
        const nn_param_t *p = k < m->nptensors ? &m->ptensors[k] : NULL;
        if (!p || strcmp(p->name, t->name + 6) || p->n != t->n) {
            printf("FAIL parameter %d: reference %s (%zu) vs C %s (%zu)\n", k, t->name + 6, t->n,
                   p ? p->name : "-", p ? p->n : 0);
            nt_fail++;
        } else
            memcpy(m->params + p->off, t->data, t->n * sizeof(float));
        k++;
    }
    nt_check(k == m->nptensors && nt_fail == fails0, "parameter names, shapes and order", (double)k, 0);
}

/* The reference batch; b points into r (labels and lengths converted to int, freed by close). */
static inline void nt_ref_batch(nt_ref_t *r, nn_batch_t *b) {
    int N = r->N;
    r->labels = calloc(N, sizeof(int));
    r->lens = calloc(N, sizeof(int));
    for (int n = 0; n < N; n++) {
        if (r->lab) r->labels[n] = (int)r->lab->data[n];
        if (r->len) r->lens[n] = (int)r->len->data[n];
    }
    *b = (nn_batch_t){.x = r->x->data,
                      .labels = r->lab ? r->labels : NULL,
                      .targets = r->tg ? r->tg->data : NULL,
                      .lengths = r->len ? r->lens : NULL,
                      .n = N};
    b->ndim = r->x->ndim - 1;
    for (int i = 1; i < r->x->ndim; i++) b->shape[i - 1] = r->x->shape[i];
}

#endif
