/* test_dev_wait.c -- the bounded wait of the device data path (collectives/dev_wait.c:
 * pcoll_dev_poll), without a GPU: scripted query functions stand in for cudaEventQuery /
 * ncclCommGetAsyncError, and a fake clock advances only when the wait sleeps. Checks: done at
 * once; "pending, pending, error X" from NCCL's asynchronous error and from the operation itself
 * name X; pending until the deadline is PCOLL_ERR_TIMEOUT at the deadline; the sleeps grow from
 * 1 us to max_sleep_s after `spin` polls; no deadline (timeout 0) waits on; pcoll_dev_env_s. */
#include "collectives/pcoll_dev.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks, fails;
static void check(int ok, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void check(int ok, int line, const char *fmt, ...) { /* counts; prints a failure with its line */
    checks++;
    if (ok) return;
    fails++;
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL test_dev_wait.c:%d: ", line);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
}
#define CHECK(c, ...) check(!!(c), __LINE__, __VA_ARGS__)

/* A script: poll i of the operation says done[i] ('p' pending, 'd' done, 'f' failed), the
 * asynchronous error query async[i] ('.' none, 'e' error); past the end, the last letter. */
typedef struct {
    const char *done, *async;
    int ndone, nasync, nsleep;
    double t, slept_max, first_sleep;
} script_t;
static char at(const char *s, int i) {
    size_t n = strlen(s);
    return s[(size_t)i < n ? (size_t)i : n - 1];
}
static int q_done(void *arg, char *why, size_t n) {
    script_t *s = arg;
    char c = at(s->done, s->ndone++);
    if (c == 'f') snprintf(why, n, "cudaEventQuery: unspecified launch failure");
    return c == 'd' ? 1 : c == 'f' ? -1 : 0;
}
static int q_async(void *arg, char *why, size_t n) {
    script_t *s = arg;
    if (at(s->async, s->nasync++) != 'e') return 0;
    snprintf(why, n, "ncclCommGetAsyncError: remote process exited or there was a network error");
    return 1;
}
static double q_now(void *arg) { return ((script_t *)arg)->t; }
static void q_sleep(void *arg, double d) {
    script_t *s = arg;
    if (!s->nsleep++) s->first_sleep = d;
    if (d > s->slept_max) s->slept_max = d;
    s->t += d;
}

static int run(script_t *s, double timeout, long spin, char *msg, size_t n) {
    pcoll_dev_poll_t p = {q_done, q_async, q_now, q_sleep, s, timeout, 1e-3, spin};
    msg[0] = 0;
    return pcoll_dev_poll(&p, "round 7 (ncclAllReduce)", msg, n);
}

int main(void) {
    char m[512];
    script_t s = {.done = "d", .async = "."};
    CHECK(run(&s, 1, 0, m, sizeof m) == PCOLL_OK && s.ndone == 1 && s.nsleep == 0, "done at once: %d polls",
          s.ndone);
    s = (script_t){.done = "p", .async = "..e"};
    int rc = run(&s, 60, 0, m, sizeof m);
    CHECK(rc == PCOLL_ERR_MPI && s.ndone == 3 &&
              strstr(m, "round 7 (ncclAllReduce): ncclCommGetAsyncError: remote"),
          "pending, pending, NCCL error: rc %d after %d polls: %s", rc, s.ndone, m);
    s = (script_t){.done = "ppf", .async = "."};
    rc = run(&s, 60, 0, m, sizeof m);
    CHECK(rc == PCOLL_ERR_MPI && s.ndone == 3 && strstr(m, "unspecified launch failure"),
          "pending, pending, failed: rc %d after %d polls: %s", rc, s.ndone, m);
    s = (script_t){.done = "p", .async = "."};
    rc = run(&s, 2.5, 0, m, sizeof m);
    CHECK(rc == PCOLL_ERR_TIMEOUT && s.t >= 2.5 && s.t < 2.5 + 2e-3 && strstr(m, "not done after 2.5 s"),
          "pending until the deadline: rc %d at t %.4f: %s", rc, s.t, m);
    CHECK(s.first_sleep == 1e-6 && s.slept_max == 1e-3, "sleeps from %g to %g s (1e-6 .. 1e-3)",
          s.first_sleep, s.slept_max);
    s = (script_t){.done = "pppppd", .async = "."};
    CHECK(run(&s, 1, 10, m, sizeof m) == PCOLL_OK && s.nsleep == 0, "spin 10: %d sleeps before done",
          s.nsleep);
    char many[3001];
    memset(many, 'p', 3000);
    many[2999] = 'd', many[3000] = 0;
    s = (script_t){.done = many, .async = "."};
    CHECK(run(&s, 0, 0, m, sizeof m) == PCOLL_OK && s.ndone == 3000 && s.t > 2,
          "no deadline: done after %d polls, %.1f s", s.ndone, s.t);
    setenv("PCOLL_TEST_S", "2.5", 1);
    CHECK(pcoll_dev_env_s("PCOLL_TEST_S", 9) == 2.5, "env 2.5");
    setenv("PCOLL_TEST_S", "x", 1);
    CHECK(pcoll_dev_env_s("PCOLL_TEST_S", 9) == 9, "env x");
    setenv("PCOLL_TEST_S", "-1", 1);
    CHECK(pcoll_dev_env_s("PCOLL_TEST_S", 9) == 9, "env -1");
    CHECK(pcoll_dev_env_s("PCOLL_TEST_UNSET", 9) == 9, "env unset");
    printf("%d checks, %d failed\n", checks, fails);
    return fails ? 1 : 0;
}
