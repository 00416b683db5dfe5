// lstm.cu: the LSTM layer of the CUDA backend on cuDNN's RNN API v8 (padded variable-length
// sequences, batch-major).  When cuDNN's weight-space layout equals PyTorch's (checked at set-up)
// the parameter buffer is the weight space; otherwise weights are gathered and gradients
// scattered every step.  The layer's host-side sequence lengths change per batch, so a model with
// an LSTM is never captured into a CUDA graph (step.cu).
#include "trainer/cuda/nn_cuda_impl.h"

namespace nncu {

int rnn_set_desc(nn_cuda_model_t *m, nn_layer_t *l, rnn_t *r) {
    cudnnMathType_t mt = (m->tf32 & NN_CUDA_TF32_CUDNN) ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    DNN(cudnnSetRNNDescriptor_v8(r->desc, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
                                 CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
                                 mt, l->lstm_d, l->lstm_h, l->lstm_h, 1, r->drop,
                                 CUDNN_RNN_PADDED_IO_ENABLED));
    return NN_OK;
}

static int rnn_data_descs(nn_cuda_model_t *m, nn_layer_t *l, rnn_t *r, int N, int T, const int *lens) {
    float fill = 0.f;
    DNN(cudnnSetRNNDataDescriptor(r->xd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, T, N,
                                  l->lstm_d, lens, &fill));
    DNN(cudnnSetRNNDataDescriptor(r->yd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, T, N,
                                  l->lstm_h, lens, &fill));
    int dims[3] = {1, N, l->lstm_h}, strides[3] = {N * l->lstm_h, l->lstm_h, 1};
    DNN(cudnnSetTensorNdDescriptor(r->hd, CUDNN_DATA_FLOAT, 3, dims, strides));
    return NN_OK;
}

/* workspace and reserve for the current data descriptors (stream-ordered growth, layers.cu) */
static int rnn_reserve(nn_cuda_model_t *m, const nn_layer_t *l, rnn_t *r) {
    size_t wsz = 0, rsz = 0;
    DNN(cudnnGetRNNTempSpaceSizes(m->dnn, r->desc, CUDNN_FWD_MODE_TRAINING, r->xd, &wsz, &rsz));
    TRY(grow_ws(m, wsz, l->name));
    return grow_async(m, &r->reserve, &r->reserve_size, rsz, l->name, "LSTM reserve");
}

int rnn_setup(nn_cuda_model_t *m, int li) {
    nn_layer_t *l = &m->layers[li];
    rnn_t *r = (rnn_t *)calloc(1, sizeof(rnn_t));
    if (!r) {
        seterr(m, "out of memory");
        return NN_ERR_NOMEM;
    }
    m->gl[li].rnn = r;
    int D = l->lstm_d, H = l->lstm_h, T = l->lstm_t, MB = m->max_batch;
    DNN(cudnnCreateRNNDescriptor(&r->desc));
    DNN(cudnnCreateDropoutDescriptor(&r->drop));
    DNN(cudnnDropoutGetStatesSize(m->dnn, &r->drop_size));
    CK(cudaMalloc(&r->drop_states, r->drop_size ? r->drop_size : 1));
    DNN(cudnnSetDropoutDescriptor(r->drop, m->dnn, 0.f, r->drop_states, r->drop_size, 0ull));
    DNN(cudnnCreateRNNDataDescriptor(&r->xd));
    DNN(cudnnCreateRNNDataDescriptor(&r->yd));
    DNN(cudnnCreateTensorDescriptor(&r->hd));
    TRY(rnn_set_desc(m, l, r));
    DNN(cudnnGetRNNWeightSpaceSize(m->dnn, r->desc, &r->wsize));
    /* where cuDNN keeps each gate matrix/bias inside a weight space: compare with PyTorch's layout
   * (weight_ih (4H,D), weight_hh (4H,H), bias_ih (4H), bias_hh (4H), gates i,f,g,o = cuDNN's
   * linLayerID 0-3 (input) and 4-7 (recurrent)); if equal, the parameter buffer IS the weight
   * space (no copies); else gather/scatter per step. */
    float *base = PAR(m, l->p);
    size_t expect_m[8], expect_b[8];
    for (int id = 0; id < 8; id++) {
        expect_m[id] = id < 4 ? (size_t)id * H * D : (size_t)4 * H * D + (size_t)(id - 4) * H * H;
        expect_b[id] = (size_t)4 * H * D + (size_t)4 * H * H + (size_t)id * H;
    }
    cudnnTensorDescriptor_t md = NULL, bd = NULL;
    cudnnStatus_t cs = cudnnCreateTensorDescriptor(&md);
    if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnCreateTensorDescriptor(&bd);
    if (cs != CUDNN_STATUS_SUCCESS) {
        if (md) cudnnDestroyTensorDescriptor(md);
        seterr(m, "%s: cudnnCreateTensorDescriptor: %s", l->name, cudnnGetErrorString(cs));
        return NN_CUDA_ERR;
    }
    int same =
        r->wsize == sizeof(float) * ((size_t)4 * H * (D + H) + (size_t)8 * H) && ((uintptr_t)base % 256) == 0;
    for (int id = 0; id < 8; id++) {
        void *ma = NULL, *ba = NULL;
        cudnnStatus_t s = cudnnGetRNNWeightParams(m->dnn, r->desc, 0, r->wsize, base, id, md, &ma, bd, &ba);
        if (s != CUDNN_STATUS_SUCCESS || !ma || !ba) {
            cudnnDestroyTensorDescriptor(md);
            cudnnDestroyTensorDescriptor(bd);
            seterr(m, "%s: cudnnGetRNNWeightParams(linLayerID %d): %s", l->name, id, cudnnGetErrorString(s));
            return NN_CUDA_ERR;
        }
        r->moff[id] = (size_t)((float *)ma - base);
        r->boff[id] = (size_t)((float *)ba - base);
        same &= r->moff[id] == expect_m[id] && r->boff[id] == expect_b[id];
    }
    cudnnDestroyTensorDescriptor(md);
    cudnnDestroyTensorDescriptor(bd);
    r->alias = same;
    if (same) {
        r->wspace = base;
        r->dwspace = GRD(m, l->p);
    } else {
        CK(cudaMalloc(&r->wspace, r->wsize));
        CK(cudaMalloc(&r->dwspace, r->wsize));
    }
    CK(cudaMalloc(&r->y, sizeof(float) * (size_t)MB * T * H));
    CK(cudaMalloc(&r->dy, sizeof(float) * (size_t)MB * T * H));
    CK(cudaMemsetAsync(r->dy, 0, sizeof(float) * (size_t)MB * T * H, m->st));
    CK(cudaMalloc(&r->dx, sizeof(float) * (size_t)MB * T * D));
    CK(cudaMalloc(&r->dlens, sizeof(int32_t) * MB));
    int *lens = (int *)malloc(sizeof(int) * MB);
    if (!lens) {
        seterr(m, "out of memory");
        return NN_ERR_NOMEM;
    }
    for (int i = 0; i < MB; i++) lens[i] = T;
    int rc = rnn_data_descs(m, l, r, MB, T, lens);
    free(lens);
    TRY(rc);
    return rnn_reserve(m, l, r);
}

/* parameter buffer <-> cuDNN weight space when they are not the same memory */
static int rnn_gather(nn_cuda_model_t *m, nn_layer_t *l, rnn_t *r) {
    int H = l->lstm_h, D = l->lstm_d;
    const float *wih = PAR(m, l->p), *whh = PAR(m, l->p + 1), *bih = PAR(m, l->p + 2),
                *bhh = PAR(m, l->p + 3);
    for (int id = 0; id < 8; id++) {
        const float *src = id < 4 ? wih + (size_t)id * H * D : whh + (size_t)(id - 4) * H * H;
        size_t n = id < 4 ? (size_t)H * D : (size_t)H * H;
        CK(cudaMemcpyAsync(r->wspace + r->moff[id], src, n * sizeof(float), cudaMemcpyDeviceToDevice, m->st));
        const float *bs = id < 4 ? bih + (size_t)id * H : bhh + (size_t)(id - 4) * H;
        CK(cudaMemcpyAsync(r->wspace + r->boff[id], bs, H * sizeof(float), cudaMemcpyDeviceToDevice, m->st));
    }
    return NN_OK;
}
static int rnn_scatter_grads(nn_cuda_model_t *m, nn_layer_t *l, rnn_t *r) {
    int H = l->lstm_h, D = l->lstm_d;
    float *gih = GRD(m, l->p), *ghh = GRD(m, l->p + 1), *gbi = GRD(m, l->p + 2), *gbh = GRD(m, l->p + 3);
    for (int id = 0; id < 8; id++) {
        float *dst = id < 4 ? gih + (size_t)id * H * D : ghh + (size_t)(id - 4) * H * H;
        size_t n = id < 4 ? (size_t)H * D : (size_t)H * H;
        k_accum<<<nblk(n), 256, 0, m->st>>>(dst, r->dwspace + r->moff[id], n);
        float *bd = id < 4 ? gbi + (size_t)id * H : gbh + (size_t)(id - 4) * H;
        k_accum<<<nblk(H), 256, 0, m->st>>>(bd, r->dwspace + r->boff[id], H);
        KCHECK("k_accum (LSTM weight gradients)");
    }
    return NN_OK;
}

int lstm_fwd(nn_cuda_model_t *m, int li) {
    nn_layer_t *l = &m->layers[li];
    rnn_t *r = m->gl[li].rnn;
    TRY(rnn_data_descs(m, l, r, m->N, m->T, m->lens_h));
    TRY(rnn_reserve(m, l, r));
    CK(cudaMemcpyAsync(r->dlens, m->lens_h, sizeof(int32_t) * m->N, cudaMemcpyHostToDevice, m->st));
    if (!r->alias) TRY(rnn_gather(m, l, r));
    DNN(cudnnRNNForward(m->dnn, r->desc, CUDNN_FWD_MODE_TRAINING, r->dlens, r->xd, ACT(m, l->in), r->yd, r->y,
                        r->hd, NULL, ACT(m, l->out), r->hd, NULL, NULL, r->wsize, r->wspace, m->ws_size,
                        m->ws, r->reserve_size, r->reserve));
    return NN_OK;
}

int lstm_bwd(nn_cuda_model_t *m, int li, const float *dout) {
    nn_layer_t *l = &m->layers[li];
    rnn_t *r = m->gl[li].rnn;
    DNN(cudnnRNNBackwardData_v8(m->dnn, r->desc, r->dlens, r->yd, r->y, r->dy, r->xd, r->dx, r->hd, NULL,
                                dout, NULL, r->hd, NULL, NULL, NULL, r->wsize, r->wspace, m->ws_size, m->ws,
                                r->reserve_size, r->reserve));
    if (!r->alias) CK(cudaMemsetAsync(r->dwspace, 0, r->wsize, m->st));
    DNN(cudnnRNNBackwardWeights_v8(m->dnn, r->desc, CUDNN_WGRAD_MODE_ADD, r->dlens, r->xd, ACT(m, l->in),
                                   r->hd, NULL, r->yd, r->y, r->wsize, r->dwspace, m->ws_size, m->ws,
                                   r->reserve_size, r->reserve));
    if (!r->alias) TRY(rnn_scatter_grads(m, l, r));
    if (l->need_din) {
        float *din;
        TRY(dslot_acc(m, l->in, &din));
        size_t n = (size_t)m->N * m->T * l->lstm_d;
        k_accum<<<nblk(n), 256, 0, m->st>>>(din, r->dx, n);
        KCHECK("k_accum (LSTM input gradient)");
    }
    return NN_OK;
}

void rnn_free(rnn_t *r) {
    if (!r) return;
    if (r->desc) cudnnDestroyRNNDescriptor(r->desc);
    if (r->drop) cudnnDestroyDropoutDescriptor(r->drop);
    if (r->xd) cudnnDestroyRNNDataDescriptor(r->xd);
    if (r->yd) cudnnDestroyRNNDataDescriptor(r->yd);
    if (r->hd) cudnnDestroyTensorDescriptor(r->hd);
    cudaFree(r->drop_states);
    if (!r->alias) {
        cudaFree(r->wspace);
        cudaFree(r->dwspace);
    }
    cudaFree(r->y);
    cudaFree(r->dy);
    cudaFree(r->dx);
    cudaFree(r->reserve);
    cudaFree(r->dlens);
    free(r);
}

} // namespace nncu
