/* crash.c -- a rank that crashes names the code that crashed it.
 *
 * On SIGSEGV, SIGBUS, SIGILL or SIGFPE the handler writes to stderr, before anything else runs:
 *
 *   eager-train: rank R: SIGSEGV at address A, pc P
 *   eager-train: rank R: pc 0 is a call through a null pointer, made from:
 *     build/bin/eager-train(+0x1c2f4)[0x55d0c8e1a2f4]
 *   eager-train: rank R: backtrace:
 *     ...frames...
 *   eager-train: rank R: addr2line -f -i -e BINARY +OFFSET names a frame's function and line
 *
 * A call through a null pointer leaves no frame of its caller for a backtrace to find (the
 * program counter is 0, nothing unwinds from there): the address the call pushed, on top of the
 * stack, is the caller, and is printed first. Then the signal goes on to the handler this one
 * replaced (Open MPI's, which prints its own report) or to the default action (the process ends
 * by the signal, with a core file where the limits allow one), so the launcher sees the same
 * failure as without it.
 *
 * Installed after MPI_Init (Open MPI installs its own handlers there). Only async-signal-safe
 * calls in the handler: write(2), backtrace(3) (loaded once at install time), signal(2),
 * raise(3).
 *
 * Test aid: EAGER_TEST_CRASH=RANK makes that rank call a null function pointer from the named
 * function crash_test_null_call, right after installing the handler (tests/trainer/crash.sh);
 * EAGER_TEST_CRASH=RANK:init before MPI_Init (tests/jobs/slurm_test.sh).
 */
#define _GNU_SOURCE
#include "trainer/crash.h"
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#define FRAMES_MAX 48

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
#define NSIG_CRASH ((int)(sizeof crash_signals / sizeof *crash_signals))
static struct sigaction previous[NSIG_CRASH];
static int crash_rank = -1;
static volatile sig_atomic_t crashing;

/* write helpers: no stdio in a signal handler */
static void put(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t k = write(STDERR_FILENO, s, n);
        if (k <= 0) return;
        s += k, n -= (size_t)k;
    }
}
static void put_uint(uintmax_t v, int base) {
    char b[32];
    int i = (int)sizeof b;
    b[--i] = 0;
    do b[--i] = "0123456789abcdef"[v % (unsigned)base], v /= (unsigned)base;
    while (v && i > 2);
    if (base == 16) b[--i] = 'x', b[--i] = '0';
    put(b + i);
}
static void prefix(void) {
    put("eager-train: rank ");
    put_uint((uintmax_t)crash_rank, 10);
    put(": ");
}

static const char *signame(int sig) {
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    default: return "signal";
    }
}

/* The program counter and, for a call through a null pointer, the address it would return to. */
static void context_pc(const void *ctx, uintptr_t *pc, uintptr_t *ret) {
    const ucontext_t *uc = ctx;
    *pc = *ret = 0;
    if (!uc) return;
#if defined(__x86_64__)
    *pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    if (*pc == 0) *ret = *(const uintptr_t *)uc->uc_mcontext.gregs[REG_RSP]; /* pushed by the call */
#elif defined(__aarch64__)
    *pc = (uintptr_t)uc->uc_mcontext.pc;
    if (*pc == 0) *ret = (uintptr_t)uc->uc_mcontext.regs[30]; /* the link register */
#endif
}

static void on_crash(int sig, siginfo_t *si, void *ctx) {
    int i = 0;
    while (i < NSIG_CRASH && crash_signals[i] != sig) i++;
    if (!crashing) {
        crashing = 1;
        uintptr_t pc, ret;
        context_pc(ctx, &pc, &ret);
        prefix();
        put(signame(sig));
        put(" at address ");
        put_uint((uintptr_t)(si ? si->si_addr : NULL), 16);
        put(", pc ");
        put_uint(pc, 16);
        put("\n");
        if (ret) {
            void *caller = (void *)(ret - 1); /* inside the call instruction, as backtraces print */
            prefix();
            put("pc 0 is a call through a null pointer, made from:\n  ");
            backtrace_symbols_fd(&caller, 1, STDERR_FILENO);
        }
        void *frames[FRAMES_MAX];
        int n = backtrace(frames, FRAMES_MAX);
        prefix();
        put("backtrace:\n");
        backtrace_symbols_fd(frames, n, STDERR_FILENO);
        prefix();
        put("addr2line -f -i -e BINARY +OFFSET names a frame's function and line\n");
    }
    /* on to the handler this one replaced, or the default action */
    if (i < NSIG_CRASH && (previous[i].sa_flags & SA_SIGINFO) && previous[i].sa_sigaction) {
        previous[i].sa_sigaction(sig, si, ctx);
        return;
    }
    if (i < NSIG_CRASH && previous[i].sa_handler != SIG_DFL && previous[i].sa_handler != SIG_IGN) {
        previous[i].sa_handler(sig);
        return;
    }
    signal(sig, SIG_DFL);                   /* the faulting instruction runs again and ends the process */
    if (si && si->si_code <= 0) raise(sig); /* sent by kill/raise: nothing to run again */
}

/* Kept out of line and named, so that the report of the test aid's crash names it. */
__attribute__((noinline)) void crash_test_null_call(void) {
    void (*volatile fn)(void) = NULL;
    fn();
    put("eager-train: EAGER_TEST_CRASH: the null call returned\n");
}

/* The test aid: rank crashes here when EAGER_TEST_CRASH names it, with ":init" for the call
 * before MPI_Init (init 1) and without for the one after (init 0). */
static void test_crash(int rank, int init) {
    const char *t = getenv("EAGER_TEST_CRASH");
    if (t && *t && (strstr(t, ":init") != NULL) == init && atoi(t) == rank) crash_test_null_call();
}

/* EAGER_TEST_CRASH=RANK:init: RANK (the launcher's rank variable) crashes before MPI_Init, where no
 * handler and no watchdog exist yet: only the launcher can end the job then. */
void crash_test_before_init(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK"); /* Open MPI */
    if (!r) r = getenv("PMI_RANK");                 /* MPICH's hydra, srun --mpi=pmi2 */
    if (!r) r = getenv("PMIX_RANK");
    if (!r) r = getenv("SLURM_PROCID");
    if (r) test_crash(atoi(r), 1);
}

void crash_install(int rank) {
    crash_rank = rank;
    void *warm[2];
    backtrace(warm, 2); /* loads the unwinder now: it may allocate, which a handler must not */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NSIG_CRASH; i++) sigaction(crash_signals[i], &sa, &previous[i]);
    test_crash(rank, 0);
}
