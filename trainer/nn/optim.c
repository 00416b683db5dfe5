/* optim.c: SGD with momentum (PyTorch formulation), LR schedules, NaN/Inf guards. */
#include "trainer/nn/nn_impl.h"
#include <math.h>

void nn_sgd_step_grad(nn_model_t *m, const float *grad, const nn_sgd_t *o) {
    float lr = o->lr, mu = o->momentum, gs = nn_sgd_gscale(o);
    nn_tick_t t0 = nn_prof_start();
    for (int t = 0; t < m->nptensors; t++) {
        const nn_param_t *p = &m->ptensors[t];
        float wd = (p->decay || o->wd_all) ? o->wd : 0.f;
        float *w = m->params + p->off, *v = m->mom + p->off;
        const float *g = grad + p->off;
        size_t n = p->n;
        if (o->nesterov) {
#pragma omp parallel for schedule(static) if (n > 65536)
            for (size_t i = 0; i < n; i++) {
                float gi = (gs == 1.f ? g[i] : gs * g[i]) + wd * w[i];
                v[i] = mu * v[i] + gi;
                w[i] -= lr * (gi + mu * v[i]);
            }
        } else if (gs == 1.f) { /* PyTorch's step, as its reference files were written */
#pragma omp parallel for schedule(static) if (n > 65536)
            for (size_t i = 0; i < n; i++) {
                v[i] = mu * v[i] + g[i] + wd * w[i];
                w[i] -= lr * v[i];
            }
        } else {
#pragma omp parallel for schedule(static) if (n > 65536)
            for (size_t i = 0; i < n; i++) {
                v[i] = mu * v[i] + gs * g[i] + wd * w[i];
                w[i] -= lr * v[i];
            }
        }
    }
    nn_prof_end(NP_UPDATE, 2, t0, 0);
}

void nn_sgd_share(const nn_sgd_t *in, double s, nn_sgd_t *out) {
    *out = *in;
    if (!(s > 0 && s < 1)) return;
    double mu = in->momentum, a = pow(mu, s), c = mu < 1 ? (1 - a) / (1 - mu) : s;
    out->momentum = (float)a;
    out->lr = (float)(in->lr * s);
    out->wd = (float)(in->wd * c);
    out->gscale = (float)(nn_sgd_gscale(in) * c / s);
}

void nn_sgd_step(nn_model_t *m, const nn_sgd_t *o) { nn_sgd_step_grad(m, m->grads, o); }

void nn_lr_sched_default(nn_lr_sched_t *s, double base_lr) {
    memset(s, 0, sizeof *s);
    s->base_lr = base_lr;
    s->warmup_start_lr = -1;
    s->gamma = 0.1;
}

double nn_lr_at(const nn_lr_sched_t *s, double epoch) {
    double peak = s->base_lr;
    if (s->base_batch > 0 && s->global_batch > 0) peak *= (double)s->global_batch / s->base_batch;
    if (s->warmup_epochs > 0 && epoch < s->warmup_epochs) {
        double a = s->warmup_start_lr >= 0 ? s->warmup_start_lr : s->base_lr;
        return a + (peak - a) * (epoch / s->warmup_epochs);
    }
    double lr = peak;
    for (int i = 0; i < s->nmilestones; i++)
        if (epoch >= s->milestones[i]) lr *= s->gamma;
    return lr;
}

int nn_check_finite_buf(const float *g, size_t n, const char *what, long step, char *err, size_t errlen) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(g[i])) {
            if (err)
                snprintf(err, errlen,
                         "step %ld: %s in %s at index %zu; stopping (lower the learning rate or check the "
                         "input data)",
                         step, isnan(g[i]) ? "NaN" : "Inf", what, i);
            return NN_ERR_NONFINITE;
        }
    return NN_OK;
}

int nn_check_finite(const nn_model_t *m, long step, char *err, size_t errlen) {
    if (!isfinite(m->loss)) {
        if (err)
            snprintf(err, errlen,
                     "step %ld: loss is %s; stopping (lower the learning rate or check the input data)", step,
                     isnan(m->loss) ? "NaN" : "Inf");
        return NN_ERR_NONFINITE;
    }
    for (int t = 0; t < m->nptensors; t++) {
        const nn_param_t *p = &m->ptensors[t];
        char what[96];
        snprintf(what, sizeof what, "gradient of %s", p->name);
        int rc = nn_check_finite_buf(m->grads + p->off, p->n, what, step, err, errlen);
        if (rc) return rc;
    }
    return NN_OK;
}
