/* splitlist.c: parsers for the official UCF101 list files (ucfTrainTestlist/):
 *   classInd.txt       "1 ApplyEyeMakeup"                                (index 1..K, in order)
 *   trainlist0N.txt    "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1"   (label 1-based)
 *   testlist0N.txt     "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi"     (class from the folder)
 * CRLF line ends (as shipped) and blank lines are accepted.  Errors name the file, line and byte
 * offset. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/data/internal.h"

#define MAX_LINE 4096

/* Next line [*pos, end) without its line end; returns 0 at the end of the buffer. */
static int next_line(const char *buf, size_t len, size_t *pos, const char **line, size_t *ll, size_t *start) {
    if (*pos >= len) return 0;
    size_t s = *pos, e = s;
    while (e < len && buf[e] != '\n') e++;
    *pos = e < len ? e + 1 : e;
    size_t n = e - s;
    while (n > 0 && (buf[s + n - 1] == '\r' || buf[s + n - 1] == ' ' || buf[s + n - 1] == '\t')) n--;
    while (n > 0 && (buf[s] == ' ' || buf[s] == '\t')) {
        s++;
        n--;
    }
    *line = buf + s;
    *ll = n;
    *start = s;
    return 1;
}

static int parse_uint(const char *p, size_t n, long *out) {
    if (n == 0 || n > 9) return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 0;
}

void classind_free(classind_t *ci) {
    for (int i = 0; i < ci->n; i++) free(ci->names[i]);
    free(ci->names);
    ci->names = NULL;
    ci->n = 0;
}

int classind_parse(const char *buf, size_t len, classind_t *ci, const char *name, char *err, size_t errlen) {
    memset(ci, 0, sizeof *ci);
    size_t pos = 0, ll, st;
    const char *l;
    int lineno = 0, cap = 0;
    while (next_line(buf, len, &pos, &l, &ll, &st)) {
        lineno++;
        if (ll == 0) continue;
        size_t sp = 0;
        while (sp < ll && l[sp] != ' ' && l[sp] != '\t') sp++;
        size_t ns = sp;
        while (ns < ll && (l[ns] == ' ' || l[ns] == '\t')) ns++;
        long v;
        if (ll > MAX_LINE || parse_uint(l, sp, &v) || ns == ll || v != ci->n + 1) {
            int want = ci->n + 1; /* classind_free zeroes ci->n */
            classind_free(ci);
            return derr(err, errlen, DATA_ERR_FORMAT,
                        "%s: line %d (byte offset %zu): expected \"%d ClassName\", got \"%.*s\"", name,
                        lineno, st, want, (int)(ll > 120 ? 120 : ll), l);
        }
        for (size_t k = ns; k < ll; k++)
            if (l[k] == '/' || l[k] == ' ' || l[k] == '\t' || (unsigned char)l[k] < 32) {
                classind_free(ci);
                return derr(err, errlen, DATA_ERR_FORMAT,
                            "%s: line %d (byte offset %zu): bad character in class name", name, lineno,
                            st + k);
            }
        if (ci->n == cap) {
            cap = cap ? cap * 2 : 128;
            char **nn = realloc(ci->names, sizeof(char *) * cap);
            if (!nn) {
                classind_free(ci);
                return derr(err, errlen, DATA_ERR_NOMEM, "%s: out of memory", name);
            }
            ci->names = nn;
        }
        char *s = strndup(l + ns, ll - ns);
        if (!s) {
            classind_free(ci);
            return derr(err, errlen, DATA_ERR_NOMEM, "%s: out of memory", name);
        }
        ci->names[ci->n++] = s;
    }
    if (ci->n == 0) return derr(err, errlen, DATA_ERR_FORMAT, "%s: no classes", name);
    return DATA_OK;
}

void splitlist_free(splitlist_t *sl) {
    for (int i = 0; i < sl->n; i++) free(sl->paths[i]);
    free(sl->paths);
    free(sl->labels);
    memset(sl, 0, sizeof *sl);
}

int splitlist_parse(const char *buf, size_t len, const classind_t *ci, splitlist_t *sl, const char *name,
                    char *err, size_t errlen) {
    memset(sl, 0, sizeof *sl);
    size_t pos = 0, ll, st;
    const char *l;
    int lineno = 0, cap = 0;
    const char *why = NULL;
    while (next_line(buf, len, &pos, &l, &ll, &st)) {
        lineno++;
        if (ll == 0) continue;
        size_t sp = 0;
        while (sp < ll && l[sp] != ' ' && l[sp] != '\t') sp++;
        size_t ns = sp;
        while (ns < ll && (l[ns] == ' ' || l[ns] == '\t')) ns++;
        size_t slash = 0;
        while (slash < sp && l[slash] != '/') slash++;
        int cls = -1;
        long lab = 0;
        if (ll > MAX_LINE) {
            why = "line too long";
            goto bad;
        }
        if (slash == 0 || slash >= sp - 1) {
            why = "expected Class/video.avi";
            goto bad;
        }
        for (size_t k = 0; k < sp; k++)
            if ((unsigned char)l[k] < 32 || (l[k] == '.' && k + 1 < sp && l[k + 1] == '.')) {
                why = "bad character or '..' in path";
                goto bad;
            }
        for (int c = 0; c < ci->n; c++)
            if (strlen(ci->names[c]) == slash && memcmp(ci->names[c], l, slash) == 0) {
                cls = c;
                break;
            }
        if (cls < 0) {
            why = "class folder not in classInd";
            goto bad;
        }
        if (ns < ll) {
            if (parse_uint(l + ns, ll - ns, &lab)) {
                why = "bad label";
                goto bad;
            }
            if (lab != cls + 1) {
                why = "label does not match the class folder";
                goto bad;
            }
        }
        if (sl->n == cap) {
            cap = cap ? cap * 2 : 1024;
            char **np = realloc(sl->paths, sizeof(char *) * cap);
            if (!np) {
                why = "out of memory";
                goto bad;
            }
            sl->paths = np;
            int *nl = realloc(sl->labels, sizeof(int) * cap);
            if (!nl) {
                why = "out of memory";
                goto bad;
            }
            sl->labels = nl;
        }
        if (!(sl->paths[sl->n] = strndup(l, sp))) {
            why = "out of memory";
            goto bad;
        }
        sl->labels[sl->n++] = cls;
        continue;
    bad:
        splitlist_free(sl);
        return derr(err, errlen, DATA_ERR_FORMAT, "%s: line %d (byte offset %zu): %s: \"%.*s\"", name, lineno,
                    st, why, (int)(ll > 120 ? 120 : ll), l);
    }
    if (sl->n == 0) return derr(err, errlen, DATA_ERR_FORMAT, "%s: no videos listed", name);
    return DATA_OK;
}
