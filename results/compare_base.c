/* compare_base.c -- pcoll-compare's allocation arena, growable strings and lists, JSON helpers,
 * notes (compare.h). Everything allocated here lives until exit: the tool reads a few hundred files. */
#include "results/compare.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------- */
/* arena: every string / array the tool allocates lives until exit                             */

static void **arena;
static size_t arena_n, arena_cap;

void *amalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "pcoll-compare: out of memory\n");
        exit(2);
    }
    if (arena_n == arena_cap) {
        arena_cap = arena_cap ? 2 * arena_cap : 256;
        void **na = realloc(arena, arena_cap * sizeof *na);
        if (!na) {
            fprintf(stderr, "pcoll-compare: out of memory\n");
            exit(2);
        }
        arena = na;
    }
    arena[arena_n++] = p;
    return p;
}
void arena_free(void) {
    for (size_t i = 0; i < arena_n; i++) free(arena[i]);
    free(arena);
}
char *astrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = amalloc(n);
    memcpy(p, s, n);
    return p;
}
char *avprintf(const char *fmt, va_list ap) {
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    char *p = amalloc((size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    return p;
}
char *aprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *p = avprintf(fmt, ap);
    va_end(ap);
    return p;
}

/* growable string */
void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->n + (size_t)n + 1 > cap) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            fprintf(stderr, "pcoll-compare: out of memory\n");
            exit(2);
        }
        b->s = ns;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}
char *sb_take(sbuf *b) { /* moves into the arena */
    char *p = astrdup(b->s ? b->s : "");
    free(b->s);
    b->s = NULL;
    b->n = b->cap = 0;
    return p;
}

/* growable pointer list */
void pl_push(plist *l, void *p) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        void **nv = amalloc((size_t)cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, (size_t)l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = p;
}
int pl_find_str(const plist *l, const char *s) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp((const char *)l->v[i], s)) return i;
    return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* JSON helpers                                                                               */

double jnum(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}
const char *jstr(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}
/* config value -> text ("(unset)" if absent) */
char *val_text(const json_t *v) {
    if (!v) return astrdup("(unset)");
    if (json_is_string(v)) return astrdup(json_string_value(v));
    if (json_is_integer(v)) return aprintf("%lld", (long long)json_integer_value(v));
    if (json_is_real(v)) return aprintf("%.10g", json_real_value(v));
    if (json_is_true(v)) return astrdup("true");
    if (json_is_false(v)) return astrdup("false");
    if (json_is_null(v)) return astrdup("null");
    char *d = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    char *r = astrdup(d ? d : "?");
    free(d);
    return r;
}

/* ---------------------------------------------------------------------------------------- */
/* notes and lists of values                                                                  */

void cmp_note(compare_t *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *p = avprintf(fmt, ap);
    va_end(ap);
    if (pl_find_str(&c->notes, p) < 0) pl_push(&c->notes, p);
}

char *vs_list(const plist *vals) {
    sbuf b = {0};
    for (int i = 0; i < vals->n; i++) sb_printf(&b, "%s%s", i ? " vs " : "", (const char *)vals->v[i]);
    return sb_take(&b);
}
