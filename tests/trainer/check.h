/* check.h -- the trainer's unit tests' CHECK: counts a failed condition in `fails` (each test
 * defines `static int fails;` before including it) and prints it with a formatted reason. */
#ifndef TESTS_TRAINER_CHECK_H
#define TESTS_TRAINER_CHECK_H

#include <stdio.h>

#define CHECK(c, ...)                                                            \
    do {                                                                         \
        if (!(c)) {                                                              \
            fails++;                                                             \
            fprintf(stderr, "CHECK failed %s:%d: %s: ", __FILE__, __LINE__, #c); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

#endif
