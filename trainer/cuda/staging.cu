// staging.cu: what crosses between host and device: batch checks (nn_check_batch, shared with
// the CPU backend), the input's trip through pinned staging buffers, the loss/top-k results,
// and the synchronous host <-> device copies of the API.  Every copy runs on the model's stream.
#include "trainer/cuda/nn_cuda_impl.h"

namespace nncu {

int copy_sync(nn_cuda_model_t *m, void *dst, const void *src, size_t bytes) {
    if (!bytes) return NN_OK;
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, m->st));
    CK(cudaStreamSynchronize(m->st));
    return NN_OK;
}

int check_batch(nn_cuda_model_t *m, const nn_batch_t *b, int *T) {
    return nn_check_batch(b, m->max_batch, m->in_ndim, m->in_shape, m->task, m->nout, m->desc, T, m->err,
                          sizeof m->err);
}

/* batch -> device (enqueued): through the pinned staging buffers (a host memcpy, then the copy),
 * or with direct_in straight from the caller's arrays (cudaMemcpyDefault: asynchronous from
 * page-locked memory, also correct from pageable or device memory).  Either way the caller's
 * arrays are read before the step's results come back (finish_results waits for the stream). */
int stage_batch(nn_cuda_model_t *m, const nn_batch_t *b, int T) {
    int N = b->n, cls = m->task == NN_TASK_CLASSIFY;
    size_t nx = m->in_ndim == 2 ? (size_t)N * T * m->in_shape[1] : (size_t)N * m->in_per;
    size_t ny = cls ? sizeof(int) * N : sizeof(float) * N * m->nout;
    const void *x = b->x, *y = cls ? (const void *)b->labels : (const void *)b->targets;
    cudaMemcpyKind kind = cudaMemcpyDefault;
    if (!m->direct_in) {
        CK(cudaStreamSynchronize(m->st)); /* the staging buffers may still be read by a previous copy */
        void *sy = cls ? (void *)m->stage_lab : (void *)m->stage_tgt;
        memcpy(m->stage, x, nx * sizeof(float));
        memcpy(sy, y, ny);
        x = m->stage, y = sy, kind = cudaMemcpyHostToDevice;
    }
    CK(cudaMemcpyAsync(ACT(m, 0), x, nx * sizeof(float), kind, m->st));
    CK(cudaMemcpyAsync(cls ? (void *)m->labels_d : (void *)m->targets_d, y, ny, kind, m->st));
    if (m->in_ndim == 2) memcpy(m->lens_h, b->lengths, sizeof(int) * N);
    m->N = N;
    m->T = T;
    return NN_OK;
}

int finish_results(nn_cuda_model_t *m) {
    CK(cudaStreamSynchronize(m->st));
    m->loss = m->res_h->loss;
    m->top1 = m->task == NN_TASK_CLASSIFY ? m->res_h->top1 : 0;
    m->top5 = m->task == NN_TASK_CLASSIFY ? m->res_h->top5 : 0;
    m->have_fwd = 1;
    m->fwd_training = m->training;
    return NN_OK;
}

/* the CPU model cpu has this GPU model's parameter and BN-statistics counts */
static int same_layout(nn_cuda_model_t *m, const nn_model_t *cpu, const char *what) {
    if (cpu->nparams == m->nparams && cpu->nbn_stats == m->nbn) return NN_OK;
    seterr(m, "%s: CPU model \"%s\" has %zu parameters / %zu BN floats, GPU model %zu / %zu", what, cpu->desc,
           cpu->nparams, cpu->nbn_stats, m->nparams, m->nbn);
    return NN_ERR_ARG;
}

} // namespace nncu

extern "C" {

int nn_cuda_output(nn_cuda_model_t *m, float *dst) {
    const nn_layer_t *l = &m->layers[m->nlayers - 1];
    int K = m->slots[l->in].c;
    return copy_sync(m, dst, ACT(m, l->in), sizeof(float) * (size_t)m->N * K);
}

int nn_cuda_copy_params_to_host(nn_cuda_model_t *m, nn_model_t *cpu) {
    TRY(same_layout(m, cpu, "copy to host"));
    TRY(copy_sync(m, cpu->params, m->params, m->nparams * sizeof(float)));
    TRY(copy_sync(m, cpu->mom, m->mom, m->nparams * sizeof(float)));
    return copy_sync(m, cpu->bn_stats, m->bn_stats, m->nbn * sizeof(float));
}

int nn_cuda_copy_params_from_host(nn_cuda_model_t *m, const nn_model_t *cpu) {
    TRY(same_layout(m, cpu, "copy from host"));
    TRY(copy_sync(m, m->params, cpu->params, m->nparams * sizeof(float)));
    TRY(copy_sync(m, m->mom, cpu->mom, m->nparams * sizeof(float)));
    return copy_sync(m, m->bn_stats, cpu->bn_stats, m->nbn * sizeof(float));
}

int nn_cuda_grads_to_host(nn_cuda_model_t *m, float *dst) {
    return copy_sync(m, dst, m->grads, m->nparams * sizeof(float));
}

int nn_cuda_bn_stats_to_host(nn_cuda_model_t *m, float *dst) {
    return copy_sync(m, dst, m->bn_stats, m->nbn * sizeof(float));
}

int nn_cuda_bn_stats_from_host(nn_cuda_model_t *m, const float *src) {
    return copy_sync(m, m->bn_stats, src, m->nbn * sizeof(float));
}

} // extern "C"
