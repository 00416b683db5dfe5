/* checkpoint.c -- atomic, checksummed checkpoints, checked whole before any of it is used.
 *
 * Writing: DIR/.NAME.tmp, fsync, rename to DIR/NAME, fsync the folder; NAME is ckpt-EEEE.ckpt,
 * then latest.ckpt (a copy, not a link, so a crash leaves either the old or the new one, never
 * half of one). A crash can leave a .NAME.tmp behind: ckpt_clean_tmp removes it at the next start.
 *
 * Format 4: the nn tensor file (nn.h: "NNTF0001") holding
 *   param.NAME, mom.NAME   every parameter tensor and its momentum
 *   bn.NAME.mean, .var     BN running statistics
 *   trainer.meta           [4, then META_WORDS words of 64 bits (enum below), each as 4 floats
 *                          holding 16 bits: integers < 2^16 are exact in floats; doubles go as
 *                          their bit patterns; the words from W_POS on: the epoch in progress at
 *                          a mid-epoch checkpoint, all 0 at an epoch's end]
 *   trainer.restarts       RESTART_WORDS words per resume of the run (present when there is one):
 *                          epoch, ranks before, ranks after, wall lost (bits), controller
 *                          continued, then where in epoch `epoch` + 1 it resumed: batches_done
 *                          (the checkpoint's part.fresh) and samples_done (its part.pos), both 0
 *                          at an epoch's end, both 2^64 - 1 when not recorded (ckpt_restart_t -1:
 *                          a restart carried over from a format-3 checkpoint)
 *   ctl.state              the adaptive controller's state (ctl_state_save bytes, 16 bits per
 *                          float; present when the run has one)
 * followed by a 16-byte trailer: "EAGERSUM" and the FNV-1a 64 of every byte before it
 * (little-endian). Format 3 is format 4 with V3_RESTART_WORDS words per restart (no position)
 * and is still read: its restarts load with position -1 (not recorded; the run file says null),
 * as one may have resumed mid-epoch. Format 2 is format 3 without the mid-epoch words
 * (V2_META_WORDS; always at an epoch's end) and is still read: its restarts, all from epoch ends,
 * load with position 0. Format 1 (no trailer; trainer.meta is 16 floats: 1, epoch, ranks,
 * wall_s, then seed, description hash and parameter count as 4 x 16 bits) is still read; it has
 * no checksum, run totals, restarts or controller state. */
#include "trainer/checkpoint.h"
#include "common/hash.h"
#include "trainer/nn/nn.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORMAT        4
#define V1_META_N     16
#define V2_META_WORDS (W_CTL_LEN + 1)
#define TRAILER_MAGIC "EAGERSUM"
#define TRAILER_BYTES 16
#define MAX_RANKS     (1 << 24)
#define MAX_EPOCH     1000000000  /* an epoch field beyond it is damage, whatever --epochs says */
#define MAX_CTL_BYTES (64u << 20) /* a controller state is kilobytes; this bounds the allocation */
/* the largest magnitude a loaded parameter may have: one whose square is no float would make
 * weight decay and every product with it overflow to inf at the first step */
#define MAX_WEIGHT sqrtf(FLT_MAX)

enum { /* trainer.meta words after the format number */
       W_EPOCH,
       W_RANKS,
       W_WALL,
       W_SEED,
       W_DESC,
       W_NPARAMS,
       W_ROUNDS,
       W_FRESH,
       W_STALE_N,
       W_STALE,
       W_MAX_STALE,
       W_MAX_STREAK,
       W_TOP1,
       W_TOP5,
       W_LOSS,
       W_T_TARGET,
       W_DHASH,
       W_NRESTARTS,
       W_CTL_LEN,
       W_POS, /* formats 3 and 4: ckpt_epoch_t, the epoch in progress */
       W_E_ROUNDS,
       W_E_FRESH,
       W_E_STALE_N,
       W_E_STALE,
       W_E_MAX_STALE,
       W_E_MAX_STREAK,
       W_E_LOSS,
       W_E_LOSS_N,
       W_E_CORRECT,
       W_E_SEEN,
       W_E_STEPS,
       META_WORDS
};
enum { R_EPOCH, R_BEFORE, R_AFTER, R_LOST, R_CTL, R_BATCHES, R_SAMPLES, RESTART_WORDS };
#define V3_RESTART_WORDS R_BATCHES  /* formats 2 and 3: no position */
#define R_UNKNOWN        UINT64_MAX /* R_BATCHES, R_SAMPLES: not recorded */

uint64_t ckpt_desc_hash(const char *desc, size_t nparams) {
    uint64_t h = hash_fnv1a64(HASH_FNV1A64_INIT, desc, strlen(desc));
    return hash_fnv1a64_word(h, nparams);
}

static void put64(float *f, uint64_t v) {
    for (int i = 0; i < 4; i++) f[i] = (float)((v >> (16 * i)) & 0xFFFF);
}
/* -1 if a float is not an integer in [0, 2^16) (a damaged format-1 file) */
static int get64(const float *f, uint64_t *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        if (!(f[i] >= 0 && f[i] < 65536 && f[i] == floorf(f[i]))) return -1;
        *v |= (uint64_t)f[i] << (16 * i);
    }
    return 0;
}
static uint64_t dbits(double d) {
    uint64_t v;
    memcpy(&v, &d, 8);
    return v;
}
static double bitsd(uint64_t v) {
    double d;
    memcpy(&d, &v, 8);
    return d;
}

static int fail(char *err, size_t n, const char *path, const char *fmt, ...) {
    int k = snprintf(err, n, "checkpoint %s: ", path);
    va_list ap;
    va_start(ap, fmt);
    if (k >= 0 && (size_t)k < n) vsnprintf(err + k, n - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

static int fsync_path(const char *path, int dir) {
    int fd = open(path, dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Appends the trailer: "EAGERSUM" and the FNV-1a 64 of the file so far. */
static int append_checksum(const char *path) {
    FILE *f = fopen(path, "r+b");
    if (!f) return -1;
    uint64_t h = HASH_FNV1A64_INIT;
    unsigned char buf[1 << 16], tr[TRAILER_BYTES];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) h = hash_fnv1a64(h, buf, got);
    memcpy(tr, TRAILER_MAGIC, 8);
    for (int i = 0; i < 8; i++) tr[8 + i] = (unsigned char)(h >> (8 * i));
    int ok = !ferror(f) && fseek(f, 0, SEEK_END) == 0 && fwrite(tr, 1, sizeof tr, f) == sizeof tr;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

static int write_atomic(const char *dir, const char *name, nn_tensor_t *ts, int nt, char *err, size_t n) {
    char tmp[1100], fin[1100];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(fin, sizeof fin, "%s/%s", dir, name);
    if (nn_tfile_write(tmp, ts, nt, err, n)) return unlink(tmp), -1;
    if (append_checksum(tmp) || fsync_path(tmp, 0) || rename(tmp, fin) || fsync_path(dir, 1)) {
        fail(err, n, fin, "%s", strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int ckpt_clean_tmp(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int k = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] != '.' || l < 6 || strcmp(e->d_name + l - 4, ".tmp")) continue;
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        k += unlink(p) == 0;
    }
    closedir(d);
    return k;
}

static void tensor(nn_tensor_t *t, const char *name, float *data, size_t count) {
    snprintf(t->name, sizeof t->name, "%.95s", name);
    t->ndim = 1;
    t->shape[0] = (int)count;
    t->n = count;
    t->data = data;
}

/* Tensor i of the model in file order (parameters and momenta, then BN means and variances):
 * its name, where it goes, its length and its range kind (see checked). */
static float *slot(nn_model_t *m, int i, char *nm, size_t nl, size_t *count, char *kind) {
    int np = 2 * m->nptensors;
    if (i < np) {
        const nn_param_t *p = &m->ptensors[i / 2];
        snprintf(nm, nl, "%s.%s", i % 2 ? "mom" : "param", p->name);
        *count = p->n, *kind = 'w';
        return (i % 2 ? m->mom : m->params) + p->off;
    }
    const nn_bnstat_t *b = &m->bns[(i - np) / 2];
    snprintf(nm, nl, "bn.%s.%s", b->name, i % 2 ? "var" : "mean");
    *count = (size_t)b->c, *kind = i % 2 ? 'v' : 'm';
    return m->bn_stats + b->off + (i % 2 ? (size_t)b->c : 0);
}

static void meta_words(const nn_model_t *m, const ckpt_meta_t *c, uint64_t *w) {
    const ckpt_totals_t *t = &c->tot;
    w[W_EPOCH] = (uint64_t)c->epoch, w[W_RANKS] = (uint64_t)c->ranks, w[W_WALL] = dbits(c->wall_s);
    w[W_SEED] = c->seed, w[W_DESC] = ckpt_desc_hash(m->desc, m->nparams), w[W_NPARAMS] = m->nparams;
    w[W_ROUNDS] = t->rounds, w[W_FRESH] = t->fresh, w[W_STALE_N] = t->stale_n, w[W_STALE] = dbits(t->stale);
    w[W_MAX_STALE] = t->max_stale, w[W_MAX_STREAK] = t->max_streak, w[W_TOP1] = dbits(t->final_top1);
    w[W_TOP5] = dbits(t->final_top5), w[W_LOSS] = dbits(t->final_loss), w[W_T_TARGET] = dbits(t->t_target);
    w[W_DHASH] = t->decision_hash, w[W_NRESTARTS] = (uint64_t)c->nrestarts, w[W_CTL_LEN] = c->ctl_len;
    const ckpt_epoch_t *e = &c->part;
    w[W_POS] = (uint64_t)e->pos, w[W_E_ROUNDS] = e->rounds, w[W_E_FRESH] = e->fresh,
    w[W_E_STALE_N] = e->stale_n;
    w[W_E_STALE] = dbits(e->stale), w[W_E_MAX_STALE] = e->max_stale, w[W_E_MAX_STREAK] = e->max_streak;
    w[W_E_LOSS] = dbits(e->loss_sum), w[W_E_LOSS_N] = e->loss_n, w[W_E_CORRECT] = e->correct;
    w[W_E_SEEN] = e->seen, w[W_E_STEPS] = e->steps;
}

/* The epoch in progress from meta words (formats 3 and 4; zero before). */
static void part_of(const uint64_t *w, ckpt_epoch_t *e) {
    *e = (ckpt_epoch_t){.pos = (int64_t)(w[W_POS] & INT64_MAX),
                        .rounds = w[W_E_ROUNDS],
                        .fresh = w[W_E_FRESH],
                        .stale_n = w[W_E_STALE_N],
                        .stale = bitsd(w[W_E_STALE]),
                        .max_stale = (uint32_t)w[W_E_MAX_STALE],
                        .max_streak = (uint32_t)w[W_E_MAX_STREAK],
                        .loss_sum = bitsd(w[W_E_LOSS]),
                        .loss_n = w[W_E_LOSS_N],
                        .correct = w[W_E_CORRECT],
                        .seen = w[W_E_SEEN],
                        .steps = w[W_E_STEPS]};
}

int ckpt_save(const char *dir, const nn_model_t *m, const ckpt_meta_t *meta, char *path_out, size_t plen,
              char *err, size_t n) {
    if (mkdir(dir, 0755) && errno != EEXIST)
        return snprintf(err, n, "checkpoint folder %s: %s", dir, strerror(errno)), -1;
    int nt = 2 * m->nptensors + 2 * m->nbns + 3, k = 0, nr = meta->nrestarts;
    size_t nctl = (meta->ctl_len + 1) / 2;
    nn_tensor_t *ts = calloc((size_t)nt, sizeof *ts);
    float *mf = calloc(1 + 4 * META_WORDS + 4 * RESTART_WORDS * (size_t)nr + nctl, sizeof *mf);
    if (!ts || !mf) return free(ts), free(mf), snprintf(err, n, "checkpoint: out of memory"), -1;
    char nm[128], kind;
    size_t count;
    for (; k < nt - 3; k++) {
        float *d = slot((nn_model_t *)m, k, nm, sizeof nm, &count, &kind); /* read only here */
        tensor(&ts[k], nm, d, count);
    }
    uint64_t words[META_WORDS];
    meta_words(m, meta, words);
    mf[0] = FORMAT;
    for (int i = 0; i < META_WORDS; i++) put64(mf + 1 + 4 * i, words[i]);
    tensor(&ts[k++], "trainer.meta", mf, 1 + 4 * META_WORDS);
    float *rf = mf + 1 + 4 * META_WORDS, *cf = rf + 4 * RESTART_WORDS * nr;
    for (int i = 0; i < nr; i++) {
        const ckpt_restart_t *e = &meta->restarts[i];
        uint64_t rw[RESTART_WORDS] = {(uint64_t)e->epoch,
                                      (uint64_t)e->ranks_before,
                                      (uint64_t)e->ranks_after,
                                      dbits(e->wall_lost_s),
                                      (uint64_t)e->controller_continued,
                                      e->batches_done < 0 ? R_UNKNOWN : (uint64_t)e->batches_done,
                                      e->samples_done < 0 ? R_UNKNOWN : (uint64_t)e->samples_done};
        for (int j = 0; j < RESTART_WORDS; j++) put64(rf + 4 * (RESTART_WORDS * i + j), rw[j]);
    }
    if (nr) tensor(&ts[k++], "trainer.restarts", rf, 4 * RESTART_WORDS * (size_t)nr);
    const unsigned char *cb = meta->ctl;
    for (size_t i = 0; i < meta->ctl_len; i++) cf[i / 2] += (float)(cb[i] << (8 * (i % 2)));
    if (nctl) tensor(&ts[k++], "ctl.state", cf, nctl);
    char name[64];
    if (meta->part.pos)
        snprintf(name, sizeof name, "ckpt-%04d-%08llu.ckpt", meta->epoch,
                 (unsigned long long)meta->part.fresh);
    else
        snprintf(name, sizeof name, "ckpt-%04d.ckpt", meta->epoch);
    int rc = write_atomic(dir, name, ts, k, err, n);
    if (!rc) rc = write_atomic(dir, "latest.ckpt", ts, k, err, n);
    if (!rc && path_out) snprintf(path_out, plen, "%s/%s", dir, name);
    free(ts);
    free(mf);
    return rc;
}

/* 1 if the file ends in a trailer (its checksum checked: -1 with a message on a mismatch), 0 if
 * it has none (format 1, or damaged: the format number decides). */
static int verify_checksum(const char *path, char *err, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, n, path, "cannot open: %s", strerror(errno));
    unsigned char tr[TRAILER_BYTES] = {0}, buf[1 << 16];
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    int has = size >= TRAILER_BYTES && fseek(f, size - TRAILER_BYTES, SEEK_SET) == 0 &&
              fread(tr, 1, TRAILER_BYTES, f) == TRAILER_BYTES && !memcmp(tr, TRAILER_MAGIC, 8);
    uint64_t want = 0, h = HASH_FNV1A64_INIT;
    for (int i = 0; i < 8; i++) want |= (uint64_t)tr[8 + i] << (8 * i);
    long left = has ? size - TRAILER_BYTES : 0;
    rewind(f);
    while (left > 0) {
        size_t got = fread(buf, 1, left < (long)sizeof buf ? (size_t)left : sizeof buf, f);
        if (!got) break;
        h = hash_fnv1a64(h, buf, got);
        left -= (long)got;
    }
    fclose(f);
    if (has && (left || h != want))
        return fail(err, n, path,
                    "checksum mismatch (stored %016llx, computed %016llx over %ld bytes): the file is "
                    "damaged; resume from an earlier ckpt-EEEE.ckpt copied to latest.ckpt",
                    (unsigned long long)want, (unsigned long long)h, size - TRAILER_BYTES);
    return has;
}

/* The epoch in progress consistent (err names the field): nothing in it at an epoch's end; in
 * the middle of one, at least one batch trained, each in a round (a round has at least one), one
 * loss per batch, top-1 hits of the samples seen. The trainer checks pos against the data set and
 * fresh x --batch == pos (setup.c). */
static int check_part(const char *path, const uint64_t *w, const ckpt_epoch_t *e, char *err, size_t n) {
    static const int words[] = {W_E_ROUNDS, W_E_FRESH,  W_E_STALE_N, W_E_STALE, W_E_MAX_STALE, W_E_MAX_STREAK,
                                W_E_LOSS,   W_E_LOSS_N, W_E_CORRECT, W_E_SEEN,  W_E_STEPS};
    if (w[W_POS] > (uint64_t)INT64_MAX / 2)
        return fail(err, n, path, "field 'pos' = %llu is out of range", (unsigned long long)w[W_POS]);
    if (!e->pos) {
        for (size_t i = 0; i < sizeof words / sizeof *words; i++)
            if (w[words[i]])
                return fail(err, n, path,
                            "trainer.meta word %d is not 0 although 'pos' is 0 (no epoch in progress)",
                            words[i]);
        return 0;
    }
    if (!e->fresh || e->fresh > (uint64_t)e->pos || e->rounds < 1 || e->rounds > e->fresh ||
        e->stale_n > e->fresh || e->loss_n != e->fresh || e->steps != e->fresh || e->correct > e->seen ||
        e->seen > (uint64_t)e->pos)
        return fail(err, n, path,
                    "the epoch in progress is inconsistent: pos %lld samples, %llu batches in %llu rounds, "
                    "%llu stale, %llu losses, %llu steps, %llu of %llu samples right",
                    (long long)e->pos, (unsigned long long)e->fresh, (unsigned long long)e->rounds,
                    (unsigned long long)e->stale_n, (unsigned long long)e->loss_n,
                    (unsigned long long)e->steps, (unsigned long long)e->correct,
                    (unsigned long long)e->seen);
    if (!isfinite(e->stale) || e->stale < 0 || !isfinite(e->loss_sum))
        return fail(err, n, path,
                    "field 'stale' = %g or 'loss_sum' = %g of the epoch in progress is not finite", e->stale,
                    e->loss_sum);
    if (w[W_E_MAX_STALE] > UINT32_MAX || w[W_E_MAX_STREAK] > UINT32_MAX)
        return fail(err, n, path,
                    "field 'max_staleness' or 'max_streak' of the epoch in progress is out of range");
    return 0;
}

/* Every scalar of a format-2, 3 or 4 meta in range (err names the field). */
static int check_meta(const char *path, const uint64_t *w, const ckpt_meta_t *c, char *err, size_t n) {
    const ckpt_totals_t *t = &c->tot;
    if (w[W_EPOCH] > MAX_EPOCH)
        return fail(err, n, path, "field 'epoch' = %llu is out of range", (unsigned long long)w[W_EPOCH]);
    if (w[W_RANKS] < 1 || w[W_RANKS] > MAX_RANKS)
        return fail(err, n, path, "field 'ranks' = %llu is out of range [1, %d]",
                    (unsigned long long)w[W_RANKS], MAX_RANKS);
    if (!isfinite(c->wall_s) || c->wall_s < 0)
        return fail(err, n, path, "field 'wall_s' = %g is not finite and >= 0", c->wall_s);
    /* a round takes at most one gradient per rank; the ranks may have changed (elastic resume) */
    if (t->fresh / MAX_RANKS > t->rounds || t->stale_n / MAX_RANKS > t->rounds)
        return fail(err, n, path,
                    "fields 'fresh' = %llu / 'stale_n' = %llu exceed rounds x %d ranks (rounds %llu)",
                    (unsigned long long)t->fresh, (unsigned long long)t->stale_n, MAX_RANKS,
                    (unsigned long long)t->rounds);
    if (!isfinite(t->stale) || t->stale < 0)
        return fail(err, n, path, "field 'stale' = %g is not finite and >= 0", t->stale);
    if (w[W_MAX_STALE] > UINT32_MAX || w[W_MAX_STREAK] > UINT32_MAX)
        return fail(err, n, path, "field 'max_staleness' or 'max_streak' is out of range");
    const double fr[3] = {t->final_top1, t->final_top5, t->t_target};
    const char *fn[3] = {"final_top1", "final_top5", "time_to_target_s"};
    for (int i = 0; i < 3; i++)
        if (!(fr[i] == -1 || (fr[i] >= 0 && (i == 2 ? fr[i] <= c->wall_s : fr[i] <= 1))))
            return fail(err, n, path, "field '%s' = %g is out of range", fn[i], fr[i]);
    if (!isfinite(t->final_loss))
        return fail(err, n, path, "field 'final_loss' = %g is not finite", t->final_loss);
    if (c->nrestarts < 0 || c->nrestarts > CKPT_MAX_RESTARTS)
        return fail(err, n, path, "field 'restarts' = %d is out of range [0, %d]", c->nrestarts,
                    CKPT_MAX_RESTARTS);
    if (c->ctl_len > MAX_CTL_BYTES)
        return fail(err, n, path, "field 'ctl_len' = %zu is out of range", c->ctl_len);
    return check_part(path, w, &c->part, err, n);
}

/* Meta of either format into c (and the model checks). */
static int read_meta(const char *path, const nn_tfile_t *f, int trailer, const nn_model_t *m, ckpt_meta_t *c,
                     char *err, size_t n) {
    const nn_tensor_t *mt = nn_tfile_find(f, "trainer.meta");
    if (!mt || mt->n < 1) return fail(err, n, path, "no 'trainer.meta' (not a checkpoint of this trainer)");
    uint64_t w[META_WORDS] = {0};
    const float *d = mt->data;
    c->version = d[0] == 1 && mt->n == V1_META_N                                ? 1
                 : d[0] == 2 && mt->n == 1 + 4 * V2_META_WORDS                  ? 2
                 : (d[0] == 3 || d[0] == FORMAT) && mt->n == 1 + 4 * META_WORDS ? (int)d[0]
                                                                                : 0;
    if (!c->version)
        return fail(err, n, path,
                    "field 'trainer.meta' format %g (%zu values) is not one this trainer reads (1 to %d)",
                    d[0], mt->n, FORMAT);
    if (c->version >= 2 && !trailer)
        return fail(err, n, path, "no checksum trailer (the file is damaged or truncated)");
    if (c->version == 1) {
        if (!(d[1] >= 0 && d[1] <= MAX_EPOCH && d[2] >= 1 && d[2] <= MAX_RANKS))
            return fail(err, n, path, "field 'epoch' = %g or 'ranks' = %g is out of range", d[1], d[2]);
        w[W_EPOCH] = (uint64_t)d[1], w[W_RANKS] = (uint64_t)d[2], w[W_WALL] = dbits(d[3]);
        if (get64(d + 4, &w[W_SEED]) || get64(d + 8, &w[W_DESC]) || get64(d + 12, &w[W_NPARAMS]))
            return fail(err, n, path, "field 'seed', 'desc_hash' or 'nparams' is damaged");
    } else
        for (int i = 0; i < (c->version == 2 ? V2_META_WORDS : META_WORDS); i++)
            if (get64(d + 1 + 4 * i, &w[i])) return fail(err, n, path, "trainer.meta word %d is damaged", i);
    if (w[W_NPARAMS] != m->nparams || w[W_DESC] != ckpt_desc_hash(m->desc, m->nparams))
        return fail(err, n, path,
                    "model mismatch: it holds %llu parameters of another model description; this run "
                    "builds '%s' with %zu parameters",
                    (unsigned long long)w[W_NPARAMS], m->desc, m->nparams);
    ckpt_totals_t *t = &c->tot;
    c->epoch = (int)(w[W_EPOCH] <= MAX_EPOCH ? w[W_EPOCH] : MAX_EPOCH + 1),
    c->ranks = (int)(w[W_RANKS] & 0x7fffffff);
    c->wall_s = bitsd(w[W_WALL]), c->seed = w[W_SEED];
    t->rounds = w[W_ROUNDS], t->fresh = w[W_FRESH], t->stale_n = w[W_STALE_N], t->stale = bitsd(w[W_STALE]);
    t->max_stale = (uint32_t)w[W_MAX_STALE], t->max_streak = (uint32_t)w[W_MAX_STREAK];
    t->final_top1 = c->version == 1 ? -1 : bitsd(w[W_TOP1]),
    t->final_top5 = c->version == 1 ? -1 : bitsd(w[W_TOP5]);
    t->final_loss = bitsd(w[W_LOSS]), t->t_target = c->version == 1 ? -1 : bitsd(w[W_T_TARGET]);
    t->decision_hash = w[W_DHASH];
    c->nrestarts = (int)(w[W_NRESTARTS] <= CKPT_MAX_RESTARTS ? w[W_NRESTARTS] : CKPT_MAX_RESTARTS + 1);
    c->ctl_len = (size_t)w[W_CTL_LEN];
    part_of(w, &c->part);
    return check_meta(path, w, c, err, n);
}

/* Restart i's position words (format 4; before: 0 in format 2, whose restarts all resumed at an
 * epoch's end, not recorded in format 3) in range into e: both not recorded, or both 0, or
 * 1 <= batches_done <= samples_done <= INT64_MAX / 2 (each batch at least one sample). */
static int restart_position(const char *path, int i, int version, uint64_t *rw, ckpt_restart_t *e, char *err,
                            size_t n) {
    if (version < 4) rw[R_BATCHES] = rw[R_SAMPLES] = version == 2 ? 0 : R_UNKNOWN;
    if (rw[R_BATCHES] == R_UNKNOWN && rw[R_SAMPLES] == R_UNKNOWN) {
        e->batches_done = e->samples_done = -1;
        return 0;
    }
    if (rw[R_SAMPLES] > (uint64_t)INT64_MAX / 2 || rw[R_BATCHES] > rw[R_SAMPLES] ||
        !rw[R_BATCHES] != !rw[R_SAMPLES])
        return fail(err, n, path,
                    "restart %d: field 'batches_done' = %llu or 'samples_done' = %llu is out of range (both "
                    "0 at an epoch's end, else 1 <= batches_done <= samples_done)",
                    i, (unsigned long long)rw[R_BATCHES], (unsigned long long)rw[R_SAMPLES]);
    e->batches_done = (int64_t)rw[R_BATCHES], e->samples_done = (int64_t)rw[R_SAMPLES];
    return 0;
}

/* The restarts and controller state of a format-2, 3 or 4 file into c (c->ctl malloc'd). */
static int read_extras(const char *path, const nn_tfile_t *f, ckpt_meta_t *c, char *err, size_t n) {
    const nn_tensor_t *rt = nn_tfile_find(f, "trainer.restarts");
    const int nw = c->version >= 4 ? RESTART_WORDS : V3_RESTART_WORDS;
    size_t want = 4 * (size_t)nw * (size_t)c->nrestarts;
    if (want && (!rt || rt->n != want))
        return fail(err, n, path, "tensor 'trainer.restarts' is missing or has the wrong size");
    for (int i = 0; i < c->nrestarts; i++) {
        uint64_t rw[RESTART_WORDS] = {0};
        for (int j = 0; j < nw; j++)
            if (get64(rt->data + 4 * (nw * i + j), &rw[j]))
                return fail(err, n, path, "restart %d is damaged", i);
        ckpt_restart_t *e = &c->restarts[i];
        e->epoch = (int)(rw[R_EPOCH] & 0x7fffffff), e->ranks_before = (int)(rw[R_BEFORE] & 0x7fffffff);
        e->ranks_after = (int)(rw[R_AFTER] & 0x7fffffff), e->wall_lost_s = bitsd(rw[R_LOST]),
        e->controller_continued = (int)(rw[R_CTL] & 1);
        if (rw[R_EPOCH] > (uint64_t)c->epoch || rw[R_BEFORE] < 1 || rw[R_BEFORE] > MAX_RANKS ||
            rw[R_AFTER] < 1 || rw[R_AFTER] > MAX_RANKS || rw[R_CTL] > 1 || !isfinite(e->wall_lost_s) ||
            e->wall_lost_s < 0)
            return fail(err, n, path, "restart %d (epoch %d, ranks %d -> %d, lost %g s) is out of range", i,
                        e->epoch, e->ranks_before, e->ranks_after, e->wall_lost_s);
        if (restart_position(path, i, c->version, rw, e, err, n)) return -1;
    }
    const nn_tensor_t *ct = nn_tfile_find(f, "ctl.state");
    if (!c->ctl_len) return 0;
    if (!ct || ct->n != (c->ctl_len + 1) / 2)
        return fail(err, n, path, "tensor 'ctl.state' is missing or has the wrong size");
    unsigned char *b = malloc(c->ctl_len);
    if (!b) return fail(err, n, path, "out of memory for the controller state");
    for (size_t i = 0; i < c->ctl_len; i++) {
        float v = ct->data[i / 2];
        if (!(v >= 0 && v < 65536 && v == floorf(v)))
            return free(b), fail(err, n, path, "tensor 'ctl.state' is damaged");
        b[i] = (unsigned char)(((uint32_t)v >> (8 * (i % 2))) & 0xFF);
    }
    c->ctl = b;
    return 0;
}

/* The tensor `name` of count values, each accepted by the kind's range: 'w' weights (finite,
 * square a float), 'm' BN mean (finite), 'v' BN variance (finite, >= 0). */
static const float *checked(const char *path, const nn_tfile_t *f, const char *name, size_t count, char kind,
                            char *err, size_t n) {
    const nn_tensor_t *t = nn_tfile_find(f, name);
    if (!t || t->n != count)
        return fail(err, n, path, "tensor '%s' %s", name, t ? "has the wrong size" : "is missing"), NULL;
    for (size_t i = 0; i < count; i++) {
        float v = t->data[i];
        int ok = kind == 'w' ? fabsf(v) <= MAX_WEIGHT : kind == 'v' ? isfinite(v) && v >= 0 : isfinite(v);
        if (!ok)
            return fail(err, n, path, "tensor '%s' value %zu = %g is %s", name, i, (double)v,
                        kind == 'w'   ? "not finite or beyond sqrt(FLT_MAX) (its square overflows)"
                        : kind == 'v' ? "not a variance (finite, >= 0)"
                                      : "not finite"),
                   NULL;
    }
    return t->data;
}

int ckpt_load(const char *dir, nn_model_t *m, ckpt_meta_t *meta, char *err, size_t n) {
    char path[1100], nm[128], kind;
    size_t count;
    snprintf(path, sizeof path, "%s/latest.ckpt", dir);
    int trailer = verify_checksum(path, err, n);
    if (trailer < 0) return -1;
    nn_tfile_t *f = nn_tfile_load(path, err, n);
    if (!f) return -1;
    ckpt_meta_t c = {0};
    int nt = 2 * m->nptensors + 2 * m->nbns;
    const float **src = calloc((size_t)nt + 1, sizeof *src);
    int rc = !src ? fail(err, n, path, "out of memory") : read_meta(path, f, trailer, m, &c, err, n);
    if (!rc && c.version >= 2) rc = read_extras(path, f, &c, err, n);
    for (int i = 0; !rc && i < nt; i++) { /* every tensor checked before any is copied */
        slot(m, i, nm, sizeof nm, &count, &kind);
        rc = (src[i] = checked(path, f, nm, count, kind, err, n)) ? 0 : -1;
    }
    for (int i = 0; !rc && i < nt; i++) {
        float *dst = slot(m, i, nm, sizeof nm, &count, &kind);
        memcpy(dst, src[i], count * sizeof(float));
    }
    if (rc)
        free(c.ctl);
    else
        *meta = c;
    free(src);
    nn_tfile_free(f);
    return rc;
}
