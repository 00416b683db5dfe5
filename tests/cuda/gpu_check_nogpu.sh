#!/bin/bash
# gpu_check_nogpu.sh: `make gpu-check` on a machine without a usable GPU, as if the build folder
# came from elsewhere (no jansson headers, no mpicc: HAVE_JANSSON= MPICC=): exits 0, one SKIP
# line per step, the summary table, and its log under $OUT.
set -u
B=${B:-build}
if [ -x "$B/bench/nn_bench_gpu" ] && "$B/bench/nn_bench_gpu" --check >/dev/null 2>&1; then
  echo "SKIP: a GPU is present (make gpu-check runs the real steps there)"; exit 77; fi
OUT=$(mktemp -d /tmp/gpu-check-test.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    /' "$OUT/stdout"; exit 1; }
OUT=$OUT make --no-print-directory -s gpu-check B="$B" HAVE_JANSSON= MPICC= > "$OUT/stdout" 2>&1 ||
  fail "make gpu-check exited $? without a GPU"
for s in tests bench-gpu collectives train; do
  n=$(grep -c "^SKIP $s: no usable GPU" "$OUT/stdout")
  [ "$n" = 1 ] || fail "step $s: $n skip lines, want 1"
  grep -qE "^$s +SKIP" "$OUT/stdout" || fail "summary row of $s missing"
done
grep -q '^==== summary' "$OUT/stdout" || fail "no summary table"
grep -qE '^preflight +DONE' "$OUT/stdout" || fail "no preflight row"
[ -s "$OUT/gpu_check.log" ] || fail "no log under \$OUT"
echo "ok: make gpu-check without a GPU: 4 skip lines, summary, log under \$OUT"
