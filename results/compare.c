/* compare.c -- pcoll-compare's command line: reads eager-sgd-run/1 run files (and allreduce
 * benchmark files), prints per-setting comparison tables (Markdown, CSV or JSON) and draws the
 * paper's figures with gnuplot. results/README.md states the rules (grouping, repeats, baselines)
 * and the output formats; compare.h lists the modules. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "results/compare.h"

static void usage(FILE *f) {
    fprintf(
        f, "usage: pcoll-compare [options] RUN.json|DIR ...\n"
           "  Compares eager-sgd-run/1 run files (folders are searched recursively for *.json; other JSON\n"
           "  files are skipped with a note). One table per experiment+data+model+ranks+epochs+batch; one\n"
           "  row per mode/policy + imbalance; repeats (same setting and mode) give mean ± std, n=.\n"
           "  Allreduce benchmark files (build/bench/collectives.json) give a latency table and Fig. 9.\n"
           "  PyTorch DDP runs (ddp-run/1, trainer/ref/ddp_mirror.py) join their setting's table as\n"
           "  pytorch-ddp rows, with \"time vs DDP\" and \"to target vs DDP\" columns.\n"
           "options:\n"
           "  --target T      target test top-1 for time to target (0..1, or percent if > 1);\n"
           "                  default: each run's summary.target_top1\n"
           "  --hold          time to target: the first point from which a run stays at or above the\n"
           "                  target to its end (default: the first point that reaches it)\n"
           "  --versus adaptive  instead of the usual tables, per table and imbalance: every row's time to\n"
           "                  each target, first crossing and held (mean ± std over the runs that reach it,\n"
           "                  k/n reached), its final top-1; and adaptive against the best static mode (the\n"
           "                  static mode whose runs all reach the target soonest on average): adaptive's\n"
           "                  time over its, per seed, mean ± standard error [pairs] and (mean - 1) / SE;\n"
           "                  each adaptive run's rounds in sync/majority/solo. Targets: every --target\n"
           "                  given (up to 8), else the mean final top-1 of the table's sync runs (one\n"
           "                  per seed) less 4 and 1 points. Not with --hold or --csv (--csv=FILE,\n"
           "                  --json, --plot: the usual outputs)\n"
           "  --csv           print CSV instead of Markdown (notes go to stderr); --csv=FILE writes it\n"
           "  --json FILE     also write the tables as JSON\n"
           "  --plot DIR      write figures to DIR: per table SLUG_loss / SLUG_top1 (or SLUG_testloss)\n"
           "                  .png and .svg vs wall time, bench_*.png/svg; plus the .dat/.gp files\n"
           "                  (gnuplot from $PCOLL_GNUPLOT or PATH; without it only .dat/.gp)\n"
           "  --ignore K,K    config keys whose differences do not split rows (default also: seed,\n"
           "                  target-top1, output / log / checkpoint / data paths, the watchdog)\n"
           "  --assume K=V,K=V  runs whose config lacks key K count as K=V (files written before\n"
           "                  an option existed, e.g. --assume final-sync=0)\n"
           "  -h, --help\n");
}

typedef struct {
    const char *json_out, *plot_dir, *csv_out;
    int csv;
    plist paths;
} outputs_t;

/* Parses the command line into c's options and o; 0, 1 for --help (printed), or 2 (usage error,
 * named on stderr). */
static int parse_args(int argc, char **argv, compare_t *c, outputs_t *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
#define OPTV(name)                                              \
    ((!strcmp(a, name) && i + 1 < argc && (val = argv[++i])) || \
     (!strncmp(a, name "=", strlen(name) + 1) && (val = a + strlen(name) + 1)))
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--csv"))
            o->csv = 1;
        else if (!strncmp(a, "--csv=", 6)) {
            o->csv = 1;
            o->csv_out = a + 6;
        } else if (OPTV("--json"))
            o->json_out = val;
        else if (OPTV("--plot"))
            o->plot_dir = val;
        else if (!strcmp(a, "--hold"))
            c->hold = 1;
        else if (OPTV("--target")) {
            char *end;
            double t = strtod(val, &end);
            if (*end || !(t > 0) || t > 100) {
                fprintf(stderr, "pcoll-compare: bad --target %s\n", val);
                return 2;
            }
            if (c->nvtarget == (int)(sizeof c->vtarget / sizeof c->vtarget[0])) {
                fprintf(stderr, "pcoll-compare: more than %d --target\n", c->nvtarget);
                return 2;
            }
            c->target = c->vtarget[c->nvtarget++] = t > 1 ? t / 100 : t;
        } else if (OPTV("--versus")) {
            if (strcmp(val, "adaptive")) {
                fprintf(stderr,
                        "pcoll-compare: --versus %s: only adaptive is compared against the static modes\n",
                        val);
                return 2;
            }
            c->versus = val;
        } else if (OPTV("--ignore")) {
            char *l = astrdup(val), *save = NULL;
            for (char *t = strtok_r(l, ",", &save); t; t = strtok_r(NULL, ",", &save)) pl_push(&c->ignore, t);
        } else if (OPTV("--assume")) {
            char *l = astrdup(val), *save = NULL;
            for (char *t = strtok_r(l, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (!strchr(t, '=') || t[0] == '=') {
                    fprintf(stderr, "pcoll-compare: --assume %s: want KEY=VALUE\n", t);
                    return 2;
                }
                pl_push(&c->assume, t);
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "pcoll-compare: unknown or incomplete option %s\n", a);
            usage(stderr);
            return 2;
        } else
            pl_push(&o->paths, (void *)a);
#undef OPTV
    }
    if (c->nvtarget > 1 && !c->versus) {
        fprintf(stderr, "pcoll-compare: --target given %d times (more than one: only with --versus)\n",
                c->nvtarget);
        return 2;
    }
    if (c->versus && (c->hold || (o->csv && !o->csv_out))) {
        fprintf(stderr,
                "pcoll-compare: --versus prints its own table, first crossing and held: not with %s\n",
                c->hold ? "--hold" : "--csv (--csv=FILE writes the usual CSV)");
        return 2;
    }
    if (!o->paths.n) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* Reads every path (file or folder); -1 if one could not be read (named on stderr). */
static int load_inputs(compare_t *c, const plist *paths) {
    plist seen = {0};
    int bad = 0;
    for (int i = 0; i < paths->n; i++) {
        const char *p = paths->v[i];
        struct stat st;
        if (stat(p, &st) != 0) {
            fprintf(stderr, "pcoll-compare: cannot read %s: %s\n", p, strerror(errno));
            bad = 1;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            if (cmp_load_dir(c, p, &seen) < 0) bad = 1;
        } else if (cmp_load_file(c, p, &seen, 1) < 0)
            bad = 1;
    }
    return bad ? -1 : 0;
}

/* CSV to a file or stdout; the notes then go to stderr. 0, or 1 if the file could not be written. */
static int csv_output(const compare_t *c, const char *csv_out) {
    int rc = 0;
    FILE *f = csv_out ? fopen(csv_out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "pcoll-compare: cannot write %s: %s\n", csv_out, strerror(errno));
        rc = 1;
    } else {
        print_csv(c, f);
        if (csv_out) fclose(f);
    }
    for (int i = 0; i < c->notes.n; i++) fprintf(stderr, "note: %s\n", (const char *)c->notes.v[i]);
    for (int gi = 0; gi < c->groups.n; gi++) {
        group_t *g = c->groups.v[gi];
        for (int k = 0; k < g->notes.n; k++)
            fprintf(stderr, "%s: %s\n", group_title(g), (const char *)g->notes.v[k]);
    }
    return rc;
}

static void compare_free(compare_t *c) {
    for (int i = 0; i < c->runs.n; i++) json_decref(((run_t *)c->runs.v[i])->root);
    for (int i = 0; i < c->benches.n; i++) json_decref(((bench_t *)c->benches.v[i])->root);
}

/* Exit status: 0 ok, 1 nothing to compare or an output failed, 2 usage error or unreadable input. */
int main(int argc, char **argv) {
    atexit(arena_free);
    compare_t c = {.target = NAN};
    outputs_t o = {0};
    int rc = parse_args(argc, argv, &c, &o);
    if (rc) return rc == 1 ? 0 : rc;
    int bad = load_inputs(&c, &o.paths) < 0;
    if (!c.runs.n && !c.benches.n) {
        fprintf(stderr, "pcoll-compare: no eager-sgd-run/1 run files or benchmark files found\n");
        rc = 1;
    } else {
        cmp_group(&c);
        if (c.versus) {
            print_versus(&c, stdout);
            if (o.csv) rc = csv_output(&c, o.csv_out);
        } else if (o.csv)
            rc = csv_output(&c, o.csv_out);
        else
            print_markdown(&c, stdout);
        fflush(stdout);
        if (o.json_out && write_json(&c, o.json_out) < 0) rc = 1;
        if (o.plot_dir && do_plots(&c, o.plot_dir) < 0) rc = 1;
    }
    compare_free(&c);
    return bad ? 2 : rc;
}
