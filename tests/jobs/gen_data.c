/* gen_data.c: small data sets in the real on-disk formats, for running the experiment scripts
 * end to end (tests/jobs/scripts_test.sh). The formats are those trainer/data/README.md describes.
 *
 *   gen_data cifar10 DIR   DIR/data_batch_1..5.bin and DIR/test_batch.bin: CIFAR-10 binary
 *                          records (1 label byte 0..9 + 3072 pixel bytes, R, G, B planes of
 *                          32x32), 40 records per training file (200 samples), 40 in the test file
 *   gen_data imagenet DIR  DIR/train/<wnid>/<wnid>_<i>.JPEG (16 per class) and
 *                          DIR/val/<wnid>/ILSVRC2012_val_<n>.JPEG (4 per class), 4 classes with
 *                          ImageNet-style synset names, JPEGs of 40..70 x 36..66 pixels, baseline
 *                          quality 90 (the loader reads the class folders; ImageNet needs no lists)
 *   gen_data ucf101 DIR    DIR/classInd.txt (the first 4 UCF101 classes, CRLF line ends as the
 *                          official files), DIR/trainlist01..03.txt ("Class/v_Class_gGG_cCC.avi
 *                          label"), DIR/testlist01..03.txt ("Class/v_Class_gGG_cCC.avi"; split s
 *                          tests groups 7(s-1)+1..7s, as the official lists) and one feature
 *                          file per video, DIR/features/<Class>/v_Class_gGG_cCC.ucff (UCFF
 *                          version 1, T = 4..19 frames, F = 16 float32 features)
 *
 * Each sample carries its class in its values (a class-dependent level plus noise), so a model can
 * learn something in one epoch; the noise comes from a fixed-seed generator, so the files are the
 * same on every run. Exit 0, or 2 with a message naming the file that could not be written. */
#include "tests/data/testutil.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    CIFAR_PER_FILE = 40,
    IMNET_CLASSES = 4,
    IMNET_TRAIN = 16,
    IMNET_VAL = 4,
    UCF_CLASSES = 4,
    UCF_GROUPS = 21,
    UCF_CLIPS = 1,
    UCF_F = 16
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) { /* xorshift64*: reproducible, no libc state */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 2685821657736338717ull) >> 32);
}
static int noise(int amp) { return (int)(next_u32() % (uint32_t)(2 * amp + 1)) - amp; }
static uint8_t clamp8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

static void cifar_file(const char *dir, const char *name, int n, int first) {
    enum { REC = 1 + 3072 };
    uint8_t *buf = malloc((size_t)n * REC);
    if (!buf) {
        perror("malloc");
        exit(2);
    }
    for (int i = 0; i < n; i++) {
        uint8_t *r = buf + (size_t)i * REC;
        int label = (first + i) % 10;
        r[0] = (uint8_t)label;
        for (int c = 0; c < 3; c++) /* class c -> its own colour mix */
            for (int p = 0; p < 1024; p++)
                r[1 + c * 1024 + p] = clamp8(40 + 20 * ((label + 3 * c) % 10) + noise(30));
    }
    char *path = t_path(dir, "%s", name);
    t_write(path, buf, (size_t)n * REC);
    free(path);
    free(buf);
}

static void cifar10(const char *dir) {
    char name[32];
    for (int b = 1; b <= 5; b++) {
        snprintf(name, sizeof name, "data_batch_%d.bin", b);
        cifar_file(dir, name, CIFAR_PER_FILE, (b - 1) * CIFAR_PER_FILE);
    }
    cifar_file(dir, "test_batch.bin", CIFAR_PER_FILE, 0);
}

static void jpeg(const char *path, int cls) {
    int w = 40 + (int)(next_u32() % 31), h = 36 + (int)(next_u32() % 31);
    uint8_t *rgb = malloc((size_t)w * h * 3);
    if (!rgb) {
        perror("malloc");
        exit(2);
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) /* class k: a gradient along x or y, tinted by k */
                rgb[((size_t)y * w + x) * 3 + c] =
                    clamp8((cls % 2 ? 255 * x / w : 255 * y / h) / 2 + 60 * ((cls + c) % 3) + noise(20));
    t_write_jpeg(path, rgb, w, h, 90);
    free(rgb);
}

static void imagenet(const char *dir) {
    int val = 1;
    for (int k = 0; k < IMNET_CLASSES; k++) {
        char wnid[16];
        snprintf(wnid, sizeof wnid, "n%08d", 1440764 + 1000 * k);
        for (int i = 0; i < IMNET_TRAIN; i++) {
            char *p = t_path(dir, "train/%s/%s_%d.JPEG", wnid, wnid, 100 + i);
            jpeg(p, k);
            free(p);
        }
        for (int i = 0; i < IMNET_VAL; i++) {
            char *p = t_path(dir, "val/%s/ILSVRC2012_val_%08d.JPEG", wnid, val++);
            jpeg(p, k);
            free(p);
        }
    }
}

static const char *UCF_NAMES[UCF_CLASSES] = {"ApplyEyeMakeup", "ApplyLipstick", "Archery", "BabyCrawling"};

static void ucff(const char *path, int cls) {
    uint32_t T = 4 + next_u32() % 16, hdr[3] = {1, T, UCF_F};
    size_t n = 16 + 4 * (size_t)T * UCF_F;
    uint8_t *b = malloc(n);
    if (!b) {
        perror("malloc");
        exit(2);
    }
    memcpy(b, "UCFF", 4);
    memcpy(b + 4, hdr, sizeof hdr); /* little-endian host (x86-64, aarch64) */
    float *x = (float *)(b + 16);
    for (uint32_t t = 0; t < T; t++)
        for (int f = 0; f < UCF_F; f++)
            x[t * UCF_F + f] = (f % UCF_CLASSES == cls ? 1.0f : 0.0f) + 0.1f * (float)noise(10);
    t_write(path, b, n);
    free(b);
}

static void ucf101(const char *dir) {
    char *text = calloc(1, 1 << 16), *p;
    if (!text) {
        perror("calloc");
        exit(2);
    }
    p = text;
    for (int k = 0; k < UCF_CLASSES; k++) p += sprintf(p, "%d %s\r\n", k + 1, UCF_NAMES[k]);
    char *path = t_path(dir, "classInd.txt");
    t_write(path, text, strlen(text));
    free(path);
    for (int k = 0; k < UCF_CLASSES; k++)
        for (int g = 1; g <= UCF_GROUPS; g++)
            for (int c = 1; c <= UCF_CLIPS; c++) {
                path = t_path(dir, "features/%s/v_%s_g%02d_c%02d.ucff", UCF_NAMES[k], UCF_NAMES[k], g, c);
                ucff(path, k);
                free(path);
            }
    for (int s = 1; s <= 3; s++)
        for (int test = 0; test <= 1; test++) {
            p = text;
            for (int k = 0; k < UCF_CLASSES; k++)
                for (int g = 1; g <= UCF_GROUPS; g++) {
                    if ((g > 7 * (s - 1) && g <= 7 * s) != test) continue;
                    for (int c = 1; c <= UCF_CLIPS; c++) {
                        p += sprintf(p, "%s/v_%s_g%02d_c%02d.avi", UCF_NAMES[k], UCF_NAMES[k], g, c);
                        p += test ? sprintf(p, "\r\n") : sprintf(p, " %d\r\n", k + 1);
                    }
                }
            path = t_path(dir, "%slist%02d.txt", test ? "test" : "train", s);
            t_write(path, text, strlen(text));
            free(path);
        }
    free(text);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s cifar10|imagenet|ucf101 DIR  (small data sets in the real formats)\n",
                argv[0]);
        return 2;
    }
    t_mkdirs(argv[2]);
    if (!strcmp(argv[1], "cifar10"))
        cifar10(argv[2]);
    else if (!strcmp(argv[1], "imagenet"))
        imagenet(argv[2]);
    else if (!strcmp(argv[1], "ucf101"))
        ucf101(argv[2]);
    else {
        fprintf(stderr, "gen_data: unknown data set '%s' (cifar10, imagenet, ucf101)\n", argv[1]);
        return 2;
    }
    return 0;
}
