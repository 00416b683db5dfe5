/* ckpt_edit -- damages an eager-train checkpoint on purpose (tests only; format: trainer/checkpoint.c).
 *
 *   ckpt_edit FILE flip TENSOR INDEX BIT   flips one bit of float INDEX of TENSOR, checksum left as is
 *   ckpt_edit FILE set TENSOR INDEX VALUE  sets float INDEX of TENSOR (nan, inf, 5e37 ...) and re-signs
 *   ckpt_edit FILE epoch VALUE             sets the checkpoint's epoch field and re-signs
 *   ckpt_edit FILE word INDEX VALUE        sets word INDEX of trainer.meta (format 2, 3 or 4; 0 =
 *                                          the epoch, 19 = the mid-epoch position) and re-signs
 *   ckpt_edit FILE rword I INDEX VALUE     sets word INDEX of restart I (format 4: 5 = batches_done,
 *                                          6 = samples_done) and re-signs
 *   ckpt_edit FILE format1                 rewrites a format-2, 3 or 4 checkpoint as format 1 (no
 *                                          trailer, totals, restarts or controller state)
 *   ckpt_edit FILE format2                 rewrites a format-3 or 4 checkpoint as format 2 (its first
 *                                          19 meta words: no mid-epoch position; the first 5 words
 *                                          of each restart: no position) and re-signs
 *   ckpt_edit FILE format3                 rewrites a format-4 checkpoint as format 3 (the first 5
 *                                          words of each restart: no position) and re-signs
 *
 * TENSOR may be a prefix ("bn." = the first BN tensor in the file). Re-signing rewrites the
 * trailer (formats 2 to 4) so that only the range checks can catch the value; a format-1 file has no
 * trailer. The file is rewritten in place; on any error it is left as it was and the program
 * exits 1 with a message naming the file. */
#include "common/hash.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRAILER     "EAGERSUM"
#define MAX_TENSORS 4096
#define META_V2     (1 + 4 * 19) /* floats of a format-2 trainer.meta */
#define RESTART_V3  (4 * 5)      /* floats per restart, formats 2 and 3 */
#define RESTART_V4  (4 * 7)      /* format 4 */

static const char usage[] = "usage: ckpt_edit FILE flip TENSOR INDEX BIT | set TENSOR INDEX VALUE | epoch "
                            "VALUE | word INDEX VALUE |\n"
                            "       rword I INDEX VALUE | format1 | format2 | format3\n";

typedef struct {
    char name[256];
    size_t off, n; /* byte offset of the first float, number of floats */
} tensor_t;

typedef struct {
    unsigned char *b;
    size_t len;
    tensor_t t[MAX_TENSORS];
    int nt;
} ckpt_t;

static const char *path;

/* Prints "ckpt_edit: FILE: message" and exits 1. */
__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ckpt_edit: %s: ", path);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void wr32(unsigned char *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (unsigned char)(v >> (8 * k));
}
static float rdf(const unsigned char *p) {
    uint32_t u = rd32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static void wrf(unsigned char *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    wr32(p, u);
}

/* The tensor table of the bytes in c (names in file order). */
static void parse(ckpt_t *c) {
    if (c->len < 12 || memcmp(c->b, "NNTF0001", 8)) die("not an NNTF0001 file");
    uint32_t count = rd32(c->b + 8);
    if (count > MAX_TENSORS) die("more than %d tensors", MAX_TENSORS);
    size_t off = 12;
    for (c->nt = 0; c->nt < (int)count; c->nt++) {
        tensor_t *t = &c->t[c->nt];
        if (off + 4 > c->len) die("the tensor table is truncated");
        uint32_t nl = rd32(c->b + off);
        if (nl >= sizeof t->name || off + 8 + nl > c->len) die("tensor %d has a bad name", c->nt);
        memcpy(t->name, c->b + off + 4, nl), t->name[nl] = 0;
        off += 4 + nl;
        uint32_t nd = rd32(c->b + off);
        if (nd > 8 || off + 4 + 4 * (size_t)nd > c->len) die("bad dimensions of tensor %s", t->name);
        t->n = 1;
        for (uint32_t d = 0; d < nd; d++) t->n *= rd32(c->b + off + 4 + 4 * d);
        off += 4 + 4 * (size_t)nd;
        if (t->n > (c->len - off) / 4) die("tensor %s runs past the end of the file", t->name);
        t->off = off;
        off += 4 * t->n;
    }
}

/* Reads the whole file and its tensor table. */
static void load(ckpt_t *c) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open: %s", strerror(errno));
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    c->len = size > 0 ? (size_t)size : 0;
    c->b = malloc(c->len + 1);
    if (!c->b || fread(c->b, 1, c->len, f) != c->len) die("cannot read: %s", strerror(errno));
    fclose(f);
    parse(c);
}

/* The first tensor whose name starts with prefix (exact = 1: equals it); NULL if none. */
static tensor_t *find(ckpt_t *c, const char *prefix, int exact) {
    for (int i = 0; i < c->nt; i++)
        if (exact ? !strcmp(c->t[i].name, prefix) : !strncmp(c->t[i].name, prefix, strlen(prefix)))
            return &c->t[i];
    return NULL;
}

/* Byte offset of float INDEX (a string) of the tensor named by prefix. */
static size_t float_at(ckpt_t *c, const char *prefix, const char *index) {
    tensor_t *t = find(c, prefix, 0);
    if (!t) die("no tensor %s", prefix);
    char *end;
    long i = strtol(index, &end, 10);
    if (*end || end == index || i < 0 || (size_t)i >= t->n) die("index %s is not in the tensor", index);
    return t->off + 4 * (size_t)i;
}

/* Rewrites the trailer's checksum when the file has one (format 2). */
static void resign(ckpt_t *c) {
    if (c->len < 16 || memcmp(c->b + c->len - 16, TRAILER, 8)) return;
    uint64_t h = hash_fnv1a64(HASH_FNV1A64_INIT, c->b, c->len - 16);
    for (int k = 0; k < 8; k++) c->b[c->len - 8 + k] = (unsigned char)(h >> (8 * k));
}

/* Word i of a format-2 trainer.meta: 4 floats of 16 bits each, lowest first. */
static uint64_t meta_word(const unsigned char *meta, int i) {
    uint64_t w = 0;
    for (int k = 0; k < 4; k++) w |= (uint64_t)rdf(meta + 4 * (1 + 4 * i + k)) << (16 * k);
    return w;
}

/* 1 for the tensors format 1 does not have */
static int format2_only(const char *name) {
    return !strcmp(name, "trainer.meta") || !strcmp(name, "trainer.restarts") || !strcmp(name, "ctl.state");
}

static void put_tensor(FILE *f, const char *name, uint32_t n, const unsigned char *data) {
    unsigned char h[4];
    uint32_t nl = (uint32_t)strlen(name);
    wr32(h, nl), fwrite(h, 1, 4, f), fwrite(name, 1, nl, f);
    wr32(h, 1), fwrite(h, 1, 4, f);
    wr32(h, n), fwrite(h, 1, 4, f);
    fwrite(data, 1, 4 * (size_t)n, f);
}

/* The trainer.meta of a format-2, 3 or 4 checkpoint (exits with a message if the file is not one). */
static tensor_t *format2_meta(ckpt_t *c) {
    tensor_t *mt = find(c, "trainer.meta", 1);
    float v = mt ? rdf(c->b + mt->off) : 0;
    if (!mt || mt->n < 1 + 4 * 6 || (v != 2 && v != 3 && v != 4)) die("not a format-2, 3 or 4 checkpoint");
    return mt;
}

/* Writes the 64-bit word v as 4 floats of 16 bits at byte p (the checkpoint's word encoding). */
static void put_word(unsigned char *p, uint64_t v) {
    for (int k = 0; k < 4; k++) wrf(p + 4 * (size_t)k, (float)((v >> (16 * k)) & 0xFFFF));
}

/* Sets meta word i to v (after the format number). */
static void set_word(ckpt_t *c, const tensor_t *mt, int i, uint64_t v) {
    if (i < 0 || 1 + 4 * ((size_t)i + 1) > mt->n) die("trainer.meta has no word %d", i);
    put_word(c->b + mt->off + 4 * (1 + 4 * (size_t)i), v);
}

/* Cuts tensor t, records of `per` floats, to the first `keep` floats of each (its length in its
 * header, the bytes after it moved up); the tensor table is read again. */
static void cut_records(ckpt_t *c, tensor_t *t, size_t per, size_t keep) {
    if (t->n % per) die("tensor %s is not records of %zu values", t->name, per);
    size_t nrec = t->n / per, end = t->off + 4 * t->n, cut = 4 * nrec * (per - keep);
    for (size_t i = 1; i < nrec; i++)
        memmove(c->b + t->off + 4 * i * keep, c->b + t->off + 4 * i * per, 4 * keep);
    memmove(c->b + end - cut, c->b + end, c->len - end);
    c->len -= cut;
    wr32(c->b + t->off - 4, (uint32_t)(nrec * keep)); /* the one dimension, just before the data */
    parse(c);
}

/* Format 4 -> 3: each restart cut to its first 5 words (no position), the format number 3. */
static void to_format3(ckpt_t *c) {
    tensor_t *mt = format2_meta(c);
    if (rdf(c->b + mt->off) != 4) die("not a format-4 checkpoint");
    tensor_t *rt = find(c, "trainer.restarts", 1);
    if (rt) cut_records(c, rt, RESTART_V4, RESTART_V3);
    wrf(c->b + format2_meta(c)->off, 3.0f);
}

/* Format 3 or 4 -> 2: (format 4: to_format3, then) trainer.meta cut to the format number and its
 * first 19 words, the format number 2. */
static void to_format2(ckpt_t *c) {
    tensor_t *mt = format2_meta(c);
    float v = rdf(c->b + mt->off);
    if ((v != 3 && v != 4) || mt->n < META_V2) die("not a format-3 or 4 checkpoint");
    if (v == 4) to_format3(c);
    mt = format2_meta(c);
    cut_records(c, mt, mt->n, META_V2);
    wrf(c->b + format2_meta(c)->off, 2.0f);
}

/* The same tensors (each as one dimension) with format 1's trainer.meta (mt: format 2's) at the
 * end, without the format-2 extras and trailer; written to f. */
static void write_format1(ckpt_t *c, const tensor_t *mt, FILE *f) {
    const unsigned char *m = c->b + mt->off;
    uint64_t wall_bits = meta_word(m, 2);
    double wall;
    memcpy(&wall, &wall_bits, 8);
    float meta[16] = {1.0f, (float)meta_word(m, 0), (float)meta_word(m, 1), (float)wall};
    for (int i = 3; i <= 5; i++) /* seed, description hash, parameter count */
        for (int k = 0; k < 4; k++)
            meta[4 + 4 * (i - 3) + k] = (float)((meta_word(m, i) >> (16 * k)) & 0xFFFF);
    int keep = 0;
    for (int i = 0; i < c->nt; i++) keep += !format2_only(c->t[i].name);
    unsigned char h[4];
    fwrite("NNTF0001", 1, 8, f), wr32(h, (uint32_t)keep + 1), fwrite(h, 1, 4, f);
    for (int i = 0; i < c->nt; i++)
        if (!format2_only(c->t[i].name)) put_tensor(f, c->t[i].name, (uint32_t)c->t[i].n, c->b + c->t[i].off);
    unsigned char mb[64];
    for (int i = 0; i < 16; i++) wrf(mb + 4 * i, meta[i]);
    put_tensor(f, "trainer.meta", 16, mb);
}

/* Writes the edited file (or, with format1_of = its format-2 trainer.meta, its format-1 rewrite)
 * to FILE.edit, then renames that over FILE, so an error never leaves a half-written checkpoint. */
static void save(ckpt_t *c, const tensor_t *format1_of) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.edit", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) die("cannot write: %s", strerror(errno));
    if (format1_of)
        write_format1(c, format1_of, f);
    else
        fwrite(c->b, 1, c->len, f);
    if (ferror(f) | fclose(f)) {
        remove(tmp);
        die("cannot write %s", tmp);
    }
    if (rename(tmp, path)) {
        int e = errno;
        remove(tmp);
        die("cannot replace: %s", strerror(e));
    }
}

int main(int argc, char **argv) {
    if (argc < 3) return fputs(usage, stderr), 1;
    path = argv[1];
    const char *op = argv[2];
    static ckpt_t c;
    load(&c);
    if (!strcmp(op, "flip") && argc == 6) {
        size_t at = float_at(&c, argv[3], argv[4]);
        int bit = atoi(argv[5]);
        if (bit < 0 || bit > 31) die("bit %s is not in [0, 31]", argv[5]);
        c.b[at + bit / 8] ^= (unsigned char)(1u << (bit % 8));
    } else if (!strcmp(op, "set") && argc == 6) {
        size_t at = float_at(&c, argv[3], argv[4]);
        char *end;
        double v = strtod(argv[5], &end);
        if (*end || end == argv[5]) die("value %s is not a number", argv[5]);
        wrf(c.b + at, (float)v);
        resign(&c);
    } else if (!strcmp(op, "epoch") && argc == 4) {
        tensor_t *mt = find(&c, "trainer.meta", 1);
        if (!mt || mt->n < 5) die("no trainer.meta");
        char *end;
        double d = strtod(argv[3], &end);
        if (*end || end == argv[3] || !(d > -9e18 && d < 9e18)) die("epoch %s is not a number", argv[3]);
        int64_t v = (int64_t)d;
        if (mt->n == 16) /* format 1: the epoch as a float */
            wrf(c.b + mt->off + 4, (float)v);
        else /* formats 2 to 4: word 0 after the format number, 4 floats of 16 bits */
            set_word(&c, mt, 0, (uint64_t)v);
        resign(&c);
    } else if (!strcmp(op, "word") && argc == 5) {
        char *end, *end2;
        long i = strtol(argv[3], &end, 10);
        unsigned long long v = strtoull(argv[4], &end2, 10);
        if (*end || end == argv[3] || *end2 || end2 == argv[4])
            die("word %s %s: not two integers", argv[3], argv[4]);
        set_word(&c, format2_meta(&c), (int)i, (uint64_t)v);
        resign(&c);
    } else if (!strcmp(op, "rword") && argc == 6) {
        char *e1, *e2, *e3;
        long r = strtol(argv[3], &e1, 10), i = strtol(argv[4], &e2, 10);
        unsigned long long v = strtoull(argv[5], &e3, 10);
        if (*e1 || e1 == argv[3] || *e2 || e2 == argv[4] || *e3 || e3 == argv[5])
            die("rword %s %s %s: not three integers", argv[3], argv[4], argv[5]);
        tensor_t *mt = format2_meta(&c), *rt = find(&c, "trainer.restarts", 1);
        size_t per = rdf(c.b + mt->off) == 4 ? RESTART_V4 : RESTART_V3;
        if (!rt || r < 0 || i < 0 || (size_t)i >= per / 4 || per * ((size_t)r + 1) > rt->n)
            die("no word %s of restart %s", argv[4], argv[3]);
        put_word(c.b + rt->off + 4 * (per * (size_t)r + 4 * (size_t)i), (uint64_t)v);
        resign(&c);
    } else if (!strcmp(op, "format2") && argc == 3) {
        to_format2(&c);
        resign(&c);
    } else if (!strcmp(op, "format3") && argc == 3) {
        to_format3(&c);
        resign(&c);
    } else if (!strcmp(op, "format1") && argc == 3) {
        save(&c, format2_meta(&c));
        return 0;
    } else
        return fputs(usage, stderr), 1;
    save(&c, NULL);
    return 0;
}
