/* fuzz_ucff.c: libFuzzer target for the UCF101 feature-file (UCFF) header and body parsers. */
#include "trainer/data/internal.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    ucff_hdr_t h;
    /* whole file, and a header read from a file whose length is claimed larger */
    ucff_parse_header(data, size, (uint64_t)size + 4, &h, "fuzz", err, sizeof err);
    if (ucff_parse_header(data, size, size, &h, "fuzz", err, sizeof err)) return 0;
    size_t n = (size_t)h.T * h.F;
    float *x = malloc(sizeof(float) * (n ? n : 1));
    if (!x) return 0;
    int t = (int)(h.T > 3 ? h.T - 2 : h.T);
    ucff_parse_body(data, size, &h, t, x, "fuzz", err, sizeof err);
    ucff_parse_body(data, size, &h, (int)h.T, x, "fuzz", err, sizeof err);
    free(x);
    return 0;
}
