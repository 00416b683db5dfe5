#!/bin/bash
# Each epoch's record of an adaptive run carries what the controller measured and chose
# ("controller": level, choice, switches, probes, and per level the rounds, rate, lag, score with
# its error and the gradients behind it), valid against results/schema/run.schema.json and named
# on rank 0's console line of the epoch; a static run's records have no such object. 2 ranks,
# linear skew, window=16 (a probe of every level, and its repeats, complete within the run).
. "$(dirname "$0")/../trainer/common.sh"
EPOCHS=3
timeout 240 $MPIRUN -np 2 "$TRAIN" --experiment fmnist --model "$TEST_MODEL" --limit-train 2048 --limit-test 128 --batch 32 \
  --mode adaptive --policy-opts window=16 --epochs $EPOCHS --imbalance linear:unit=20 --out "$TMP/a.json" > "$TMP/out" 2>&1 \
  || { cat "$TMP/out"; fail "adaptive run"; }
J="$TMP/a.json"
"$B/bin/pcoll-validate" -q results/schema/run.schema.json "$J" || fail "the adaptive run's JSON is not valid"
jq -c '.epochs[] | .controller' "$J"
n=$(jq '[.epochs[] | select(.controller)] | length' "$J")
[ "$n" = "$EPOCHS" ] || fail "$n of $EPOCHS epochs have a controller object"
# per epoch: the levels are sync, majority, solo in that order; level and chosen are among them;
# a measured level has numbers (JSON has no NaN or infinity) and, unless its score predates a
# detected change (samples 0), at least 2 gradients per rank behind its score;
# the switches equal the epoch's entries in the run's switch log
for e in $(seq 0 $((EPOCHS - 1))); do
  jq -e --argjson e $e '.epochs[$e].controller as $c | ($c.levels | map(.level)) as $names
    | $names == ["sync", "majority", "solo"]
    and ([$c.level] - $names) == [] and ($c.chosen == null or ([$c.chosen] - $names) == [])
    and all($c.levels[]; (.rate == null and .lag == null and .score == null and .score_se == null
                          and .samples == 0)
                         or (([.rate, .lag, .score, .score_se] | all(type == "number")) and (.samples == 0 or .samples >= 4)))
    and ($c.levels | map(.rounds) | add) > 0
    and $c.switches == ([.controller.switches[] | select(.epoch == $e)] | length)
    and $c.probes <= $c.switches' "$J" > /dev/null || fail "epoch $((e + 1)): bad controller object"
  # rank 0's console line after the epoch line names the level in force and the chosen one
  lvl=$(jq -r --argjson e $e '.epochs[$e].controller.level' "$J")
  line=$(grep -A1 "^epoch *$((e + 1))/$EPOCHS" "$TMP/out" | grep '^  controller: level ')
  echo "epoch $((e + 1)): $line"
  case "$line" in "  controller: level $lvl"*) ;; *) fail "epoch $((e + 1)): console line does not name level $lvl";; esac
  ch=$(jq -r --argjson e $e '.epochs[$e].controller.chosen // ""' "$J")
  [ -z "$ch" ] || grep -q "chosen $ch" <<< "$line" || fail "epoch $((e + 1)): console line does not name chosen $ch"
done
jq -e '([.epochs[].controller.levels[] | select(.samples >= 4)] | length > 0)
  and .epochs[-1].controller.chosen != null' "$J" > /dev/null \
  || fail "no level measured, or none chosen, in $EPOCHS epochs: the checks of those fields did not run"
# pcoll-compare sums the epochs' objects into one note per run
"$B/bin/pcoll-compare" "$J" > "$TMP/cmp" 2>&1 || { cat "$TMP/cmp"; fail "pcoll-compare"; }
grep -m1 "controller rounds sync" "$TMP/cmp" || fail "pcoll-compare has no controller note for the adaptive run"
# a static mode: no controller object, no controller line
timeout 120 $MPIRUN -np 2 "$TRAIN" --experiment fmnist --limit-train 256 --limit-test 64 --batch 32 \
  --mode solo --epochs 1 --out "$TMP/s.json" > "$TMP/out" 2>&1 || { cat "$TMP/out"; fail "solo run"; }
jq -e 'all(.epochs[]; has("controller") | not)' "$TMP/s.json" > /dev/null || fail "solo epochs carry a controller object"
! grep -q '^  controller: level' "$TMP/out" || fail "solo printed a controller line"
echo "ok: $EPOCHS adaptive epochs report the controller; solo does not"
