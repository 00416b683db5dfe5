/* warmup.c -- the warm-up before the run's first collective (docs/DESIGN.md#warm-up): the
 * backend runs every shape of the run once (warmup_plan.h) on dummy batches, so that its one-time
 * work (cuDNN's algorithm searches, workspace sizing, the CUDA graph capture) happens while no
 * collective runs, and the ranks agree it succeeded. A backend without a warm-up (cpu) makes it
 * a no-op but for the agreement. */
#include "common/hash.h"
#include "trainer/end.h"
#include "trainer/setup.h"
#include "trainer/warmup_plan.h"
#include "trainer/watchdog.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The run's longest sequence in set (1: no sequences). */
static int longest(const data_set_t *set) {
    int d[3] = {0, 0, 0};
    return set && data_sample_shape(set, d) == 2 && d[0] > 1 ? d[0] : 1;
}

/* Zero-filled batches of the plan's shapes (labels 0, targets 0, every sequence of full length),
 * in b[0..k) over buffers from one allocation (*mem, freed by the caller); 0, or -1 (out of
 * memory). */
static int make_batches(const nn_model_t *m, const warm_shape_t *s, int k, nn_batch_t *b, void **mem) {
    size_t per[WARM_MAX_SHAPES], total = 0;
    for (int i = 0; i < k; i++) {
        per[i] = 1;
        for (int d = m->in_ndim == 2 ? 1 : 0; d < m->in_ndim; d++) per[i] *= (size_t)m->in_shape[d];
        if (m->in_ndim == 2) per[i] *= (size_t)s[i].t;
        total += (size_t)s[i].n * (per[i] + (size_t)m->nout + 2); /* x, targets, labels, lengths */
    }
    float *f = *mem = calloc(total ? total : 1, sizeof(float)); /* int and float: 4 bytes each */
    if (!f) return -1;
    for (int i = 0; i < k; i++) {
        const size_t n = (size_t)s[i].n;
        int *labels = (int *)(f + n * (per[i] + (size_t)m->nout)), *lengths = labels + n;
        for (size_t j = 0; j < n; j++) lengths[j] = s[i].t;
        b[i] = (nn_batch_t){
            .x = f, .targets = f + n * per[i], .labels = labels, .lengths = lengths, .n = s[i].n};
        if (m->in_ndim == 2) b[i].ndim = 2, b[i].shape[0] = s[i].t, b[i].shape[1] = m->in_shape[1];
        f += n * (per[i] + (size_t)m->nout + 2);
    }
    return 0;
}

/* This rank's warm-up: 0, or -1 with the reason in err; *secs its time, *fp the backend's
 * fingerprint of what it chose. The model's hash is compared before and after (internal check of
 * the warm-up's contract: parameters, momentum and BN statistics as they were). */
static int warm(run_t *r, const warm_shape_t *s, int k, double *secs, uint64_t *fp, char *err, size_t n) {
    backend_t *be = r->be;
    nn_batch_t b[WARM_MAX_SHAPES];
    int training[WARM_MAX_SHAPES];
    uint64_t h0 = 0, h1 = 0;
    void *mem = NULL;
    for (int i = 0; i < k; i++) training[i] = s[i].training;
    const double t0 = run_now();
    _Static_assert(sizeof(int) == sizeof(float), "make_batches shares one buffer");
    int rc = make_batches(r->model, s, k, b, &mem)
                 ? (snprintf(err, n, "out of memory for the dummy batches"), -1)
                 : 0;
    if (!rc) rc = be->ops->hash(be, &h0, err, n);
    if (!rc) rc = be->ops->warmup(be, b, training, k, fp, err, n);
    if (!rc) rc = be->ops->hash(be, &h1, err, n);
    if (!rc && h0 != h1)
        rc = -1, snprintf(err, n, "the warm-up changed the model (weights hash %016llx -> %016llx; internal)",
                          (unsigned long long)h0, (unsigned long long)h1);
    free(mem);
    *secs = run_now() - t0;
    return rc;
}

void run_warmup(run_t *r) {
    const cfg_t *c = &r->cfg;
    char err[1024] = "";
    int64_t ev[2] = {warm_eval_shard(data_count(r->test), r->me, r->P),
                     r->curve.test ? warm_eval_shard(data_count(r->curve.test), r->me, r->P) : 0};
    const nn_model_t *m = r->model;
    warm_shape_t s[WARM_MAX_SHAPES];
    int t_eval = longest(r->test), tc = longest(r->curve.test);
    int k = warm_plan(c->batch, longest(r->train), tc > t_eval ? tc : t_eval,
                      m->in_ndim == 2 ? m->in_shape[0] : 0, ev, 2, s, WARM_MAX_SHAPES);
    if (k < 0) snprintf(err, sizeof err, "no plan for batch %d (internal)", c->batch);
    /* the bound on work that never ends, as the controller's on a first deposit (controller.h) */
    const double deadline = r->ctl.t_first > c->t_abort ? r->ctl.t_first : c->t_abort;
    double secs = 0;
    uint64_t fp = 0;
    watch_enter_until(r, "warm-up", deadline);
    int rc = k < 0 ? -1 : r->be->ops->warmup ? warm(r, s, k, &secs, &fp, err, sizeof err) : 0;
    watch_leave(r);
    /* a rank still warming up is waited for up to the same deadline */
    watch_enter_until(r, "warm-up agreement", deadline);
    run_agree(r, rc == 0, "warm-up", err);
    struct {
        double secs;
        uint64_t fp;
    } mine = {secs, fp}, *all = r->me == 0 ? calloc((size_t)r->P, sizeof mine) : NULL;
    if (r->me == 0 && !all) run_die(r, "warm-up", "out of memory");
    MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
    watch_leave(r);
    if (r->me != 0 || !r->be->ops->warmup) return free(all);
    json_t *o = json_object(), *sec = json_array(), *fps = json_array(), *sh = json_array();
    int differ = 0;
    for (int p = 0; p < r->P; p++) {
        char hx[20];
        snprintf(hx, sizeof hx, "%016llx", (unsigned long long)all[p].fp);
        json_array_append_new(sec, json_real(all[p].secs));
        json_array_append_new(fps, json_string(hx));
        differ |= all[p].fp != all[0].fp;
    }
    for (int i = 0; i < k; i++)
        json_array_append_new(
            sh, json_pack("{s:i, s:i, s:b}", "n", s[i].n, "t", s[i].t, "training", s[i].training));
    json_object_set_new(o, "seconds", sec);
    json_object_set_new(o, "fingerprint", fps);
    json_object_set_new(o, "shapes", sh);
    r->warm_json = o;
    if (differ)
        fprintf(stderr,
                "eager-train: the ranks' warm-ups chose different algorithms (fingerprints in the run JSON's "
                "warmup.fingerprint): their step times may differ\n");
    free(all);
}
