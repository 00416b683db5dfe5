/* testutil.c: helpers for the trainer/data tests. */
#define _GNU_SOURCE
#include "tests/data/testutil.h"

#include <jpeglib.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

int t_failures;
static char *tmp_root;

void check_err(const char *file, int line, const char *err, ...) {
    va_list ap;
    va_start(ap, err);
    const char *s;
    while ((s = va_arg(ap, const char *)))
        if (!err || !strstr(err, s)) {
            t_failures++;
            fprintf(stderr, "%s:%d: error message \"%s\" does not mention \"%s\"\n", file, line,
                    err ? err : "(null)", s);
        }
    va_end(ap);
}

int t_done(const char *name) {
    t_cleanup();
    if (t_failures) {
        printf("%s: %d check(s) failed\n", name, t_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

char *t_tmpdir(void) {
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char *p = t_path(base, "datatest.XXXXXX");
    if (!mkdtemp(p)) {
        perror("mkdtemp");
        exit(2);
    }
    tmp_root = p;
    return p;
}

void t_cleanup(void) {
    if (!tmp_root || getenv("KEEP_TMP")) return;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", tmp_root);
    free(tmp_root);
    tmp_root = NULL;
}

char *t_path(const char *dir, const char *fmt, ...) {
    char rel[2048], *out;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    if (asprintf(&out, "%s/%s", dir, rel) < 0) exit(2);
    return out;
}

void t_mkdirs(const char *path) {
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    mkdir(p, 0755);
}

static void mkparent(const char *path) {
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    char *s = strrchr(p, '/');
    if (s) {
        *s = 0;
        t_mkdirs(p);
    }
}

void t_write(const char *path, const void *buf, size_t len) {
    mkparent(path);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f)) {
        perror(path);
        exit(2);
    }
}

void t_write_gz(const char *path, const void *buf, size_t len) {
    mkparent(path);
    gzFile g = gzopen(path, "wb");
    if (!g || gzwrite(g, buf, (unsigned)len) != (int)len || gzclose(g) != Z_OK) {
        fprintf(stderr, "gz write %s failed\n", path);
        exit(2);
    }
}

void t_write_jpeg(const char *path, const uint8_t *rgb, int w, int h, int quality) {
    mkparent(path);
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(2);
    }
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW r = (JSAMPROW)(rgb + (size_t)c.next_scanline * w * 3);
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    fclose(f);
}

uint8_t *t_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) exit(2);
    fclose(f);
    *len = (size_t)n;
    return b;
}
