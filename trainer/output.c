/* output.c -- this process's stdout and stderr, as its launcher reads them (output.h). */
#include "trainer/output.h"
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int output_unread(int fd) {
    struct stat st;
    int n = 0;
    if (fstat(fd, &st)) return 0;
    if (S_ISFIFO(st.st_mode)) return ioctl(fd, FIONREAD, &n) ? 0 : n;
    if (S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode)) return ioctl(fd, TIOCOUTQ, &n) ? 0 : n;
    return 0;
}

void output_drain(double max_s) {
    fflush(stdout);
    fflush(stderr);
    const struct timespec tick = {0, 10 * 1000 * 1000};
    for (double waited = 0; waited < max_s; waited += 0.01) {
        if (output_unread(STDOUT_FILENO) <= 0 && output_unread(STDERR_FILENO) <= 0) return;
        nanosleep(&tick, NULL);
    }
}
