#!/bin/bash
# core_check_quick.sh: `make core-check` in its short form (CORE_CHECK_QUICK=1) on this machine:
# it exits 0, the summary has a PASS row for the benchmark and the race, the benchmark's JSON
# holds sync and solo at 8 B and 4 MiB with no wrong result, and the race's table has the sync
# run without imbalance and the adaptive run under the random straggler (and DDP's rows when
# python3 has torch). Checks the steps, not the figures (those need a core per rank); its budget
# (540 s) and the steps' limits are hang detectors, 6-8 times what the steps take here.
set -u
B=${B:-build}
OUT=$(mktemp -d /tmp/core-check-test.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; tail -40 "$OUT/stdout" | sed 's/^/    /'; exit 1; }
OUT=$OUT CORE_CHECK_QUICK=1 CORE_CHECK_BUDGET=540 make --no-print-directory -s core-check B="$B" HAVE_JANSSON= MPICC= > "$OUT/stdout" 2>&1 ||
  fail "make core-check exited $?"
for s in collectives skew reduce wake race; do grep -qE "^$s +PASS" "$OUT/stdout" || fail "no PASS row for $s"; done
grep -qE '^preflight +DONE' "$OUT/stdout" || fail "no preflight row"
jq -e '.wake_always == true' "$OUT/wake_always-1.json" > /dev/null || fail "wake_always-1.json: not run with --wake-always"
jq -e '[.results[] | select(.skew == "none" and .wrong == 0) | "\(.mode) \(.bytes)"] as $got
  | ["sync", "solo", "mpi_allreduce"] | all(. as $m | [8, 4194304] | all("\($m) \(.)" as $k | $got | index($k)))' \
  "$OUT/collectives_p8.json" > /dev/null || fail "collectives_p8.json: sync, solo or MPI_Allreduce missing at 8 B or 4 MiB"
jq -e '[.results[] | .variant] | index("blocking") and index("nb")' "$OUT/reduce_p8.json" > /dev/null ||
  fail "reduce_p8.json: the blocking and non-blocking variants missing"
# the quick form's one repetition reaches the steps (each runs in its own bash -c)
for j in collectives_p8 reduce_p8; do
  jq -e '.repetitions == 1' "$OUT/$j.json" > /dev/null || fail "$j.json: $(jq .repetitions "$OUT/$j.json") repetitions in the quick form, not 1"
done
[ -s "$OUT/skew_x4.json" ] && grep -q "unit/R" "$OUT/stdout" || fail "skew: no skew_x4.json or no summary of the sweep"
T=$OUT/race/compare-p4.md
[ -s "$T" ] || fail "no race table $T"
grep -qE '^\| sync \| 4 \| none ' "$T" || fail "race: no sync row without imbalance"
grep -qE '^\| adaptive[^|]* \| 4 \| random:k=1,' "$T" || fail "race: no adaptive row under the random straggler"
if python3 -c 'import torch' 2> /dev/null; then
  [ "$(grep -cE '^\| pytorch-ddp \| 4 \|' "$T")" = 2 ] || fail "race: want DDP's two rows (torch is here)"
fi
[ -s "$OUT/core_check.log" ] || fail "no log under \$OUT"
echo "ok: make core-check (quick): benchmark and race steps PASS, JSON and race table complete"
