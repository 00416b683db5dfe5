#!/bin/bash
# ddp_race.sh keeps the step time its delays are scaled to in DIR/pP/step_ms: seeds run one call
# at a time into the same folder get the same delays (one calibration run, not one per call); a
# damaged step_ms is refused, naming the file, and so is one measured on another CPU model; the
# target is DDP's mean final top-1 over the seeds that have one.
. "$(dirname "$0")/common.sh"
R=jobs/ddp_race.sh
D=$TMP/race/p2
race() {
  B=$B MPIRUN="$MPIRUN" bash $R --no-ddp --ranks 2 --imbalances random1 --modes adaptive --epochs 1 \
    --limit-train 512 --limit-test 256 --curve-every 0 --out "$TMP/race" "$@" > "$TMP/race.out" 2>&1
}
race --seeds 1 || fail "seed 1: $(tail -5 "$TMP/race.out")"
[ -s "$D/step_ms" ] || fail "no $D/step_ms after the first call: $(cat "$TMP/race.out")"
race --seeds 2 || fail "seed 2: $(tail -5 "$TMP/race.out")"
grep -q "from $D/step_ms (measured by none/sync-s1.json" "$TMP/race.out" ||
  fail "the second call did not say where its step time came from: $(head -5 "$TMP/race.out")"
[ -e "$D/none/sync-s2.json" ] && fail "the second call measured the step time again (none/sync-s2.json)"
a=$(jq -r ".config.imbalance // empty" "$D/random1/adaptive-s1.json") b=$(jq -r ".config.imbalance // empty" "$D/random1/adaptive-s2.json")
[ -n "$a" ] && [ "$a" = "$b" ] || fail "seeds 1 and 2 ran different delays: '$a' and '$b'"
# the target: DDP's mean final top-1 over seeds, one run per seed, the one without imbalance where
# there is one (DDP's steps do not depend on the delays), also when this call runs no DDP
F=tests/results/ddp/fmnist_ddp_none.json
mkdir -p "$D/linear"
jq '.summary.final_test_top1 = 0.9' $F >"$D/random1/ddp-s1.json"
jq '.summary.final_test_top1 = 0.5' $F >"$D/none/ddp-s1.json"
jq '.summary.final_test_top1 = 0.7' $F >"$D/linear/ddp-s2.json"
jq '.summary.final_test_top1 = null' $F >"$D/none/ddp-s3.json"
race --seeds 2 || fail "with DDP runs in the folder: $(tail -5 "$TMP/race.out")"
grep -q "target top-1 = DDP's mean final top-1, 0.6, over seed(s) 1 2 (" "$TMP/race.out" ||
  fail "target not DDP's mean over seeds 1 (none) and 2 (linear), 0.6, without seed 3 (no top-1): $(grep -i target "$TMP/race.out")"
rm -r "$D/random1/ddp-s1.json" "$D/none/ddp-s1.json" "$D/none/ddp-s3.json" "$D/linear"
good=$(cat "$D/step_ms")
echo "12x none/sync-s1.json" > "$D/step_ms"
race --seeds 3 && fail "a damaged step_ms was accepted"
grep -q "$D/step_ms: '12x' is not a step time" "$TMP/race.out" || fail "damaged step_ms: $(cat "$TMP/race.out")"
# a step time measured on another CPU model is refused, naming both; a run file without one is not
echo "$good" >"$D/step_ms"
cp "$D/none/sync-s1.json" "$TMP/cal.json"
jq '.environment.cpu = "Imaginary CPU 9000; sse4_2 avx"' "$TMP/cal.json" >"$D/none/sync-s1.json"
race --seeds 3 && fail "a step time measured on another CPU model was accepted"
grep -q "$D/step_ms: measured on CPU 'Imaginary CPU 9000' (none/sync-s1.json), this machine's is '" "$TMP/race.out" ||
  fail "another CPU model: $(cat "$TMP/race.out")"
jq '.environment.cpu = null' "$TMP/cal.json" >"$D/none/sync-s1.json"
race --seeds 3 || fail "a calibration run without environment.cpu was refused: $(tail -5 "$TMP/race.out")"
echo "race_calib: ok ($a)"
