/* ddp_init_hash.c -- the initial weights' fingerprint that trainer/ref/ddp_mirror.py writes into
 * its mirror reference: the model of description DESC built and initialised from SEED as
 * eager-train does (nn_model_build), then FNV-1a 64 over the float32 bytes of every parameter in
 * order (= PyTorch's named_parameters order).
 * Usage: ddp_init_hash DESC SEED   prints "NPARAMS HASH" (hash as 16 hex digits); exit 1 on a bad
 * description or seed, named. */
#include "common/hash.h"
#include "trainer/nn/nn.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: ddp_init_hash DESC SEED   (e.g. ddp_init_hash resnet-fmnist 1)\n");
        return 2;
    }
    char *end, err[512];
    unsigned long long seed = strtoull(argv[2], &end, 0);
    if (!*argv[2] || *end) {
        fprintf(stderr, "ddp_init_hash: SEED '%s' is not an unsigned integer\n", argv[2]);
        return 1;
    }
    nn_model_t *m = nn_model_build(argv[1], 1, (uint64_t)seed, err, sizeof err);
    if (!m) {
        fprintf(stderr, "ddp_init_hash: model '%s': %s\n", argv[1], err);
        return 1;
    }
    printf("%zu %016llx\n", m->nparams,
           (unsigned long long)hash_fnv1a64(HASH_FNV1A64_BASIS, m->params, m->nparams * sizeof(float)));
    nn_model_free(m);
    return 0;
}
