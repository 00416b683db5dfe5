/* compare.h -- internal to pcoll-compare; not a library header. The tool's state is one
 * compare_t, passed to every step; no file shares a global with another.
 *
 *   compare.c         the command line: options, inputs, which outputs
 *   compare_load.c    reading run files (eager-train's and PyTorch DDP's) and benchmark files
 *   compare_keys.c    which config keys split rows, and their values
 *   compare_group.c   tables (settings) and rows (mode + imbalance + differing keys)
 *   compare_stats.c   row statistics, sync and DDP baselines, seed-paired deltas
 *   compare_print.c   the Markdown tables
 *   compare_export.c  CSV and JSON
 *   compare_plot.c    figures (gnuplot)
 *   compare_versus.c  --versus MODE: one mode against the best static mode, paired by seed
 *   compare_base.c    arena, strings, lists, JSON helpers */
#ifndef RESULTS_COMPARE_H
#define RESULTS_COMPARE_H

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* arena: every string / array the tool allocates lives until exit (compare_base.c) */
void *amalloc(size_t n);
void arena_free(void);
char *astrdup(const char *s);
char *aprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *avprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* growable string; sb_take moves it into the arena */
typedef struct {
    char *s;
    size_t n, cap;
} sbuf;
void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *sb_take(sbuf *b);

/* growable pointer list (arena-backed) */
typedef struct {
    void **v;
    int n, cap;
} plist;
void pl_push(plist *l, void *p);
int pl_find_str(const plist *l, const char *s);

/* JSON: number (NAN if absent), string (NULL if absent), config value as text ("(unset)") */
double jnum(const json_t *o, const char *k);
const char *jstr(const json_t *o, const char *k);
char *val_text(const json_t *v);

/* ---------------------------------------------------------------------------------------- */
/* data model                                                                                 */

typedef struct {
    const char *path;
    json_t *root;
    const json_t *cfg;
    const char *experiment, *data, *model, *mode, *imbalance, *policy, *exit;
    const char *ranks_s, *epochs_s, *batch_s;
    double wall, top1, top5, train_loss, test_loss, target, ttt, fresh, mstal, maxstal, streak;
    double sttt;   /* training samples applied before the point that reached the target (NAN: none) */
    int ttt_curve; /* ttt is a point of the run's accuracy curve (--curve-every), not an epoch end */
    double straggler;
    double seed;       /* config.seed (NAN if absent) */
    const char *whash; /* the last epoch's weights_hash, NULL if absent */
    const char *cpu;   /* environment.cpu (rank 0's CPU model and vector extensions), NULL if absent */
    int nw;
    double *wait;
    const char *modelabel; /* mode, or adaptive/<policy> */
    const char *extra;     /* "[lr=0.1]" when runs of the table differ in lr, else "" */
    const char *pextra;    /* extra without the keys a sync run ignores (pairing by seed) */
    int ddp;               /* a PyTorch DDP run (ddp-run/1, trainer/ref/ddp_mirror.py): mode "ddp" */
} run_t;

typedef struct {
    double mean, std;
    int n;
} stat_t;

typedef struct {
    const char *mode, *modelabel, *imbalance, *extra, *label;
    plist runs; /* run_t* */
    stat_t wall, ttt, sttt, top1, top5, train_loss, test_loss, mstal, maxstal, streak, fresh;
    int nw;
    double *wait;
    int base; /* row index of the sync baseline, -1 if none */
    double speedup, dtop1, dloss;
    int dbase;                 /* row index of the DDP baseline, -1 if none */
    double vs_ddp, ttt_vs_ddp; /* mean wall / DDP's, mean time to target / DDP's */
    stat_t pdtop1;             /* paired Δtop-1 in points: each run minus the sync run of its seed */
    stat_t psamp;              /* paired: each run's samples to target over the sync run's of its seed */
} row_t;

typedef struct {
    const char *experiment, *data, *model, *ranks_s, *epochs_s, *batch_s;
    plist runs;  /* run_t* */
    plist rows;  /* row_t* */
    plist notes; /* char* */
    int classif;
    int paired;           /* repeats and seed-paired sync runs: the paired Δ column is shown */
    int has_ddp;          /* a row of DDP runs: the "vs DDP" columns are shown */
    double target;        /* NAN if none / differing */
    int ttt_curve, ttt_n; /* runs whose time to target is a curve point; runs that reached it */
} group_t;

typedef struct {
    const char *path;
    json_t *root;
} bench_t;

/* one comparison: the options, what was read, and the tables built from it */
typedef struct {
    double target;      /* --target (0..1), NAN if not given */
    const char *versus; /* --versus MODE: that mode against the best static mode (compare_versus.c) */
    double vtarget[8];  /* with --versus: the --target values given, in order */
    int nvtarget;
    int hold;      /* --hold: time to target is the first point from which a run stays at or above it */
    plist ignore;  /* --ignore: char* config keys that do not split rows */
    plist assume;  /* --assume: char* "key=value", the value of key in runs whose config lacks it */
    plist runs;    /* run_t*, in reading order */
    plist benches; /* bench_t* */
    plist groups;  /* group_t*, sorted (cmp_group) */
    plist notes;   /* char*: notes on the whole comparison, each once */
} compare_t;

/* compare_base.c: adds a note to c->notes unless the same text is there */
void cmp_note(compare_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "a vs b vs c" of the strings in vals */
char *vs_list(const plist *vals);

/* compare_load.c: reads one file (explicit: the user named it, so a skip says why louder) or a
 * folder (recursively, *.json in sorted order); a file reached twice (seen: real paths) counts
 * once. Runs go to c->runs, benchmark files to c->benches, other JSON is skipped with a note on
 * stderr. 0, or -1 if a file or folder could not be read (named on stderr). */
int cmp_load_file(compare_t *c, const char *path, plist *seen, int explicit);
int cmp_load_dir(compare_t *c, const char *dir, plist *seen);

/* compare_load.c: the wall time at which r's test top-1 reaches target (with hold: the first point
 * from which it stays at or above target to the run's end): a point of its accuracy curve
 * (--curve-every) where the curve reaches it, else an epoch end; NAN if neither does or target is
 * NAN. *samples (if not NULL): the training samples applied through that point (NAN if none);
 * *from_curve (if not NULL): 1 if the time is a curve point. */
double time_to_target(const run_t *r, double target, int hold, double *samples, int *from_curve);

/* An adaptive run's level rounds summed over its epochs[].controller objects (run.schema.json) */
typedef struct {
    const char *names[3]; /* the levels, in the run file's order */
    double rounds[3], all, switches, probes;
    const char *chosen; /* the level chosen at the end, NULL if none */
} ctl_levels_t;
int controller_levels(const json_t *epochs, ctl_levels_t *l); /* 0, or -1 if the run has none */
double level_share(const ctl_levels_t *l, const char *level); /* 0..1; NAN: no such level */

/* compare_keys.c */
extern const char *const cmp_group_keys[]; /* config keys that make a table: data, model, ... */
int key_eq(const char *a, const char *b);  /* '-' and '_' alike */
int key_in(const char *k, const char *const *l);
int key_ignored(const compare_t *c, const char *k); /* never splits rows */
int key_moot(const char *k, const run_t *r);        /* does not matter in r's mode (or to DDP) */
int key_blind_to_sync(const char *k);               /* does not pair runs with sync runs */
char *cfg_val(const compare_t *c, const run_t *r, const char *k); /* value text, --assume */

/* compare_group.c: fills c->groups from c->runs: tables, rows, statistics, baselines, notes */
void cmp_group(compare_t *c);

/* compare_stats.c */
stat_t stat_of(const double *x, int n);      /* mean, sample std, n over the non-NAN values */
void row_stats(row_t *row);                  /* the row's stat_t fields and mean wait per rank */
void sync_baselines(group_t *g);             /* base, speedup and deltas of every row */
void ddp_baselines(group_t *g);              /* dbase and the "vs DDP" ratios of every row */
int paired_deltas(compare_t *c, group_t *g); /* pdtop1, psamp of every row; the pairs found */

/* compare_print.c */
const char *group_setting(const group_t *g); /* "EXPERIMENT: model=M data=D ranks=P epochs=E batch=B" */
const char *group_title(const group_t *g);   /* the setting and the target */
/* s as text in printf format f, values times scale: "-" (no values), "f" (one), "f ± f" (mean ± std) */
char *fmt_stat(stat_t s, const char *f, double scale);
/* a time to target over a row of n runs, s over those that reached it: "-" (none), fmt_stat's "%.1f",
 * and " (k/n reached)" when not all did */
char *fmt_reached(stat_t s, int n);
void print_markdown(const compare_t *c, FILE *o);

/* compare_export.c: one flat CSV table; the tables as pcoll-compare/1 JSON (0, or -1 named) */
void print_csv(const compare_t *c, FILE *o);
int write_json(const compare_t *c, const char *out);

/* compare_plot.c: per-table training curves and Fig. 9 latency panels under dir (gnuplot);
 * 0 on success, -1 if a file could not be written or a figure was not produced */
int do_plots(const compare_t *c, const char *dir);

/* compare_versus.c: per table, each mode's time to two targets (first crossing and held) and the
 * --versus mode against the best static mode, paired by seed (results/README.md) */
void print_versus(const compare_t *c, FILE *o);

#endif
