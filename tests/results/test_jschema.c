/* Unit tests of results/jschema.c: each keyword accepts and rejects what it should, with the
 * JSON path in the message; lint rejects unsupported keywords and dangling $refs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/jschema.h"

static int fails;

/* expect: NULL = valid; else a substring of the first error */
static void check(const char *schema, const char *inst, const char *expect, int line) {
    json_error_t je;
    json_t *s = json_loads(schema, 0, &je);
    json_t *v = json_loads(inst, JSON_DECODE_ANY, &je);
    if (!s || !v) {
        printf("line %d: bad test JSON: %s\n", line, je.text);
        fails++;
        return;
    }
    jschema_errors le = {0};
    if (jschema_lint(s, &le)) {
        printf("line %d: schema lint: %s\n", line, le.msg[0]);
        fails++;
    }
    jschema_errors_free(&le);
    jschema_errors e = {0};
    int n = jschema_validate(s, v, &e);
    if (!expect && n) {
        printf("line %d: expected valid, got: %s\n", line, e.msg[0]);
        fails++;
    } else if (expect && !n) {
        printf("line %d: expected error '%s', got valid\n", line, expect);
        fails++;
    } else if (expect && !strstr(e.msg[0], expect)) {
        printf("line %d: expected '%s', got '%s'\n", line, expect, e.msg[0]);
        fails++;
    }
    jschema_errors_free(&e);
    json_decref(s);
    json_decref(v);
}
#define OK(s, i)     check(s, i, NULL, __LINE__)
#define BAD(s, i, m) check(s, i, m, __LINE__)

static void lint_bad(const char *schema, const char *expect, int line) {
    json_error_t je;
    json_t *s = json_loads(schema, 0, &je);
    jschema_errors le = {0};
    int n = s ? jschema_lint(s, &le) : 0;
    if (!n || !strstr(le.msg[0], expect)) {
        printf("line %d: lint expected '%s', got '%s'\n", line, expect, n ? le.msg[0] : "(ok)");
        fails++;
    }
    jschema_errors_free(&le);
    json_decref(s);
}

int main(void) {
    /* type */
    OK("{\"type\":\"integer\"}", "3");
    OK("{\"type\":\"integer\"}", "3.0");
    BAD("{\"type\":\"integer\"}", "3.5", "$: expected integer, got number");
    OK("{\"type\":\"number\"}", "3");
    BAD("{\"type\":\"number\"}", "\"3\"", "$: expected number, got string");
    OK("{\"type\":[\"number\",\"null\"]}", "null");
    BAD("{\"type\":[\"number\",\"null\"]}", "true", "$: expected number or null, got boolean");
    BAD("{\"type\":\"object\"}", "[]", "expected object, got array");
    /* enum, const */
    OK("{\"enum\":[\"a\",1]}", "1");
    BAD("{\"enum\":[\"a\",1]}", "\"b\"", "value \"b\" is not one of [\"a\",1]");
    BAD("{\"const\":\"x\"}", "\"y\"", "is not \"x\"");
    /* minimum, maximum */
    OK("{\"minimum\":0,\"maximum\":1}", "1");
    BAD("{\"minimum\":0,\"maximum\":1}", "1.5", "1.5 is above the maximum 1");
    BAD("{\"minimum\":0}", "-2", "-2 is below the minimum 0");
    /* pattern (unanchored unless the pattern anchors) */
    OK("{\"pattern\":\"^quorum:[0-9]+$\"}", "\"quorum:3\"");
    BAD("{\"pattern\":\"^quorum:[0-9]+$\"}", "\"quorum:\"", "does not match the pattern");
    OK("{\"pattern\":\"b\"}", "\"abc\"");
    /* objects */
    const char *obj = "{\"type\":\"object\",\"required\":[\"a\"],\"additionalProperties\":false,"
                      "\"properties\":{\"a\":{\"type\":\"integer\"},\"b c\":{\"type\":\"string\"}}}";
    OK(obj, "{\"a\":1}");
    BAD(obj, "{}", "$: missing required property \"a\"");
    BAD(obj, "{\"a\":1,\"z\":2}", "$.z: unexpected property");
    BAD(obj, "{\"a\":1,\"b c\":2}", "$[\"b c\"]: expected string, got integer");
    OK("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}", "{\"x\":\"y\"}");
    BAD("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}", "{\"x\":[1]}",
        "$.x: expected string, got array");
    /* arrays */
    const char *arr = "{\"type\":\"array\",\"minItems\":1,\"items\":{\"type\":\"object\",\"properties\":{"
                      "\"v\":{\"type\":\"number\"}}}}";
    OK(arr, "[{\"v\":1},{}]");
    BAD(arr, "[]", "fewer than minItems 1");
    BAD(arr, "[{\"v\":1},{\"v\":\"x\"}]", "$[1].v: expected number, got string");
    /* $ref */
    const char *ref = "{\"definitions\":{\"e\":{\"type\":\"object\",\"required\":[\"t\"],\"properties\":{"
                      "\"t\":{\"$ref\":\"#/definitions/f\"}}},"
                      "\"f\":{\"type\":[\"number\",\"null\"],\"minimum\":0,\"maximum\":1}},"
                      "\"type\":\"object\",\"properties\":{\"epochs\":{\"type\":\"array\",\"items\":{\"$"
                      "ref\":\"#/definitions/e\"}}}}";
    OK(ref, "{\"epochs\":[{\"t\":0.5},{\"t\":null}]}");
    BAD(ref, "{\"epochs\":[{\"t\":0.5},{\"t\":null},{\"t\":null},{\"t\":\"0.9\"}]}",
        "$.epochs[3].t: expected number or null, got string");
    BAD(ref, "{\"epochs\":[{}]}", "$.epochs[0]: missing required property \"t\"");
    /* every error is reported, not only the first */
    {
        json_t *s = json_loads(obj, 0, NULL), *v = json_loads("{\"z\":1,\"y\":2}", 0, NULL);
        jschema_errors e = {0};
        int n = jschema_validate(s, v, &e);
        if (n != 3) {
            printf("expected 3 errors, got %d\n", n);
            fails++;
        }
        jschema_errors_free(&e);
        json_decref(s);
        json_decref(v);
    }
    /* lint */
    lint_bad("{\"oneOf\":[]}", "unsupported keyword \"oneOf\"", __LINE__);
    lint_bad("{\"properties\":{\"a\":{\"$ref\":\"#/definitions/nope\"}}}", "does not resolve", __LINE__);
    lint_bad("{\"type\":\"float\"}", "unknown type", __LINE__);
    lint_bad("{\"pattern\":\"(\"}", "not a POSIX extended regular expression", __LINE__);
    if (fails) {
        printf("%d failures\n", fails);
        return 1;
    }
    printf("test_jschema: all checks passed\n");
    return 0;
}
