/* imbalance.h -- injected load imbalance (imbalance.c): a delay model parsed from a spec
 * ("random:k=2,d=320", ...), or a schedule of such models by phase ("none@0/random:k=1,d=320@1.5ep"),
 * and the delay of (step, rank) as a pure function of the seed, so every rank can compute every
 * other rank's delay and a rerun injects the same delays. Below its users: the trainer
 * (--imbalance), pcoll-sim (sim_main.c) and trainer/ref's mirror check. */
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

/* A schedule: phases, each a model from its first step to the next phase's (the last to the run's
 * end). A spec without '@' is one phase from step 0: the model alone, as imb_parse reads it. */
#define IMB_MAX_PHASES 16
typedef struct {
    int n;                          /* phases, 1..IMB_MAX_PHASES */
    int epochs;                     /* 1: the boundaries are in epochs (imb_sched_resolve needed) */
    imb_t phase[IMB_MAX_PHASES];    /* phase i's model */
    double at[IMB_MAX_PHASES];      /* phase i's start as given: a step, or an epoch (epochs) */
    uint64_t start[IMB_MAX_PHASES]; /* phase i's first step; UINT64_MAX while an epoch is unresolved */
} imb_sched_t;
/* Parses s into *q: MODEL@START/MODEL@START/... (imbalance.c's header), or a plain model. 0, or -1
 * with a message in err naming the spec and the part that is wrong. */
int imb_sched_parse(const char *s, imb_sched_t *q, char *err, size_t errlen);
/* Resolves epoch boundaries to steps, once, at set-up: epoch E + f (0 <= f < 1) starts at step
 * E x stride + ceil(f x epoch_steps), where step E x stride is epoch E's first and a rank takes
 * epoch_steps (<= stride) steps per epoch. A no-op for boundaries in steps. 0, or -1 with a message
 * (epochs without stride > 0, or two boundaries on one step). */
int imb_sched_resolve(imb_sched_t *q, uint64_t stride, double epoch_steps, char *err, size_t errlen);
/* The model of step's phase. */
const imb_t *imb_sched_at(const imb_sched_t *q, uint64_t step);
/* imb_delay_ms of step's phase: pure in (seed, step, rank). */
double imb_sched_delay_ms(const imb_sched_t *q, uint64_t seed, uint64_t step, int rank, int P,
                          double compute_ms, double cost);

#endif
