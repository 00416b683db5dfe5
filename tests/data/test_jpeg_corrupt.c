/* test_jpeg_corrupt.c: JPEG files that libjpeg decodes only with a warning are refused with a
 * message naming the file (generated here from one valid JPEG):
 *   truncated          the last third cut off ("premature end of data segment")
 *   extraneous bytes   garbage inserted before the EOI marker ("Corrupt JPEG data")
 *   huge header        SOF0 claims 20000x3000 pixels for a file of a few kB
 * and the untouched file decodes. */
#include "tests/data/testutil.h"
#include "trainer/data/internal.h"

static int decode(const uint8_t *b, size_t n, char *err, size_t errlen) {
    image_t img;
    int rc = jpeg_decode_mem(b, n, &img, "probe.jpg", err, errlen);
    if (rc == 0) free(img.rgb);
    return rc;
}

/* offset of the first marker 0xFF m at or after from, or 0 */
static size_t find_marker(const uint8_t *b, size_t n, uint8_t m, size_t from) {
    for (size_t i = from; i + 1 < n; i++)
        if (b[i] == 0xFF && b[i + 1] == m) return i;
    return 0;
}

int main(void) {
    char *dir = t_tmpdir(), err[512];
    int w = 64, h = 48;
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++) rgb[i] = (uint8_t)((i * 37) ^ (i >> 5)); /* busy content */
    char *p = t_path(dir, "ok.jpg");
    t_write_jpeg(p, rgb, w, h, 90);
    size_t n = 0;
    uint8_t *ok = t_read(p, &n);
    CHECK(ok && n > 200);

    /* the valid file decodes */
    CHECKF(decode(ok, n, err, sizeof err) == 0, "valid JPEG refused: %s", err);

    /* truncated */
    size_t cut = n * 2 / 3;
    err[0] = 0;
    CHECK(decode(ok, cut, err, sizeof err) != 0);
    CHECK_ERR(err, "probe.jpg", "corrupt JPEG");

    /* 64 bytes of garbage before EOI (more than the Huffman decoder reads ahead): libjpeg warns
   * "Corrupt JPEG data: N extraneous bytes before marker 0xd9" */
    enum { G = 64 };
    size_t eoi = find_marker(ok, n, 0xD9, n - 4);
    CHECK(eoi == n - 2);
    uint8_t *bad = malloc(n + G);
    memcpy(bad, ok, eoi);
    for (int i = 0; i < G; i++) bad[eoi + i] = (uint8_t)(0x11 + i);
    memcpy(bad + eoi + G, ok + eoi, n - eoi);
    err[0] = 0;
    CHECKF(decode(bad, n + G, err, sizeof err) != 0, "extraneous bytes accepted");
    CHECK_ERR(err, "probe.jpg", "extraneous");
    free(bad);

    /* huge header for a tiny file: SOF0 patched to 20000 x 3000 (60 Mpixel: under JPEG_MAX_PIXELS,
   * far over 512 pixels per byte of a file of a few kB) */
    size_t sof = find_marker(ok, n, 0xC0, 2);
    CHECK(sof > 0);
    bad = malloc(n);
    memcpy(bad, ok, n);
    /* SOF0: FF C0 len(2) precision(1) height(2) width(2) */
    bad[sof + 5] = 3000 >> 8;
    bad[sof + 6] = 3000 & 255;
    bad[sof + 7] = 20000 >> 8;
    bad[sof + 8] = 20000 & 255;
    err[0] = 0;
    CHECKF(decode(bad, n, err, sizeof err) != 0, "huge header accepted");
    CHECK_ERR(err, "probe.jpg", "20000x3000", "bytes");
    free(bad);

    free(ok);
    free(rgb);
    free(p);
    t_cleanup();
    return t_done("test_jpeg_corrupt");
}
