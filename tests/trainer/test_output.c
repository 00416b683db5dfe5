/* test_output: output_drain (trainer/output.c) returns only once the reader of stderr has read
 * what was written to it, and within its bound when nobody reads.
 *   pipe      stderr a pipe whose reader starts 300 ms late: output_drain waits for it
 *   nobody    stderr a pipe nobody reads: output_drain returns after its bound, not before
 *   file      stderr a regular file: nothing to wait for */
#include "trainer/output.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fails;
#define CHECK(c, ...)                                                    \
    do {                                                                 \
        if (!(c)) {                                                      \
            fprintf(stdout, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c); \
            fprintf(stdout, __VA_ARGS__);                                \
            fputc('\n', stdout);                                         \
            fails++;                                                     \
        }                                                                \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int rd;
static atomic_int got;
static void *late_reader(void *arg) {
    (void)arg;
    usleep(300000);
    char b[4096];
    ssize_t n;
    while ((n = read(rd, b, sizeof b)) > 0) atomic_fetch_add(&got, (int)n);
    return NULL;
}

/* stderr onto a new pipe's write end; returns the read end */
static int stderr_to_pipe(void) {
    int p[2];
    if (pipe(p)) exit(2);
    dup2(p[1], STDERR_FILENO);
    close(p[1]);
    return p[0];
}

int main(void) {
    int saved = dup(STDERR_FILENO);
    char msg[2000];
    memset(msg, 'x', sizeof msg - 1);
    msg[sizeof msg - 1] = 0;

    rd = stderr_to_pipe();
    fprintf(stderr, "%s\n", msg); /* buffered or not: output_drain flushes */
    pthread_t t;
    pthread_create(&t, NULL, late_reader, NULL);
    double t0 = now();
    output_drain(5.0);
    double waited = now() - t0;
    int read_then = atomic_load(&got);
    CHECK(read_then == (int)sizeof msg,
          "pipe: the reader had read %d of %zu bytes when output_drain returned "
          "after %.3f s",
          read_then, sizeof msg, waited);
    CHECK(waited >= 0.25 && waited < 5.0, "pipe: output_drain returned after %.3f s", waited);
    dup2(saved, STDERR_FILENO); /* the reader sees the end of its pipe */
    pthread_join(t, NULL);
    close(rd);
    printf("pipe: returned %.3f s after the write, once the late reader had read it\n", waited);

    int keep = stderr_to_pipe();
    fprintf(stderr, "%s\n", msg);
    t0 = now();
    output_drain(0.5);
    waited = now() - t0;
    dup2(saved, STDERR_FILENO);
    CHECK(waited >= 0.45 && waited < 3.0, "nobody: output_drain(0.5) returned after %.3f s", waited);
    CHECK(output_unread(keep) == (int)sizeof msg, "nobody: %d bytes in the pipe, %zu written",
          output_unread(keep), sizeof msg);
    close(keep);
    printf("nobody: returned after %.3f s (bound 0.5 s)\n", waited);

    FILE *f = tmpfile();
    dup2(fileno(f), STDERR_FILENO);
    fprintf(stderr, "%s\n", msg);
    t0 = now();
    output_drain(5.0);
    waited = now() - t0;
    dup2(saved, STDERR_FILENO);
    fclose(f);
    CHECK(waited < 0.5, "file: output_drain waited %.3f s on a regular file", waited);
    printf("file: returned after %.3f s\n", waited);
    printf("%d failed\n", fails);
    return fails != 0;
}
