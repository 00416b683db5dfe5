/* ucf101.c: UCF101 as one feature sequence per video plus the official split lists.
 * Layout under spec->path (lists also found in path/ucfTrainTestlist/):
 *   classInd.txt, trainlist0N.txt, testlist0N.txt      (official format, see splitlist.c)
 *   <features>/<Class>/v_<...>.ucff                     (the list's path with .avi -> .ucff)
 * UCFF feature file (little-endian):
 *   offset 0  char[4]  magic "UCFF"
 *   offset 4  uint32   version (1)
 *   offset 8  uint32   T  frames (>= 1)
 *   offset 12 uint32   F  feature dimensions (>= 1)
 *   offset 16 float32  x[T][F], row-major (frame t at offset 16 + 4*t*F); finite values only
 *   the file is exactly 16 + 4*T*F bytes long.
 * data_open reads every header (checks magic, version, F against feat_dim or the first file, and
 * the file length); samples are read with pread on demand, truncated to max_t frames. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trainer/data/internal.h"

typedef struct {
    char **files; /* full paths */
    int *labels;
    int64_t n;
} ucf_t;

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int ucff_parse_header(const uint8_t *buf, size_t len, uint64_t file_len, ucff_hdr_t *h, const char *name,
                      char *err, size_t errlen) {
    if (len < UCFF_HDR || file_len < UCFF_HDR)
        return derr(err, errlen, DATA_ERR_FORMAT, "%s: truncated UCFF header (%llu of 16 bytes)", name,
                    (unsigned long long)(len < file_len ? len : file_len));
    if (memcmp(buf, "UCFF", 4) != 0)
        return derr(err, errlen, DATA_ERR_FORMAT, "%s: bad magic at byte offset 0 (want \"UCFF\")", name);
    h->version = rd32(buf + 4);
    h->T = rd32(buf + 8);
    h->F = rd32(buf + 12);
    if (h->version != 1)
        return derr(err, errlen, DATA_ERR_FORMAT, "%s: unsupported version %u at byte offset 4", name,
                    h->version);
    if (h->T == 0 || h->T > (1u << 24))
        return derr(err, errlen, DATA_ERR_FORMAT, "%s: bad frame count T=%u at byte offset 8", name, h->T);
    if (h->F == 0 || h->F > (1u << 20))
        return derr(err, errlen, DATA_ERR_FORMAT, "%s: bad feature dimension F=%u at byte offset 12", name,
                    h->F);
    uint64_t want = UCFF_HDR + 4ull * h->T * h->F;
    if (file_len != want)
        return derr(err, errlen, DATA_ERR_FORMAT,
                    "%s: %s: header says T=%u F=%u (%llu bytes) but the file has %llu bytes (data ends "
                    "at byte offset %llu)",
                    name, file_len < want ? "truncated" : "trailing bytes", h->T, h->F,
                    (unsigned long long)want, (unsigned long long)file_len, (unsigned long long)file_len);
    return DATA_OK;
}

int ucff_parse_body(const uint8_t *buf, size_t len, const ucff_hdr_t *h, int t, float *x, const char *name,
                    char *err, size_t errlen) {
    size_t nf = (size_t)t * h->F;
    if (t < 0 || (uint32_t)t > h->T || len < UCFF_HDR + 4 * nf)
        return derr(err, errlen, DATA_ERR_FORMAT, "%s: truncated: %zu bytes, need %zu for %d frames", name,
                    len, UCFF_HDR + 4 * nf, t);
    for (size_t k = 0; k < nf; k++) {
        uint32_t u = rd32(buf + UCFF_HDR + 4 * k);
        float v;
        memcpy(&v, &u, 4);
        if (!isfinite(v))
            return derr(err, errlen, DATA_ERR_FORMAT, "%s: non-finite value at byte offset %zu", name,
                        UCFF_HDR + 4 * k);
        x[k] = v;
    }
    return DATA_OK;
}

static int ucf_load(const data_set_t *s, int64_t idx, int64_t epoch, int augment, float *x, int *label,
                    float *target, char *err, size_t errlen) {
    const ucf_t *u = s->priv;
    const char *path = u->files[idx];
    int t = s->lengths[idx];
    size_t need = UCFF_HDR + 4 * (size_t)t * s->dims[1];
    uint8_t *buf = malloc(need);
    if (!buf) return derr(err, errlen, DATA_ERR_NOMEM, "%s: out of memory", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        free(buf);
        return derr(err, errlen, DATA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    size_t got = 0;
    while (got < need) {
        ssize_t r = pread(fd, buf + got, need - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    struct stat st;
    int rc = fstat(fd, &st);
    close(fd);
    ucff_hdr_t h;
    rc = rc ? derr(err, errlen, DATA_ERR_IO, "%s: cannot stat", path)
            : ucff_parse_header(buf, got, (uint64_t)st.st_size, &h, path, err, errlen);
    if (!rc && (int)h.F != s->dims[1])
        rc = derr(err, errlen, DATA_ERR_FORMAT, "%s: feature dimension F=%u at byte offset 12, want %d", path,
                  h.F, s->dims[1]);
    if (!rc && (int64_t)h.T < t)
        rc = derr(err, errlen, DATA_ERR_FORMAT, "%s: T=%u changed since open (want >= %d)", path, h.T, t);
    if (!rc) rc = ucff_parse_body(buf, got, &h, t, x, path, err, errlen);
    free(buf);
    *label = u->labels[idx];
    *target = 0;
    return rc;
}

static void ucf_close(data_set_t *s) {
    ucf_t *u = s->priv;
    if (!u) return;
    for (int64_t i = 0; i < u->n; i++) free(u->files[i]);
    free(u->files);
    free(u->labels);
    free(u);
}

static const data_ops_t UCF_OPS = {ucf_load, ucf_close};

/* Reads root/name or root/ucfTrainTestlist/name. */
static int read_list(const char *root, const char *name, uint8_t **buf, size_t *len, char *path, size_t plen,
                     char *err, size_t errlen) {
    snprintf(path, plen, "%s/%s", root, name);
    if (access(path, F_OK) != 0) {
        char alt[4200];
        snprintf(alt, sizeof alt, "%s/ucfTrainTestlist/%s", root, name);
        if (access(alt, F_OK) == 0) snprintf(path, plen, "%s", alt);
    }
    return read_file(path, buf, len, (size_t)64 << 20, err, errlen);
}

static int read_header(const char *path, ucff_hdr_t *h, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return derr(err, errlen, DATA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t hb[UCFF_HDR];
    ssize_t r = pread(fd, hb, sizeof hb, 0);
    struct stat st;
    int sr = fstat(fd, &st);
    close(fd);
    if (r < 0 || sr) return derr(err, errlen, DATA_ERR_IO, "%s: read error", path);
    return ucff_parse_header(hb, (size_t)r, (uint64_t)st.st_size, h, path, err, errlen);
}

data_set_t *ucf101_open(const data_spec_t *spec, char *err, size_t errlen) {
    int sp = spec->ucf_split ? spec->ucf_split : 1;
    if (sp < 1 || sp > 9) {
        derr(err, errlen, DATA_ERR_ARG, "ucf101: bad split number %d", sp);
        return NULL;
    }
    const char *feat = spec->ucf_features ? spec->ucf_features : "features";
    data_set_t *s = data_set_alloc(spec);
    ucf_t *u = calloc(1, sizeof *u);
    classind_t ci = {0};
    splitlist_t sl = {0};
    uint8_t *buf = NULL;
    size_t len;
    char path[4200], lname[64];
    if (!s || !u) {
        free(s);
        free(u);
        derr(err, errlen, DATA_ERR_NOMEM, "ucf101: out of memory");
        return NULL;
    }
    s->priv = u;
    s->ops = &UCF_OPS;
    if (read_list(spec->path, "classInd.txt", &buf, &len, path, sizeof path, err, errlen)) goto fail;
    int rc = classind_parse((const char *)buf, len, &ci, path, err, errlen);
    free(buf);
    buf = NULL;
    if (rc) goto fail;
    snprintf(lname, sizeof lname, "%slist%02d.txt", spec->split == DATA_TRAIN ? "train" : "test", sp);
    if (read_list(spec->path, lname, &buf, &len, path, sizeof path, err, errlen)) goto fail;
    rc = splitlist_parse((const char *)buf, len, &ci, &sl, path, err, errlen);
    free(buf);
    buf = NULL;
    if (rc) goto fail;
    int64_t n = sl.n;
    if (spec->limit > 0 && spec->limit < n) n = spec->limit; /* don't read headers we won't use */
    u->files = calloc((size_t)n, sizeof(char *));
    u->labels = calloc((size_t)n, sizeof(int));
    s->lengths = calloc((size_t)n, sizeof(int));
    if (!u->files || !u->labels || !s->lengths) {
        derr(err, errlen, DATA_ERR_NOMEM, "ucf101: out of memory");
        goto fail;
    }
    int F = spec->feat_dim;
    for (int64_t i = 0; i < n; i++) {
        const char *vp = sl.paths[i];
        size_t vl = strlen(vp);
        if (vl > 4 && strcmp(vp + vl - 4, ".avi") == 0) vl -= 4;
        char *fp = malloc(strlen(spec->path) + strlen(feat) + vl + 16);
        if (!fp) {
            derr(err, errlen, DATA_ERR_NOMEM, "ucf101: out of memory");
            goto fail;
        }
        sprintf(fp, "%s/%s/%.*s.ucff", spec->path, feat, (int)vl, vp);
        u->files[i] = fp;
        u->n = i + 1;
        ucff_hdr_t h;
        if (read_header(fp, &h, err, errlen)) goto fail;
        if (F == 0) F = (int)h.F;
        if ((int)h.F != F) {
            derr(err, errlen, DATA_ERR_FORMAT, "%s: feature dimension F=%u at byte offset 12, want %d (%s)",
                 fp, h.F, F, spec->feat_dim ? "spec feat_dim" : "as in the first file");
            goto fail;
        }
        int t = (int)h.T;
        if (spec->max_t > 0 && t > spec->max_t) t = spec->max_t;
        s->lengths[i] = t;
        u->labels[i] = sl.labels[i];
    }
    s->n = n;
    s->ndims = 2;
    s->dims[1] = F; /* dims[0] = T_max, set by data_open */
    s->num_classes = ci.n;
    s->class_names = ci.names;
    ci.names = NULL;
    ci.n = 0;
    splitlist_free(&sl);
    return s;
fail:
    classind_free(&ci);
    splitlist_free(&sl);
    data_close(s);
    return NULL;
}
