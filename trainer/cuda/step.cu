// step.cu: the training step of the CUDA backend (eager, or captured once into a CUDA graph and
// replayed), SGD, the finite check.  See nn_cuda.h for the contracts.
#include "common/hash.h"
#include "trainer/cuda/nn_cuda_impl.h"

namespace nncu {

void drop_graph(nn_cuda_model_t *m) {
    if (m->gexec) cudaGraphExecDestroy(m->gexec);
    if (m->graph) cudaGraphDestroy(m->graph);
    m->gexec = NULL;
    m->graph = NULL;
    memset(&m->gkey, 0, sizeof m->gkey);
    m->warmN = 0;
}

/* Backward needs the batch statistics of a training-mode forward (cuDNN's saved mean and inverse
 * std): refused in evaluation mode, as the CPU backend refuses it. */
static int refuse_eval_bn(nn_cuda_model_t *m, int training, const char *what) {
    if (training) return NN_OK;
    for (int li = 0; li < m->nlayers; li++)
        if (m->layers[li].type == L_BN) {
            seterr(m, "%s in evaluation mode (BN uses running statistics); call nn_cuda_set_training(m, 1)%s",
                   what, m->training ? " and run a forward" : "");
            return NN_ERR_ARG;
        }
    return NN_OK;
}

/* the failure a void call kept (nn_cuda_zero_grad), once */
static int take_sticky(nn_cuda_model_t *m) {
    int rc = m->sticky;
    m->sticky = 0;
    return rc;
}

/* zero_grad + forward + backward of the staged batch, not captured */
static int eager_step(nn_cuda_model_t *m) {
    CK(cudaMemsetAsync(m->grads, 0, m->nparams * sizeof(float), m->st));
    TRY(run_forward(m, 1));
    TRY(run_backward(m));
    return finish_results(m);
}

/* captures zero_grad + forward + backward of the staged batch into m->gexec (not run) */
static int capture(nn_cuda_model_t *m, const nn_cuda_graph_key_t *key) {
    CK(cudaStreamSynchronize(m->st));
    CK(cudaStreamBeginCapture(m->st, cudaStreamCaptureModeThreadLocal));
    cudaError_t e = cudaMemsetAsync(m->grads, 0, m->nparams * sizeof(float), m->st);
    int rc = e == cudaSuccess ? (int)NN_OK : (int)NN_CUDA_ERR;
    if (rc) seterr(m, "cudaMemsetAsync (gradients) in capture: %s", cudaGetErrorString(e));
    if (!rc) rc = run_forward(m, 1);
    if (!rc) rc = run_backward(m);
    cudaGraph_t gr = NULL;
    cudaGraphExec_t ge = NULL;
    e = cudaStreamEndCapture(m->st, &gr);
    if (!rc && e == cudaSuccess) e = cudaGraphInstantiate(&ge, gr, 0);
    if (rc || e != cudaSuccess) {
        if (gr) cudaGraphDestroy(gr);
        cudaGetLastError();
        if (!rc) seterr(m, "%s", cudaGetErrorString(e));
        return rc ? rc : (int)NN_CUDA_ERR;
    }
    m->graph = gr;
    m->gexec = ge;
    m->gkey = *key;
    m->gstats.captures++;
    return NN_OK;
}

} // namespace nncu

extern "C" {

void nn_cuda_zero_grad(nn_cuda_model_t *m) {
    cudaError_t e = cudaMemsetAsync(m->grads, 0, m->nparams * sizeof(float), m->st);
    if (e != cudaSuccess && !m->sticky) {
        seterr(m, "nn_cuda_zero_grad: cudaMemsetAsync: %s", cudaGetErrorString(e));
        m->sticky = NN_CUDA_ERR;
    }
}

int nn_cuda_forward(nn_cuda_model_t *m, const nn_batch_t *b) {
    int T = 0;
    TRY(take_sticky(m));
    TRY(check_batch(m, b, &T));
    TRY(stage_batch(m, b, T));
    TRY(run_forward(m, 1));
    return finish_results(m);
}

int nn_cuda_backward(nn_cuda_model_t *m) {
    TRY(take_sticky(m));
    if (!m->have_fwd || m->N < 1) {
        seterr(m, "nn_cuda_backward without a forward");
        return NN_ERR_ARG;
    }
    TRY(refuse_eval_bn(m, m->training && m->fwd_training, "nn_cuda_backward"));
    return run_backward(m);
}

/* The first step at a batch size runs eagerly (algorithm search, workspace growth), the second is
 * captured and replayed, later ones replay while nn_cuda_graph_replayable holds; an invalidated
 * graph is dropped and the cycle starts again.  A failed capture is reported once on stderr and
 * in nn_cuda_graph_stats, and the model stays eager. */
int nn_cuda_step_graph(nn_cuda_model_t *m, const nn_batch_t *b) {
    int T = 0;
    TRY(take_sticky(m));
    if (!b && m->N < 1) {
        seterr(m, "nn_cuda_step_graph(NULL): no batch on the device yet (pass one first)");
        return NN_ERR_ARG;
    }
    if (b) TRY(check_batch(m, b, &T));
    TRY(refuse_eval_bn(m, m->training, "nn_cuda_step_graph"));
    int has_lstm = 0;
    for (int li = 0; li < m->nlayers; li++) has_lstm |= m->layers[li].type == L_LSTM;
    if (b) TRY(stage_batch(m, b, T));
    nn_cuda_graph_stats_t *gs = &m->gstats;
    if (has_lstm || !m->training) {
        gs->warm_steps++;
        return eager_step(m);
    }
    if (!m->graph_off && getenv("NN_CUDA_NO_GRAPH")) {
        m->graph_off = 1;
        snprintf(gs->eager_why, sizeof gs->eager_why, "NN_CUDA_NO_GRAPH is set");
    }
    if (m->graph_off) {
        gs->eager_steps++;
        return eager_step(m);
    }
    nn_cuda_graph_key_t now = {m->N, m->tf32, m->ws_gen};
    if (m->gexec && !nn_cuda_graph_replayable(&m->gkey, &now)) {
        drop_graph(m);
        gs->invalidations++;
    }
    if (!m->gexec && m->warmN != m->N) {
        TRY(eager_step(m));
        m->warmN = m->N;
        gs->warm_steps++;
        return NN_OK;
    }
    if (!m->gexec) {
        int rc = capture(m, &now);
        if (rc) {
            snprintf(gs->eager_why, sizeof gs->eager_why,
                     "CUDA graph capture of the training step at batch %d "
                     "failed: %.180s",
                     m->N, m->err);
            fprintf(stderr, "nn_cuda: %s; this and later steps run eagerly\n", gs->eager_why);
            m->graph_off = 1;
            m->err[0] = 0;
            gs->eager_steps++;
            return eager_step(m);
        }
    }
    CK(cudaGraphLaunch(m->gexec, m->st));
    gs->graph_steps++;
    return finish_results(m);
}

/* BN statistics: saved aside on the device before the batches, written back after (see nn_cuda.h) */
int nn_cuda_warmup(nn_cuda_model_t *m, const nn_batch_t *batch, const int *training, int nb) {
    TRY(take_sticky(m));
    const int was = m->training;
    const size_t bytes = m->nbn * sizeof(float);
    float *saved = NULL;
    if (bytes) {
        CK(cudaMalloc(&saved, bytes));
        cudaError_t e = cudaMemcpyAsync(saved, m->bn_stats, bytes, cudaMemcpyDeviceToDevice, m->st);
        if (e != cudaSuccess) {
            cudaFree(saved);
            seterr(m, "warm-up: saving the BN statistics: %s", cudaGetErrorString(e));
            return NN_CUDA_ERR;
        }
    }
    int rc = NN_OK;
    for (int i = 0; i < nb && !rc; i++) {
        m->training = training[i] ? 1 : 0;
        rc = training[i] ? nn_cuda_step_graph(m, &batch[i]) : nn_cuda_forward(m, &batch[i]);
        if (!rc && training[i]) rc = nn_cuda_step_graph(m, &batch[i]);
    }
    m->training = was;
    if (saved) {
        cudaError_t e = cudaMemcpyAsync(m->bn_stats, saved, bytes, cudaMemcpyDeviceToDevice, m->st);
        if (e == cudaSuccess) e = cudaStreamSynchronize(m->st);
        cudaFree(saved); /* the stream has passed the copy: no kernel uses it */
        if (e != cudaSuccess && !rc) {
            seterr(m, "warm-up: restoring the BN statistics: %s", cudaGetErrorString(e));
            rc = NN_CUDA_ERR;
        }
    }
    if (!rc) CK(cudaStreamSynchronize(m->st));
    m->warmed = !rc;
    return rc;
}

uint64_t nn_cuda_algo_hash(const nn_cuda_model_t *m, int N) {
    uint64_t h = HASH_FNV1A64_INIT;
    for (int li = 0; li < m->nlayers; li++) {
        if (m->layers[li].type != L_CONV) continue;
        const gl_t *g = &m->gl[li];
        for (int i = 0; i < g->nalgo; i++) {
            const algo_t *a = &g->algo[i];
            if (a->N != N) continue;
            const int v[7] = {li,
                              a->have_f ? (int)a->f : -1,
                              a->have_f ? (int)a->fm : -1,
                              a->have_d ? (int)a->d : -1,
                              a->have_d ? (int)a->dm : -1,
                              a->have_w ? (int)a->w : -1,
                              a->have_w ? (int)a->wm : -1};
            h = hash_fnv1a64(h, v, sizeof v);
        }
    }
    return h;
}

void nn_cuda_warm_stats(const nn_cuda_model_t *m, int batch, nn_cuda_warm_stats_t *s) {
    s->algo_hash = nn_cuda_algo_hash(m, batch);
    s->searches = m->searches, s->late_searches = m->late_searches;
    s->grows = m->grows, s->late_grows = m->late_grows;
    s->ws_bytes = m->ws_size;
}

int nn_cuda_sgd_step_grad(nn_cuda_model_t *m, const float *dev_grad, const nn_sgd_t *o) {
    k_sgd<<<nblk(m->nparams), 256, 0, m->st>>>(m->params, m->mom, dev_grad, m->decay, m->nparams, o->lr,
                                               o->momentum, o->wd, o->wd_all, o->nesterov, nn_sgd_gscale(o));
    KCHECK("k_sgd");
    if (dev_grad != m->grads) { /* the caller's buffer (a results-ring slot): wait until it was read */
        CK(cudaEventRecord(m->sgd_ev, m->st));
        CK(cudaEventSynchronize(m->sgd_ev));
    }
    return NN_OK;
}

int nn_cuda_sgd_step(nn_cuda_model_t *m, const nn_sgd_t *o) { return nn_cuda_sgd_step_grad(m, m->grads, o); }

int nn_cuda_check_finite(nn_cuda_model_t *m, long step, char *err, size_t n) {
    if (!isfinite(m->loss)) {
        if (err)
            snprintf(err, n,
                     "step %ld: loss is %s; stopping (lower the learning rate or check the input data)", step,
                     isnan(m->loss) ? "NaN" : "Inf");
        return NN_ERR_NONFINITE;
    }
    *m->bad_h = ~0ull;
    CK(cudaMemcpyAsync(m->bad_d, m->bad_h, sizeof *m->bad_h, cudaMemcpyHostToDevice, m->st));
    k_first_bad<<<nblk(m->nparams), 256, 0, m->st>>>(m->bad_d, m->grads, m->nparams);
    KCHECK("k_first_bad");
    CK(cudaMemcpyAsync(m->bad_h, m->bad_d, sizeof *m->bad_h, cudaMemcpyDeviceToHost, m->st));
    CK(cudaStreamSynchronize(m->st));
    unsigned long long i = *m->bad_h;
    if (i == ~0ull) return NN_OK;
    float v = 0;
    TRY(copy_sync(m, &v, m->grads + i, sizeof v));
    for (int t = 0; t < m->npt; t++)
        if (i >= m->pt[t].off && i < m->pt[t].off + m->pt[t].n) {
            if (err)
                snprintf(err, n,
                         "step %ld: %s in gradient of %s at index %zu; stopping (lower the learning rate or "
                         "check the input data)",
                         step, isnan(v) ? "NaN" : "Inf", m->pt[t].name, (size_t)(i - m->pt[t].off));
            break;
        }
    return NN_ERR_NONFINITE;
}

} // extern "C"
