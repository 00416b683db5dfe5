/* trainer.h -- the trainer's hash of bytes and its injected delays (imbalance.c: a pure function
 * of seed, step and rank). The program's modules each have their own header; run.h holds the run
 * context and lists them.
 */
#ifndef TRAINER_H
#define TRAINER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* FNV-1a 64: the trainer's hash of bytes (weights, decisions, model descriptions). */
#define FNV1A64_INIT 1469598103934665603ull
static inline uint64_t fnv1a64(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* ---- imbalance injection --------------------------------------------------------------- */
typedef enum { IMB_NONE, IMB_LINEAR, IMB_RANDOM, IMB_LOGNORMAL, IMB_SLOW, IMB_INHERENT } imb_kind_t;
typedef struct {
    imb_kind_t kind;
    double unit_ms, delay_ms, mean_ms, std_ms, factor;
    int k, rank;
    int busy; /* 1: the delay is computed (imb_busy_ms), not slept */
} imb_t;
int imb_parse(const char *s, imb_t *m, char *err, size_t errlen);
/* Delay in ms for (step, rank): pure. compute_ms: this step's measured compute time (slow);
 * cost: the batch's inherent cost (inherent). */
double imb_delay_ms(const imb_t *m, uint64_t seed, uint64_t step, int rank, int P, double compute_ms,
                    double cost);
/* Busy work on the calling thread until it has used ms of CPU time (its own clock, so time taken
 * from it by other processes does not count); returns the CPU ms used (0 for ms <= 0). */
double imb_busy_ms(double ms);

#endif
