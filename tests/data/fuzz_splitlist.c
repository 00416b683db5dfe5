/* fuzz_splitlist.c: libFuzzer target for the UCF101 list parsers: the input is classInd.txt, a
 * NUL byte, then a train/test list parsed against those classes. */
#include "trainer/data/internal.h"
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    const uint8_t *z = memchr(data, 0, size);
    size_t n1 = z ? (size_t)(z - data) : size;
    classind_t ci;
    if (classind_parse((const char *)data, n1, &ci, "classInd.txt", err, sizeof err)) return 0;
    splitlist_t sl;
    if (z && splitlist_parse((const char *)z + 1, size - n1 - 1, &ci, &sl, "trainlist01.txt", err,
                             sizeof err) == 0) {
        for (int i = 0; i < sl.n; i++)
            if (sl.labels[i] < 0 || sl.labels[i] >= ci.n || !sl.paths[i][0]) __builtin_trap();
        splitlist_free(&sl);
    }
    classind_free(&ci);
    return 0;
}
