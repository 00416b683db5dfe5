/* imbalance.h -- injected load imbalance (imbalance.c): a delay model parsed from a spec
 * ("random:k=2,d=320", ...) and the delay of (step, rank) as a pure function of the seed, so every
 * rank can compute every other rank's delay and a rerun injects the same delays. Below its users:
 * the trainer (--imbalance), pcoll-sim (sim_main.c) and trainer/ref's mirror check. */
#ifndef COLLECTIVES_SIM_IMBALANCE_H
#define COLLECTIVES_SIM_IMBALANCE_H

#include <stddef.h>
#include <stdint.h>

typedef enum { IMB_NONE, IMB_LINEAR, IMB_RANDOM, IMB_LOGNORMAL, IMB_SLOW, IMB_INHERENT } imb_kind_t;
typedef struct {
    imb_kind_t kind;
    double unit_ms, delay_ms, mean_ms, std_ms, factor;
    int k, rank;
    int busy; /* 1: the delay is computed (imb_busy_ms), not slept */
} imb_t;
/* Parses spec s (imbalance.c's header lists the models) into *m: 0, or -1 with a message naming
 * the spec in err (errlen bytes). */
int imb_parse(const char *s, imb_t *m, char *err, size_t errlen);
/* Delay in ms for (step, rank): pure. compute_ms: this step's measured compute time (slow);
 * cost: the batch's inherent cost (inherent). */
double imb_delay_ms(const imb_t *m, uint64_t seed, uint64_t step, int rank, int P, double compute_ms,
                    double cost);
/* Busy work on the calling thread until it has used ms of CPU time (its own clock, so time taken
 * from it by other processes does not count); returns the CPU ms used (0 for ms <= 0). */
double imb_busy_ms(double ms);

#endif
