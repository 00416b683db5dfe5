// drivers.cu: forward and backward over the CPU model's layer list on the device, in the CPU
// driver's order (trainer/nn/model.c): backward in reverse layer order, activation gradients
// zeroed (or overwritten) on first use in a backward, parameter gradients accumulated.  Every
// call only enqueues on the model's stream (graph-capturable).
#include "trainer/cuda/nn_cuda_impl.h"

namespace nncu {

/* forward of layers [from, nlayers) for batch m->N (input already on the device) */
int run_forward(nn_cuda_model_t *m, int from) {
    int N = m->N;
    for (int li = from; li < m->nlayers; li++) {
        nn_layer_t *l = &m->layers[li];
        gl_t *g = &m->gl[li];
        struct nn_slot *si = l->in >= 0 ? &m->slots[l->in] : NULL;
        size_t cnt = si ? slot_n(si) * N : 0;
        TRY(set_descs(m, li, N));
        m->cur_layer = l->name;
        switch (l->type) {
        case L_INPUT: break;
        case L_CONV: TRY(conv_fwd(m, li)); break;
        case L_BN: {
            float *rs = m->bn_stats + m->bns[l->bn].off, *out = ACT(m, l->out);
            int C = si->c;
            if (m->training)
                DNN(cudnnBatchNormalizationForwardTraining(
                    m->dnn, CUDNN_BATCHNORM_SPATIAL, &ONE, &ZERO, g->xd, ACT(m, l->in), g->yd, out, g->bnd,
                    PAR(m, l->p), PAR(m, l->p + 1), (double)m->bn_momentum, rs, rs + C, (double)m->bn_eps,
                    g->saved, g->saved + C));
            else
                DNN(cudnnBatchNormalizationForwardInference(
                    m->dnn, CUDNN_BATCHNORM_SPATIAL, &ONE, &ZERO, g->xd, ACT(m, l->in), g->yd, out, g->bnd,
                    PAR(m, l->p), PAR(m, l->p + 1), rs, rs + C, (double)m->bn_eps));
            if (l->relu) {
                k_relu<<<nblk(cnt), 256, 0, m->st>>>(out, out, cnt);
                KCHECK("k_relu");
            }
            break;
        }
        case L_RELU:
            k_relu<<<nblk(cnt), 256, 0, m->st>>>(ACT(m, l->out), ACT(m, l->in), cnt);
            KCHECK("k_relu");
            break;
        case L_ADD:
            k_add<<<nblk(cnt), 256, 0, m->st>>>(ACT(m, l->out), ACT(m, l->in), ACT(m, l->in2), cnt, l->relu);
            KCHECK("k_add");
            break;
        case L_PADSUB: {
            struct nn_slot *so = &m->slots[l->out];
            size_t on = slot_n(so) * N;
            k_padsub<<<nblk(on), 256, 0, m->st>>>(ACT(m, l->out), ACT(m, l->in), N, si->c, si->h, si->w,
                                                  so->c, l->s);
            KCHECK("k_padsub");
            break;
        }
        case L_MAXPOOL:
        case L_AVGPOOL:
            DNN(cudnnPoolingForward(m->dnn, g->pd, &ONE, g->xd, ACT(m, l->in), &ZERO, g->yd, ACT(m, l->out)));
            break;
        case L_GAP: {
            int NC = N * si->c, HW = si->h * si->w;
            k_gap<<<(unsigned)(((size_t)NC * 32 + 255) / 256), 256, 0, m->st>>>(ACT(m, l->out), ACT(m, l->in),
                                                                                NC, HW);
            KCHECK("k_gap");
            break;
        }
        case L_FC: TRY(fc_fwd(m, l)); break;
        case L_LSTM: TRY(lstm_fwd(m, li)); break;
        case L_SOFTMAX_CE:
            k_softmax_ce<<<N, 128, 0, m->st>>>(m->probs, m->rowloss, m->rowtop, ACT(m, l->in), m->labels_d, N,
                                               si->c);
            k_finish<<<1, 256, 0, m->st>>>(m->res_d, m->rowloss, m->rowtop, N, (double)N);
            KCHECK("loss + k_finish");
            break;
        case L_MSE:
            k_mse_rows<<<N, 256, 0, m->st>>>(m->rowloss, ACT(m, l->in), m->targets_d, N, si->c);
            k_finish<<<1, 256, 0, m->st>>>(m->res_d, m->rowloss, NULL, N, (double)N * si->c);
            KCHECK("loss + k_finish");
            break;
        }
    }
    m->cur_layer = NULL;
    CK(cudaMemcpyAsync(m->res_h, m->res_d, sizeof(res_t), cudaMemcpyDeviceToHost, m->st));
    return NN_OK;
}

int run_backward(nn_cuda_model_t *m) {
    int N = m->N;
    memset(m->dinit, 0, (size_t)m->nslots);
    for (int li = m->nlayers - 1; li >= 0; li--) {
        nn_layer_t *l = &m->layers[li];
        if (l->type == L_INPUT) continue;
        gl_t *g = &m->gl[li];
        struct nn_slot *si = &m->slots[l->in];
        struct nn_slot *so = l->out >= 0 ? &m->slots[l->out] : NULL;
        float *dout = NULL;
        if (so) TRY(dslot_acc(m, l->out, &dout)); /* zeroed if nothing wrote it (unused output) */
        size_t cnt = slot_n(si) * N;
        TRY(set_descs(m, li, N));
        m->cur_layer = l->name;
        switch (l->type) {
        case L_INPUT: break;
        case L_CONV: TRY(conv_bwd(m, li, dout)); break;
        case L_BN: {
            int C = si->c;
            if (l->relu) {
                k_mask<<<nblk(cnt), 256, 0, m->st>>>(dout, ACT(m, l->out), cnt);
                KCHECK("k_mask");
            }
            float *din;
            int acc = 0;
            if (l->need_din)
                acc = dslot_ow(m, l->in, &din);
            else { /* BN on the raw input: cuDNN still writes dx; send it to the workspace */
                TRY(grow_ws(m, cnt * sizeof(float), l->name));
                din = (float *)m->ws;
            }
            DNN(cudnnBatchNormalizationBackward(m->dnn, CUDNN_BATCHNORM_SPATIAL, &ONE, acc ? &ONE : &ZERO,
                                                &ONE, &ONE, g->xd, ACT(m, l->in), g->yd, dout, g->xd, din,
                                                g->bnd, PAR(m, l->p), GRD(m, l->p), GRD(m, l->p + 1),
                                                (double)m->bn_eps, g->saved, g->saved + C));
            break;
        }
        case L_RELU:
            if (l->need_din) {
                float *din;
                int acc = dslot_ow(m, l->in, &din);
                k_relu_bwd<<<nblk(cnt), 256, 0, m->st>>>(din, dout, ACT(m, l->out), cnt, acc);
                KCHECK("k_relu_bwd");
            }
            break;
        case L_ADD: {
            const float *ro = l->relu ? ACT(m, l->out) : NULL;
            float *da = NULL, *db = NULL;
            int aa = 0, ab = 0;
            if (l->in2 == l->in) { /* x + x: both gradients go to the same slot */
                if (l->need_din) {
                    TRY(dslot_acc(m, l->in, &da));
                    k_add_bwd<<<nblk(cnt), 256, 0, m->st>>>(da, 1, da, 1, dout, ro, cnt);
                    KCHECK("k_add_bwd");
                }
                break;
            }
            if (l->need_din) aa = dslot_ow(m, l->in, &da);
            if (l->in2 != 0) ab = dslot_ow(m, l->in2, &db);
            if (da || db) {
                k_add_bwd<<<nblk(cnt), 256, 0, m->st>>>(da, aa, db, ab, dout, ro, cnt);
                KCHECK("k_add_bwd");
            }
            break;
        }
        case L_PADSUB:
            if (l->need_din) {
                float *din;
                TRY(dslot_acc(m, l->in, &din));
                size_t on = (size_t)N * si->c * slot_n(so) / so->c;
                k_padsub_bwd<<<nblk(on), 256, 0, m->st>>>(din, dout, N, si->c, si->h, si->w, so->c, l->s);
                KCHECK("k_padsub_bwd");
            }
            break;
        case L_MAXPOOL:
        case L_AVGPOOL:
            if (l->need_din) {
                float *din;
                int acc = dslot_ow(m, l->in, &din);
                DNN(cudnnPoolingBackward(m->dnn, g->pd, &ONE, g->yd, ACT(m, l->out), g->yd, dout, g->xd,
                                         ACT(m, l->in), acc ? &ONE : &ZERO, g->xd, din));
            }
            break;
        case L_GAP:
            if (l->need_din) {
                float *din;
                int acc = dslot_ow(m, l->in, &din);
                k_gap_bwd<<<nblk(cnt), 256, 0, m->st>>>(din, dout, N * si->c, si->h * si->w, acc);
                KCHECK("k_gap_bwd");
            }
            break;
        case L_FC: TRY(fc_bwd(m, l, dout)); break;
        case L_LSTM: TRY(lstm_bwd(m, li, dout)); break;
        case L_SOFTMAX_CE:
            if (l->need_din) {
                float *din;
                int acc = dslot_ow(m, l->in, &din);
                k_softmax_ce_bwd<<<nblk(cnt), 256, 0, m->st>>>(din, m->probs, m->labels_d, N, si->c,
                                                               1.f / (float)N, acc);
                KCHECK("k_softmax_ce_bwd");
            }
            break;
        case L_MSE:
            if (l->need_din) {
                float *din;
                int acc = dslot_ow(m, l->in, &din);
                k_mse_bwd<<<nblk(cnt), 256, 0, m->st>>>(din, ACT(m, l->in), m->targets_d, cnt,
                                                        2.f / ((float)N * si->c), acc);
                KCHECK("k_mse_bwd");
            }
            break;
        }
    }
    m->cur_layer = NULL;
    return NN_OK;
}

} // namespace nncu
