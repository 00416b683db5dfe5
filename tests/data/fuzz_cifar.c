/* fuzz_cifar.c: libFuzzer target for CIFAR-10: the record parser, then the whole loader
 * (input written as test_batch.bin, opened, every record loaded with augmentation). */
#include "trainer/data/internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char dir[256], path[300];
static void cleanup(void) {
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    snprintf(dir, sizeof dir, "%s/fuzz_cifar.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) abort();
    snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    size_t n;
    int ok = cifar_parse(data, size, &n, "fuzz", err, sizeof err) == 0;
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    data_spec_t sp = {.kind = DATA_CIFAR10, .path = dir, .split = DATA_TEST, .seed = size};
    data_set_t *s = data_open(&sp, err, sizeof err);
    if (!s != !ok) abort(); /* the loader agrees with the parser */
    if (!s) return 0;
    data_batch_t *b = data_batch_new(s, 4);
    for (int64_t i = 0; i < data_count(s); i += 4) {
        int64_t idx[4];
        int m = 0;
        for (; m < 4 && i + m < data_count(s); m++) idx[m] = i + m;
        if (data_load_indices(s, idx, m, 1, 1, 1, b, err, sizeof err)) abort();
        for (int k = 0; k < m; k++)
            if (b->y[k] < 0 || b->y[k] > 9) abort();
    }
    data_batch_free(b);
    data_close(s);
    return 0;
}
