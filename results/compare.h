/* compare.h -- internal to pcoll-compare (compare.c: loading, grouping, tables; compare_plot.c:
 * figures; compare_base.c: arena, strings, lists, JSON helpers). Not a library header. */
#ifndef RESULTS_COMPARE_H
#define RESULTS_COMPARE_H

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>

/* arena: every string / array the tool allocates lives until exit (compare_base.c) */
void *amalloc(size_t n);
void arena_free(void);
char *astrdup(const char *s);
char *aprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *avprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* growable string; sb_take moves it into the arena */
typedef struct { char *s; size_t n, cap; } sbuf;
void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *sb_take(sbuf *b);

/* growable pointer list (arena-backed) */
typedef struct { void **v; int n, cap; } plist;
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
  double straggler;
  double seed;       /* config.seed (NAN if absent) */
  const char *whash; /* the last epoch's weights_hash, NULL if absent */
  int nw;
  double *wait;
  const char *modelabel; /* mode, or adaptive/<policy> */
  const char *extra;     /* "[lr=0.1]" when runs of the table differ in lr, else "" */
  const char *pextra;    /* extra without the keys a sync run ignores (pairing by seed) */
} run_t;

typedef struct { double mean, std; int n; } stat_t;

typedef struct {
  const char *mode, *modelabel, *imbalance, *extra, *label;
  plist runs; /* run_t* */
  stat_t wall, ttt, top1, top5, train_loss, test_loss, mstal, maxstal, streak, fresh;
  int nw;
  double *wait;
  int base; /* row index of the sync baseline, -1 if none */
  double speedup, dtop1, dloss;
  stat_t pdtop1; /* paired Δtop-1 in points: each run minus the sync run of its seed */
} row_t;

typedef struct {
  const char *experiment, *data, *model, *ranks_s, *epochs_s, *batch_s;
  plist runs;  /* run_t* */
  plist rows;  /* row_t* */
  plist notes; /* char* */
  int classif;
  int paired;    /* repeats and seed-paired sync runs: the paired Δ column is shown */
  double target; /* NAN if none / differing */
} group_t;

typedef struct {
  const char *path;
  json_t *root;
} bench_t;

/* compare.c */
extern plist g_groups, g_benches; /* group_t*, bench_t* */
stat_t stat_of(const double *x, int n);
const char *group_title(const group_t *g);

/* compare_plot.c: per-table training curves and Fig. 9 latency panels under dir (gnuplot);
 * 0 on success, -1 if a file could not be written or a figure was not produced */
int do_plots(const char *dir);

#endif
