/* ddp_imb_delays.c -- eager-train's injected delays (collectives/sim/imbalance.c) for the mirror check:
 * the delay of every (step, rank) as a JSON array of steps, each an array over the ranks, printed
 * with 17 significant digits so that trainer/ref/ddp_check.sh can require ddp_mirror.py's (trainer/ref/ddp_imbalance.py)
 * delays to be the same doubles.
 * Usage: ddp_imb_delays SPEC SEED RANKS STEPS COMPUTE_MS COST [STEPS_PER_EPOCH]   (exit 1 on a bad
 * SPEC, named; STEPS_PER_EPOCH resolves a schedule's epochs as the mirror's shard epochs do: epoch E
 * starts at step E x STEPS_PER_EPOCH) */
#include "collectives/sim/imbalance.h"
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 7 && argc != 8) {
        fprintf(stderr, "usage: ddp_imb_delays SPEC SEED RANKS STEPS COMPUTE_MS COST [STEPS_PER_EPOCH]\n");
        return 2;
    }
    imb_sched_t m;
    char err[512];
    long spe = argc == 8 ? atol(argv[7]) : 0;
    if (imb_sched_parse(argv[1], &m, err, sizeof err) ||
        imb_sched_resolve(&m, spe > 0 ? (uint64_t)spe : 0, (double)spe, err, sizeof err)) {
        fprintf(stderr, "ddp_imb_delays: %s\n", err);
        return 1;
    }
    unsigned long long seed = strtoull(argv[2], NULL, 0);
    int P = atoi(argv[3]), steps = atoi(argv[4]);
    double compute_ms = atof(argv[5]), cost = atof(argv[6]);
    if (P < 1 || steps < 0) {
        fprintf(stderr, "ddp_imb_delays: RANKS >= 1 and STEPS >= 0\n");
        return 1;
    }
    printf("[");
    for (int s = 0; s < steps; s++) {
        printf("%s[", s ? "," : "");
        for (int r = 0; r < P; r++)
            printf("%s%.17g", r ? "," : "",
                   imb_sched_delay_ms(&m, seed, (uint64_t)s, r, P, compute_ms, cost));
        printf("]");
    }
    printf("]\n");
    return 0;
}
