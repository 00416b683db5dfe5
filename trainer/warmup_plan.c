/* warmup_plan.c -- the warm-up's shapes (warmup_plan.h): no MPI, no device. */
#include "trainer/warmup_plan.h"

int64_t warm_eval_shard(int64_t count, int rank, int P) {
    if (P < 1 || rank < 0 || rank >= P || count <= rank) return 0;
    return (count - rank + P - 1) / P;
}

/* out[0..k) extended by s unless present; -1 when out is full */
static int add(warm_shape_t *out, int k, int cap, warm_shape_t s) {
    for (int i = 0; i < k; i++)
        if (out[i].n == s.n && out[i].t == s.t && out[i].training == s.training) return k;
    return k < cap ? (out[k] = s, k + 1) : -1;
}

int warm_plan(int batch, int t_train, int t_eval, int t_model, const int64_t *eval, int neval,
              warm_shape_t *out, int cap) {
    if (batch < 1 || t_train < 1 || t_eval < 1 || t_model < 0 || neval < 0 || (neval && !eval) || !out ||
        cap < 1)
        return -1;
    if (t_model && t_train > t_model) t_train = t_model;
    if (t_model && t_eval > t_model) t_eval = t_model;
    int k = 0;
    for (int i = 0; i < neval && k >= 0; i++) {
        if (eval[i] < 0) return -1;
        if (eval[i] >= batch) k = add(out, k, cap, (warm_shape_t){batch, t_eval, 0});
    }
    for (int i = 0; i < neval && k >= 0; i++)
        if (eval[i] % batch) k = add(out, k, cap, (warm_shape_t){(int)(eval[i] % batch), t_eval, 0});
    return k < 0 ? -1 : add(out, k, cap, (warm_shape_t){batch, t_train, 1});
}
