/* pcoll-compare: reads eager-sgd-run/1 run files (and allreduce benchmark files) and prints
 * per-setting comparison tables (Markdown, CSV or JSON) and draws the paper's figures with gnuplot.
 * See results/README.md for the rules (grouping, repeats, baselines) and the output formats. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "results/compare.h"

#define RUN_SCHEMA "eager-sgd-run/1"

plist g_groups, g_benches;
static plist g_runs, g_notes;
static double opt_target = NAN;
static plist opt_ignore;
static plist opt_assume; /* "key=value": the value of key in runs whose config lacks it */

/* config keys that never split rows (compared with '-' and '_' treated alike): grouping keys,
 * the row keys themselves, seeds (repeats differ in them), output / logging / checkpoint paths */
static const char *default_ignore[] = {"seed", "mode", "imbalance", "policy", "target", "target_top1",
                                       "experiment", "config", "out", "output", "json", "log", "logdir",
                                       "log_every", "quiet", "checkpoint", "ckpt_dir", "ckpt_every", "save",
                                       "load", "resume", "tag", "name", "run", "run_id", "dir", "out_dir",
                                       "data_dir", "data_path", "json_out", "metrics", "round_agg", "t_warn",
                                       "t_abort", NULL};
static const char *group_keys[] = {"data", "model", "ranks", "epochs", "batch", NULL};
/* keys that only matter under mode adaptive: compared among adaptive runs only */
static const char *adaptive_keys[] = {"policy_opts", "controller", "horizon", NULL};
/* keys a sync run's trajectory does not depend on (it waits for all, every round is fresh):
 * compared among the other modes only, and ignored when pairing runs with sync runs by seed */
static const char *sync_blind_keys[] = {"initial_sync", "final_sync", "tau", "ring", "div", NULL};

static int key_eq(const char *a, const char *b) {
  for (; *a && *b; a++, b++) {
    char x = *a == '-' ? '_' : *a, y = *b == '-' ? '_' : *b;
    if (x != y) return 0;
  }
  return *a == *b;
}
static int key_in(const char *k, const char **l) {
  for (; *l; l++)
    if (key_eq(*l, k)) return 1;
  return 0;
}

static int ignored_key(const char *k) {
  if (key_in(k, default_ignore) || key_in(k, group_keys)) return 1;
  for (int i = 0; i < opt_ignore.n; i++)
    if (key_eq(opt_ignore.v[i], k)) return 1;
  size_t l = strlen(k);
  static const char *suffixes[] = {"_path", "_file", "_dir", "_out", "-path", "-file", "-dir", "-out", NULL};
  for (const char **s = suffixes; *s; s++) {
    size_t sl = strlen(*s);
    if (l > sl && !strcmp(k + l - sl, *s)) return 1;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* loading                                                                                    */

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *p = avprintf(fmt, ap);
  va_end(ap);
  if (pl_find_str(&g_notes, p) < 0) pl_push(&g_notes, p);
}

static const char *num_text(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  return v ? val_text(v) : NULL;
}

static double time_to_target(const json_t *epochs, double target) {
  if (isnan(target)) return NAN;
  size_t i;
  const json_t *e;
  json_array_foreach(epochs, i, e) {
    double t = jnum(e, "test_top1");
    if (!isnan(t) && t >= target) return jnum(e, "wall_s");
  }
  return NAN;
}

static double last_epoch_num(const json_t *epochs, const char *k) {
  size_t n = json_array_size(epochs);
  for (size_t i = n; i-- > 0;) {
    double v = jnum(json_array_get(epochs, i), k);
    if (!isnan(v)) return v;
  }
  return NAN;
}

static void add_run(const char *path, json_t *root) {
  run_t *r = amalloc(sizeof *r);
  r->path = astrdup(path);
  r->root = root;
  const json_t *cfg = json_object_get(root, "config");
  const json_t *env = json_object_get(root, "environment");
  const json_t *sum = json_object_get(root, "summary");
  const json_t *ep = json_object_get(root, "epochs");
  const json_t *ctl = json_object_get(root, "controller");
  r->cfg = cfg;
  r->experiment = jstr(root, "experiment") ? jstr(root, "experiment") : "(unnamed)";
  r->data = jstr(cfg, "data") ? jstr(cfg, "data") : "?";
  r->model = jstr(cfg, "model") ? jstr(cfg, "model") : "?";
  r->mode = jstr(cfg, "mode") ? jstr(cfg, "mode") : "?";
  r->imbalance = jstr(cfg, "imbalance") ? jstr(cfg, "imbalance") : "none";
  r->policy = jstr(ctl, "policy") ? jstr(ctl, "policy") : jstr(cfg, "policy");
  r->exit = jstr(sum, "exit");
  r->ranks_s = num_text(cfg, "ranks");
  if (!r->ranks_s) r->ranks_s = num_text(env, "ranks");
  if (!r->ranks_s) r->ranks_s = "?";
  r->epochs_s = num_text(cfg, "epochs") ? num_text(cfg, "epochs") : "?";
  r->batch_s = num_text(cfg, "batch") ? num_text(cfg, "batch") : "?";
  r->wall = jnum(sum, "wall_s");
  if (isnan(r->wall)) r->wall = last_epoch_num(ep, "wall_s");
  r->top1 = jnum(sum, "final_test_top1");
  if (isnan(r->top1)) r->top1 = last_epoch_num(ep, "test_top1");
  r->top5 = jnum(sum, "final_test_top5");
  if (isnan(r->top5)) r->top5 = last_epoch_num(ep, "test_top5");
  r->train_loss = jnum(sum, "final_train_loss");
  if (isnan(r->train_loss)) r->train_loss = last_epoch_num(ep, "train_loss");
  r->test_loss = last_epoch_num(ep, "test_loss");
  r->target = !isnan(opt_target) ? opt_target : jnum(sum, "target_top1");
  r->ttt = time_to_target(ep, r->target);
  r->fresh = jnum(sum, "fresh_fraction");
  r->mstal = jnum(sum, "mean_staleness");
  r->maxstal = jnum(sum, "max_staleness");
  r->streak = jnum(sum, "max_streak");
  r->straggler = jnum(sum, "straggler");
  r->seed = jnum(cfg, "seed");
  size_t ne = json_array_size(ep);
  r->whash = ne ? jstr(json_array_get(ep, ne - 1), "weights_hash") : NULL;
  const json_t *ranks = json_object_get(root, "ranks");
  r->nw = (int)json_array_size(ranks);
  r->wait = amalloc(sizeof(double) * (size_t)(r->nw ? r->nw : 1));
  for (int i = 0; i < r->nw; i++) r->wait[i] = NAN;
  for (int i = 0; i < r->nw; i++) {
    const json_t *rk = json_array_get(ranks, (size_t)i);
    double idx = jnum(rk, "rank");
    int at = (!isnan(idx) && idx >= 0 && idx < r->nw) ? (int)idx : i;
    r->wait[at] = jnum(rk, "wait_s");
  }
  if (!strcmp(r->mode, "adaptive") && r->policy && strcmp(r->policy, "none") && strcmp(r->policy, ""))
    r->modelabel = aprintf("adaptive/%s", r->policy);
  else r->modelabel = r->mode;
  r->extra = r->pextra = "";
  if (!json_is_object(sum) || !json_is_array(ep) || !json_is_object(cfg))
    note("%s lacks config, epochs or summary; check it with pcoll-validate results/schema/run.schema.json", path);
  if (r->exit && strcmp(r->exit, "ok"))
    note("%s ended with exit \"%s\" (its numbers cover what it finished)", path, r->exit);
  pl_push(&g_runs, r);
}

static int seen_path(plist *seen, const char *path) {
  char rp[PATH_MAX];
  const char *k = realpath(path, rp) ? rp : path;
  if (pl_find_str(seen, k) >= 0) return 1;
  pl_push(seen, astrdup(k));
  return 0;
}

/* explicit: the user named this file (a skip is reported louder) */
static int load_file(const char *path, plist *seen, int explicit) {
  if (seen_path(seen, path)) return 0;
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  if (!root) {
    if (json_error_code(&je) == json_error_cannot_open_file) {
      fprintf(stderr, "pcoll-compare: cannot read %s: %s\n", path, je.text);
      return -1;
    }
    fprintf(stderr, "note: skipping %s: not valid JSON (line %d: %s)\n", path, je.line, je.text);
    return 0;
  }
  const char *schema = jstr(root, "schema");
  if (schema && !strcmp(schema, RUN_SCHEMA)) {
    add_run(path, root);
    return 0;
  }
  if (json_is_object(root) && json_is_array(json_object_get(root, "results")) &&
      json_object_get(root, "unit_ms")) {
    bench_t *b = amalloc(sizeof *b);
    b->path = astrdup(path);
    b->root = root;
    pl_push(&g_benches, b);
    return 0;
  }
  if (schema) fprintf(stderr, "note: skipping %s: schema \"%s\" is not %s\n", path, schema, RUN_SCHEMA);
  else fprintf(stderr, "note: skipping %s: not an %s run file%s\n", path, RUN_SCHEMA,
               explicit ? " (no \"schema\" key)" : "");
  json_decref(root);
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int load_dir(const char *dir, plist *seen) {
  DIR *d = opendir(dir);
  if (!d) { fprintf(stderr, "pcoll-compare: cannot open %s: %s\n", dir, strerror(errno)); return -1; }
  plist names = {0};
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    pl_push(&names, aprintf("%s/%s", dir, de->d_name));
  }
  closedir(d);
  if (names.n) qsort(names.v, (size_t)names.n, sizeof(void *), cmp_str);
  int rc = 0;
  for (int i = 0; i < names.n; i++) {
    const char *p = names.v[i];
    struct stat st;
    if (stat(p, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) { if (load_dir(p, seen) < 0) rc = -1; }
    else if (S_ISREG(st.st_mode)) {
      size_t l = strlen(p);
      if (l > 5 && !strcmp(p + l - 5, ".json") && load_file(p, seen, 0) < 0) rc = -1;
    }
  }
  return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* grouping                                                                                   */

static int num_or_str_cmp(const char *a, const char *b) {
  char *ea, *eb;
  double x = strtod(a, &ea), y = strtod(b, &eb);
  if (!*ea && !*eb && ea != a && eb != b) return (x > y) - (x < y);
  return strcmp(a, b);
}

static int cmp_group(const void *pa, const void *pb) {
  const group_t *a = *(const group_t *const *)pa, *b = *(const group_t *const *)pb;
  int c;
  if ((c = strcmp(a->experiment, b->experiment))) return c;
  if ((c = strcmp(a->data, b->data))) return c;
  if ((c = strcmp(a->model, b->model))) return c;
  if ((c = num_or_str_cmp(a->ranks_s, b->ranks_s))) return c;
  if ((c = num_or_str_cmp(a->epochs_s, b->epochs_s))) return c;
  return num_or_str_cmp(a->batch_s, b->batch_s);
}

static int mode_order(const char *m) {
  if (!strcmp(m, "sync")) return 0;
  if (!strcmp(m, "solo")) return 1;
  if (!strcmp(m, "majority")) return 2;
  if (!strncmp(m, "quorum", 6)) return 3;
  if (!strncmp(m, "adaptive", 8)) return 4;
  return 5;
}

static int cmp_row(const void *pa, const void *pb) {
  const row_t *a = *(const row_t *const *)pa, *b = *(const row_t *const *)pb;
  int ia = strcmp(a->imbalance, "none") != 0, ib = strcmp(b->imbalance, "none") != 0;
  if (ia != ib) return ia - ib;
  int c;
  if ((c = strcmp(a->imbalance, b->imbalance))) return c;
  if ((c = mode_order(a->mode) - mode_order(b->mode))) return c;
  if (!strncmp(a->mode, "quorum:", 7) && !strncmp(b->mode, "quorum:", 7) &&
      (c = atoi(a->mode + 7) - atoi(b->mode + 7)))
    return c;
  if ((c = strcmp(a->modelabel, b->modelabel))) return c;
  return strcmp(a->extra, b->extra);
}

/* "a vs b vs c" of the distinct values in order of first appearance */
static char *vs_list(const plist *vals) {
  sbuf b = {0};
  for (int i = 0; i < vals->n; i++) sb_printf(&b, "%s%s", i ? " vs " : "", (const char *)vals->v[i]);
  return sb_take(&b);
}

stat_t stat_of(const double *x, int n) {
  stat_t s = {NAN, NAN, 0};
  double sum = 0;
  for (int i = 0; i < n; i++)
    if (!isnan(x[i])) { sum += x[i]; s.n++; }
  if (!s.n) return s;
  s.mean = sum / s.n;
  double ss = 0;
  for (int i = 0; i < n; i++)
    if (!isnan(x[i])) ss += (x[i] - s.mean) * (x[i] - s.mean);
  s.std = s.n > 1 ? sqrt(ss / (s.n - 1)) : 0;
  return s;
}

#define ROW_STAT(row, field)                                      \
  do {                                                            \
    double *xs_ = amalloc(sizeof(double) * (size_t)(row)->runs.n); \
    for (int i_ = 0; i_ < (row)->runs.n; i_++)                    \
      xs_[i_] = ((run_t *)(row)->runs.v[i_])->field;              \
    (row)->field = stat_of(xs_, (row)->runs.n);                   \
  } while (0)

/* The sync run of r's seed and setting in g: the one under r's imbalance if there is one, else any.
 * Sync runs are bit-identical under every imbalance (the trainer deals evenly and waits for all),
 * so two sync runs of one seed that end in different weights are a broken premise: noted, unused. */
static const run_t *sync_of_seed(const group_t *g, const run_t *r) {
  const run_t *hit = NULL;
  for (int i = 0; i < g->runs.n; i++) {
    const run_t *s = g->runs.v[i];
    if (strcmp(s->mode, "sync") || s->seed != r->seed || strcmp(s->pextra, r->pextra) || isnan(s->top1)) continue;
    if (hit && hit->whash && s->whash && strcmp(hit->whash, s->whash)) {
      note("sync runs %s and %s have seed %.0f but end in different weights (%s, %s); seed %.0f is not paired",
           hit->path, s->path, s->seed, hit->whash, s->whash, s->seed);
      return NULL;
    }
    if (!hit || !strcmp(s->imbalance, r->imbalance)) hit = s;
  }
  return hit;
}

/* Fills row->pdtop1 for every row of g (mean, sample std, pairs); returns the pairs found. */
static int paired_deltas(group_t *g) {
  int total = 0;
  for (int j = 0; j < g->rows.n; j++) {
    row_t *row = g->rows.v[j];
    double *d = amalloc(sizeof(double) * (size_t)row->runs.n);
    for (int i = 0; i < row->runs.n; i++) {
      const run_t *r = row->runs.v[i], *s = isnan(r->seed) ? NULL : sync_of_seed(g, r);
      d[i] = s && !isnan(r->top1) && s != r ? 100.0 * (r->top1 - s->top1) : NAN;
    }
    row->pdtop1 = stat_of(d, row->runs.n);
    if (strcmp(row->mode, "sync")) total += row->pdtop1.n;
  }
  return total;
}

/* Key k does not matter in r's mode: an adaptive-only key of another mode, or a key that a sync
 * run ignores. Such values neither split r's row nor label it. */
static int key_moot(const char *k, const run_t *r) {
  return (key_in(k, adaptive_keys) && strcmp(r->mode, "adaptive")) || (key_in(k, sync_blind_keys) && !strcmp(r->mode, "sync"));
}

/* The text of config key k of r; a key the run lacks takes its --assume value, else "(unset)"
 * (runs written before an option existed). */
static char *cfg_val(const run_t *r, const char *k) {
  const json_t *v = json_object_get(r->cfg, k);
  if (!v)
    for (int i = 0; i < opt_assume.n; i++) {
      const char *a = opt_assume.v[i], *eq = strchr(a, '=');
      char *key = astrdup(a);
      key[eq - a] = 0;
      if (key_eq(key, k)) return astrdup(eq + 1);
    }
  return val_text(v);
}

static void build_groups(void) {
  /* 1. tables by experiment + data + model + ranks + epochs + batch */
  for (int i = 0; i < g_runs.n; i++) {
    run_t *r = g_runs.v[i];
    group_t *g = NULL;
    for (int j = 0; j < g_groups.n && !g; j++) {
      group_t *h = g_groups.v[j];
      if (!strcmp(h->experiment, r->experiment) && !strcmp(h->data, r->data) &&
          !strcmp(h->model, r->model) && !strcmp(h->ranks_s, r->ranks_s) &&
          !strcmp(h->epochs_s, r->epochs_s) && !strcmp(h->batch_s, r->batch_s))
        g = h;
    }
    if (!g) {
      g = amalloc(sizeof *g);
      g->experiment = r->experiment;
      g->data = r->data;
      g->model = r->model;
      g->ranks_s = r->ranks_s;
      g->epochs_s = r->epochs_s;
      g->batch_s = r->batch_s;
      pl_push(&g_groups, g);
    }
    pl_push(&g->runs, r);
  }
  if (g_groups.n) qsort(g_groups.v, (size_t)g_groups.n, sizeof(void *), cmp_group);

  /* 2. an experiment split over several tables: say in what */
  plist done = {0};
  for (int i = 0; i < g_groups.n; i++) {
    group_t *g = g_groups.v[i];
    if (pl_find_str(&done, g->experiment) >= 0) continue;
    pl_push(&done, (void *)g->experiment);
    int ng = 0;
    for (int j = 0; j < g_groups.n; j++) ng += !strcmp(((group_t *)g_groups.v[j])->experiment, g->experiment);
    if (ng < 2) continue;
    sbuf b = {0};
    for (const char **k = group_keys; *k; k++) {
      plist vals = {0};
      for (int j = 0; j < g_runs.n; j++) {
        run_t *r = g_runs.v[j];
        if (strcmp(r->experiment, g->experiment)) continue;
        const char *v = !strcmp(*k, "data") ? r->data : !strcmp(*k, "model") ? r->model
                        : !strcmp(*k, "ranks") ? r->ranks_s : !strcmp(*k, "epochs") ? r->epochs_s
                        : r->batch_s;
        if (pl_find_str(&vals, v) < 0) pl_push(&vals, (void *)v);
      }
      if (vals.n > 1) sb_printf(&b, "%s%s (%s)", b.n ? ", " : "", *k, vs_list(&vals));
    }
    note("%s: runs differ in %s; they are not averaged and appear in %d separate tables",
         g->experiment, b.s ? b.s : "?", ng);
    free(b.s);
  }

  /* 3. rows within each table */
  for (int gi = 0; gi < g_groups.n; gi++) {
    group_t *g = g_groups.v[gi];
    /* config keys (other than the expected ones) whose values differ across the table */
    plist keys = {0};
    for (int i = 0; i < g->runs.n; i++) {
      run_t *r = g->runs.v[i];
      const char *k;
      json_t *v;
      json_object_foreach((json_t *)r->cfg, k, v) {
        (void)v;
        if (!ignored_key(k) && pl_find_str(&keys, k) < 0) pl_push(&keys, (void *)k);
      }
    }
    plist diff = {0};
    sbuf nb = {0};
    for (int ki = 0; ki < keys.n; ki++) {
      const char *k = keys.v[ki];
      plist vals = {0};
      for (int i = 0; i < g->runs.n; i++) {
        run_t *r = g->runs.v[i];
        if (key_moot(k, r)) continue;
        char *t = cfg_val(r, k);
        if (pl_find_str(&vals, t) < 0) pl_push(&vals, t);
      }
      if (vals.n > 1) {
        pl_push(&diff, (void *)k);
        sb_printf(&nb, "%s%s (%s)", nb.n ? ", " : "", k, vs_list(&vals));
      }
    }
    if (diff.n) {
      pl_push(&g->notes, aprintf("note: runs differ in %s; such runs are not averaged (rows marked [%s=...])",
                                 nb.s, (const char *)diff.v[0]));
      for (int i = 0; i < g->runs.n; i++) {
        run_t *r = g->runs.v[i];
        sbuf eb = {0};
        for (int ki = 0; ki < diff.n; ki++) {
          if (key_moot(diff.v[ki], r)) continue;
          sb_printf(&eb, "%s%s=%s", eb.n ? "," : "[", (const char *)diff.v[ki],
                    cfg_val(r, diff.v[ki]));
        }
        if (eb.n) sb_printf(&eb, "]");
        r->extra = sb_take(&eb);
        for (int ki = 0; ki < diff.n; ki++)
          if (!key_in(diff.v[ki], adaptive_keys) && !key_in(diff.v[ki], sync_blind_keys))
            sb_printf(&eb, "%s=%s;", (const char *)diff.v[ki], cfg_val(r, diff.v[ki]));
        r->pextra = eb.n ? sb_take(&eb) : "";
      }
    }
    free(nb.s);

    /* target */
    plist tg = {0};
    for (int i = 0; i < g->runs.n; i++) {
      run_t *r = g->runs.v[i];
      char *t = isnan(r->target) ? astrdup("none") : aprintf("%g", r->target);
      if (pl_find_str(&tg, t) < 0) pl_push(&tg, t);
    }
    g->target = NAN;
    if (!isnan(opt_target)) g->target = opt_target;
    else if (tg.n == 1) g->target = ((run_t *)g->runs.v[0])->target;
    else pl_push(&g->notes, aprintf("note: runs have different target_top1 (%s); each run's own target is used "
                                    "for time to target (pass --target T to use one)", vs_list(&tg)));

    /* rows = mode label + imbalance + differing keys */
    for (int i = 0; i < g->runs.n; i++) {
      run_t *r = g->runs.v[i];
      if (!isnan(r->top1)) g->classif = 1;
      row_t *row = NULL;
      for (int j = 0; j < g->rows.n && !row; j++) {
        row_t *w = g->rows.v[j];
        if (!strcmp(w->modelabel, r->modelabel) && !strcmp(w->imbalance, r->imbalance) &&
            !strcmp(w->extra, r->extra))
          row = w;
      }
      if (!row) {
        row = amalloc(sizeof *row);
        row->mode = r->mode;
        row->modelabel = r->modelabel;
        row->imbalance = r->imbalance;
        row->extra = r->extra;
        row->label = *r->extra ? aprintf("%s %s", r->modelabel, r->extra) : r->modelabel;
        pl_push(&g->rows, row);
      }
      pl_push(&row->runs, r);
    }
    if (g->rows.n) qsort(g->rows.v, (size_t)g->rows.n, sizeof(void *), cmp_row);

    for (int j = 0; j < g->rows.n; j++) {
      row_t *row = g->rows.v[j];
      ROW_STAT(row, wall);
      ROW_STAT(row, ttt);
      ROW_STAT(row, top1);
      ROW_STAT(row, top5);
      ROW_STAT(row, train_loss);
      ROW_STAT(row, test_loss);
      ROW_STAT(row, mstal);
      ROW_STAT(row, maxstal);
      ROW_STAT(row, streak);
      ROW_STAT(row, fresh);
      int nw = 0;
      for (int i = 0; i < row->runs.n; i++) {
        int k = ((run_t *)row->runs.v[i])->nw;
        if (k > nw) nw = k;
      }
      row->nw = nw;
      row->wait = amalloc(sizeof(double) * (size_t)(nw ? nw : 1));
      double *xs = amalloc(sizeof(double) * (size_t)row->runs.n);
      for (int k = 0; k < nw; k++) {
        for (int i = 0; i < row->runs.n; i++) {
          run_t *r = row->runs.v[i];
          xs[i] = k < r->nw ? r->wait[k] : NAN;
        }
        row->wait[k] = stat_of(xs, row->runs.n).mean;
      }
    }
    /* sync baselines: same imbalance and differing keys; else the only sync row of that imbalance */
    for (int j = 0; j < g->rows.n; j++) {
      row_t *row = g->rows.v[j];
      row->base = -1;
      int cand = -1, ncand = 0;
      for (int k = 0; k < g->rows.n; k++) {
        row_t *s = g->rows.v[k];
        if (strcmp(s->mode, "sync") || strcmp(s->imbalance, row->imbalance)) continue;
        if (!strcmp(s->extra, row->extra)) { row->base = k; break; }
        cand = k;
        ncand++;
      }
      if (row->base < 0 && ncand == 1) row->base = cand;
      row->speedup = row->dtop1 = row->dloss = NAN;
      if (row->base >= 0) {
        row_t *s = g->rows.v[row->base];
        if (s->wall.n && row->wall.n && row->wall.mean > 0) row->speedup = s->wall.mean / row->wall.mean;
        if (s->top1.n && row->top1.n) row->dtop1 = 100.0 * (row->top1.mean - s->top1.mean);
        if (s->test_loss.n && row->test_loss.n) row->dloss = row->test_loss.mean - s->test_loss.mean;
        else if (s->train_loss.n && row->train_loss.n) row->dloss = row->train_loss.mean - s->train_loss.mean;
      }
    }
    int repeats = 0;
    for (int j = 0; j < g->rows.n; j++) repeats |= ((row_t *)g->rows.v[j])->runs.n > 1;
    if (g->classif && paired_deltas(g) && repeats && (g->paired = 1))
      pl_push(&g->notes, astrdup("note: paired Δ: each run's top-1 minus that of the sync run with the same seed "
                                 "and setting, under any imbalance (sync is bit-identical under every imbalance; "
                                 "the final weight hashes are checked); mean ± standard error [pairs]"));
    if (repeats)
      pl_push(&g->notes, astrdup("note: rows with n > 1 are repeats of one setting and mode: mean ± sample std "
                                 "(run-to-run noise)"));
    int nobase = 0;
    for (int j = 0; j < g->rows.n; j++) nobase |= ((row_t *)g->rows.v[j])->base < 0;
    if (nobase)
      pl_push(&g->notes, astrdup("note: '-' in speedup / Δ: no sync run of the same setting and imbalance"));
  }
}

/* ---------------------------------------------------------------------------------------- */
/* formatting                                                                                 */

static char *fmt_stat(stat_t s, const char *f, double scale) {
  if (!s.n) return "-";
  char fm[64];
  if (s.n == 1) return aprintf(f, s.mean * scale);
  snprintf(fm, sizeof fm, "%s ± %s", f, f);
  return aprintf(fm, s.mean * scale, s.std * scale);
}

static char *fmt_int_stat(stat_t s) {
  if (!s.n) return "-";
  if (s.n == 1) return aprintf("%.0f", s.mean);
  return aprintf("%.1f ± %.1f", s.mean, s.std);
}

static char *fmt_ttt(const row_t *row) {
  if (!row->ttt.n) return "-";
  char *v = fmt_stat(row->ttt, "%.1f", 1);
  if (row->ttt.n < row->runs.n) return aprintf("%s (%d/%d reached)", v, row->ttt.n, row->runs.n);
  return v;
}

static char *fmt_wait(const row_t *row) {
  if (!row->nw) return "-";
  if (row->nw <= 16) {
    sbuf b = {0};
    sb_printf(&b, "w=[");
    for (int k = 0; k < row->nw; k++) {
      if (isnan(row->wait[k])) sb_printf(&b, "%s-", k ? "," : "");
      else sb_printf(&b, "%s%.2f", k ? "," : "", row->wait[k]);
    }
    sb_printf(&b, "]s");
    return sb_take(&b);
  }
  double mn = INFINITY, mx = -INFINITY, sum = 0;
  int at = -1, n = 0;
  for (int k = 0; k < row->nw; k++) {
    double w = row->wait[k];
    if (isnan(w)) continue;
    n++;
    sum += w;
    if (w < mn) mn = w;
    if (w > mx) { mx = w; at = k; }
  }
  if (!n) return "-";
  return aprintf("w: min %.2f mean %.2f max %.2f s (rank %d)", mn, sum / n, mx, at);
}

static char *fmt_num(double x, const char *f) { return isnan(x) ? "-" : aprintf(f, x); }

const char *group_title(const group_t *g) {
  sbuf b = {0};
  sb_printf(&b, "%s: model=%s data=%s ranks=%s epochs=%s batch=%s", g->experiment, g->model, g->data,
            g->ranks_s, g->epochs_s, g->batch_s);
  if (g->classif) {
    if (!isnan(g->target)) sb_printf(&b, ", target top-1 %.2f%%", 100 * g->target);
    else sb_printf(&b, ", no common target top-1");
  } else sb_printf(&b, " (regression: losses)");
  return sb_take(&b);
}

#define NCOL_MAX 16
typedef struct { int ncol; const char *head[NCOL_MAX]; } cols_t;

static void row_cells(const group_t *g, const row_t *row, const char **c, cols_t *h) {
  int n = 0;
#define COL(name, val) do { h->head[n] = (name); c[n++] = (val); } while (0)
  COL("mode/policy", row->label);
  COL("ranks", g->ranks_s);
  COL("imbalance", row->imbalance);
  COL("n", aprintf("%d", row->runs.n));
  COL("wall (s)", fmt_stat(row->wall, "%.1f", 1));
  if (g->classif) {
    COL("to target (s)", fmt_ttt(row));
    COL("top-1 (%)", fmt_stat(row->top1, "%.2f", 100));
    COL("top-5 (%)", fmt_stat(row->top5, "%.2f", 100));
    COL("Δtop-1 (pts)", fmt_num(row->dtop1, "%+.2f"));
    if (g->paired)
      COL("paired Δ (pts)", !row->pdtop1.n || !strcmp(row->mode, "sync") ? "-"
          : row->pdtop1.n == 1 ? aprintf("%+.2f [1]", row->pdtop1.mean)
          : aprintf("%+.2f ± %.2f [%d]", row->pdtop1.mean, row->pdtop1.std / sqrt(row->pdtop1.n), row->pdtop1.n));
  } else {
    COL("train loss", fmt_stat(row->train_loss, "%.4g", 1));
    COL("test loss", fmt_stat(row->test_loss, "%.4g", 1));
    COL("Δloss", fmt_num(row->dloss, "%+.4g"));
  }
  COL("speedup", isnan(row->speedup) ? "-" : aprintf("%.2fx", row->speedup));
  COL("staleness mean", fmt_stat(row->mstal, "%.2f", 1));
  COL("staleness max", fmt_int_stat(row->maxstal));
  COL("max streak", fmt_int_stat(row->streak));
  COL("fresh", fmt_stat(row->fresh, "%.3f", 1));
  COL("wait per rank", fmt_wait(row));
#undef COL
  h->ncol = n;
}

static void print_markdown(FILE *o) {
  for (int i = 0; i < g_notes.n; i++) fprintf(o, "note: %s\n", (const char *)g_notes.v[i]);
  if (g_notes.n) fprintf(o, "\n");
  for (int gi = 0; gi < g_groups.n; gi++) {
    group_t *g = g_groups.v[gi];
    fprintf(o, "### %s\n\n", group_title(g));
    for (int k = 0; k < g->notes.n; k++) fprintf(o, "%s\n", (const char *)g->notes.v[k]);
    if (g->notes.n) fprintf(o, "\n");
    for (int j = 0; j < g->rows.n; j++) {
      const char *c[NCOL_MAX];
      cols_t h;
      row_cells(g, g->rows.v[j], c, &h);
      if (j == 0) {
        fprintf(o, "|");
        for (int k = 0; k < h.ncol; k++) fprintf(o, " %s |", h.head[k]);
        fprintf(o, "\n|");
        for (int k = 0; k < h.ncol; k++) fprintf(o, "%s|", k < 4 ? "---" : "--:");
        fprintf(o, "\n");
      }
      fprintf(o, "|");
      for (int k = 0; k < h.ncol; k++) fprintf(o, " %s |", c[k]);
      fprintf(o, "\n");
    }
    fprintf(o, "\nfiles:");
    for (int j = 0; j < g->rows.n; j++) {
      row_t *row = g->rows.v[j];
      for (int i = 0; i < row->runs.n; i++) fprintf(o, " %s", ((run_t *)row->runs.v[i])->path);
    }
    fprintf(o, "\n\n");
  }
  for (int bi = 0; bi < g_benches.n; bi++) {
    bench_t *b = g_benches.v[bi];
    const json_t *res = json_object_get(b->root, "results");
    plist sizes = {0}, series = {0};
    size_t i;
    const json_t *e;
    json_array_foreach(res, i, e) {
      char *sz = aprintf("%.0f", jnum(e, "bytes"));
      char *se = aprintf("%s/%s", jstr(e, "mode") ? jstr(e, "mode") : "?", jstr(e, "skew") ? jstr(e, "skew") : "?");
      if (pl_find_str(&sizes, sz) < 0) pl_push(&sizes, sz);
      if (pl_find_str(&series, se) < 0) pl_push(&series, se);
    }
    fprintf(o, "### allreduce benchmark: %s (P=%.0f, unit %g ms): mean latency (us)\n\n", b->path,
            jnum(b->root, "ranks"), jnum(b->root, "unit_ms"));
    fprintf(o, "| mode/skew |");
    for (int s = 0; s < sizes.n; s++) fprintf(o, " %s B |", (const char *)sizes.v[s]);
    fprintf(o, "\n|---|");
    for (int s = 0; s < sizes.n; s++) fprintf(o, "--:|");
    fprintf(o, "\n");
    int wrong = 0;
    for (int q = 0; q < series.n; q++) {
      fprintf(o, "| %s |", (const char *)series.v[q]);
      for (int s = 0; s < sizes.n; s++) {
        double v = NAN;
        json_array_foreach(res, i, e) {
          char *sz = aprintf("%.0f", jnum(e, "bytes"));
          char *se = aprintf("%s/%s", jstr(e, "mode") ? jstr(e, "mode") : "?", jstr(e, "skew") ? jstr(e, "skew") : "?");
          if (!strcmp(sz, sizes.v[s]) && !strcmp(se, series.v[q])) v = jnum(e, "mean_latency_us");
        }
        fprintf(o, " %s |", fmt_num(v, "%.1f"));
      }
      fprintf(o, "\n");
    }
    json_array_foreach(res, i, e) if (jnum(e, "wrong") > 0) wrong = 1;
    fprintf(o, "\n%s", wrong ? "note: some results have wrong > 0 (incorrect sums)\n\n" : "");
  }
}

/* CSV: one flat table, numbers unformatted; empty = not available */
static void csv_field(FILE *o, const char *s, int last) {
  int q = strpbrk(s, ",\"\n") != NULL;
  if (q) {
    fputc('"', o);
    for (; *s; s++) {
      if (*s == '"') fputc('"', o);
      fputc(*s, o);
    }
    fputc('"', o);
  } else fputs(s, o);
  fputc(last ? '\n' : ',', o);
}
static const char *csv_num(double x) { return isnan(x) ? "" : aprintf("%.10g", x); }

static void print_csv(FILE *o) {
  static const char *head[] = {"experiment", "data", "model", "ranks", "epochs", "batch", "target_top1", "mode",
                               "policy_label", "imbalance", "extra", "n", "wall_s", "wall_s_std",
                               "time_to_target_s", "time_to_target_s_std", "reached", "final_top1_pct",
                               "final_top1_pct_std", "final_top5_pct", "final_top5_pct_std", "delta_top1_pts",
                               "speedup", "final_train_loss", "final_train_loss_std", "final_test_loss",
                               "final_test_loss_std", "delta_loss", "mean_staleness", "mean_staleness_std",
                               "max_staleness", "max_streak", "fresh_fraction", "wait_s", "files", NULL};
  for (int k = 0; head[k]; k++) csv_field(o, head[k], head[k + 1] == NULL);
  for (int gi = 0; gi < g_groups.n; gi++) {
    group_t *g = g_groups.v[gi];
    for (int j = 0; j < g->rows.n; j++) {
      row_t *r = g->rows.v[j];
      sbuf w = {0}, f = {0};
      for (int k = 0; k < r->nw; k++) sb_printf(&w, "%s%s", k ? ";" : "", isnan(r->wait[k]) ? "" : aprintf("%.6g", r->wait[k]));
      for (int i = 0; i < r->runs.n; i++) sb_printf(&f, "%s%s", i ? ";" : "", ((run_t *)r->runs.v[i])->path);
      const char *v[] = {g->experiment, g->data, g->model, g->ranks_s, g->epochs_s, g->batch_s,
                         csv_num(g->target), r->mode, r->modelabel, r->imbalance, r->extra,
                         aprintf("%d", r->runs.n), csv_num(r->wall.mean), csv_num(r->wall.std),
                         csv_num(r->ttt.mean), csv_num(r->ttt.std), aprintf("%d", r->ttt.n),
                         csv_num(100 * r->top1.mean), csv_num(100 * r->top1.std), csv_num(100 * r->top5.mean),
                         csv_num(100 * r->top5.std), csv_num(r->dtop1), csv_num(r->speedup),
                         csv_num(r->train_loss.mean), csv_num(r->train_loss.std), csv_num(r->test_loss.mean),
                         csv_num(r->test_loss.std), csv_num(r->dloss), csv_num(r->mstal.mean),
                         csv_num(r->mstal.std), csv_num(r->maxstal.mean), csv_num(r->streak.mean),
                         csv_num(r->fresh.mean), sb_take(&w), sb_take(&f)};
      int nv = (int)(sizeof v / sizeof v[0]);
      for (int k = 0; k < nv; k++) csv_field(o, v[k], k == nv - 1);
    }
  }
}

static json_t *jnv(double x) { return isnan(x) ? json_null() : json_real(x); }
static json_t *jstat(stat_t s, double scale) {
  json_t *o = json_object();
  json_object_set_new(o, "mean", jnv(s.n ? s.mean * scale : NAN));
  json_object_set_new(o, "std", jnv(s.n ? s.std * scale : NAN));
  json_object_set_new(o, "n", json_integer(s.n));
  return o;
}

static int write_json(const char *out) {
  json_t *root = json_object(), *tables = json_array(), *notes = json_array();
  json_object_set_new(root, "format", json_string("pcoll-compare/1"));
  for (int i = 0; i < g_notes.n; i++) json_array_append_new(notes, json_string(g_notes.v[i]));
  json_object_set_new(root, "notes", notes);
  for (int gi = 0; gi < g_groups.n; gi++) {
    group_t *g = g_groups.v[gi];
    json_t *t = json_object(), *rows = json_array(), *gn = json_array();
    json_object_set_new(t, "title", json_string(group_title(g)));
    json_object_set_new(t, "experiment", json_string(g->experiment));
    json_object_set_new(t, "data", json_string(g->data));
    json_object_set_new(t, "model", json_string(g->model));
    json_object_set_new(t, "ranks", json_string(g->ranks_s));
    json_object_set_new(t, "epochs", json_string(g->epochs_s));
    json_object_set_new(t, "batch", json_string(g->batch_s));
    json_object_set_new(t, "kind", json_string(g->classif ? "classification" : "regression"));
    json_object_set_new(t, "target_top1", jnv(g->target));
    for (int k = 0; k < g->notes.n; k++) json_array_append_new(gn, json_string(g->notes.v[k]));
    json_object_set_new(t, "notes", gn);
    for (int j = 0; j < g->rows.n; j++) {
      row_t *r = g->rows.v[j];
      json_t *o = json_object(), *w = json_array(), *files = json_array();
      json_object_set_new(o, "mode", json_string(r->mode));
      json_object_set_new(o, "label", json_string(r->label));
      json_object_set_new(o, "imbalance", json_string(r->imbalance));
      json_object_set_new(o, "n", json_integer(r->runs.n));
      json_object_set_new(o, "wall_s", jstat(r->wall, 1));
      json_object_set_new(o, "time_to_target_s", jstat(r->ttt, 1));
      json_object_set_new(o, "final_top1_pct", jstat(r->top1, 100));
      json_object_set_new(o, "final_top5_pct", jstat(r->top5, 100));
      json_object_set_new(o, "delta_top1_pts", jnv(r->dtop1));
      json_object_set_new(o, "paired_delta_top1_pts", jstat(r->pdtop1, 1));
      json_object_set_new(o, "final_train_loss", jstat(r->train_loss, 1));
      json_object_set_new(o, "final_test_loss", jstat(r->test_loss, 1));
      json_object_set_new(o, "delta_loss", jnv(r->dloss));
      json_object_set_new(o, "speedup", jnv(r->speedup));
      json_object_set_new(o, "baseline", r->base >= 0 ? json_string(((row_t *)g->rows.v[r->base])->label) : json_null());
      json_object_set_new(o, "mean_staleness", jstat(r->mstal, 1));
      json_object_set_new(o, "max_staleness", jstat(r->maxstal, 1));
      json_object_set_new(o, "max_streak", jstat(r->streak, 1));
      json_object_set_new(o, "fresh_fraction", jstat(r->fresh, 1));
      for (int k = 0; k < r->nw; k++) json_array_append_new(w, jnv(r->wait[k]));
      json_object_set_new(o, "wait_s", w);
      for (int i = 0; i < r->runs.n; i++) json_array_append_new(files, json_string(((run_t *)r->runs.v[i])->path));
      json_object_set_new(o, "files", files);
      json_array_append_new(rows, o);
    }
    json_object_set_new(t, "rows", rows);
    json_array_append_new(tables, t);
  }
  json_object_set_new(root, "tables", tables);
  int rc = json_dump_file(root, out, JSON_INDENT(1) | JSON_REAL_PRECISION(12));
  json_decref(root);
  if (rc) fprintf(stderr, "pcoll-compare: cannot write %s\n", out);
  return rc ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
    "usage: pcoll-compare [options] RUN.json|DIR ...\n"
    "  Compares eager-sgd-run/1 run files (folders are searched recursively for *.json; other JSON\n"
    "  files are skipped with a note). One table per experiment+data+model+ranks+epochs+batch; one\n"
    "  row per mode/policy + imbalance; repeats (same setting and mode) give mean ± std, n=.\n"
    "  Allreduce benchmark files (build/bench/collectives.json) give a latency table and Fig. 9.\n"
    "options:\n"
    "  --target T      target test top-1 for time to target (0..1, or percent if > 1);\n"
    "                  default: each run's summary.target_top1\n"
    "  --csv           print CSV instead of Markdown (notes go to stderr); --csv=FILE writes it\n"
    "  --json FILE     also write the tables as JSON\n"
    "  --plot DIR      write figures to DIR: per table SLUG_loss / SLUG_top1 (or SLUG_testloss)\n"
    "                  .png and .svg vs wall time, bench_*.png/svg; plus the .dat/.gp files\n"
    "                  (gnuplot from $PCOLL_GNUPLOT or PATH; without it only .dat/.gp)\n"
    "  --ignore K,K    config keys whose differences do not split rows (default also: seed,\n"
    "                  output paths, target, policy)\n"
    "  --assume K=V,K=V  runs whose config lacks key K count as K=V (files written before\n"
    "                  an option existed, e.g. --assume final-sync=0)\n"
    "  -h, --help\n");
}

int main(int argc, char **argv) {
  const char *json_out = NULL, *plot_dir = NULL, *csv_out = NULL;
  int csv = 0;
  plist paths = {0};
  atexit(arena_free);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = NULL;
#define OPTV(name) ((!strcmp(a, name) && i + 1 < argc && (val = argv[++i])) || \
                    (!strncmp(a, name "=", strlen(name) + 1) && (val = a + strlen(name) + 1)))
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
    else if (!strcmp(a, "--csv")) csv = 1;
    else if (!strncmp(a, "--csv=", 6)) { csv = 1; csv_out = a + 6; }
    else if (OPTV("--json")) json_out = val;
    else if (OPTV("--plot")) plot_dir = val;
    else if (OPTV("--target")) {
      char *end;
      double t = strtod(val, &end);
      if (*end || !(t > 0) || t > 100) { fprintf(stderr, "pcoll-compare: bad --target %s\n", val); return 2; }
      opt_target = t > 1 ? t / 100 : t;
    } else if (OPTV("--ignore")) {
      char *c = astrdup(val), *save = NULL;
      for (char *t = strtok_r(c, ",", &save); t; t = strtok_r(NULL, ",", &save)) pl_push(&opt_ignore, t);
    } else if (OPTV("--assume")) {
      char *c = astrdup(val), *save = NULL;
      for (char *t = strtok_r(c, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strchr(t, '=') || t[0] == '=') { fprintf(stderr, "pcoll-compare: --assume %s: want KEY=VALUE\n", t); return 2; }
        pl_push(&opt_assume, t);
      }
    } else if (a[0] == '-' && a[1]) { fprintf(stderr, "pcoll-compare: unknown or incomplete option %s\n", a); usage(stderr); return 2; }
    else pl_push(&paths, (void *)a);
#undef OPTV
  }
  if (!paths.n) { usage(stderr); return 2; }

  plist seen = {0};
  int bad = 0;
  for (int i = 0; i < paths.n; i++) {
    const char *p = paths.v[i];
    struct stat st;
    if (stat(p, &st) != 0) { fprintf(stderr, "pcoll-compare: cannot read %s: %s\n", p, strerror(errno)); bad = 1; continue; }
    if (S_ISDIR(st.st_mode)) { if (load_dir(p, &seen) < 0) bad = 1; }
    else if (load_file(p, &seen, 1) < 0) bad = 1;
  }
  int rc = 0;
  if (!g_runs.n && !g_benches.n) {
    fprintf(stderr, "pcoll-compare: no %s run files or benchmark files found\n", RUN_SCHEMA);
    rc = 1;
  } else {
    build_groups();
    if (csv) {
      FILE *o = csv_out ? fopen(csv_out, "w") : stdout;
      if (!o) { fprintf(stderr, "pcoll-compare: cannot write %s: %s\n", csv_out, strerror(errno)); rc = 1; }
      else {
        print_csv(o);
        if (csv_out) fclose(o);
      }
      for (int i = 0; i < g_notes.n; i++) fprintf(stderr, "note: %s\n", (const char *)g_notes.v[i]);
      for (int gi = 0; gi < g_groups.n; gi++) {
        group_t *g = g_groups.v[gi];
        for (int k = 0; k < g->notes.n; k++) fprintf(stderr, "%s: %s\n", group_title(g), (const char *)g->notes.v[k]);
      }
    } else print_markdown(stdout);
    fflush(stdout);
    if (json_out && write_json(json_out) < 0) rc = 1;
    if (plot_dir && do_plots(plot_dir) < 0) rc = 1;
  }
  for (int i = 0; i < g_runs.n; i++) json_decref(((run_t *)g_runs.v[i])->root);
  for (int i = 0; i < g_benches.n; i++) json_decref(((bench_t *)g_benches.v[i])->root);
  if (bad) rc = 2;
  return rc;
}
