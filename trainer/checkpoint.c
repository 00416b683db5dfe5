/* checkpoint.c -- atomic checkpoints: write DIR/ckpt-EEEE.tmp, fsync, rename to
 * DIR/ckpt-EEEE.ckpt, fsync the folder, then the same for DIR/latest.ckpt (a copy, not a link,
 * so a crash leaves either the old or the new one, never half of one).
 * Format: the nn tensor file (nn.h: "NNTF0001") holding param.*, mom.*, bn.* tensors and one
 * "trainer.meta" tensor: [version, epoch, ranks, wall_s, seed 4 x 16 bits, desc hash 4 x 16 bits,
 * nparams 4 x 16 bits] -- integers < 2^16 in floats are exact. */
#include "trainer/nn/nn.h"
#include "trainer/trainer.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define META_VERSION 1
#define META_N       16

uint64_t ckpt_desc_hash(const char *desc, size_t nparams) {
    uint64_t h = fnv1a64(FNV1A64_INIT, desc, strlen(desc));
    return (h ^ nparams) * 1099511628211ull;
}

static void put64(float *f, uint64_t v) {
    for (int i = 0; i < 4; i++) f[i] = (float)((v >> (16 * i)) & 0xFFFF);
}
static uint64_t get64(const float *f) {
    uint64_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint64_t)f[i] << (16 * i);
    return v;
}

static int fsync_path(const char *path, int dir) {
    int fd = open(path, dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static int write_atomic(const char *dir, const char *name, nn_tensor_t *ts, int nt, char *err, size_t n) {
    char tmp[1100], fin[1100];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(fin, sizeof fin, "%s/%s", dir, name);
    if (nn_tfile_write(tmp, ts, nt, err, n)) return -1;
    if (fsync_path(tmp, 0) || rename(tmp, fin) || fsync_path(dir, 1)) {
        snprintf(err, n, "checkpoint %s: %s", fin, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int ckpt_save(const char *dir, const nn_model_t *m, const ckpt_meta_t *meta, char *path_out, size_t plen,
              char *err, size_t n) {
    if (mkdir(dir, 0755) && errno != EEXIST)
        return snprintf(err, n, "checkpoint folder %s: %s", dir, strerror(errno)), -1;
    int nt = 2 * m->nptensors + 2 * m->nbns + 1, k = 0;
    nn_tensor_t *ts = calloc((size_t)nt, sizeof *ts);
    float mf[META_N] = {0};
    if (!ts) return snprintf(err, n, "checkpoint: out of memory"), -1;
    for (int i = 0; i < m->nptensors; i++) {
        const nn_param_t *p = &m->ptensors[i];
        for (int w = 0; w < 2; w++, k++) {
            snprintf(ts[k].name, sizeof ts[k].name, "%s.%s", w ? "mom" : "param", p->name);
            ts[k].ndim = 1;
            ts[k].shape[0] = (int)p->n;
            ts[k].n = p->n;
            ts[k].data = (w ? m->mom : m->params) + p->off;
        }
    }
    for (int i = 0; i < m->nbns; i++) {
        const nn_bnstat_t *b = &m->bns[i];
        for (int w = 0; w < 2; w++, k++) {
            snprintf(ts[k].name, sizeof ts[k].name, "bn.%s.%s", b->name, w ? "var" : "mean");
            ts[k].ndim = 1;
            ts[k].shape[0] = b->c;
            ts[k].n = (size_t)b->c;
            ts[k].data = m->bn_stats + b->off + (w ? (size_t)b->c : 0);
        }
    }
    mf[0] = META_VERSION;
    mf[1] = (float)meta->epoch;
    mf[2] = (float)meta->ranks;
    mf[3] = (float)meta->wall_s;
    put64(mf + 4, meta->seed);
    put64(mf + 8, ckpt_desc_hash(m->desc, m->nparams));
    put64(mf + 12, m->nparams);
    snprintf(ts[k].name, sizeof ts[k].name, "trainer.meta");
    ts[k].ndim = 1;
    ts[k].shape[0] = META_N;
    ts[k].n = META_N;
    ts[k].data = mf;
    k++;
    char name[64];
    snprintf(name, sizeof name, "ckpt-%04d.ckpt", meta->epoch);
    int rc = write_atomic(dir, name, ts, k, err, n);
    if (!rc) rc = write_atomic(dir, "latest.ckpt", ts, k, err, n);
    if (!rc && path_out) snprintf(path_out, plen, "%s/%s", dir, name);
    free(ts);
    return rc;
}

int ckpt_load(const char *dir, nn_model_t *m, ckpt_meta_t *meta, char *err, size_t n) {
    char path[1100];
    snprintf(path, sizeof path, "%s/latest.ckpt", dir);
    nn_tfile_t *f = nn_tfile_load(path, err, n);
    if (!f) return -1;
    int rc = -1;
    const nn_tensor_t *mt = nn_tfile_find(f, "trainer.meta");
    if (!mt || mt->n != META_N || mt->data[0] != META_VERSION) {
        snprintf(err, n,
                 "checkpoint %s: missing or unknown 'trainer.meta' (not a checkpoint of this "
                 "trainer, or another version)",
                 path);
        goto out;
    }
    uint64_t dh = get64(mt->data + 8), np = get64(mt->data + 12);
    if (np != m->nparams || dh != ckpt_desc_hash(m->desc, m->nparams)) {
        snprintf(err, n,
                 "checkpoint %s: model mismatch: it holds %llu parameters of another model "
                 "description; this run builds '%s' with %zu parameters",
                 path, (unsigned long long)np, m->desc, m->nparams);
        goto out;
    }
    meta->epoch = (int)mt->data[1];
    meta->ranks = (int)mt->data[2];
    meta->wall_s = mt->data[3];
    meta->seed = get64(mt->data + 4);
    for (int i = 0; i < m->nptensors; i++) {
        const nn_param_t *p = &m->ptensors[i];
        for (int w = 0; w < 2; w++) {
            char nm[128];
            snprintf(nm, sizeof nm, "%s.%s", w ? "mom" : "param", p->name);
            const nn_tensor_t *t = nn_tfile_find(f, nm);
            if (!t || t->n != p->n) {
                snprintf(err, n, "checkpoint %s: tensor '%s' %s", path, nm,
                         t ? "has the wrong size" : "is missing");
                goto out;
            }
            memcpy((w ? m->mom : m->params) + p->off, t->data, p->n * sizeof(float));
        }
    }
    for (int i = 0; i < m->nbns; i++) {
        const nn_bnstat_t *b = &m->bns[i];
        for (int w = 0; w < 2; w++) {
            char nm[128];
            snprintf(nm, sizeof nm, "bn.%s.%s", b->name, w ? "var" : "mean");
            const nn_tensor_t *t = nn_tfile_find(f, nm);
            if (!t || t->n != (size_t)b->c) {
                snprintf(err, n, "checkpoint %s: tensor '%s' %s", path, nm,
                         t ? "has the wrong size" : "is missing");
                goto out;
            }
            memcpy(m->bn_stats + b->off + (w ? (size_t)b->c : 0), t->data, (size_t)b->c * sizeof(float));
        }
    }
    rc = 0;
out:
    nn_tfile_free(f);
    return rc;
}
