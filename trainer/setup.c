/* setup.c -- from the command line to a run ready for its first epoch. Every step that can fail
 * on some rank is agreed by all (run_agree): bad input ends every rank with a message naming
 * the option, file or rank, never a hang. */
#include "trainer/setup.h"
#include "collectives/sim/imbalance.h"
#include "common/hash.h"
#include "trainer/crash.h"
#include "trainer/datasplit.h"
#include "trainer/end.h"
#include "trainer/runlog.h"
#include "trainer/watchdog.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern void openblas_set_num_threads(int);
#ifdef _OPENMP
#include <omp.h>
#endif

static const char *thread_level_name(int level) {
    return level == MPI_THREAD_SINGLE       ? "MPI_THREAD_SINGLE"
           : level == MPI_THREAD_FUNNELED   ? "MPI_THREAD_FUNNELED"
           : level == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
           : level == MPI_THREAD_MULTIPLE   ? "MPI_THREAD_MULTIPLE"
                                            : "an unknown level";
}

/* The thread level to ask for: MPI_THREAD_MULTIPLE, or the test aid EAGER_TEST_THREAD_LEVEL
 * (single, funneled, serialized), which shows the refusal on an MPI that has MULTIPLE. */
static int thread_level_wanted(void) {
    const char *t = getenv("EAGER_TEST_THREAD_LEVEL");
    if (!t || !*t) return MPI_THREAD_MULTIPLE;
    return !strcmp(t, "single")     ? MPI_THREAD_SINGLE
           : !strcmp(t, "funneled") ? MPI_THREAD_FUNNELED
                                    : MPI_THREAD_SERIALIZED;
}

int run_init(run_t *r, int *argc, char ***argv) {
    int provided;
    memset(r, 0, sizeof *r);
    crash_test_before_init(); /* a test aid, off unless EAGER_TEST_CRASH=RANK:init */
    MPI_Init_thread(argc, argv, thread_level_wanted(), &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &r->P);
    MPI_Comm_rank(MPI_COMM_WORLD, &r->me);
    crash_install(r->me); /* after MPI_Init, whose handlers it chains to */
    /* every rank checks, all agree: the lowest level provided and the first rank that got it */
    struct {
        int level, rank;
    } mine = {provided, r->me}, low;
    MPI_Allreduce(&mine, &low, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD);
    if (low.level >= MPI_THREAD_MULTIPLE) {
        if (watch_start(r) == 0) return 0; /* every collective from here on is watched */
        if (!r->me) fprintf(stderr, "eager-train: the watchdog could not start\n");
        MPI_Finalize();
        return 1;
    }
    int below = provided < MPI_THREAD_MULTIPLE, nbelow = 0;
    MPI_Reduce(&below, &nbelow, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (!r->me) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING] = "";
        int len = 0;
        MPI_Get_library_version(ver, &len);
        ver[strcspn(ver, "\n")] = 0;
        for (char *c = ver; *c; c++)
            if (*c == '\t') *c = ' ';
        fprintf(stderr,
                "eager-train: %s provides thread level %s on rank %d (%d of %d ranks below "
                "MPI_THREAD_MULTIPLE); libpcoll needs MPI_THREAD_MULTIPLE (its engine, liveness and "
                "watchdog threads call MPI concurrently): use an MPI built with it\n",
                ver, thread_level_name(low.level), low.rank, nbelow, r->P);
    }
    MPI_Finalize();
    return 1;
}

/* The default --out: results/runs/<experiment>-<mode>.json (':' of quorum:Q as '-'). */
static void default_out(cfg_t *c) {
    if (*c->out) return;
    mkdir("results", 0755);
    mkdir("results/runs", 0755);
    char mode[64];
    snprintf(mode, sizeof mode, "%s", c->mode);
    for (char *p = mode; *p; p++)
        if (*p == ':') *p = '-';
    snprintf(c->out, sizeof c->out, "results/runs/%s-%s.json", c->experiment, mode);
}

/* Rank 0 writes --out at every epoch end: its folder must exist and be writable before the run
 * spends any time (err stays empty when it is). */
static void out_dir_writable(const char *out, char *err, size_t n) {
    char dir[sizeof((cfg_t *)0)->out];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
    if (access(dir, W_OK) != 0)
        snprintf(err, n, "--out %.480s: its folder %.480s %s (create it first)", out, dir,
                 errno == ENOENT ? "does not exist" : "is not writable");
    else
        err[0] = 0;
}

int run_configure(run_t *r, int argc, char **argv) {
    char err[1024] = "";
    int rc = cfg_parse(&r->cfg, argc, argv, err, sizeof err);
    if (rc == 0) watch_bounds(r, r->cfg.t_warn, r->cfg.t_abort);
    if (rc == 1) {
        if (!r->me) cfg_print_help(stdout);
        watch_stop(r);
        return run_finalize(r) ? -1 : 1;
    }
    run_agree(r, rc == 0, "configuration", err);
    rc = cfg_policy(&r->cfg, &r->policy_cfg, r->policy, sizeof r->policy, err, sizeof err);
    run_agree(r, rc == 0, "configuration", err);
    rc = cfg_check_ranks(&r->cfg, &r->policy_cfg, r->P, err, sizeof err);
    run_agree(r, rc == 0, "configuration", err);
    if (r->me == 0) fputs(r->cfg.notes, stderr); /* flags that override config-file values */
    default_out(&r->cfg);
    if (r->me == 0) out_dir_writable(r->cfg.out, err, sizeof err);
    run_agree(r, r->me != 0 || !*err, "output", err);
    r->global = !strcmp(r->cfg.epoch_mode, "global");
    r->late_go = !strcmp(r->cfg.late, "go");
    r->tot = (run_totals_t){
        .final_top1 = -1, .final_top5 = -1, .t_target = -1, .decision_hash = HASH_FNV1A64_INIT};
    return 0;
}

void run_set_threads(run_t *r) {
    MPI_Comm node;
    watch_enter(r, "ranks per host");
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r->me, MPI_INFO_NULL, &node);
    watch_leave(r);
    MPI_Comm_size(node, &r->local_ranks);
    MPI_Comm_rank(node, &r->local_rank);
    MPI_Comm_free(&node);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    r->threads =
        r->cfg.threads ? r->cfg.threads : (int)(cores / r->local_ranks > 0 ? cores / r->local_ranks : 1);
    openblas_set_num_threads(r->threads);
#ifdef _OPENMP
    omp_set_num_threads(r->threads);
#endif
}

void run_open_data(run_t *r) {
    char err[1024] = "";
    r->train = run_open_split(&r->cfg, DATA_TRAIN, r->cfg.limit_train, err, sizeof err);
    run_agree(r, r->train != NULL, "training data", err);
    r->test = run_open_split(&r->cfg, DATA_TEST, r->cfg.limit_test, err, sizeof err);
    run_agree(r, r->test != NULL, "test data", err);
    if (!r->global) return;
    r->perm = malloc((size_t)data_count(r->train) * sizeof *r->perm);
    if (!r->perm) run_die(r, "global epoch", "out of memory for the permutation");
}

void run_build_model(run_t *r) {
    const cfg_t *c = &r->cfg;
    char err[1024] = "";
    nn_model_t *m = r->model = nn_model_build(c->model, c->batch, c->seed, err, sizeof err);
    run_agree(r, m != NULL, "model", err);
    /* the model's input against the data's sample shape, reported with both shapes */
    int d[3] = {0, 0, 0};
    int nd = data_sample_shape(r->train, d), ok = 1;
    if (m->in_ndim == 3 && nd == 3)
        ok = d[0] == m->in_shape[0] && d[1] == m->in_shape[1] && d[2] == m->in_shape[2];
    else if (m->in_ndim == 2 && nd == 2)
        ok = d[1] == m->in_shape[1];
    else if (m->in_ndim == 1 && nd == 1)
        ok = d[0] == m->in_shape[0];
    else
        ok = 0;
    snprintf(err, sizeof err,
             "model '%s' expects input %dx%dx%d (ndim %d) but %s samples are %dx%dx%d (ndim %d)", c->model,
             m->in_shape[0], m->in_shape[1], m->in_shape[2], m->in_ndim, c->data, d[0], d[1], d[2], nd);
    run_agree(r, ok, "shape mismatch", err);
    int classes = data_num_classes(r->train);
    snprintf(err, sizeof err, "model '%s' has %d outputs but %s has %d classes", c->model, m->nout, c->data,
             classes);
    run_agree(r, classes == 0 || classes == m->nout, "shape mismatch", err);
}

void run_set_optimiser(run_t *r) {
    cfg_t *c = &r->cfg;
    r->sgd = (nn_sgd_t){.lr = (float)c->lr,
                        .momentum = (float)c->momentum,
                        .wd = (float)c->wd,
                        .nesterov = c->nesterov,
                        .wd_all = c->wd_bn};
    nn_lr_sched_t *s = &r->sched;
    nn_lr_sched_default(s, c->lr);
    s->base_batch = c->base_batch;
    s->global_batch = c->batch * r->P;
    s->warmup_epochs = c->warmup;
    s->warmup_start_lr = c->warmup_start_lr;
    s->gamma = c->gamma;
    for (char *p = c->milestones; *p && s->nmilestones < 16;) {
        s->milestones[s->nmilestones++] = strtod(p, &p);
        while (*p == ',') p++;
    }
}

void run_open_backend(run_t *r) {
    char err[1024] = "", what[32];
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r->me, MPI_INFO_NULL, &node);
    r->be = backend_open(r->cfg.device, r->model, &r->cfg, node, err, sizeof err);
    MPI_Comm_free(&node);
    snprintf(what, sizeof what, "--device %s", r->cfg.device);
    run_agree(r, r->be != NULL, what, err);
    const data_alloc_t *mem = r->be->ops->input_alloc ? r->be->ops->input_alloc(r->be) : NULL;
    data_set_batch_memory(r->train, mem); /* the batches made from here on */
    data_set_batch_memory(r->test, mem);
}

/* Wall time from the write of dir/latest.ckpt to now (rank 0's clock and file system, shared with
 * every rank; 0 when unknown or when clocks disagree). */
static double wall_since_write(run_t *r, const char *dir) {
    double lost = 0;
    if (r->me == 0) {
        char path[1100];
        struct stat st;
        struct timespec now;
        snprintf(path, sizeof path, "%s/latest.ckpt", dir);
        if (!stat(path, &st) && !clock_gettime(CLOCK_REALTIME, &now))
            lost =
                (double)(now.tv_sec - st.st_mtim.tv_sec) + 1e-9 * (double)(now.tv_nsec - st.st_mtim.tv_nsec);
        if (!(lost > 0)) lost = 0;
    }
    MPI_Bcast(&lost, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return lost;
}

/* The checkpoint's adaptive controller state as r->carried (the first epoch's ctl.resume) when
 * this run can continue it: adaptive, the same window; on another world size converted
 * (ctl_state_resize: the level kept, every level probed again), with one line saying so;
 * otherwise one line says why the controller starts afresh. Returns 1 if continued. A state that
 * does not load (damaged) ends every rank naming the file. */
static int resume_controller(run_t *r, const ckpt_meta_t *m) {
    char err[1024] = "", why[1200] = "";
    if (!m->ctl || r->policy_cfg.kind != CTL_ADAPTIVE) return 0;
    ctl_state_t *st = NULL;
    int resized = 0;
    const int rc = ctl_state_continue(m->ctl, m->ctl_len, m->ranks, &r->policy_cfg, r->P, &st, &resized, err,
                                      sizeof err);
    snprintf(why, sizeof why, "checkpoint %s/latest.ckpt: tensor 'ctl.state': %s", r->cfg.ckpt_dir, err);
    run_agree(r, rc != CTL_ERR_ARG && rc != CTL_ERR_NOMEM, "resume", why);
    if (r->me == 0 && resized)
        fprintf(stderr,
                "eager-train: the checkpoint's controller state (%d ranks) continues on %d ranks: its level "
                "kept, what it measured per rank restarted, every level probed again\n",
                m->ranks, r->P);
    if (rc != CTL_OK) {
        if (r->me == 0)
            fprintf(stderr,
                    "eager-train: the checkpoint's controller state (%d ranks) is not continued: %s; the "
                    "controller starts afresh\n",
                    m->ranks, err);
        return 0;
    }
    r->carried = st;
    return 1;
}

/* The checkpoint's run totals (format 2) become this run's, so the summary continues them. */
static void resume_totals(run_t *r, const ckpt_meta_t *m) {
    if (m->version < 2) {
        if (r->me == 0)
            fprintf(stderr,
                    "eager-train: %s/latest.ckpt is a format-1 checkpoint: it has no run totals or "
                    "controller state, so they start afresh\n",
                    r->cfg.ckpt_dir);
        return;
    }
    r->tot = m->tot;
    /* the summary's fresh fraction is fresh / (rounds x P): on another world size the earlier
     * rounds' fresh gradients count in this P's units, so that it stays the mean over all rounds
     * of each round's fresh share */
    if (m->ranks != r->P) r->tot.fresh = (uint64_t)llround((double)m->tot.fresh * r->P / m->ranks);
}

/* The run's restarts from the checkpoint, this one appended (the oldest dropped beyond
 * CKPT_MAX_RESTARTS). Collective: continues the controller (resume_controller). */
static void add_restart(run_t *r, const ckpt_meta_t *m) {
    int keep = m->nrestarts < CKPT_MAX_RESTARTS ? m->nrestarts : CKPT_MAX_RESTARTS - 1;
    memcpy(r->restarts, m->restarts + m->nrestarts - keep, (size_t)keep * sizeof *r->restarts);
    ckpt_restart_t *e = &r->restarts[keep];
    /* where epoch `epoch` + 1 continues (resume_position; 0 at an epoch's end) */
    *e = (ckpt_restart_t){.epoch = m->epoch,
                          .ranks_before = m->ranks,
                          .ranks_after = r->P,
                          .batches_done = (int64_t)m->part.fresh,
                          .samples_done = m->part.pos};
    e->wall_lost_s = wall_since_write(r, r->cfg.ckpt_dir);
    e->controller_continued = resume_controller(r, m);
    r->nrestarts = keep + 1;
}

/* A mid-epoch checkpoint's position (ckpt_epoch_t.pos > 0) as where the first epoch continues
 * (r->at; train_epoch), after checking it against this run: the epoch is one this run has, the
 * position is inside its training set, and it is a whole number of --batch batches, one per
 * gradient applied (a resume mid-epoch keeps the checkpoint's --batch). */
static void resume_position(run_t *r, const ckpt_meta_t *m) {
    const cfg_t *c = &r->cfg;
    const ckpt_epoch_t *a = &m->part;
    char err[1200] = "";
    if (!a->pos) return;
    if (m->epoch >= c->epochs)
        snprintf(err, sizeof err,
                 "checkpoint %s/latest.ckpt is in the middle of epoch %d, beyond --epochs %d", c->ckpt_dir,
                 m->epoch + 1, c->epochs);
    else if (a->pos >= data_count(r->train))
        snprintf(
            err, sizeof err,
            "checkpoint %s/latest.ckpt: field 'pos' = %lld is beyond the %lld training samples of this run "
            "(--limit-train)",
            c->ckpt_dir, (long long)a->pos, (long long)data_count(r->train));
    else if (a->fresh * (uint64_t)c->batch != (uint64_t)a->pos)
        snprintf(
            err, sizeof err,
            "checkpoint %s/latest.ckpt is in the middle of epoch %d after %llu batches and %lld samples: "
            "not batches of --batch %d (resume mid-epoch with the --batch that wrote it)",
            c->ckpt_dir, m->epoch + 1, (unsigned long long)a->fresh, (long long)a->pos, c->batch);
    run_agree(r, !*err, "resume", err);
    r->at = *a;
    r->at_ranks = m->ranks;
    if (r->me == 0)
        printf("eager-train: epoch %d continues after %llu of its batches (%lld samples of its permutation), "
               "on %d ranks (the checkpoint's: %d)\n",
               m->epoch + 1, (unsigned long long)a->fresh, (long long)a->pos, r->P, m->ranks);
}

void run_resume(run_t *r) {
    const cfg_t *c = &r->cfg;
    char err[1200] = "";
    ckpt_meta_t meta = {0};
    int cleaned = r->me == 0 && *c->ckpt_dir ? ckpt_clean_tmp(c->ckpt_dir) : 0;
    if (cleaned)
        fprintf(stderr,
                "eager-train: removed %d temporary file%s (.NAME.tmp) an interrupted checkpoint left in %s\n",
                cleaned, cleaned > 1 ? "s" : "", c->ckpt_dir);
    if (c->resume) {
        int ok = r->be->ops->load(r->be, c->ckpt_dir, &meta, err, sizeof err) == 0;
        if (ok && meta.seed != c->seed) {
            ok = 0;
            snprintf(err, sizeof err,
                     "checkpoint %s/latest.ckpt was written with --seed %llu, this run has --seed %llu",
                     c->ckpt_dir, (unsigned long long)meta.seed, (unsigned long long)c->seed);
        }
        if (ok && meta.epoch > c->epochs) {
            ok = 0;
            snprintf(err, sizeof err, "checkpoint %s/latest.ckpt: field 'epoch' = %d is beyond --epochs %d",
                     c->ckpt_dir, meta.epoch, c->epochs);
        }
        run_agree(r, ok, "resume", err);
        resume_position(r, &meta);
        r->epoch0 = r->epochs_done = meta.epoch;
        resume_totals(r, &meta);
        add_restart(r, &meta);
        free(meta.ctl);
        runlog_resumed(r);
    }
    r->wall0 = meta.wall_s;
}

void run_set_rounds(run_t *r) {
    const cfg_t *c = &r->cfg;
    char err[1024] = "";
    ctl_config_t *cc = &r->ctl;
    ctl_config_default(cc);
    cc->policy = r->policy_cfg;
    cc->t_warn = c->t_warn;
    cc->t_abort = c->t_abort;
    cc->log = stderr;
    cc->resume = r->carried;        /* --resume: the checkpoint's controller state (run_resume) */
    cc->on_abort = run_stall_abort; /* a stall this rank caused itself (stopped) blames no other */
    cc->abort_arg = r;
    r->ctl_sync = *cc; /* the epochs of --initial-sync / --final-sync: a static sync policy */
    run_agree(r, ctl_policy_parse("sync", &r->ctl_sync.policy, err, sizeof err) == 0, "policy", err);
    r->ctl_sync.policy.tau = c->tau;
    pcoll_config_t *pc = &r->pcoll;
    pcoll_config_default(pc);
    pc->div = !strcmp(c->div, "fresh") ? PCOLL_DIV_FRESH : PCOLL_DIV_P;
    pc->seed = c->seed;
    pc->tau = r->policy_cfg.tau_by == CTL_TAU_LIBRARY ? c->tau : 0; /* tau_by=policy: the policy's rules */
    pc->ring = c->ring ? c->ring : (2 * c->tau + 2 > 16 ? 2 * c->tau + 2 : 16);
    pc->horizon = 1;
    pc->poll_max_us = 2000; /* idle engines poll at most every 2 ms: cheap on oversubscribed cores */
    pc->records = 1024;
    imb_sched_parse(c->imbalance, &r->imb, err, sizeof err);
    pcoll_record_init(&r->rec, r->P);
}
