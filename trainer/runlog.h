/* runlog.h -- everything eager-train tells the user: the console lines (rank 0, unless --quiet)
 * and the run's JSON (results/schema/run.schema.json; rank 0 builds it). --out is written once,
 * atomically, when the run finishes; until then (and when it stops early) the record lives in a
 * partial file beside it (OUT.partial.json, rewritten at the start and at every epoch end, its
 * summary.exit "running" or why the run stopped), so a killed or failed run never replaces an
 * earlier complete --out. Functions marked collective are called by every
 * rank; the others may be called by every rank and act on rank 0 only. */
#ifndef TRAINER_RUNLOG_H
#define TRAINER_RUNLOG_H

#include "trainer/run.h"

/* What the epoch end measured, for the epoch's record and line. */
typedef struct {
    double wall, epoch_s, lr;
    double train_loss, train_top1;
    int evaluated; /* test_* hold an evaluation */
    double test_loss, test_top1, test_top5;
    double samples, steps;     /* all ranks together */
    long steps_min, steps_max; /* per rank (global epochs; shard: this rank's) */
    double fresh_fraction;
    uint64_t weights_hash;
} epoch_report_t;

void runlog_config(const run_t *r); /* the resolved configuration */
void runlog_resumed(const run_t *r);
/* Collective: hosts, PAPI counters (started here on every rank), the JSON's fixed parts and the
 * first partial file; returns on every rank after rank 0 has written it (the clocks start then). */
void runlog_open(run_t *r, int argc, char **argv);
/* A round applied (rank 0 aggregates --round-agg rounds per record); flush: the epoch's last. */
void runlog_round(run_t *r, const pcoll_record_t *rec, double lr, double wd, int epoch);
void runlog_rounds_flush(run_t *r, int epoch);
/* --log-every: progress of step s (0-based) of the epoch. */
void runlog_progress(const run_t *r, int epoch, long s, const epoch_t *e);
void runlog_switches(run_t *r, int epoch, const ctl_switch_t *sw, size_t n);
void runlog_papi_epoch(run_t *r, int epoch); /* collective */
void runlog_epoch(run_t *r, int epoch, const epoch_t *e, const epoch_report_t *rep);
/* One point of the accuracy curve (--curve-every): an evaluated snapshot. */
void runlog_curve(run_t *r, const curve_snap_t *s, double test_loss, double test_top1);
void runlog_checkpoint(const run_t *r, const char *path);
void runlog_save(run_t *r); /* rewrites the partial file (exit "running") */
/* The summary (exit: "ok" or why the run stopped) and the per-rank records, then the file:
 * exit_reason NULL: --out (and the partial file is removed); else the partial file only.
 * collective: every rank takes part (per-rank records of all); else rank 0 writes its own only.
 * Returns 0, or 1 if the file could not be written. Frees the JSON. runlog_open registers it as
 * a close hook (run.h), which is how the fatal path and the finish call it. */
int runlog_finish(run_t *r, const char *exit_reason, int collective);

#endif
