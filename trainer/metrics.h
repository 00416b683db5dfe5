/* metrics.h -- JSON pieces of a run (see metrics.c and results/schema/run.schema.json). */
#ifndef TRAINER_METRICS_H
#define TRAINER_METRICS_H

#include "collectives/pcoll.h"
#include <jansson.h>

json_t *metrics_environment(int P, char **hosts, int argc, char **argv);
/* PAPI (HAVE_PAPI builds; libpapi opened at run time): start counting on this thread (0 with the
 * reason kept for metrics_papi when unavailable); read-and-reset per epoch. */
int metrics_papi_start(void);
int metrics_papi_read(long long v[3]); /* cycles, instructions, L2 misses */
json_t *metrics_papi(int available);
#ifdef HAVE_NN_CUDA
#include "trainer/cuda/nn_cuda.h"
/* "cuda_graph" of the run JSON (rank 0's model): graph (true when every training step that could
 * be a CUDA graph was one), the counts of nn_cuda_graph_stats_t, eager_why (null or the reason). */
json_t *metrics_cuda_graph(nn_cuda_model_t *G);
#endif
/* Atomic and durable: PATH.tmp (same folder), fsync, rename over PATH, fsync of the folder; a
 * failure leaves PATH as it was. Returns 0, or -1 with a message naming the file. */
int metrics_write(json_t *root, const char *path, char *err, size_t n);

/* Aggregate of consecutive round records (rank 0 keeps one per --round-agg rounds): libpcoll's
 * summary plus the learning rate and weight decay the rounds were applied with. */
typedef struct {
    pcoll_agg_t r;
    double lr_first, lr_last, wd_sum;
} ragg_t;
void ragg_reset(ragg_t *a);
void ragg_add(ragg_t *a, const pcoll_record_t *r, double lr, double wd);
json_t *ragg_json(const ragg_t *a, int epoch);

#endif
