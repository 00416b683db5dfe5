/* testutil.h: helpers for the trainer/data tests (temp dirs, file writers, checks). */
#ifndef TESTS_DATA_TESTUTIL_H
#define TESTS_DATA_TESTUTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int t_failures;
#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            t_failures++;                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
        }                                                                         \
    } while (0)
#define CHECKF(c, ...)                                                            \
    do {                                                                          \
        if (!(c)) {                                                               \
            t_failures++;                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #c); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
        }                                                                         \
    } while (0)
/* err must mention every given substring */
#define CHECK_ERR(err, ...) check_err(__FILE__, __LINE__, err, __VA_ARGS__, (const char *)NULL)
void check_err(const char *file, int line, const char *err, ...);
int t_done(const char *name); /* prints summary, returns exit code */

char *t_tmpdir(void); /* mkdtemp under $TMPDIR; removed by t_cleanup */
void t_cleanup(void);
char *t_path(const char *dir, const char *fmt, ...); /* malloc'd dir/fmt */
void t_mkdirs(const char *path);
void t_write(const char *path, const void *buf, size_t len);
void t_write_gz(const char *path, const void *buf, size_t len);
/* JPEG of rgb[h][w][3] at the given quality */
void t_write_jpeg(const char *path, const uint8_t *rgb, int w, int h, int quality);
uint8_t *t_read(const char *path, size_t *len);
#endif
