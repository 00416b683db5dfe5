/* sim_main.c -- pcoll-sim: the model of collectives/sim/sim.h over ranks, rules and skews.
 *
 *   build/bench/pcoll-sim [--P 4,8,16,32,64] [--modes sync,solo,majority,quorum] [--act flat,tree]
 *       [--imbalance none|linear:unit=MS|lognormal:mean=MS,std=MS|random:k=K,d=MS] (repeatable)
 *       [--bytes 8] [--iters 64] [--warmup 4] [--tau 0] [--seed 1]
 *       [--cost FILE] [--o-us X] [--L-us X] [--alpha-us X] [--beta-ns X]
 *       [--validate BENCH.json ...] [--loop COMPUTE_MS [--late wait|go]] [--json OUT]
 *
 * Costs: --cost reads the JSON that pcoll-sim-calibrate writes (measured on the machine being
 * modelled); single flags override it. Quorum is Q = P/2, as in bench_collectives.
 * --validate: for each measured row of a bench_collectives JSON (its ranks, mode, skew, size),
 * the model's prediction beside it (tree activation, as libpcoll), same iterations and unit.
 * --loop COMPUTE_MS: the trainer's loop instead of the benchmark's (sim.h: each rank computes
 * COMPUTE_MS, waits its delay and deposits, no barrier; --iters steps per rank on average); the
 * rows give a rank's mean step time and the speed-up of each rule over sync with the same delays:
 * what a partial mode can gain in training, with a core per rank, before any accuracy question.
 * --late go: the trainer's --late go (a rank waits only for a round it has not seen).
 */
#include "collectives/sim/imbalance.h"
#include "collectives/sim/sim.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    imb_sched_t m;
    uint64_t seed;
} delay_arg_t;

static double delay_ms(void *arg, uint64_t it, int p, int P) {
    const delay_arg_t *d = arg;
    return imb_sched_delay_ms(&d->m, d->seed, it, p, P, 0, 1);
}

static int parse_rule(const char *s, sim_rule_t *r) { /* a bare mode name (sim_rule_name) */
    for (int i = SIM_SYNC; i <= SIM_QUORUM; i++)
        if (!strcmp(s, sim_rule_name((sim_rule_t)i))) {
            *r = (sim_rule_t)i;
            return 0;
        }
    return -1;
}

static int load_cost(const char *path, sim_cost_t *c) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j) {
        fprintf(stderr, "pcoll-sim: %s: %s (line %d)\n", path, e.text, e.line);
        return -1;
    }
    const char *keys[] = {"o_us", "L_us", "alpha_us", "beta_us"};
    double *dst[] = {&c->o_us, &c->L_us, &c->alpha_us, &c->beta_us};
    for (int i = 0; i < 4; i++) {
        json_t *v = json_object_get(j, keys[i]);
        if (!json_is_number(v) || json_number_value(v) < 0) {
            fprintf(stderr, "pcoll-sim: %s: field '%s' missing or not a number >= 0\n", path, keys[i]);
            json_decref(j);
            return -1;
        }
        *dst[i] = json_number_value(v);
    }
    json_decref(j);
    return 0;
}

typedef struct {
    sim_cost_t cost;
    double loop_ms; /* < 0: the benchmark's loop; else the trainer's, with this compute per step */
    int go;         /* the trainer's --late go */
    int iters, warmup, tau;
    size_t bytes;
    uint64_t seed;
    json_t *rows;
} run_ctx_t;

/* One model run; prints a table row and appends it to the JSON rows. measured < 0: none. */
static int run_one(run_ctx_t *x, int P, sim_rule_t rule, sim_act_t act, const char *skew, int iters,
                   int warmup, size_t bytes, double measured) {
    delay_arg_t da = {{0}, x->seed};
    char err[256];
    if (imb_sched_parse(skew, &da.m, err, sizeof err) || imb_sched_resolve(&da.m, 0, 0, err, sizeof err)) {
        fprintf(stderr, "pcoll-sim: %s\n", err);
        return -1;
    }
    sim_cfg_t c = {P,
                   rule,
                   P / 2 > 0 ? P / 2 : 1,
                   x->tau,
                   act,
                   bytes,
                   iters,
                   warmup,
                   x->seed,
                   da.m.n == 1 && da.m.phase[0].kind == IMB_NONE ? NULL : delay_ms,
                   &da,
                   x->loop_ms >= 0,
                   x->loop_ms >= 0 ? x->loop_ms : 0,
                   x->go};
    sim_result_t r, rs = {0};
    int rc = sim_run(&c, &x->cost, &r);
    if (!rc && c.loop && rule == SIM_SYNC)
        rs = r;               /* the reference of the speed-up: itself */
    else if (!rc && c.loop) { /* sync with the same delays */
        sim_cfg_t cs = c;
        cs.rule = SIM_SYNC;
        rc = sim_run(&cs, &x->cost, &rs);
    }
    const char *an = act == SIM_ACT_TREE ? "tree" : "flat";
    if (rc == SIM_ERR_DEADLOCK) {
        printf("%6d %10zu %9s %5s %24s %12s\n", P, bytes, sim_rule_name(rule), an, skew, "deadlock");
        return 0;
    }
    if (rc) {
        fprintf(stderr, "pcoll-sim: model failed (%d) for P=%d %s\n", rc, P, sim_rule_name(rule));
        return -1;
    }
    printf("%6d %10zu %9s %5s %24s %12.1f %10.1f %10.1f %10.1f %6.2f %8ld", P, bytes, sim_rule_name(rule), an,
           skew, r.mean_us, r.p50_us, r.p90_us, r.p99_us, r.fresh_frac, r.rounds);
    if (c.loop) printf(" %10.2f %8.3f", r.step_us / 1e3, rs.step_us / r.step_us);
    if (measured >= 0) printf(" %12.1f %7.2f", measured, measured > 0 ? r.mean_us / measured : 0);
    printf("\n");
    json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:I}", "ranks", P, "mode",
                          sim_rule_name(rule), "activation", an, "skew", skew, "bytes", (json_int_t)bytes,
                          "mean_latency_us", r.mean_us, "p50_us", r.p50_us, "p90_us", r.p90_us, "p99_us",
                          r.p99_us, "fresh_fraction", r.fresh_frac, "rounds", (json_int_t)r.rounds);
    if (measured >= 0) json_object_set_new(o, "measured_mean_latency_us", json_real(measured));
    if (c.loop) {
        json_object_set_new(o, "step_ms", json_real(r.step_us / 1e3));
        json_object_set_new(o, "speedup_vs_sync", json_real(rs.step_us / r.step_us));
    }
    json_array_append_new(x->rows, o);
    return 0;
}

static void header(int validate, int loop) {
    printf("%6s %10s %9s %5s %24s %12s %10s %10s %10s %6s %8s%s\n", "P", "size(B)", "mode", "act", "skew",
           "mean(us)", "p50(us)", "p90(us)", "p99(us)", "fresh", "rounds",
           validate ? "  measured(us)  model/meas"
           : loop   ? "   step(ms)  vs sync"
                    : "");
}

/* Every measured partial/sync row of a bench_collectives JSON, with the model beside it. */
static int validate(run_ctx_t *x, const char *path) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j) {
        fprintf(stderr, "pcoll-sim: %s: %s (line %d)\n", path, e.text, e.line);
        return -1;
    }
    int P = (int)json_integer_value(json_object_get(j, "ranks"));
    int iters = (int)json_integer_value(json_object_get(j, "iterations"));
    int warm = (int)json_integer_value(json_object_get(j, "warmup"));
    double unit = json_number_value(json_object_get(j, "unit_ms"));
    json_t *res = json_object_get(j, "results");
    if (P < 1 || iters < 1 || !json_is_array(res)) {
        fprintf(stderr, "pcoll-sim: %s: not a bench_collectives JSON (ranks, iterations, results)\n", path);
        json_decref(j);
        return -1;
    }
    size_t i;
    json_t *row;
    int rc = 0;
    json_array_foreach(res, i, row) {
        sim_rule_t rule;
        const char *mode = json_string_value(json_object_get(row, "mode"));
        const char *skew = json_string_value(json_object_get(row, "skew"));
        if (!mode || !skew || parse_rule(mode, &rule)) continue; /* mpi_allreduce: baseline */
        char sk[64];
        if (!strcmp(skew, "linear"))
            snprintf(sk, sizeof sk, "linear:unit=%g", unit);
        else
            snprintf(sk, sizeof sk, "none");
        size_t bytes = (size_t)json_integer_value(json_object_get(row, "bytes"));
        double meas = json_number_value(json_object_get(row, "mean_latency_us"));
        if ((rc = run_one(x, P, rule, SIM_ACT_TREE, sk, iters, warm, bytes, meas)))
            break; /* libpcoll activates over the tree */
    }
    json_decref(j);
    return rc;
}

static int split(char *s, char **out, int max) {
    int n = 0;
    for (char *t = strtok(s, ","); t && n < max; t = strtok(NULL, ",")) out[n++] = t;
    return n;
}

/* The command line: the model's settings (x) and the lists the runs go over. */
typedef struct {
    run_ctx_t x;
    char pl[256], ml[128], al[32]; /* --P, --modes, --act: comma-separated */
    const char *skews[8];          /* --imbalance, in order (none given: none and linear:unit=1) */
    int nskew;
    const char *vals[16]; /* --validate files */
    int nval;
    const char *json; /* --json, or NULL */
} opts_t;

/* Applies option a with its value v to o. Returns 0, or the exit code after a message on stderr
 * (1: --cost unreadable; 2: a bad value or an unknown option). */
static int set_option(opts_t *o, const char *a, const char *v) {
    run_ctx_t *x = &o->x;
    if (!strcmp(a, "--P"))
        snprintf(o->pl, sizeof o->pl, "%s", v);
    else if (!strcmp(a, "--modes"))
        snprintf(o->ml, sizeof o->ml, "%s", v);
    else if (!strcmp(a, "--act"))
        snprintf(o->al, sizeof o->al, "%s", v);
    else if (!strcmp(a, "--imbalance") && o->nskew < 8)
        o->skews[o->nskew++] = v;
    else if (!strcmp(a, "--validate") && o->nval < 16)
        o->vals[o->nval++] = v;
    else if (!strcmp(a, "--bytes"))
        x->bytes = (size_t)atol(v);
    else if (!strcmp(a, "--iters"))
        x->iters = atoi(v);
    else if (!strcmp(a, "--warmup"))
        x->warmup = atoi(v);
    else if (!strcmp(a, "--tau"))
        x->tau = atoi(v);
    else if (!strcmp(a, "--seed"))
        x->seed = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--cost"))
        return load_cost(v, &x->cost) ? 1 : 0;
    else if (!strcmp(a, "--o-us"))
        x->cost.o_us = atof(v);
    else if (!strcmp(a, "--L-us"))
        x->cost.L_us = atof(v);
    else if (!strcmp(a, "--alpha-us"))
        x->cost.alpha_us = atof(v);
    else if (!strcmp(a, "--beta-ns"))
        x->cost.beta_us = atof(v) * 1e-3;
    else if (!strcmp(a, "--json"))
        o->json = v;
    else if (!strcmp(a, "--late")) {
        if (strcmp(v, "wait") && strcmp(v, "go")) {
            fprintf(stderr, "pcoll-sim: --late '%s': want wait or go\n", v);
            return 2;
        }
        x->go = !strcmp(v, "go");
    } else if (!strcmp(a, "--loop")) {
        char *end;
        x->loop_ms = strtod(v, &end);
        if (*end || !(x->loop_ms >= 0)) {
            fprintf(stderr, "pcoll-sim: --loop '%s': want the compute time per step in ms (>= 0)\n", v);
            return 2;
        }
    } else {
        fprintf(stderr, "pcoll-sim: unknown option '%s'\n", a);
        return 2;
    }
    return 0;
}

/* Parses argv (every option takes a value) into o, which holds the defaults. Returns 0, or the
 * exit code after a message on stderr (set_option's, or 2 for an option without its value). */
static int parse_args(int argc, char **argv, opts_t *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "pcoll-sim: '%s' needs a value (see the header of collectives/sim/sim_main.c)\n",
                    a);
            return 2;
        }
        i++;
        int rc = set_option(o, a, v);
        if (rc) return rc;
    }
    if (!o->nskew) {
        o->skews[0] = "none";
        o->skews[1] = "linear:unit=1";
        o->nskew = 2;
    }
    return 0;
}

/* The first line of the output: the costs and the loop modelled. */
static void print_banner(const run_ctx_t *x) {
    printf("# pcoll-sim: o=%.2f us L=%.2f us alpha=%.2f us beta=%.3f ns/B, %d iterations (+%d warm-up)",
           x->cost.o_us, x->cost.L_us, x->cost.alpha_us, x->cost.beta_us * 1e3, x->iters, x->warmup);
    if (x->loop_ms >= 0)
        printf(", the trainer's loop: %g ms of compute per step, tau %d, --late %s", x->loop_ms, x->tau,
               x->go ? "go" : "wait");
    printf("\n");
}

/* One run per skew x activation x mode x P (that nesting, P innermost), a row each. Splits o's
 * lists in place. Returns 0; 2 after a message for a bad P, mode or activation; -1 if a run
 * failed (run_one's message). Stops at the first error. */
static int run_grid(opts_t *o) {
    run_ctx_t *x = &o->x;
    char *ps[32], *ms[8], *as[4];
    int np = split(o->pl, ps, 32), nm = split(o->ml, ms, 8), na = split(o->al, as, 4), rc = 0;
    header(0, x->loop_ms >= 0);
    for (int s = 0; s < o->nskew && !rc; s++)
        for (int a = 0; a < na && !rc; a++)
            for (int m = 0; m < nm && !rc; m++)
                for (int p = 0; p < np && !rc; p++) {
                    sim_rule_t rule;
                    int P = atoi(ps[p]);
                    if (parse_rule(ms[m], &rule) || P < 1 ||
                        (strcmp(as[a], "flat") && strcmp(as[a], "tree"))) {
                        fprintf(stderr, "pcoll-sim: bad --P '%s', --modes '%s' or --act '%s'\n", ps[p], ms[m],
                                as[a]);
                        return 2;
                    }
                    rc = run_one(x, P, rule, strcmp(as[a], "tree") ? SIM_ACT_FLAT : SIM_ACT_TREE, o->skews[s],
                                 x->iters, x->warmup, x->bytes, -1);
                }
    return rc;
}

/* Writes the costs, the settings and x's rows to path. Returns 0, or 1 after a message. */
static int write_json(const run_ctx_t *x, const char *path) {
    int rc = 0;
    json_t *root = json_pack("{s:f, s:f, s:f, s:f, s:i, s:o}", "o_us", x->cost.o_us, "L_us", x->cost.L_us,
                             "alpha_us", x->cost.alpha_us, "beta_us", x->cost.beta_us, "iterations", x->iters,
                             "results", json_incref(x->rows));
    if (root && x->loop_ms >= 0) {
        json_object_set_new(root, "loop_compute_ms", json_real(x->loop_ms));
        json_object_set_new(root, "tau", json_integer(x->tau));
        json_object_set_new(root, "late", json_string(x->go ? "go" : "wait"));
    }
    if (!root || json_dump_file(root, path, JSON_INDENT(1))) {
        fprintf(stderr, "pcoll-sim: cannot write %s\n", path);
        rc = 1;
    }
    json_decref(root);
    return rc;
}

/* Exit: 0 done; 1 --cost unreadable or the JSON not written; 2 usage; 255 a model run failed or a
 * --validate file is not a bench_collectives JSON. */
int main(int argc, char **argv) {
    /* Defaults: `pcoll-sim-calibrate` at P=8 on the development VM (Debian 12, 2 cores,
     * Open MPI 4.1.4, shared memory), 2026-11-30; pass --cost for another machine. */
    opts_t o = {.x = {{1.0, 1.5, 3.0, 1.0e-3}, -1, 0, 64, 4, 0, 8, 1, json_array()},
                .pl = "4,8,16,32,64",
                .ml = "sync,solo,majority,quorum",
                .al = "flat,tree"};
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    print_banner(&o.x);
    if (o.nval && o.x.loop_ms >= 0) {
        fprintf(stderr, "pcoll-sim: --validate compares with the benchmark's loop; drop --loop\n");
        return 2;
    }
    if (o.nval) {
        header(1, 0);
        for (int i = 0; i < o.nval && !rc; i++) rc = validate(&o.x, o.vals[i]);
    } else
        rc = run_grid(&o);
    if (!rc && o.json) rc = write_json(&o.x, o.json);
    json_decref(o.x.rows);
    return rc;
}
