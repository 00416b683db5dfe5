#!/bin/bash
# papi_optional.sh: the trainer runs where libpapi cannot be loaded, and its run JSON says so:
# papi.available false with reason "unavailable (libpapi not found: ...)"; the file still
# validates against results/schema/run.schema.json.  EAGER_PAPI_LIB names a library that does
# not exist, which is what a machine without PAPI looks like to trainer/metrics.c.
. "$(dirname "$0")/common.sh"
[ -x "$TRAIN" ] || { echo "SKIP: $TRAIN not built"; exit 77; }
EAGER_PAPI_LIB=/nonexistent/libpapi.so.99 run 1 --epochs 1 --max-steps 4 --out "$TMP/run.json" ||
  { cat "$TMP/out"; fail "eager-train failed without libpapi"; }
jq -e '.papi.available == false and (.papi.reason | startswith("unavailable (libpapi not found: "))' \
  "$TMP/run.json" >/dev/null || fail "papi field: $(jq -c .papi "$TMP/run.json")"
echo "ok: papi: $(jq -r .papi.reason "$TMP/run.json")"
if [ -x "$B/bin/pcoll-validate" ]; then
  "$B/bin/pcoll-validate" results/schema/run.schema.json "$TMP/run.json" > "$TMP/val" 2>&1 || { cat "$TMP/val"; fail "run JSON does not validate"; }
fi
echo "ok: trainer ran without libpapi"
