/* output.h -- this process's stdout and stderr, as its launcher reads them (output.c). Pure POSIX:
 * no MPI. */
#ifndef TRAINER_OUTPUT_H
#define TRAINER_OUTPUT_H

/* Bytes written to fd that its reader has not read yet: a pipe's or socket's queue, a terminal's
 * output queue; 0 for a regular file, or when the count is unknown. */
int output_unread(int fd);

/* Flushes stdout and stderr, then waits until their readers (the launcher's output forwarder) have
 * read them, at most max_s seconds (a reader that never reads). For the last message before an
 * abort: MPICH's hydra drops what is still in the pipes when it ends the job, so the abort would
 * overtake the message that explains it (docs/DESIGN.md#faults-under-each-launcher). */
void output_drain(double max_s);

#endif
