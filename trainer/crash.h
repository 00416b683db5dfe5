/* crash.h -- a crashing rank (crash.c) says where it crashed. */
#ifndef TRAINER_CRASH_H
#define TRAINER_CRASH_H

/* After MPI_Init: a SIGSEGV, SIGBUS, SIGILL or SIGFPE prints this rank, the address, the program
 * counter, the caller of a call through a null pointer and a backtrace to stderr, then goes on to
 * the handler it replaced (Open MPI's) or the default action. Test aid: EAGER_TEST_CRASH=RANK
 * makes RANK call a null function pointer from crash_test_null_call. */
void crash_install(int rank);
void crash_test_null_call(void);
void crash_test_before_init(void); /* EAGER_TEST_CRASH=RANK:init: RANK crashes before MPI_Init */

#endif
