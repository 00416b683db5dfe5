/* runlog.c -- console lines and the run's JSON (runlog.h). */
#include "trainer/runlog.h"
#include "trainer/end.h"
#include "trainer/metrics.h"
#include "trainer/watchdog.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct runlog {
    json_t *root, *epochs, *rounds, *switches; /* rank 0 only */
    json_t *curve;                             /* --curve-every: the accuracy curve (rank 0) */
    ragg_t agg;                                /* rounds not yet in a record (rank 0) */
    char *hosts_buf, **hosts;                  /* every rank's host (rank 0) */
    int papi;                                  /* every rank counts with PAPI */
};

static int talk(const run_t *r) { return r->me == 0 && !r->cfg.quiet; }

static void set(json_t *o, const char *k, json_t *v) { json_object_set_new(o, k, v); }
static json_t *real_or_null(int ok, double v) { return ok ? json_real(v) : json_null(); }

void runlog_config(const run_t *r) {
    if (!talk(r)) return;
    printf("eager-train: %d ranks, %d threads each; resolved configuration:\n", r->P, r->threads);
    cfg_print(&r->cfg, stdout);
    fflush(stdout);
}

void runlog_resumed(const run_t *r) {
    if (talk(r))
        printf("eager-train: resumed from %s/latest.ckpt after epoch %d\n", r->cfg.ckpt_dir, r->epoch0);
}

static void gather_hosts(run_t *r, runlog_t *l) {
    char host[MPI_MAX_PROCESSOR_NAME] = "";
    int hl = 0;
    MPI_Get_processor_name(host, &hl);
    if (r->me == 0) {
        l->hosts_buf = calloc((size_t)r->P, MPI_MAX_PROCESSOR_NAME);
        l->hosts = calloc((size_t)r->P, sizeof *l->hosts);
        if (!l->hosts_buf || !l->hosts) run_die(r, "metrics", "out of memory for the host names");
        for (int p = 0; p < r->P; p++) l->hosts[p] = l->hosts_buf + (size_t)p * MPI_MAX_PROCESSOR_NAME;
    }
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, l->hosts_buf, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               MPI_COMM_WORLD);
}

/* Every resume of the run (kept in its checkpoints), oldest first. */
static json_t *restarts_json(const run_t *r) {
    json_t *a = json_array();
    for (int i = 0; i < r->nrestarts; i++) {
        const ckpt_restart_t *e = &r->restarts[i];
        json_t *o = json_object();
        set(o, "epoch", json_integer(e->epoch));
        set(o, "ranks_before", json_integer(e->ranks_before));
        set(o, "ranks_after", json_integer(e->ranks_after));
        set(o, "wall_lost_s", json_real(e->wall_lost_s));
        set(o, "controller_continued", json_boolean(e->controller_continued));
        /* where in epoch `epoch` + 1 it resumed (0 at an epoch's end); null: not recorded */
        set(o, "batches_done", e->batches_done < 0 ? json_null() : json_integer(e->batches_done));
        set(o, "samples_done", e->samples_done < 0 ? json_null() : json_integer(e->samples_done));
        json_array_append_new(a, o);
    }
    return a;
}

/* --out's partial twin: OUT with ".json" replaced by ".partial.json" (appended if OUT has none). */
static void partial_path(const char *out, char *buf, size_t n) {
    size_t l = strlen(out);
    int js = l >= 5 && !strcmp(out + l - 5, ".json");
    snprintf(buf, n, "%.*s.partial.json", (int)(js ? l - 5 : l), out);
}

static void save_partial(run_t *r, double wall);

/* Rank 0 at the start: temporary files a killed writer left are removed, and the partial file
 * (no epochs yet, exit "running") replaces any earlier run's. */
static void start_partial(run_t *r) {
    char p[sizeof r->cfg.out + 32];
    snprintf(p, sizeof p, "%s.tmp", r->cfg.out);
    unlink(p);
    partial_path(r->cfg.out, p, sizeof p);
    strcat(p, ".tmp");
    unlink(p);
    save_partial(r, r->wall0);
}

void runlog_open(run_t *r, int argc, char **argv) {
    runlog_t *l = calloc(1, sizeof *l);
    if (!l) run_die(r, "metrics", "out of memory");
    ragg_reset(&l->agg);
    watch_enter(r, "run file"); /* left once every rank is past the barrier below */
    gather_hosts(r, l);
    int papi_mine = metrics_papi_start();
    MPI_Allreduce(&papi_mine, &l->papi, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    r->log = l;
    run_on_close(r, runlog_finish); /* the run's JSON written when the run ends */
    if (r->me) { /* the ranks start their clocks together: after rank 0 has written the partial file */
        MPI_Barrier(MPI_COMM_WORLD);
        watch_leave(r);
        return;
    }
    json_t *root = l->root = json_object();
    set(root, "schema", json_string("eager-sgd-run/1"));
    set(root, "experiment", json_string(r->cfg.experiment));
    json_t *jc = cfg_to_json(&r->cfg);
    set(jc, "ranks", json_integer(r->P));
    set(jc, "threads", json_integer(r->threads));
    set(root, "config", jc);
    set(root, "environment", metrics_environment(r->P, l->hosts, argc, argv));
    /* every rank's GPU (the CUDA backend's add_json) and libpcoll's data path, at the end */
    set(json_object_get(root, "environment"), "gpus", json_null());
    set(json_object_get(root, "environment"), "data_path", json_null());
    set(root, "epochs", l->epochs = json_array());
    json_t *rd = json_object();
    set(rd, "aggregation", json_integer(r->cfg.round_agg));
    set(rd, "records", l->rounds = json_array());
    set(root, "rounds", rd);
    json_t *ct = json_object();
    set(ct, "policy", json_string(r->policy));
    set(ct, "decision_hash", json_string(""));
    set(ct, "switches", l->switches = json_array());
    set(root, "controller", ct);
    set(root, "papi", metrics_papi(l->papi));
    if (r->cfg.curve_every) set(root, "curve", l->curve = json_array());
    if (r->nrestarts) set(root, "restarts", restarts_json(r));
    start_partial(r);
    MPI_Barrier(MPI_COMM_WORLD);
    watch_leave(r);
}

void runlog_round(run_t *r, const pcoll_record_t *rec, double lr, double wd, int epoch) {
    runlog_t *l = r->log;
    if (r->me) return;
    ragg_add(&l->agg, rec, lr, wd);
    if (l->agg.r.n >= r->cfg.round_agg) runlog_rounds_flush(r, epoch);
}

void runlog_rounds_flush(run_t *r, int epoch) {
    runlog_t *l = r->log;
    if (r->me || !l->agg.r.n) return;
    json_array_append_new(l->rounds, ragg_json(&l->agg, epoch));
    ragg_reset(&l->agg);
}

void runlog_progress(const run_t *r, int epoch, long s, const epoch_t *e) {
    if (!talk(r) || !r->cfg.log_every || (s + 1) % r->cfg.log_every) return;
    double el = run_now() - e->t0, rate = (double)(s + 1) * r->cfg.batch * r->P / el;
    printf("  epoch %d step %ld/%ld loss %.4f acc %.3f  %.0f samples/s  epoch left %.0f s\n", epoch + 1,
           s + 1, e->steps, e->loss_sum / e->loss_n, e->seen ? (double)e->correct / e->seen : 0, rate,
           el / (s + 1) * (e->steps - s - 1));
    fflush(stdout);
}

void runlog_switches(run_t *r, int epoch, const ctl_switch_t *sw, size_t n) {
    if (r->me) return;
    for (size_t i = 0; i < n; i++) {
        char a[32], b[32];
        json_t *o = json_object();
        set(o, "epoch", json_integer(epoch));
        set(o, "round", json_integer((json_int_t)sw[i].round));
        set(o, "effective", json_integer((json_int_t)sw[i].effective));
        set(o, "from", json_string(pcoll_format_mode(sw[i].old_mode, sw[i].old_quorum, a, sizeof a)));
        set(o, "to", json_string(pcoll_format_mode(sw[i].new_mode, sw[i].new_quorum, b, sizeof b)));
        set(o, "reason", json_string(sw[i].reason));
        json_array_append_new(r->log->switches, o);
        if (!r->cfg.quiet)
            printf("  controller: epoch %d round %llu: %s\n", epoch + 1, (unsigned long long)sw[i].round,
                   sw[i].reason);
    }
}

void runlog_papi_epoch(run_t *r, int epoch) {
    if (!r->log->papi) return;
    long long pv[3], *pall = r->me == 0 ? malloc((size_t)r->P * sizeof pv) : NULL;
    if (r->me == 0 && !pall) run_die(r, "metrics", "out of memory for the PAPI counters");
    metrics_papi_read(pv);
    watch_enter(r, "hardware counters");
    MPI_Gather(pv, 3, MPI_LONG_LONG, pall, 3, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    watch_leave(r);
    if (r->me) return;
    json_t *pr = json_object_get(json_object_get(r->log->root, "papi"), "per_rank");
    for (int p = 0; p < r->P; p++) {
        json_t *o = json_object();
        set(o, "rank", json_integer(p));
        set(o, "epoch", json_integer(epoch + 1));
        set(o, "cycles", json_integer(pall[3 * p]));
        set(o, "instructions", json_integer(pall[3 * p + 1]));
        set(o, "cache_misses", json_integer(pall[3 * p + 2]));
        json_array_append_new(pr, o);
    }
    free(pall);
}

static json_t *gain_json(const ctl_policy_stats_t *s) {
    if (!s->gain_n) return json_null();
    json_t *g = json_object();
    set(g, "min", json_real(s->gain_min));
    set(g, "mean", json_real(s->gain_sum / (double)s->gain_n));
    set(g, "max", json_real(s->gain_max));
    set(g, "rounds", json_integer((json_int_t)s->gain_n));
    return g;
}

/* Name of the adaptive policy's level i (CTL_LV_*). */
static const char *level_name(const ctl_policy_stats_t *s, int i, char *buf, size_t n) {
    pcoll_mode_t m = i == CTL_LV_SYNC       ? PCOLL_SYNC
                     : i == CTL_LV_MAJORITY ? PCOLL_MAJORITY
                     : s->light_quorum      ? PCOLL_QUORUM
                                            : PCOLL_SOLO;
    return pcoll_format_mode(m, s->light_quorum, buf, n);
}

static int level_measured(const ctl_policy_stats_t *s, int i) { return isfinite(s->rate[i]); }

/* The epoch's "controller" object (adaptive epochs; results/schema/run.schema.json): what the
 * policy measured of each level and chose, at the epoch end. */
static json_t *controller_json(const ctl_policy_stats_t *s) {
    char a[32], b[32];
    json_t *o = json_object(), *lv = json_array();
    set(o, "rule", json_string("rate")); /* the one adaptive rule (earlier runs: also thresholds) */
    set(o, "level", json_string(pcoll_format_mode(s->mode, s->quorum, a, sizeof a)));
    set(o, "chosen", s->choice >= 0 ? json_string(level_name(s, s->choice, b, sizeof b)) : json_null());
    set(o, "probing", json_boolean(s->probing));
    set(o, "switches", json_integer((json_int_t)s->mode_switches));
    set(o, "probes", json_integer((json_int_t)s->probes));
    set(o, "screens", json_integer((json_int_t)s->screens));
    for (int i = 0; i < CTL_NLV; i++) { /* sync, majority, LIGHT */
        int m = level_measured(s, i);
        json_t *l = json_object();
        set(l, "level", json_string(level_name(s, i, a, sizeof a)));
        set(l, "rounds", json_integer((json_int_t)s->lv_rounds[i]));
        set(l, "rate", real_or_null(m, s->rate[i]));
        set(l, "lag", real_or_null(m, s->lag[i]));
        set(l, "score", real_or_null(m, s->score[i]));
        set(l, "score_se", real_or_null(m, s->score_se[i]));
        set(l, "samples", json_integer((json_int_t)(m ? s->samples[i] : 0)));
        set(l, "predicted", real_or_null(isfinite(s->predicted[i]), s->predicted[i]));
        json_array_append_new(lv, l);
    }
    set(o, "levels", lv);
    return o;
}

/* One console line of what the adaptive controller measured and chose (see controller_json). */
static void controller_line(const ctl_policy_stats_t *s) {
    char a[32], b[32], lv[320] = "";
    size_t k = 0;
    for (int i = 0; i < CTL_NLV && k < sizeof lv; i++) {
        const char *nm = level_name(s, i, a, sizeof a);
        if (level_measured(s, i))
            k += (size_t)snprintf(lv + k, sizeof lv - k,
                                  "%s%s %.4g/s lag %.2f score %.4g+-%.2g (%llu gradients)", k ? ", " : "", nm,
                                  s->rate[i], s->lag[i], s->score[i], s->score_se[i],
                                  (unsigned long long)s->samples[i]);
        else
            k += (size_t)snprintf(lv + k, sizeof lv - k, "%s%s -", k ? ", " : "", nm);
    }
    char ch[64] = "";
    if (s->choice >= 0 || s->probing)
        snprintf(ch, sizeof ch, " (%s%s%s)", s->choice >= 0 ? "chosen " : "",
                 s->choice >= 0 ? level_name(s, s->choice, b, sizeof b) : "",
                 s->probing ? (s->choice >= 0 ? ", probing" : "probing") : "");
    printf(
        "  controller: level %s%s; %s; %llu switches, %llu probes; rounds sync/majority/%s %llu/%llu/%llu\n",
        pcoll_format_mode(s->mode, s->quorum, a, sizeof a), ch, lv, (unsigned long long)s->mode_switches,
        (unsigned long long)s->probes, level_name(s, CTL_LV_LIGHT, b, sizeof b),
        (unsigned long long)s->lv_rounds[CTL_LV_SYNC], (unsigned long long)s->lv_rounds[CTL_LV_MAJORITY],
        (unsigned long long)s->lv_rounds[CTL_LV_LIGHT]);
}

static void epoch_line(const run_t *r, int epoch, const epoch_t *e, const epoch_report_t *p) {
    char steps[64];
    if (r->global)
        snprintf(steps, sizeof steps, "global: %lld batches, %ld-%ld per rank", (long long)e->nbatches,
                 p->steps_min, p->steps_max);
    else
        snprintf(steps, sizeof steps, "%ld steps x %d ranks", e->steps, r->P);
    double rate = p->samples / p->epoch_s;
    char test[64] = "test -"; /* not evaluated this epoch (--eval-every) */
    if (p->evaluated)
        snprintf(test, sizeof test, "test %.2f%% (top-5 %.2f%%)", 100 * p->test_top1, 100 * p->test_top5);
    if (data_num_classes(r->train) > 0)
        printf("epoch %3d/%d  %6.1f s  loss %.4f  train %.2f%%  %s  "
               "%.0f samples/s  rounds %llu fresh %.2f  lr %.4g  [%s]\n",
               epoch + 1, r->cfg.epochs, p->wall, p->train_loss, 100 * p->train_top1, test, rate,
               (unsigned long long)e->rounds, p->fresh_fraction, p->lr, steps);
    else
        printf("epoch %3d/%d  %6.1f s  train loss %.6f  test loss %.6f  %.0f samples/s  rounds %llu "
               "fresh %.2f  [%s]\n",
               epoch + 1, r->cfg.epochs, p->wall, p->train_loss, p->test_loss, rate,
               (unsigned long long)e->rounds, p->fresh_fraction, steps);
    fflush(stdout);
}

void runlog_epoch(run_t *r, int epoch, const epoch_t *e, const epoch_report_t *p) {
    if (r->me) return;
    int cls = data_num_classes(r->train) > 0, ev = p->evaluated;
    char hx[32];
    snprintf(hx, sizeof hx, "%016llx", (unsigned long long)p->weights_hash);
    json_t *o = json_object();
    set(o, "epoch", json_integer(epoch + 1));
    set(o, "wall_s", json_real(p->wall));
    set(o, "epoch_s", json_real(p->epoch_s));
    set(o, "lr", json_real(p->lr));
    set(o, "train_loss", json_real(p->train_loss));
    set(o, "train_top1", real_or_null(cls, p->train_top1));
    set(o, "test_loss", real_or_null(ev, p->test_loss));
    set(o, "test_top1", real_or_null(ev && cls, p->test_top1));
    set(o, "test_top5", real_or_null(ev && cls, p->test_top5));
    set(o, "steps", json_integer((json_int_t)p->steps));
    set(o, "rank_steps_min", json_integer(p->steps_min));
    set(o, "rank_steps_max", json_integer(p->steps_max));
    set(o, "samples", json_integer((json_int_t)p->samples));
    set(o, "rounds", json_integer((json_int_t)e->rounds));
    set(o, "fresh_fraction", json_real(p->fresh_fraction));
    set(o, "merged", json_integer((json_int_t)(e->grads - e->fresh_sum)));
    set(o, "mean_staleness", json_real(e->stale_n ? e->stale_sum / e->stale_n : 0));
    set(o, "max_staleness", json_integer(e->max_stale));
    set(o, "max_streak", json_integer(e->max_streak));
    set(o, "gain", gain_json(&e->ctl)); /* the controller's gain over this epoch's rounds */
    set(o, "weights_hash", json_string(hx));
    const int adaptive = e->ctl.kind == CTL_ADAPTIVE; /* static epochs: no "controller" */
    if (adaptive) set(o, "controller", controller_json(&e->ctl));
    json_array_append_new(r->log->epochs, o);
    if (r->cfg.quiet) return;
    epoch_line(r, epoch, e, p);
    if (adaptive) controller_line(&e->ctl);
}

void runlog_curve(run_t *r, const curve_snap_t *s, double test_loss, double test_top1) {
    if (r->me) return;
    int cls = data_num_classes(r->train) > 0;
    json_t *o = json_object();
    set(o, "epoch", json_integer(s->epoch));
    set(o, "batches", json_integer((json_int_t)s->batches));
    set(o, "samples", json_integer((json_int_t)(s->batches * (uint64_t)r->cfg.batch)));
    set(o, "wall_s", json_real(s->wall));
    set(o, "test_top1", real_or_null(cls, test_top1));
    set(o, "test_loss", json_real(test_loss));
    json_array_append_new(r->log->curve, o);
    if (r->cfg.quiet) return;
    if (cls)
        printf("  curve: epoch %d batch %llu  %6.1f s  test %.2f%% loss %.4f\n", s->epoch,
               (unsigned long long)s->batches, s->wall, 100 * test_top1, test_loss);
    else
        printf("  curve: epoch %d batch %llu  %6.1f s  test loss %.6f\n", s->epoch,
               (unsigned long long)s->batches, s->wall, test_loss);
}

void runlog_checkpoint(const run_t *r, const char *path) {
    if (talk(r)) printf("  checkpoint %s\n", path);
}

/* Rank 0: writes the JSON atomically to path; 0, or 1 after printing why it could not. */
static int write_file(run_t *r, const char *path) {
    char err[1200];
    if (!metrics_write(r->log->root, path, err, sizeof err)) return 0;
    fprintf(stderr, "eager-train: %s\n", err);
    return 1;
}

static void my_stats(const run_t *r, double mine[6]) {
    const rank_stats_t *rs = &r->rs;
    double v[6] = {rs->compute, rs->inject, rs->wait, rs->apply, (double)rs->steps, (double)rs->max_streak};
    memcpy(mine, v, sizeof v);
}

/* Per-rank records of n ranks' stats v (6 values each); returns the straggler. */
static int ranks_json(run_t *r, const double *all, int n) {
    json_t *jr = json_array();
    int strag = 0;
    for (int p = 0; p < n; p++) {
        const double *v = all + 6 * p;
        json_t *o = json_object();
        set(o, "rank", json_integer(p));
        set(o, "host", json_string(r->log->hosts[p]));
        set(o, "steps", json_integer((json_int_t)v[4]));
        set(o, "compute_s", json_real(v[0]));
        set(o, "inject_s", json_real(v[1]));
        set(o, "wait_s", json_real(v[2]));
        set(o, "apply_s", json_real(v[3]));
        set(o, "max_streak", json_integer((json_int_t)v[5]));
        json_array_append_new(jr, o);
        if (v[0] + v[1] > all[6 * strag] + all[6 * strag + 1]) strag = p;
    }
    set(r->log->root, "ranks", jr);
    return strag;
}

static json_t *summary_json(const run_t *r, double wall, int straggler, const char *exit_reason) {
    const run_totals_t *t = &r->tot;
    int cls = data_num_classes(r->train) > 0;
    json_t *s = json_object();
    set(s, "wall_s", json_real(wall));
    set(s, "epochs", json_integer(r->epochs_done));
    set(s, "final_test_top1", real_or_null(cls && t->final_top1 >= 0, t->final_top1));
    set(s, "final_test_top5", real_or_null(cls && t->final_top5 >= 0, t->final_top5));
    set(s, "final_train_loss", json_real(t->final_loss));
    set(s, "target_top1", real_or_null(cls && r->cfg.target_top1 > 0, r->cfg.target_top1));
    set(s, "time_to_target_s", real_or_null(t->t_target >= 0, t->t_target));
    set(s, "fresh_fraction", json_real(t->rounds ? (double)t->fresh / ((double)t->rounds * r->P) : 1));
    set(s, "mean_staleness", json_real(t->stale_n ? t->stale / t->stale_n : 0));
    set(s, "max_staleness", json_integer(t->max_stale));
    set(s, "max_streak", json_integer(t->max_streak));
    set(s, "bn_stats", json_string("averaged across ranks before every evaluation and checkpoint"));
    set(s, "straggler", json_integer(straggler));
    set(s, "exit", json_string(exit_reason ? exit_reason : "ok"));
    return s;
}

/* Rank 0: the partial file of a running run: what it has so far, rank 0's own per-rank record and
 * a summary whose exit is "running" (schema-valid, so a run killed now leaves a readable record). */
static void save_partial(run_t *r, double wall) {
    double mine[6];
    my_stats(r, mine);
    set(r->log->root, "summary", summary_json(r, wall, ranks_json(r, mine, 1), "running"));
    char path[sizeof r->cfg.out + 16];
    partial_path(r->cfg.out, path, sizeof path);
    write_file(r, path);
}

void runlog_save(run_t *r) {
    if (r->me == 0) save_partial(r, run_now() - r->t_start);
}

/* Rank 0, the summary in place: a finished run replaces --out atomically and drops the partial
 * file; a stopped one (or a finished one whose --out cannot be written) leaves --out as it was and
 * says why in the partial file. Returns 1 if the run's record could not be written where promised. */
static int write_result(run_t *r, const char *exit_reason) {
    char partial[sizeof r->cfg.out + 16], why[1400];
    partial_path(r->cfg.out, partial, sizeof partial);
    if (!exit_reason) {
        if (!write_file(r, r->cfg.out)) {
            unlink(partial);
            return 0;
        }
        snprintf(why, sizeof why, "finished, but --out %s could not be written", r->cfg.out);
        set(json_object_get(r->log->root, "summary"), "exit", json_string(why));
        write_file(r, partial);
        return 1;
    }
    int failed = write_file(r, partial);
    if (!failed)
        fprintf(stderr, "eager-train: the stopped run's record is %s (%s is left as it was)\n", partial,
                r->cfg.out);
    return failed;
}

int runlog_finish(run_t *r, const char *exit_reason, int collective) {
    runlog_t *l = r->log;
    if (!l) return 0;
    double mine[6];
    my_stats(r, mine);
    double *all = r->me == 0 ? malloc((size_t)r->P * sizeof mine) : NULL;
    if (collective)
        MPI_Gather(mine, 6, MPI_DOUBLE, all, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    else if (all)
        memcpy(all, mine, sizeof mine);
    int failed = 0;
    if (r->me == 0) {
        runlog_rounds_flush(r, r->epochs_done);
        int strag = all ? ranks_json(r, all, collective ? r->P : 1) : 0;
        char hx[32];
        snprintf(hx, sizeof hx, "%016llx", (unsigned long long)r->tot.decision_hash);
        set(json_object_get(l->root, "controller"), "decision_hash", json_string(hx));
        double wall = run_now() - r->t_start;
        set(l->root, "summary", summary_json(r, wall, strag, exit_reason));
        if (r->data_path)
            set(json_object_get(l->root, "environment"), "data_path", json_string(r->data_path));
        if (r->warm_json) set(l->root, "warmup", r->warm_json), r->warm_json = NULL;
        if (r->be && r->be->ops->add_json) r->be->ops->add_json(r->be, l->root);
        failed = write_result(r, exit_reason);
        if (!failed && !exit_reason && !r->cfg.quiet) {
            char t1[32] = "-";
            if (r->tot.final_top1 >= 0 && data_num_classes(r->train) > 0)
                snprintf(t1, sizeof t1, "%.2f%%", 100 * r->tot.final_top1);
            printf("eager-train: %s: %d epochs in %.1f s, final test top-1 %s, metrics %s\n", r->cfg.mode,
                   r->cfg.epochs, wall, t1, r->cfg.out);
        }
        json_decref(l->root);
        free(all);
        free(l->hosts);
        free(l->hosts_buf);
    }
    free(l);
    r->log = NULL;
    return failed;
}
