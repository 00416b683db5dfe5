/* tfile.c: the "NNTF0001" tensor file (reference states, checkpoints); see nn.h. */
#include "trainer/nn/nn_impl.h"

static const char MAGIC[8] = {'N', 'N', 'T', 'F', '0', '0', '0', '1'};

void nn_tfile_free(nn_tfile_t *f) {
    if (!f) return;
    for (int i = 0; i < f->count; i++) free(f->t[i].data);
    free(f->t);
    free(f);
}

nn_tfile_t *nn_tfile_load(const char *path, char *err, size_t errlen) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        if (err) snprintf(err, errlen, "%s: cannot open", path);
        return NULL;
    }
    nn_tfile_t *f = calloc(1, sizeof *f);
    char mg[8];
    uint32_t cnt = 0;
    long off = 0;
    const char *why = NULL;
    if (!f || fread(mg, 1, 8, fp) != 8 || memcmp(mg, MAGIC, 8)) {
        why = "bad magic (not an NNTF0001 file)";
        goto bad;
    }
    if (fread(&cnt, 4, 1, fp) != 1 || cnt > 1000000) {
        why = "bad tensor count";
        goto bad;
    }
    f->t = calloc(cnt ? cnt : 1, sizeof(nn_tensor_t));
    if (!f->t) {
        why = "out of memory";
        goto bad;
    }
    for (uint32_t i = 0; i < cnt; i++) {
        nn_tensor_t *t = &f->t[i];
        uint32_t nl, nd, d;
        off = ftell(fp);
        if (fread(&nl, 4, 1, fp) != 1 || nl >= sizeof t->name || fread(t->name, 1, nl, fp) != nl) {
            why = "truncated or bad name";
            goto bad;
        }
        t->name[nl] = 0;
        if (fread(&nd, 4, 1, fp) != 1 || nd > 6) {
            why = "bad ndim";
            goto bad;
        }
        t->ndim = (int)nd;
        t->n = 1;
        for (uint32_t k = 0; k < nd; k++) {
            if (fread(&d, 4, 1, fp) != 1 || d > (1u << 30)) {
                why = "bad dimension";
                goto bad;
            }
            t->shape[k] = (int)d;
            t->n *= d;
        }
        t->data = malloc((t->n ? t->n : 1) * sizeof(float));
        if (!t->data) {
            why = "out of memory";
            goto bad;
        }
        f->count = (int)i + 1;
        if (fread(t->data, sizeof(float), t->n, fp) != t->n) {
            why = "truncated data";
            goto bad;
        }
    }
    fclose(fp);
    return f;
bad:
    if (err) snprintf(err, errlen, "%s: %s (tensor record at byte %ld)", path, why, off);
    fclose(fp);
    nn_tfile_free(f);
    return NULL;
}

const nn_tensor_t *nn_tfile_find(const nn_tfile_t *f, const char *name) {
    for (int i = 0; i < f->count; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

int nn_tfile_write(const char *path, const nn_tensor_t *ts, int count, char *err, size_t errlen) {
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        if (err) snprintf(err, errlen, "%s: cannot create", path);
        return NN_ERR_IO;
    }
    uint32_t c = (uint32_t)count;
    int ok = fwrite(MAGIC, 1, 8, fp) == 8 && fwrite(&c, 4, 1, fp) == 1;
    for (int i = 0; ok && i < count; i++) {
        uint32_t nl = (uint32_t)strlen(ts[i].name), nd = (uint32_t)ts[i].ndim;
        ok = fwrite(&nl, 4, 1, fp) == 1 && fwrite(ts[i].name, 1, nl, fp) == nl && fwrite(&nd, 4, 1, fp) == 1;
        for (int k = 0; ok && k < ts[i].ndim; k++) {
            uint32_t d = (uint32_t)ts[i].shape[k];
            ok = fwrite(&d, 4, 1, fp) == 1;
        }
        ok = ok && fwrite(ts[i].data, sizeof(float), ts[i].n, fp) == ts[i].n;
    }
    if (fclose(fp) != 0) ok = 0;
    if (!ok) {
        if (err) snprintf(err, errlen, "%s: write failed", path);
        return NN_ERR_IO;
    }
    return NN_OK;
}

int nn_model_save(const nn_model_t *m, const char *path, char *err, size_t errlen) {
    int n = 2 * m->nptensors + 2 * m->nbns;
    nn_tensor_t *ts = calloc(n ? n : 1, sizeof *ts);
    if (!ts) return NN_ERR_NOMEM;
    int k = 0;
    for (int i = 0; i < m->nptensors; i++)
        for (int j = 0; j < 2; j++) {
            const nn_param_t *p = &m->ptensors[i];
            nn_tensor_t *t = &ts[k++];
            snprintf(t->name, sizeof t->name, "%s%s", j ? "momentum." : "", p->name);
            t->ndim = p->ndim;
            memcpy(t->shape, p->shape, sizeof p->shape);
            t->n = p->n;
            t->data = (j ? m->mom : m->params) + p->off;
        }
    for (int i = 0; i < m->nbns; i++)
        for (int j = 0; j < 2; j++) {
            nn_tensor_t *t = &ts[k++];
            snprintf(t->name, sizeof t->name, "%s.%s", m->bns[i].name, j ? "running_var" : "running_mean");
            t->ndim = 1;
            t->shape[0] = m->bns[i].c;
            t->n = (size_t)m->bns[i].c;
            t->data = m->bn_stats + m->bns[i].off + (j ? m->bns[i].c : 0);
        }
    int rc = nn_tfile_write(path, ts, k, err, errlen);
    free(ts);
    return rc;
}

int nn_model_load(nn_model_t *m, const char *path, char *err, size_t errlen) {
    nn_tfile_t *f = nn_tfile_load(path, err, errlen);
    if (!f) return NN_ERR_IO;
    int rc = NN_OK;
    for (int i = 0; i < m->nptensors && rc == NN_OK; i++) {
        const nn_param_t *p = &m->ptensors[i];
        char nm[96];
        for (int j = 0; j < 2 && rc == NN_OK; j++) {
            snprintf(nm, sizeof nm, "%s%s", j ? "momentum." : "", p->name);
            const nn_tensor_t *t = nn_tfile_find(f, nm);
            if (!t && j) continue;
            if (!t || t->n != p->n) {
                if (err)
                    snprintf(err, errlen, "%s: tensor %s %s", path, nm, t ? "has the wrong size" : "missing");
                rc = NN_ERR_SHAPE;
                break;
            }
            memcpy((j ? m->mom : m->params) + p->off, t->data, p->n * sizeof(float));
        }
    }
    for (int i = 0; i < m->nbns && rc == NN_OK; i++)
        for (int j = 0; j < 2; j++) {
            char nm[96];
            snprintf(nm, sizeof nm, "%s.%s", m->bns[i].name, j ? "running_var" : "running_mean");
            const nn_tensor_t *t = nn_tfile_find(f, nm);
            if (t && t->n == (size_t)m->bns[i].c)
                memcpy(m->bn_stats + m->bns[i].off + (j ? m->bns[i].c : 0), t->data, t->n * sizeof(float));
        }
    nn_tfile_free(f);
    return rc;
}
