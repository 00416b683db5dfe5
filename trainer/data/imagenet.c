/* imagenet.c: ImageNet as class folders of JPEG files: root/train/<class>/FILE and
 * root/val/<class>/FILE.
 * Classes = the sorted (strcmp) subfolders of root/train (or of the split's folder when there is no
 * train/); files sorted within a class; hidden files skipped.  Output 3xSxS, S = image_size.
 *   training (augment):  random-resized crop, scale U(0.08,1) of the area, log-uniform aspect
 *                        ratio in [3/4, 4/3] (10 tries, then the centre crop, as torchvision), then
 *                        horizontal flip with probability 1/2; all drawn from (seed, epoch, index)
 *   evaluation:          resize the shorter side to round(S*256/224), centre crop S
 * Bilinear resampling, mean (0.485,0.456,0.406) / std (0.229,0.224,0.225). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trainer/data/internal.h"

static const float IN_MEAN[3] = {0.485f, 0.456f, 0.406f};
static const float IN_STD[3] = {0.229f, 0.224f, 0.225f};
static const float ZERO3[3] = {0, 0, 0}, ONE3[3] = {1, 1, 1};

typedef struct {
    char *dir;    /* root/train or root/val */
    char **files; /* "class/file" */
    int *labels;
    int64_t n, cap;
} imnet_t;

static int cmpstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names in dir (dirs_only: subfolders, else regular files); hidden names skipped. */
static int list_dir(const char *dir, int dirs_only, char ***out, int *nout, char *err, size_t errlen) {
    *out = NULL;
    *nout = 0;
    DIR *d = opendir(dir);
    if (!d) return derr(err, errlen, DATA_ERR_IO, "%s: cannot open folder", dir);
    char **v = NULL;
    int n = 0, cap = 0, rc = DATA_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = path_join(dir, e->d_name);
        struct stat st;
        int ok = p && stat(p, &st) == 0 && (dirs_only ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
        free(p);
        if (!ok) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nv = realloc(v, sizeof(char *) * cap);
            if (!nv) {
                rc = DATA_ERR_NOMEM;
                break;
            }
            v = nv;
        }
        if (!(v[n] = strdup(e->d_name))) {
            rc = DATA_ERR_NOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc) {
        for (int i = 0; i < n; i++) free(v[i]);
        free(v);
        return derr(err, errlen, rc, "%s: out of memory listing the folder", dir);
    }
    if (n) qsort(v, n, sizeof(char *), cmpstr);
    *out = v;
    *nout = n;
    return DATA_OK;
}

static void free_list(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

static void im_close(data_set_t *s) {
    imnet_t *m = s->priv;
    if (!m) return;
    for (int64_t i = 0; i < m->n; i++) free(m->files[i]);
    free(m->files);
    free(m->labels);
    free(m->dir);
    free(m);
}

static int im_load(const data_set_t *s, int64_t idx, int64_t epoch, int augment, float *x, int *label,
                   float *target, char *err, size_t errlen) {
    const imnet_t *m = s->priv;
    char *path = path_join(m->dir, m->files[idx]);
    if (!path) return derr(err, errlen, DATA_ERR_NOMEM, "imagenet: out of memory");
    uint8_t *buf;
    size_t len;
    image_t img;
    int rc = read_file(path, &buf, &len, (size_t)1 << 30, err, errlen);
    if (!rc) {
        rc = jpeg_decode_mem(buf, len, &img, path, err, errlen);
        free(buf);
    }
    free(path);
    if (rc) return rc;
    int S = s->dims[1];
    const float *mean = s->spec.raw ? ZERO3 : IN_MEAN, *std = s->spec.raw ? ONE3 : IN_STD;
    double W = img.w, H = img.h;
    if (augment) {
        rng_t r = rng_key(s->spec.seed, STREAM_AUG, (uint64_t)epoch, (uint64_t)idx);
        double area = W * H, lr0 = log(3.0 / 4.0), lr1 = log(4.0 / 3.0);
        double bw = 0, bh = 0, x0 = 0, y0 = 0;
        int found = 0;
        for (int t = 0; t < 10 && !found; t++) {
            double ta = area * (0.08 + 0.92 * rng_unif(&r));
            double ar = exp(lr0 + (lr1 - lr0) * rng_unif(&r));
            double w = round(sqrt(ta * ar)), h = round(sqrt(ta / ar));
            if (w > 0 && w <= W && h > 0 && h <= H) {
                y0 = (double)rng_below(&r, (uint64_t)(H - h) + 1);
                x0 = (double)rng_below(&r, (uint64_t)(W - w) + 1);
                bw = w;
                bh = h;
                found = 1;
            }
        }
        if (!found) {
            double ratio = W / H;
            if (ratio < 3.0 / 4.0) {
                bw = W;
                bh = round(W / (3.0 / 4.0));
            } else if (ratio > 4.0 / 3.0) {
                bh = H;
                bw = round(H * (4.0 / 3.0));
            } else {
                bw = W;
                bh = H;
            }
            x0 = floor((W - bw) / 2);
            y0 = floor((H - bh) / 2);
        }
        int flip = (int)rng_below(&r, 2);
        image_resample(&img, x0, y0, bw, bh, S, flip, mean, std, x);
    } else {
        double R = round(S * 256.0 / 224.0);
        double Wr, Hr;
        if (W <= H) {
            Wr = R;
            Hr = floor(R * H / W);
        } else {
            Hr = R;
            Wr = floor(R * W / H);
        }
        double left = round((Wr - S) / 2), top = round((Hr - S) / 2);
        double sx = W / Wr, sy = H / Hr;
        image_resample(&img, left * sx, top * sy, S * sx, S * sy, S, 0, mean, std, x);
    }
    free(img.rgb);
    *label = m->labels[idx];
    *target = 0;
    return DATA_OK;
}

static const data_ops_t IM_OPS = {im_load, im_close};

static int add_file(imnet_t *m, const char *cls, const char *f, int label) {
    if (m->n == m->cap) {
        int64_t nc = m->cap ? m->cap * 2 : 1024;
        char **nf = realloc(m->files, sizeof(char *) * nc);
        if (!nf) return DATA_ERR_NOMEM;
        m->files = nf;
        int *nl = realloc(m->labels, sizeof(int) * nc);
        if (!nl) return DATA_ERR_NOMEM;
        m->labels = nl;
        m->cap = nc;
    }
    char *p = path_join(cls, f);
    if (!p) return DATA_ERR_NOMEM;
    m->files[m->n] = p;
    m->labels[m->n++] = label;
    return DATA_OK;
}

data_set_t *imagenet_open(const data_spec_t *spec, char *err, size_t errlen) {
    int S = spec->image_size ? spec->image_size : 224;
    if (S < 8 || S > 4096) {
        derr(err, errlen, DATA_ERR_ARG, "imagenet: bad image_size %d", S);
        return NULL;
    }
    data_set_t *s = data_set_alloc(spec);
    imnet_t *m = calloc(1, sizeof *m);
    char *train = path_join(spec->path, "train");
    char **classes = NULL, **sub = NULL;
    int ncls = 0, nsub = 0;
    if (!s || !m || !train) {
        free(s);
        free(m);
        free(train);
        derr(err, errlen, DATA_ERR_NOMEM, "imagenet: out of memory");
        return NULL;
    }
    s->priv = m;
    s->ops = &IM_OPS;
    m->dir = path_join(spec->path, spec->split == DATA_TRAIN ? "train" : "val");
    if (!m->dir) {
        derr(err, errlen, DATA_ERR_NOMEM, "imagenet: out of memory");
        goto fail;
    }
    struct stat st;
    const char *cdir = stat(train, &st) == 0 && S_ISDIR(st.st_mode) ? train : m->dir;
    if (list_dir(cdir, 1, &classes, &ncls, err, errlen)) goto fail;
    if (ncls == 0) {
        derr(err, errlen, DATA_ERR_FORMAT, "%s: no class folders", cdir);
        goto fail;
    }
    if (list_dir(m->dir, 1, &sub, &nsub, err, errlen)) goto fail;
    for (int k = 0; k < nsub; k++) {
        char **hit = bsearch(&sub[k], classes, ncls, sizeof(char *), cmpstr);
        if (!hit) {
            derr(err, errlen, DATA_ERR_FORMAT, "%s/%s: class folder not among the %d classes of %s", m->dir,
                 sub[k], ncls, cdir);
            goto fail;
        }
        int label = (int)(hit - classes);
        char *cpath = path_join(m->dir, sub[k]);
        char **files = NULL;
        int nf = 0;
        int rc = cpath ? list_dir(cpath, 0, &files, &nf, err, errlen) : DATA_ERR_NOMEM;
        free(cpath);
        if (rc) goto fail;
        for (int i = 0; i < nf && !rc; i++) rc = add_file(m, sub[k], files[i], label);
        free_list(files, nf);
        if (rc) {
            derr(err, errlen, rc, "imagenet: out of memory");
            goto fail;
        }
    }
    if (m->n == 0) {
        derr(err, errlen, DATA_ERR_FORMAT, "%s: no image files", m->dir);
        goto fail;
    }
    s->n = m->n;
    s->ndims = 3;
    s->dims[0] = 3;
    s->dims[1] = S;
    s->dims[2] = S;
    s->numel = (size_t)3 * S * S;
    s->num_classes = ncls;
    s->class_names = classes;
    classes = NULL;
    free_list(sub, nsub);
    free(train);
    return s;
fail:
    free_list(classes, ncls);
    free_list(sub, nsub);
    free(train);
    data_close(s);
    return NULL;
}
