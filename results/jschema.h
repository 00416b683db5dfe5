/* results/jschema.h: a small JSON Schema (draft-07 subset) validator over jansson.
 *
 * Supported keywords: type (string or array of strings; "integer" also accepts a real with no
 * fractional part), enum, const, minimum, maximum, pattern (POSIX extended regex, unanchored
 * search as in JSON Schema), required, properties, additionalProperties (boolean or schema),
 * items (a single schema), minItems, maxItems, $ref (JSON pointer into the same document, e.g.
 * "#/definitions/epoch"). Annotations ($schema, $id, $comment, title, description, default,
 * examples, definitions) are ignored. jschema_lint() rejects any other keyword, so a schema can
 * never carry a constraint that is silently not enforced.
 */
#ifndef RESULTS_JSCHEMA_H
#define RESULTS_JSCHEMA_H
#include <jansson.h>

typedef struct {
    char **msg; /* "PATH: message", e.g. "$.epochs[3].test_top1: expected number or null, got string" */
    int n, cap;
    int max; /* stop recording after this many (0 = 100); 'dropped' counts the rest */
    int dropped;
} jschema_errors;

/* Checks the schema itself (known keywords, well-formed values, every $ref resolvable).
 * Returns the number of problems found (recorded in errs with schema paths). */
int jschema_lint(const json_t *schema, jschema_errors *errs);

/* Validates inst against schema (whose $refs resolve within schema). Returns the number of
 * errors (recorded ones + dropped ones); 0 means valid. */
int jschema_validate(const json_t *schema, const json_t *inst, jschema_errors *errs);

void jschema_errors_free(jschema_errors *errs);

/* The JSON type name of a value as the messages use it: object, array, string, integer,
 * number (a real), boolean, null. */
const char *jschema_type_name(const json_t *v);

#endif
