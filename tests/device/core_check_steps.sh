#!/bin/bash
# core_check_steps.sh: `make core-check` runs only the steps CORE_CHECK_STEPS names, the race at
# the rank counts and imbalances CORE_CHECK_RACE_RANKS / _IMBS name, and packs the race's files
# into $OUT/race.tgz (short form, CORE_CHECK_QUICK=1, 2 ranks, without DDP: checks the knobs, not
# the figures).
set -u
B=${B:-build}
OUT=$(mktemp -d /tmp/core-check-steps.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; tail -30 "$OUT/stdout" | sed 's/^/    /'; exit 1; }
OUT=$OUT CORE_CHECK_QUICK=1 CORE_CHECK_STEPS=race CORE_CHECK_RACE_RANKS=2 CORE_CHECK_RACE_IMBS="random1 lognormal" \
  CORE_CHECK_BUDGET=540 make --no-print-directory -s core-check B="$B" HAVE_JANSSON= MPICC= > "$OUT/stdout" 2>&1 ||
  fail "make core-check exited $?"
grep -qE '^race +PASS' "$OUT/stdout" || fail "no PASS row for the race"
grep -qE '^(collectives|wake) ' "$OUT/stdout" && fail "a step CORE_CHECK_STEPS does not name ran"
T=$OUT/race/compare-p2.md
[ -s "$T" ] || fail "no race table $T"
grep -qE '^\| sync \| 2 \| none ' "$T" || fail "race: no sync row without imbalance"
grep -qE '^\| adaptive[^|]* \| 2 \| random:k=1,' "$T" || fail "race: no adaptive row under the random straggler"
grep -qE '^\| adaptive[^|]* \| 2 \| lognormal:' "$T" || fail "race: no adaptive row under log-normal delays"
tar tzf "$OUT/race.tgz" | grep -q 'race/compare-p2.md' || fail "race.tgz lacks the table"
echo "ok: CORE_CHECK_STEPS ran the race alone, at 2 ranks, both imbalances, packed in race.tgz"
