/* fuzz_idx.c: libFuzzer target for the Fashion-MNIST path: gzip inflate + IDX parser. */
#include "trainer/data/internal.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    uint8_t *buf = NULL;
    size_t len = size;
    const uint8_t *p = data;
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
        if (gunzip_mem(data, size, &buf, &len, (size_t)16 << 20, "fuzz.gz", err, sizeof err)) return 0;
        p = buf;
    }
    idx_t idx;
    for (int nd = 0; nd <= 3; nd += 1) {
        if (idx_parse(p, len, nd, &idx, "fuzz", err, sizeof err) == 0) {
            unsigned s = 0; /* touch the data */
            for (size_t k = 0; k < idx.count; k += 97) s += idx.data[k];
            if (s == 0xdeadbeef) abort();
        }
    }
    free(buf);
    return 0;
}
