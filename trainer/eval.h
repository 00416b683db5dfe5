/* eval.h -- evaluation of the current model on a data set (eval.c). */
#ifndef TRAINER_EVAL_H
#define TRAINER_EVAL_H

#include "trainer/run.h"

/* Collective: evaluation of the current model on `set`, sharded over the ranks (evaluation mode,
 * BN on the running statistics as they are); every rank gets the totals. */
void run_evaluate(run_t *r, const data_set_t *set, double *loss, double *top1, double *top5);

#endif
