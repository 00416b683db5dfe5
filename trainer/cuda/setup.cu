// setup.cu: the CUDA backend's device choice, model build (the GPU mirror of a CPU model:
// buffers, handles, descriptors) and release, TF32 switching, and its error reporting.
#include "trainer/cuda/nn_cuda_impl.h"

#include <fcntl.h>
#include <unistd.h>

namespace nncu {

void seterr(nn_cuda_model_t *m, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
}

int kcheck(nn_cuda_model_t *m, const char *what, const char *file, int line) {
    cudaError_t e = cudaGetLastError();
    const char *when = "launch";
    if (e == cudaSuccess && m->debug) {
        cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        if (cudaStreamIsCapturing(m->st, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusNone) {
            e = cudaStreamSynchronize(m->st);
            when = "execution (NN_CUDA_DEBUG)";
        }
    }
    if (e == cudaSuccess) return NN_OK;
    seterr(m, "%s:%d: kernel %s%s%s%s: %s failed: %s", file, line, what, m->cur_layer ? " (layer " : "",
           m->cur_layer ? m->cur_layer : "", m->cur_layer ? ")" : "", when, cudaGetErrorString(e));
    return NN_CUDA_ERR;
}

} // namespace nncu

extern "C" {

int nn_cuda_available(char *why, size_t n) {
    int cnt = 0;
    cudaError_t e = cudaGetDeviceCount(&cnt);
    if (e != cudaSuccess) {
        if (why) snprintf(why, n, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return 0;
    }
    if (cnt < 1) {
        if (why) snprintf(why, n, "cudaGetDeviceCount: 0 devices");
        return 0;
    }
    if (why && n) why[0] = 0;
    return cnt;
}

int nn_cuda_select_local_device(int local_rank, int local_size, char *why, size_t n) {
    char tmp[256];
    int cnt = nn_cuda_available(tmp, sizeof tmp);
    int d = nn_cuda_pick_device(local_rank, local_size, cnt, why, n);
    if (d < 0) {
        if (why && cnt < 1) snprintf(why, n, "local rank %d: %s", local_rank, tmp);
        return -1;
    }
    cudaError_t e = cudaSetDevice(d);
    if (e != cudaSuccess) {
        if (why)
            snprintf(why, n, "local rank %d: cudaSetDevice(%d): %s", local_rank, d, cudaGetErrorString(e));
        cudaGetLastError();
        return -1;
    }
    return d;
}

int nn_cuda_select_device(int local_rank, char *why, size_t n) {
    return nn_cuda_select_local_device(local_rank, local_rank < 0 ? 1 : local_rank + 1, why, n);
}

int nn_cuda_gpu_info(nn_cuda_gpu_t *g, char *why, size_t n) {
    memset(g, 0, sizeof *g);
    cudaDeviceProp p;
    if (cudaGetDevice(&g->device) != cudaSuccess || cudaGetDeviceProperties(&p, g->device) != cudaSuccess ||
        cudaGetDeviceCount(&g->visible) != cudaSuccess ||
        cudaDeviceGetPCIBusId(g->bus_id, (int)sizeof g->bus_id, g->device) != cudaSuccess) {
        if (why) snprintf(why, n, "the current GPU's properties: %s", cudaGetErrorString(cudaGetLastError()));
        return -1;
    }
    snprintf(g->name, sizeof g->name, "%s", p.name);
    const unsigned char *u = (const unsigned char *)p.uuid.bytes;
    int any = 0;
    for (int i = 0; i < 16; i++) any |= u[i];
    if (any)
        snprintf(g->uuid, sizeof g->uuid,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
                 u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    /* the node's GPUs this process could reach: /dev/nvidia<N> that open (a container or a
     * cgroup shows or allows only the job's) */
    for (int i = 0; i < 64; i++) {
        char dev[32];
        snprintf(dev, sizeof dev, "/dev/nvidia%d", i);
        int fd = open(dev, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) g->openable++, close(fd);
    }
    return 0;
}

void nn_cuda_describe(char *buf, size_t n) {
    int d = 0, rt = 0, drv = 0;
    cudaDeviceProp p;
    memset(&p, 0, sizeof p);
    if (cudaGetDevice(&d) != cudaSuccess || cudaGetDeviceProperties(&p, d) != cudaSuccess) {
        cudaGetLastError();
        snprintf(buf, n, "no CUDA device");
        return;
    }
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    snprintf(buf, n, "%s (sm_%d%d, %.1f GiB), CUDA runtime %d.%d driver %d.%d, cuDNN %zu, cuBLAS %d", p.name,
             p.major, p.minor, p.totalGlobalMem / 1073741824.0, rt / 1000, rt % 1000 / 10, drv / 1000,
             drv % 1000 / 10, cudnnGetVersion(), CUBLAS_VERSION);
}

const char *nn_cuda_error(const nn_cuda_model_t *m) { return m ? m->err : "no model"; }
double nn_cuda_loss(const nn_cuda_model_t *m) { return m->loss; }
int nn_cuda_top1(const nn_cuda_model_t *m) { return m->top1; }
int nn_cuda_top5(const nn_cuda_model_t *m) { return m->top5; }
int nn_cuda_batch(const nn_cuda_model_t *m) { return m->N; }
size_t nn_cuda_nparams(const nn_cuda_model_t *m) { return m->nparams; }
float *nn_cuda_params(nn_cuda_model_t *m) { return m->params; }
float *nn_cuda_grads(nn_cuda_model_t *m) { return m->grads; }
float *nn_cuda_momentum(nn_cuda_model_t *m) { return m->mom; }
float *nn_cuda_bn_stats(nn_cuda_model_t *m) { return m->bn_stats; }
size_t nn_cuda_nbn_stats(const nn_cuda_model_t *m) { return m->nbn; }
void *nn_cuda_stream(nn_cuda_model_t *m) { return (void *)m->st; }
void nn_cuda_set_training(nn_cuda_model_t *m, int training) { m->training = training ? 1 : 0; }

void nn_cuda_graph_stats(const nn_cuda_model_t *m, nn_cuda_graph_stats_t *s) { *s = m->gstats; }

int nn_cuda_sync(nn_cuda_model_t *m) {
    CK(cudaStreamSynchronize(m->st));
    return NN_OK;
}

void nn_cuda_model_free(nn_cuda_model_t *m) {
    if (!m) return;
    if (m->st) cudaStreamSynchronize(m->st);
    drop_graph(m);
    for (int li = 0; m->gl && li < m->nlayers; li++) {
        gl_t *g = &m->gl[li];
        if (g->xd) cudnnDestroyTensorDescriptor(g->xd);
        if (g->yd) cudnnDestroyTensorDescriptor(g->yd);
        if (g->bnd) cudnnDestroyTensorDescriptor(g->bnd);
        if (g->biasd) cudnnDestroyTensorDescriptor(g->biasd);
        if (g->wd) cudnnDestroyFilterDescriptor(g->wd);
        if (g->cd) cudnnDestroyConvolutionDescriptor(g->cd);
        if (g->pd) cudnnDestroyPoolingDescriptor(g->pd);
        cudaFree(g->saved);
        rnn_free(g->rnn);
    }
    cudaFree(m->params);
    cudaFree(m->grads);
    cudaFree(m->mom);
    cudaFree(m->bn_stats);
    cudaFree(m->decay);
    cudaFree(m->acts);
    cudaFree(m->dacts);
    cudaFree(m->ws);
    cudaFree(m->ones);
    cudaFree(m->probs);
    cudaFree(m->rowloss);
    cudaFree(m->rowtop);
    cudaFree(m->res_d);
    cudaFree(m->labels_d);
    cudaFree(m->targets_d);
    cudaFree(m->bad_d);
    cudaFree(m->blas_ws);
    cudaFreeHost(m->res_h);
    cudaFreeHost(m->stage);
    cudaFreeHost(m->stage_lab);
    cudaFreeHost(m->stage_tgt);
    cudaFreeHost(m->bad_h);
    cudaFreeHost(m->lens_h);
    if (m->blas) cublasDestroy(m->blas);
    if (m->dnn) cudnnDestroy(m->dnn);
    if (m->sgd_ev) cudaEventDestroy(m->sgd_ev);
    if (m->st) cudaStreamDestroy(m->st);
    free(m->layers);
    free(m->slots);
    free(m->pt);
    free(m->bns);
    free(m->soff);
    free(m->gl);
    free(m->dinit);
    free(m);
}

static int apply_math(nn_cuda_model_t *m) {
    BL(cublasSetMathMode(m->blas,
                         (m->tf32 & NN_CUDA_TF32_CUBLAS) ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    for (int li = 0; li < m->nlayers; li++) {
        gl_t *g = &m->gl[li];
        g->nalgo = 0;
        g->next_algo = 0;
        if (g->rnn) TRY(rnn_set_desc(m, &m->layers[li], g->rnn));
    }
    return NN_OK;
}

void nn_cuda_set_direct_input(nn_cuda_model_t *m, int on) { m->direct_in = on ? 1 : 0; }
int nn_cuda_direct_input(const nn_cuda_model_t *m) { return m->direct_in; }

void *nn_cuda_host_alloc(nn_cuda_model_t *m, size_t bytes) {
    void *p = NULL;
    if (cudaSetDevice(m->dev) != cudaSuccess ||
        cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

void nn_cuda_host_free(nn_cuda_model_t *m, void *p) {
    (void)m;
    if (p) cudaFreeHost(p);
}

int nn_cuda_set_tf32(nn_cuda_model_t *m, int tf32) {
    CK(cudaStreamSynchronize(m->st));
    drop_graph(m);
    m->graph_off = 0;
    m->tf32 = tf32 & NN_CUDA_TF32_ALL;
    return apply_math(m);
}

static int build(nn_cuda_model_t *m, const nn_model_t *c) {
    /* copy the graph */
    m->nlayers = c->nlayers;
    m->nslots = c->nslots;
    m->npt = c->nptensors;
    m->nbns = c->nbns;
    m->layers = (nn_layer_t *)malloc(sizeof(nn_layer_t) * (m->nlayers ? m->nlayers : 1));
    m->slots = (struct nn_slot *)malloc(sizeof(struct nn_slot) * (m->nslots ? m->nslots : 1));
    m->pt = (nn_param_t *)malloc(sizeof(nn_param_t) * (m->npt ? m->npt : 1));
    m->bns = (nn_bnstat_t *)malloc(sizeof(nn_bnstat_t) * (m->nbns ? m->nbns : 1));
    m->soff = (size_t *)malloc(sizeof(size_t) * (m->nslots ? m->nslots : 1));
    m->gl = (gl_t *)calloc(m->nlayers ? m->nlayers : 1, sizeof(gl_t));
    m->dinit = (unsigned char *)calloc((size_t)m->nslots + 1, 1);
    if (!m->layers || !m->slots || !m->pt || !m->bns || !m->soff || !m->gl || !m->dinit) {
        seterr(m, "out of memory");
        return NN_ERR_NOMEM;
    }
    memcpy(m->layers, c->layers, sizeof(nn_layer_t) * m->nlayers);
    memcpy(m->slots, c->slots, sizeof(struct nn_slot) * m->nslots);
    memcpy(m->pt, c->ptensors, sizeof(nn_param_t) * m->npt);
    if (m->nbns) memcpy(m->bns, c->bns, sizeof(nn_bnstat_t) * m->nbns);
    m->nparams = c->nparams;
    m->nbn = c->nbn_stats;
    m->bn_momentum = c->bn_momentum;
    m->bn_eps = c->bn_eps;
    m->task = c->task;
    m->nout = c->nout;
    m->in_ndim = c->in_ndim;
    memcpy(m->in_shape, c->in_shape, sizeof m->in_shape);
    snprintf(m->desc, sizeof m->desc, "%s", c->desc);
    m->in_per = slot_n(&m->slots[0]);
    /* device activation layout: slots only (saved state lives with the layers), 256-byte aligned */
    size_t off = 0;
    for (int s = 0; s < m->nslots; s++) {
        m->soff[s] = off;
        off += slot_n(&m->slots[s]) * (size_t)m->max_batch;
        off = (off + 63) & ~(size_t)63;
    }
    m->nacts = off ? off : 64;
    CK(cudaGetDevice(&m->device));
    CK(cudaStreamCreateWithFlags(&m->st, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&m->sgd_ev, cudaEventBlockingSync | cudaEventDisableTiming));
    DNN(cudnnCreate(&m->dnn));
    DNN(cudnnSetStream(m->dnn, m->st));
    BL(cublasCreate(&m->blas));
    BL(cublasSetStream(m->blas, m->st));
    size_t bws = (size_t)32 << 20;
    CK(cudaMalloc(&m->blas_ws, bws));
    BL(cublasSetWorkspace(m->blas, m->blas_ws, bws)); /* no allocation inside graph capture */
    size_t np = m->nparams ? m->nparams : 1, nb = m->nbn ? m->nbn : 1;
    CK(cudaMalloc(&m->params, np * sizeof(float)));
    CK(cudaMalloc(&m->grads, np * sizeof(float)));
    CK(cudaMalloc(&m->mom, np * sizeof(float)));
    CK(cudaMalloc(&m->bn_stats, nb * sizeof(float)));
    CK(cudaMalloc(&m->decay, np));
    CK(cudaMemsetAsync(m->grads, 0, np * sizeof(float), m->st));
    CK(cudaMalloc(&m->acts, m->nacts * sizeof(float)));
    CK(cudaMalloc(&m->dacts, m->nacts * sizeof(float)));
    CK(cudaMemsetAsync(m->acts, 0, m->nacts * sizeof(float), m->st));
    int MB = m->max_batch, K = m->nout > 0 ? m->nout : 1;
    CK(cudaMalloc(&m->ones, sizeof(float) * MB));
    k_fill<<<nblk(MB), 256, 0, m->st>>>(m->ones, 1.f, MB);
    KCHECK("k_fill");
    CK(cudaMalloc(&m->probs, sizeof(float) * (size_t)MB * K));
    CK(cudaMalloc(&m->rowloss, sizeof(double) * MB));
    CK(cudaMalloc(&m->rowtop, sizeof(int) * 2 * MB));
    CK(cudaMalloc(&m->res_d, sizeof(res_t)));
    CK(cudaMemsetAsync(m->res_d, 0, sizeof(res_t), m->st));
    CK(cudaMalloc(&m->labels_d, sizeof(int) * MB));
    CK(cudaMalloc(&m->targets_d, sizeof(float) * (size_t)MB * K));
    CK(cudaMalloc(&m->bad_d, sizeof(unsigned long long)));
    CK(cudaMallocHost(&m->res_h, sizeof(res_t)));
    CK(cudaMallocHost(&m->stage, sizeof(float) * m->in_per * MB));
    CK(cudaMallocHost(&m->stage_lab, sizeof(int) * MB));
    CK(cudaMallocHost(&m->stage_tgt, sizeof(float) * (size_t)MB * K));
    CK(cudaMallocHost(&m->bad_h, sizeof(unsigned long long)));
    CK(cudaMallocHost(&m->lens_h, sizeof(int) * MB));
    /* weight-decay flags per element (one kernel for the whole SGD step) */
    uint8_t *dh = (uint8_t *)calloc(np, 1);
    if (!dh) {
        seterr(m, "out of memory");
        return NN_ERR_NOMEM;
    }
    for (int t = 0; t < m->npt; t++) memset(dh + m->pt[t].off, m->pt[t].decay ? 1 : 0, m->pt[t].n);
    int rc = copy_sync(m, m->decay, dh, np);
    free(dh);
    TRY(rc);
    /* parameters, momentum, BN statistics from the CPU model */
    TRY(nn_cuda_copy_params_from_host(m, c));
    TRY(grow_ws(m, (size_t)16 << 20, "set-up"));
    /* per-layer descriptors */
    for (int li = 0; li < m->nlayers; li++) {
        nn_layer_t *l = &m->layers[li];
        gl_t *g = &m->gl[li];
        switch (l->type) {
        case L_CONV: {
            struct nn_slot *si = &m->slots[l->in], *so = &m->slots[l->out];
            DNN(cudnnCreateTensorDescriptor(&g->xd));
            DNN(cudnnCreateTensorDescriptor(&g->yd));
            DNN(cudnnCreateFilterDescriptor(&g->wd));
            DNN(cudnnSetFilter4dDescriptor(g->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, so->c, si->c, l->k,
                                           l->k));
            DNN(cudnnCreateConvolutionDescriptor(&g->cd));
            DNN(cudnnSetConvolution2dDescriptor(g->cd, l->pad, l->pad, l->s, l->s, 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
            if (l->bias) {
                DNN(cudnnCreateTensorDescriptor(&g->biasd));
                DNN(cudnnSetTensor4dDescriptor(g->biasd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, so->c, 1,
                                               1));
            }
            break;
        }
        case L_BN:
            DNN(cudnnCreateTensorDescriptor(&g->xd));
            DNN(cudnnCreateTensorDescriptor(&g->yd));
            DNN(cudnnCreateTensorDescriptor(&g->bnd));
            CK(cudaMalloc(&g->saved, sizeof(float) * 2 * m->slots[l->in].c));
            break;
        case L_MAXPOOL:
        case L_AVGPOOL:
            DNN(cudnnCreateTensorDescriptor(&g->xd));
            DNN(cudnnCreateTensorDescriptor(&g->yd));
            DNN(cudnnCreatePoolingDescriptor(&g->pd));
            /* max: gradient to one maximum per window, deterministically; average counts padding
       * (PyTorch's count_include_pad=True) */
            DNN(cudnnSetPooling2dDescriptor(g->pd,
                                            l->type == L_MAXPOOL
                                                ? CUDNN_POOLING_MAX_DETERMINISTIC
                                                : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                                            CUDNN_PROPAGATE_NAN, l->k, l->k, l->pad, l->pad, l->s, l->s));
            break;
        case L_LSTM: TRY(rnn_setup(m, li)); break;
        default: break;
        }
    }
    TRY(apply_math(m));
    CK(cudaStreamSynchronize(m->st));
    return NN_OK;
}

nn_cuda_model_t *nn_cuda_model_build(const nn_model_t *cpu, int max_batch, int tf32, char *err, size_t n) {
    if (!cpu || max_batch < 1) {
        if (err)
            snprintf(err, n, "nn_cuda_model_build: %s", !cpu ? "no CPU model" : "max_batch must be >= 1");
        return NULL;
    }
    char why[256];
    if (nn_cuda_available(why, sizeof why) < 1) {
        if (err) snprintf(err, n, "no CUDA device (%s)", why);
        return NULL;
    }
    nn_cuda_model_t *m = (nn_cuda_model_t *)calloc(1, sizeof *m);
    if (!m) {
        if (err) snprintf(err, n, "out of memory");
        return NULL;
    }
    m->max_batch = max_batch;
    m->tf32 = tf32 & NN_CUDA_TF32_ALL;
    m->training = 1;
    const char *dbg = getenv("NN_CUDA_DEBUG");
    m->debug = dbg && *dbg && strcmp(dbg, "0");
    const char *direct = getenv("NN_CUDA_DIRECT_INPUT");
    m->direct_in = direct && !strcmp(direct, "1");
    if (cudaGetDevice(&m->dev) != cudaSuccess) {
        cudaGetLastError();
        m->dev = 0;
    }
    if (build(m, cpu) != NN_OK) {
        if (err) snprintf(err, n, "GPU model \"%s\": %s", cpu->desc, m->err[0] ? m->err : "failed");
        nn_cuda_model_free(m);
        return NULL;
    }
    return m;
}
} // extern "C"
