/* batch.h -- nn's batch view of a data batch (training and evaluation). */
#ifndef TRAINER_BATCH_H
#define TRAINER_BATCH_H

#include "trainer/data/data.h"
#include "trainer/nn/nn.h"
#include <string.h>

static inline void to_batch(nn_batch_t *nb, const data_batch_t *b) {
    memset(nb, 0, sizeof *nb);
    nb->x = b->x;
    nb->labels = b->y;
    nb->targets = b->target;
    nb->lengths = b->lengths;
    nb->n = b->n;
    if (b->t_pad > 1) {
        nb->ndim = 2;
        nb->shape[0] = b->t_pad;
        nb->shape[1] = (int)(b->x_stride / (size_t)b->t_pad);
    }
}

#endif
