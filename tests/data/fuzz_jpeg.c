/* fuzz_jpeg.c: libFuzzer target for the ImageNet decode path: libjpeg-turbo decode from memory,
 * then the evaluation and augmentation resamplers on the decoded image. */
#include "trainer/data/internal.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    image_t img;
    if (jpeg_decode_mem(data, size, &img, "fuzz.JPEG", err, sizeof err)) return 0;
    if (img.w < 1 || img.h < 1 || !img.rgb) abort();
    static const float m[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
    float out[3 * 16 * 16];
    image_resample(&img, 0, 0, img.w, img.h, 16, 0, m, sd, out);
    image_resample(&img, img.w / 3.0, img.h / 4.0, img.w / 2.0 + 1, img.h / 2.0 + 1, 16, 1, m, sd, out);
    free(img.rgb);
    return 0;
}
