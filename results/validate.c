/* pcoll-validate SCHEMA FILE...: validates JSON files against a JSON Schema (the subset that
 * results/jschema.h implements). Prints "FILE: valid" per good file on stdout and one line per
 * problem on stderr ("FILE: $.json.path: message").
 * Exit: 0 all valid, 1 some file invalid (or not JSON), 2 usage error, unreadable file or bad schema. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/jschema.h"

static void usage(FILE *f) {
    fprintf(f, "usage: pcoll-validate [-q] [--max-errors N] SCHEMA FILE...\n"
               "  Validates each JSON FILE against the JSON Schema SCHEMA (draft-07 subset: type, enum,\n"
               "  const, minimum, maximum, pattern, required, properties, additionalProperties, items,\n"
               "  minItems, maxItems, $ref to #/definitions/...).\n"
               "  -q  do not print 'FILE: valid' lines\n"
               "  exit 0: all valid; 1: some file invalid; 2: usage, unreadable file or bad schema\n"
               "  e.g. pcoll-validate results/schema/run.schema.json runs/*.json\n");
}

int main(int argc, char **argv) {
    int quiet = 0, max_errors = 50, i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        if (!strcmp(argv[i], "-q"))
            quiet = 1;
        else if (!strcmp(argv[i], "--max-errors") && i + 1 < argc)
            max_errors = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else {
            fprintf(stderr, "pcoll-validate: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (argc - i < 2) {
        usage(stderr);
        return 2;
    }
    const char *schema_path = argv[i++];
    json_error_t je;
    json_t *schema = json_load_file(schema_path, 0, &je);
    if (!schema) {
        fprintf(stderr, "%s: cannot load schema: line %d column %d: %s\n", schema_path, je.line, je.column,
                je.text);
        return 2;
    }
    jschema_errors le = {0};
    if (jschema_lint(schema, &le) > 0) {
        for (int k = 0; k < le.n; k++) fprintf(stderr, "%s: schema error: %s\n", schema_path, le.msg[k]);
        jschema_errors_free(&le);
        json_decref(schema);
        return 2;
    }
    jschema_errors_free(&le);

    int rc = 0;
    for (; i < argc; i++) {
        const char *f = argv[i];
        json_t *doc = json_load_file(f, 0, &je);
        if (!doc) {
            if (json_error_code(&je) == json_error_cannot_open_file) {
                fprintf(stderr, "%s: cannot read: %s\n", f, je.text);
                rc = 2;
            } else {
                fprintf(stderr, "%s: not valid JSON: line %d column %d: %s\n", f, je.line, je.column,
                        je.text);
                if (rc < 1) rc = 1;
            }
            continue;
        }
        jschema_errors e = {0};
        e.max = max_errors > 0 ? max_errors : 50;
        int n = jschema_validate(schema, doc, &e);
        for (int k = 0; k < e.n; k++) fprintf(stderr, "%s: %s\n", f, e.msg[k]);
        if (e.dropped) fprintf(stderr, "%s: ... and %d more errors\n", f, e.dropped);
        if (n == 0) {
            if (!quiet) printf("%s: valid\n", f);
        } else {
            fprintf(stderr, "%s: INVALID (%d error%s)\n", f, n, n == 1 ? "" : "s");
            if (rc < 1) rc = 1;
        }
        jschema_errors_free(&e);
        json_decref(doc);
    }
    json_decref(schema);
    return rc;
}
