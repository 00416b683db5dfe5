/* warmup_plan.h -- the shapes the warm-up runs before the first collective (docs/DESIGN.md#warm-up):
 * a pure function of the run's batch size, its data and the model's input, so that every
 * algorithm search, workspace growth and graph capture of the run happens in the warm-up. */
#ifndef TRAINER_WARMUP_PLAN_H
#define TRAINER_WARMUP_PLAN_H

#include <stdint.h>

typedef struct {
    int n;        /* samples */
    int t;        /* sequence steps (1: data without sequences) */
    int training; /* 1: a training step (forward + backward); 0: an evaluation forward */
} warm_shape_t;

#define WARM_MAX_SHAPES 8

/* Samples of rank `rank`'s shard of an evaluation set of `count` samples over P ranks, as
 * run_evaluate's iterator deals them (data_iter_new without DATA_EVEN_SHARDS: the positions
 * rank, rank + P, ...). 0 for a bad rank or P. */
int64_t warm_eval_shard(int64_t count, int rank, int P);

/* The warm-up's shapes, in the order they are run:
 *   - evaluation forwards: a full batch (batch samples) if any shard in eval[0..neval) has one,
 *     then each distinct last partial batch (shard % batch), at t_eval steps;
 *   - one training step last: batch samples at t_train steps (training batches are always full:
 *     the last partial one is dropped), so that a graph is captured after the workspace has
 *     reached its largest size.
 * batch: --batch (>= 1). t_train, t_eval: the longest sequence of the training and evaluation
 * sets after truncation (>= 1; 1 for data without sequences), each capped at t_model (the model's
 * steps; 0: no cap). eval[i]: this rank's evaluation shards (test set, the curve's subset), each
 * >= 0 (0: nothing to evaluate). Shapes equal to an earlier one are dropped.
 * Returns the number written to out (<= cap), or -1 when an argument is out of range or out has
 * fewer than cap slots than needed. */
int warm_plan(int batch, int t_train, int t_eval, int t_model, const int64_t *eval, int neval,
              warm_shape_t *out, int cap);

#endif
