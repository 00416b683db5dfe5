/* jpeg.c: JPEG decode (libjpeg-turbo, from memory) to 8-bit RGB, and bilinear resampling.
 * Errors longjmp out of libjpeg into a message naming the file.  Every libjpeg warning is an
 * error too: a truncated stream ("premature end of data segment"), corrupt entropy-coded data
 * ("N extraneous bytes before marker", lost sync, bogus progression): such a file would decode to
 * filler or garbage pixels, silently.  A header whose size the file cannot hold (see
 * jpeg_size_plausible) is refused before libjpeg allocates for it.  Grayscale is expanded to RGB,
 * CMYK/YCCK (Adobe, inverted) converted to RGB. */
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "trainer/data/internal.h"

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jerr_t;

/* Huffman-coded JPEG (baseline, extended, progressive) spends at least one bit per 8x8 block on
 * its DC coefficient, so W x H pixels need at least W*H/512 bytes; a header claiming more pixels
 * than 512 per byte of the whole file is not an image this file can hold.  Arithmetic coding has
 * no such floor and is not checked. */
static int jpeg_size_plausible(uint64_t w, uint64_t h, size_t len, int arith) {
    return arith || w * h <= (uint64_t)len * 512u;
}

static void on_error(j_common_ptr c) {
    jerr_t *e = (jerr_t *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jb, 1);
}

/* level -1: a warning (corrupt or truncated data): fatal here; levels >= 0 are trace output */
static void on_message(j_common_ptr c, int level) {
    jerr_t *e = (jerr_t *)c->err;
    if (level < 0) {
        c->err->format_message(c, e->msg);
        longjmp(e->jb, 1);
    }
}
static void on_output(j_common_ptr c) { (void)c; }

int jpeg_decode_mem(const uint8_t *buf, size_t len, image_t *img, const char *name, char *err,
                    size_t errlen) {
    struct jpeg_decompress_struct d;
    jerr_t je;
    /* volatile: modified between setjmp and longjmp */
    uint8_t *volatile pix = NULL;
    uint8_t *volatile row = NULL;
    img->w = img->h = 0;
    img->rgb = NULL;
    if (len < 4 || buf[0] != 0xFF || buf[1] != 0xD8)
        return derr(err, errlen, DATA_ERR_FORMAT, "%s: not a JPEG file (no SOI marker at byte offset 0)",
                    name);
    memset(&je, 0, sizeof je);
    d.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = on_error;
    je.pub.emit_message = on_message;
    je.pub.output_message = on_output;
    if (setjmp(je.jb)) {
        jpeg_destroy_decompress(&d);
        free(pix);
        free(row);
        return derr(err, errlen, DATA_ERR_FORMAT, "%s: corrupt JPEG: %s", name, je.msg);
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, (const unsigned char *)buf, (unsigned long)len);
    jpeg_read_header(&d, TRUE);
    int cmyk = d.jpeg_color_space == JCS_CMYK || d.jpeg_color_space == JCS_YCCK;
    d.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    if ((uint64_t)d.image_width * d.image_height > JPEG_MAX_PIXELS) {
        snprintf(je.msg, sizeof je.msg, "image %ux%u exceeds %u pixels", d.image_width, d.image_height,
                 JPEG_MAX_PIXELS);
        longjmp(je.jb, 1);
    }
    if (!jpeg_size_plausible(d.image_width, d.image_height, len, d.arith_code)) {
        snprintf(je.msg, sizeof je.msg,
                 "header claims %ux%u pixels but the file has only %zu bytes "
                 "(a Huffman-coded JPEG needs at least one byte per 512 pixels)",
                 d.image_width, d.image_height, len);
        longjmp(je.jb, 1);
    }
    jpeg_start_decompress(&d);
    int w = (int)d.output_width, h = (int)d.output_height, nc = d.output_components;
    if ((nc != 3 && !cmyk) || (cmyk && nc != 4)) {
        snprintf(je.msg, sizeof je.msg, "unsupported output components %d", nc);
        longjmp(je.jb, 1);
    }
    pix = malloc((size_t)w * h * 3);
    row = malloc((size_t)w * nc);
    if (!pix || !row) {
        snprintf(je.msg, sizeof je.msg, "out of memory for %dx%d image", w, h);
        longjmp(je.jb, 1);
    }
    while (d.output_scanline < d.output_height) {
        int y = (int)d.output_scanline;
        JSAMPROW rp = row;
        if (jpeg_read_scanlines(&d, &rp, 1) != 1) {
            snprintf(je.msg, sizeof je.msg, "read_scanlines failed at row %d", y);
            longjmp(je.jb, 1);
        }
        uint8_t *o = pix + (size_t)y * w * 3;
        if (!cmyk) {
            memcpy(o, row, (size_t)w * 3);
        } else {
            for (int x = 0; x < w; x++) { /* Adobe CMYK is stored inverted: r = c*k/255 */
                const uint8_t *q = row + 4 * x;
                o[3 * x + 0] = (uint8_t)(q[0] * q[3] / 255);
                o[3 * x + 1] = (uint8_t)(q[1] * q[3] / 255);
                o[3 * x + 2] = (uint8_t)(q[2] * q[3] / 255);
            }
        }
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    free(row);
    img->w = w;
    img->h = h;
    img->rgb = pix;
    return DATA_OK;
}

void image_resample(const image_t *img, double x0, double y0, double bw, double bh, int S, int flip,
                    const float *mean, const float *std, float *out) {
    /* output pixel centre j maps to source x = x0 + (j + 0.5) * bw / S - 0.5 (half-pixel centres,
   * like align_corners=False), clamped to the image. */
    int W = img->w, H = img->h;
    int *xi = malloc(sizeof(int) * 2 * S);
    float *xf = malloc(sizeof(float) * S);
    if (!xi || !xf) { /* cannot happen for sane S; leave zeros rather than crash */
        free(xi);
        free(xf);
        memset(out, 0, sizeof(float) * 3 * S * S);
        return;
    }
    for (int j = 0; j < S; j++) {
        double sx = x0 + (j + 0.5) * bw / S - 0.5;
        if (sx < 0) sx = 0;
        if (sx > W - 1) sx = W - 1;
        int a = (int)floor(sx);
        int b = a + 1 < W ? a + 1 : W - 1;
        int jj = flip ? S - 1 - j : j;
        xi[2 * jj] = a;
        xi[2 * jj + 1] = b;
        xf[jj] = (float)(sx - a);
    }
    float sc[3], of[3];
    for (int c = 0; c < 3; c++) {
        sc[c] = 1.f / (255.f * std[c]);
        of[c] = mean[c] / std[c];
    }
    size_t plane = (size_t)S * S;
    for (int i = 0; i < S; i++) {
        double sy = y0 + (i + 0.5) * bh / S - 0.5;
        if (sy < 0) sy = 0;
        if (sy > H - 1) sy = H - 1;
        int a = (int)floor(sy);
        int b = a + 1 < H ? a + 1 : H - 1;
        float fy = (float)(sy - a);
        const uint8_t *r0 = img->rgb + (size_t)a * W * 3, *r1 = img->rgb + (size_t)b * W * 3;
        for (int j = 0; j < S; j++) {
            int p = xi[2 * j] * 3, q = xi[2 * j + 1] * 3;
            float fx = xf[j];
            for (int c = 0; c < 3; c++) {
                float top = r0[p + c] + (r0[q + c] - r0[p + c]) * fx;
                float bot = r1[p + c] + (r1[q + c] - r1[p + c]) * fx;
                float v = top + (bot - top) * fy;
                out[c * plane + (size_t)i * S + j] = v * sc[c] - of[c];
            }
        }
    }
    free(xi);
    free(xf);
}
