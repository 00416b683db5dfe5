/* results/jschema.c: see jschema.h. */
#include "results/jschema.h"

#include <ctype.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_CAP      2048
#define MAX_REF_DEPTH 64

static void add_err(jschema_errors *e, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_err(jschema_errors *e, const char *path, const char *fmt, ...) {
    int max = e->max > 0 ? e->max : 100;
    if (e->n >= max) {
        e->dropped++;
        return;
    }
    char body[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    size_t len = strlen(path) + strlen(body) + 3;
    char *m = malloc(len);
    if (!m) {
        e->dropped++;
        return;
    }
    snprintf(m, len, "%s: %s", path, body);
    if (e->n == e->cap) {
        int cap = e->cap ? 2 * e->cap : 16;
        char **nm = realloc(e->msg, (size_t)cap * sizeof *nm);
        if (!nm) {
            free(m);
            e->dropped++;
            return;
        }
        e->msg = nm;
        e->cap = cap;
    }
    e->msg[e->n++] = m;
}

void jschema_errors_free(jschema_errors *e) {
    for (int i = 0; i < e->n; i++) free(e->msg[i]);
    free(e->msg);
    e->msg = NULL;
    e->n = e->cap = e->dropped = 0;
}

const char *jschema_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

static int is_ident(const char *k) {
    if (!*k || !(isalpha((unsigned char)*k) || *k == '_')) return 0;
    for (; *k; k++)
        if (!(isalnum((unsigned char)*k) || *k == '_' || *k == '-')) return 0;
    return 1;
}

/* Appends ".key" (or ["key"]) / "[i]" to path in place; returns the old length to restore. */
static size_t path_key(char *path, const char *key) {
    size_t l = strlen(path);
    if (is_ident(key))
        snprintf(path + l, PATH_CAP - l, ".%s", key);
    else
        snprintf(path + l, PATH_CAP - l, "[\"%s\"]", key);
    return l;
}
static size_t path_idx(char *path, size_t i) {
    size_t l = strlen(path);
    snprintf(path + l, PATH_CAP - l, "[%zu]", i);
    return l;
}

/* Resolves "#", "#/a/b" (with ~0 ~1 escapes) against root. NULL if not resolvable. */
static const json_t *resolve_ref(const json_t *root, const char *ref) {
    if (ref[0] != '#') return NULL;
    const json_t *cur = root;
    const char *p = ref + 1;
    if (*p == 0) return root;
    if (*p != '/') return NULL;
    char tok[256];
    while (*p == '/') {
        p++;
        size_t n = 0;
        while (*p && *p != '/') {
            char c = *p++;
            if (c == '~' && *p == '0') {
                c = '~';
                p++;
            } else if (c == '~' && *p == '1') {
                c = '/';
                p++;
            }
            if (n + 1 >= sizeof tok) return NULL;
            tok[n++] = c;
        }
        tok[n] = 0;
        if (json_is_object(cur))
            cur = json_object_get(cur, tok);
        else if (json_is_array(cur)) {
            char *end;
            long i = strtol(tok, &end, 10);
            if (*end || i < 0) return NULL;
            cur = json_array_get(cur, (size_t)i);
        } else
            return NULL;
        if (!cur) return NULL;
    }
    return cur;
}

static int type_matches(const char *t, const json_t *v) {
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "integer")) {
        if (json_is_integer(v)) return 1;
        if (json_is_real(v)) {
            double x = json_real_value(v);
            return isfinite(x) && x == floor(x);
        }
        return 0;
    }
    return 0;
}

static const char *known_types[] = {"object", "array",  "string",  "boolean",
                                    "null",   "number", "integer", NULL};

static char *dump_compact(const json_t *v) {
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    return s ? s : strdup("?");
}

/* ------------------------------------------------------------------------------------------ */
/* validation                                                                                  */

/* one pass over a document (validation) or a schema (lint): the root refs resolve against, where
 * the errors go and how many there were */
typedef struct {
    const json_t *root;
    jschema_errors *errs;
    int total;
} vctx;

static void verr(vctx *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void verr(vctx *c, const char *path, const char *fmt, ...) {
    char body[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    c->total++;
    add_err(c->errs, path, "%s", body);
}

static void validate(vctx *c, const json_t *s, const json_t *v, char *path, int depth);

/* "type" (a name or an array of names): 1 if s has none or v has one of them; else reports
 * "expected ..., got ..." at path and returns 0 (the caller then checks nothing more). */
static int check_type(vctx *c, const json_t *s, const json_t *v, const char *path) {
    const json_t *type = json_object_get(s, "type");
    if (!type) return 1;
    int ok = 0;
    char want[256] = "";
    if (json_is_string(type)) {
        ok = type_matches(json_string_value(type), v);
        snprintf(want, sizeof want, "%s", json_string_value(type));
    } else if (json_is_array(type)) {
        size_t i;
        const json_t *t;
        json_array_foreach(type, i, t) {
            if (!json_is_string(t)) continue;
            if (type_matches(json_string_value(t), v)) ok = 1;
            size_t l = strlen(want);
            snprintf(want + l, sizeof want - l, "%s%s", i ? " or " : "", json_string_value(t));
        }
    }
    if (!ok) verr(c, path, "expected %s, got %s", want, jschema_type_name(v));
    return ok;
}

/* "enum" (v equals one of the items) and "const" (v equals it); any value v. */
static void check_enum_const(vctx *c, const json_t *s, const json_t *v, const char *path) {
    const json_t *en = json_object_get(s, "enum");
    if (json_is_array(en)) {
        size_t i;
        const json_t *e;
        int ok = 0;
        json_array_foreach(en, i, e) if (json_equal((json_t *)e, (json_t *)v)) ok = 1;
        if (!ok) {
            char *a = dump_compact(v), *b = dump_compact(en);
            verr(c, path, "value %s is not one of %s", a, b);
            free(a);
            free(b);
        }
    }
    const json_t *cn = json_object_get(s, "const");
    if (cn && !json_equal((json_t *)cn, (json_t *)v)) {
        char *a = dump_compact(v), *b = dump_compact(cn);
        verr(c, path, "value %s is not %s", a, b);
        free(a);
        free(b);
    }
}

/* "minimum" and "maximum" (inclusive); v a number. */
static void check_number(vctx *c, const json_t *s, const json_t *v, const char *path) {
    double x = json_number_value(v);
    const json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
    if (json_is_number(mn) && x < json_number_value(mn))
        verr(c, path, "%.17g is below the minimum %.17g", x, json_number_value(mn));
    if (json_is_number(mx) && x > json_number_value(mx))
        verr(c, path, "%.17g is above the maximum %.17g", x, json_number_value(mx));
}

/* "pattern" (POSIX extended, unanchored: a match anywhere); v a string. */
static void check_pattern(vctx *c, const json_t *s, const json_t *v, const char *path) {
    const json_t *pat = json_object_get(s, "pattern");
    if (!json_is_string(pat)) return;
    regex_t re;
    if (regcomp(&re, json_string_value(pat), REG_EXTENDED | REG_NOSUB) != 0) {
        verr(c, path, "schema pattern \"%s\" does not compile", json_string_value(pat));
        return;
    }
    if (regexec(&re, json_string_value(v), 0, NULL, 0) != 0)
        verr(c, path, "\"%s\" does not match the pattern \"%s\"", json_string_value(v),
             json_string_value(pat));
    regfree(&re);
}

/* "required", then each property of v in its order against "properties" or else
 * "additionalProperties" (false: an error; a schema: checked against it); v an object. path is
 * extended per property and restored. */
static void check_object(vctx *c, const json_t *s, const json_t *v, char *path, int depth) {
    const json_t *req = json_object_get(s, "required");
    if (json_is_array(req)) {
        size_t i;
        const json_t *k;
        json_array_foreach(req, i, k) {
            if (json_is_string(k) && !json_object_get(v, json_string_value(k)))
                verr(c, path, "missing required property \"%s\"", json_string_value(k));
        }
    }
    const json_t *props = json_object_get(s, "properties");
    const json_t *addl = json_object_get(s, "additionalProperties");
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        const json_t *ps = json_is_object(props) ? json_object_get(props, key) : NULL;
        size_t l = path_key(path, key);
        if (ps)
            validate(c, ps, val, path, depth + 1);
        else if (json_is_false(addl))
            verr(c, path, "unexpected property (not in the schema)");
        else if (json_is_object(addl))
            validate(c, addl, val, path, depth + 1);
        path[l] = 0;
    }
}

/* "minItems", "maxItems", then every item against "items"; v an array. path as check_object. */
static void check_array(vctx *c, const json_t *s, const json_t *v, char *path, int depth) {
    const json_t *mi = json_object_get(s, "minItems"), *ma = json_object_get(s, "maxItems");
    if (json_is_integer(mi) && (json_int_t)json_array_size(v) < json_integer_value(mi))
        verr(c, path, "array has %zu items, fewer than minItems %lld", json_array_size(v),
             (long long)json_integer_value(mi));
    if (json_is_integer(ma) && (json_int_t)json_array_size(v) > json_integer_value(ma))
        verr(c, path, "array has %zu items, more than maxItems %lld", json_array_size(v),
             (long long)json_integer_value(ma));
    const json_t *items = json_object_get(s, "items");
    if (!items) return;
    size_t i;
    const json_t *it;
    json_array_foreach(v, i, it) {
        size_t l = path_idx(path, i);
        validate(c, items, it, path, depth + 1);
        path[l] = 0;
    }
}

/* Validates v against schema s (a boolean or an object; anything else accepts all), reporting
 * at path (PATH_CAP bytes, extended and restored below). A "$ref" replaces its siblings
 * (draft-07); a type mismatch stops the checks of this schema (no cascade of follow-up errors);
 * the other keyword groups run in turn. depth bounds nesting and $ref loops. */
static void validate(vctx *c, const json_t *s, const json_t *v, char *path, int depth) {
    if (json_is_true(s)) return;
    if (json_is_false(s)) {
        verr(c, path, "no value is allowed here");
        return;
    }
    if (!json_is_object(s)) return;
    if (depth > MAX_REF_DEPTH) {
        verr(c, path, "schema nesting too deep ($ref loop?)");
        return;
    }
    const json_t *ref = json_object_get(s, "$ref");
    if (json_is_string(ref)) {
        const json_t *t = resolve_ref(c->root, json_string_value(ref));
        if (!t)
            verr(c, path, "schema $ref \"%s\" does not resolve", json_string_value(ref));
        else
            validate(c, t, v, path, depth + 1);
        return;
    }
    if (!check_type(c, s, v, path)) return;
    check_enum_const(c, s, v, path);
    if (json_is_number(v)) check_number(c, s, v, path);
    if (json_is_string(v)) check_pattern(c, s, v, path);
    if (json_is_object(v)) check_object(c, s, v, path, depth);
    if (json_is_array(v)) check_array(c, s, v, path, depth);
}

int jschema_validate(const json_t *schema, const json_t *inst, jschema_errors *errs) {
    vctx c = {schema, errs, 0};
    char path[PATH_CAP] = "$";
    validate(&c, schema, inst, path, 0);
    return c.total;
}

/* ------------------------------------------------------------------------------------------ */
/* schema lint                                                                                 */

static const char *annotations[] = {"$schema", "$id",      "$comment",    "title", "description",
                                    "default", "examples", "definitions", NULL};
static const char *keywords[] = {"type",     "enum",       "const",
                                 "minimum",  "maximum",    "pattern",
                                 "required", "properties", "additionalProperties",
                                 "items",    "minItems",   "maxItems",
                                 "$ref",     NULL};

static int in_list(const char *k, const char **l) {
    for (; *l; l++)
        if (!strcmp(k, *l)) return 1;
    return 0;
}

static void lint(vctx *c, const json_t *s, char *path, int depth);

/* "definitions" or "properties": an object of schemas, each linted at path.NAME. */
static void lint_schema_map(vctx *c, const json_t *v, char *path, int depth) {
    if (!json_is_object(v)) {
        verr(c, path, "must be an object");
        return;
    }
    const char *k;
    json_t *sub;
    json_object_foreach((json_t *)v, k, sub) {
        size_t l = path_key(path, k);
        lint(c, sub, path, depth + 1);
        path[l] = 0;
    }
}

/* "type": a known type name or a non-empty array of them. */
static void lint_type(vctx *c, const json_t *v, const char *path) {
    if (json_is_string(v)) {
        if (!in_list(json_string_value(v), known_types))
            verr(c, path, "unknown type \"%s\"", json_string_value(v));
    } else if (json_is_array(v) && json_array_size(v) > 0) {
        size_t i;
        json_t *t;
        json_array_foreach(v, i, t) if (!json_is_string(t) || !in_list(json_string_value(t), known_types))
            verr(c, path, "item %zu is not a known type name", i);
    } else
        verr(c, path, "must be a type name or a non-empty array of them");
}

/* "pattern": a string that compiles as a POSIX extended regular expression. */
static void lint_pattern(vctx *c, const json_t *v, const char *path) {
    regex_t re;
    if (!json_is_string(v))
        verr(c, path, "must be a string");
    else if (regcomp(&re, json_string_value(v), REG_EXTENDED | REG_NOSUB) != 0)
        verr(c, path, "\"%s\" is not a POSIX extended regular expression", json_string_value(v));
    else
        regfree(&re);
}

/* Keyword k (one of keywords[]) with its value v, reported at path (which ends in k). */
static void lint_keyword(vctx *c, const char *k, const json_t *v, char *path, int depth) {
    size_t i;
    json_t *t;
    if (!strcmp(k, "type"))
        lint_type(c, v, path);
    else if (!strcmp(k, "enum")) {
        if (!json_is_array(v) || json_array_size(v) == 0) verr(c, path, "must be a non-empty array");
    } else if (!strcmp(k, "minimum") || !strcmp(k, "maximum")) {
        if (!json_is_number(v)) verr(c, path, "must be a number");
    } else if (!strcmp(k, "minItems") || !strcmp(k, "maxItems")) {
        if (!json_is_integer(v) || json_integer_value(v) < 0) verr(c, path, "must be a non-negative integer");
    } else if (!strcmp(k, "pattern"))
        lint_pattern(c, v, path);
    else if (!strcmp(k, "required")) {
        if (!json_is_array(v))
            verr(c, path, "must be an array of strings");
        else
            json_array_foreach(v, i, t) if (!json_is_string(t)) verr(c, path, "item %zu is not a string", i);
    } else if (!strcmp(k, "properties"))
        lint_schema_map(c, v, path, depth);
    else if (!strcmp(k, "additionalProperties") || !strcmp(k, "items"))
        lint(c, v, path, depth + 1);
    else if (!strcmp(k, "$ref")) {
        if (!json_is_string(v))
            verr(c, path, "must be a string");
        else if (!resolve_ref(c->root, json_string_value(v)))
            verr(c, path, "\"%s\" does not resolve (only local refs like \"#/definitions/x\")",
                 json_string_value(v));
    }
}

/* Checks that schema s (at path, PATH_CAP bytes, extended and restored) uses only the keywords
 * the validator enforces, or annotations, each with a value of the right shape; "definitions"
 * and every subschema are checked too, to depth 200. */
static void lint(vctx *c, const json_t *s, char *path, int depth) {
    if (json_is_boolean(s)) return;
    if (!json_is_object(s)) {
        verr(c, path, "a schema must be an object or a boolean, got %s", jschema_type_name(s));
        return;
    }
    if (depth > 200) {
        verr(c, path, "schema nesting too deep");
        return;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        size_t l = path_key(path, k);
        if (!strcmp(k, "definitions"))
            lint_schema_map(c, v, path, depth);
        else if (!in_list(k, annotations) && !in_list(k, keywords))
            verr(c, path, "unsupported keyword \"%s\" (the validator would not enforce it)", k);
        else if (in_list(k, keywords))
            lint_keyword(c, k, v, path, depth);
        path[l] = 0;
    }
}

int jschema_lint(const json_t *schema, jschema_errors *errs) {
    vctx c = {schema, errs, 0};
    char path[PATH_CAP] = "#";
    lint(&c, schema, path, 0);
    return c.total;
}
