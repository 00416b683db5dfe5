#!/bin/bash
# papi_optional.sh: the trainer runs where libpapi cannot be loaded, and its run JSON says so:
# papi.available false with reason "unavailable (libpapi not found: ...)"; the file still
# validates against results/schema/run.schema.json.  EAGER_PAPI_LIB names a library that does
# not exist, which is what a machine without PAPI looks like to trainer/metrics.c.
. "$(dirname "$0")/../trainer/common.sh"
[ -x "$TRAIN" ] || { echo "SKIP: $TRAIN not built"; exit 77; }
EAGER_PAPI_LIB=/nonexistent/libpapi.so.99 run 1 --epochs 1 --max-steps 4 --out "$TMP/run.json" ||
  { cat "$TMP/out"; fail "eager-train failed without libpapi"; }
python3 - "$TMP/run.json" <<'PY' || fail "papi field"
import json, sys
p = json.load(open(sys.argv[1]))["papi"]
assert p["available"] is False, p
assert p["reason"].startswith("unavailable (libpapi not found: "), p["reason"]
print("ok: papi:", p["reason"])
PY
if [ -x "$B/bin/pcoll-validate" ]; then
  "$B/bin/pcoll-validate" results/schema/run.schema.json "$TMP/run.json" > "$TMP/val" 2>&1 || { cat "$TMP/val"; fail "run JSON does not validate"; }
fi
echo "ok: trainer ran without libpapi"
