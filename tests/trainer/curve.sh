#!/bin/bash
# The accuracy curve (--curve-every N, --curve-test M): snapshots every N applied batches, evaluated
# at the epoch ends. (a) A sync run with the curve trains exactly as without it (same weights hash
# at every epoch: the snapshots and their evaluation leave the model bitwise as it was); its points
# are every N batches up to the run's total, in order of batches and wall time; a snapshot taken at
# an epoch's end, evaluated on the epoch's own test set, reads what the epoch end reads (same
# model, BN statistics averaged over the ranks alike). (b) Partial modes under imbalance finish
# with equal replicas (the trainer's hash check) and a complete curve. (c) Bad values are refused
# naming the option, on every rank.
. "$(dirname "$0")/common.sh"
V="$B/bin/pcoll-validate"
S=results/schema/run.schema.json
hashes() { jq -r '[.epochs[].weights_hash] | join(" ")' "$1"; }
# points FILE N: one point in the round that passed each multiple of N batches (a round of |F|
# gradients may pass k N by up to |F| - 1), up to the run's total, monotone in batches and wall_s
points() {
  local f=$1 n=$2 total
  total=$(jq '[.epochs[].steps] | add' "$f")
  jq -e --argjson n "$n" --argjson t "$total" '
    (.curve | length) == ($t / $n | floor) and .curve[-1].batches == $t and
    ([.curve[].batches / $n | floor] == [range(1; ($t / $n | floor) + 1)]) and
    ([.curve[].batches] | . == sort) and ([.curve[].wall_s] | . == sort) and
    ([.curve[] | .samples == .batches * 32] | all)' "$f" >/dev/null \
    || fail "$f: the curve is not every $n batches up to $total in order: $(jq -c '[.curve[] | [.batches, .wall_s]]' "$f")"
  "$V" $S "$f" >/dev/null || fail "$f: schema: $("$V" $S "$f")"
}

# (a) sync: 1024 samples / 32 per batch = 32 batches per epoch; N = 8 divides it
args=(--mode sync --seed 1 --limit-train 1024 --limit-test 256 --epochs 2 --threads 1)
run 2 "${args[@]}" --out "$TMP/plain.json" || { cat "$TMP/out"; fail "sync run"; }
run 2 "${args[@]}" --curve-every 8 --curve-test 256 --out "$TMP/curve.json" || { cat "$TMP/out"; fail "sync run with --curve-every"; }
hp=$(hashes "$TMP/plain.json"); hc=$(hashes "$TMP/curve.json")
echo "sync weights hashes: without the curve $hp; with it $hc"
[ -n "$hp" ] && [ "$hp" = "$hc" ] || fail "--curve-every changed the training: $hp vs $hc"
jq -e 'has("curve") | not' "$TMP/plain.json" >/dev/null || fail "a run without --curve-every has a curve"
points "$TMP/curve.json" 8
jq -e '[.curve[].batches] == [8, 16, 24, 32, 40, 48, 56, 64]' "$TMP/curve.json" >/dev/null || fail "sync: points off the multiples of 8"
jq -e '[.epochs[] as $e | .curve[] | select(.batches == $e.epoch * 32) | .test_top1 == $e.test_top1 and .test_loss == $e.test_loss] | length == 2 and all' \
  "$TMP/curve.json" >/dev/null \
  || fail "the epoch ends' snapshots read otherwise than the epochs: $(jq -c '[.curve[] | [.batches, .test_top1]], [.epochs[] | .test_top1]' "$TMP/curve.json")"
jq -e '.config["curve-every"] == 8 and .config["curve-test"] == 256' "$TMP/curve.json" >/dev/null || fail "config lacks the curve's options"
jq -c '[.curve[] | {batches, wall_s: (.wall_s * 10 | round / 10), test_top1}]' "$TMP/curve.json"

# The curve's evaluation is left out of the run's clock: with a snapshot per sync round (16
# evaluations, longer than the training itself), the epoch still ends soon after its last
# snapshot, and the epoch's own time is its training's.
run 2 "${args[@]}" --epochs 1 --curve-every 2 --curve-test 256 --out "$TMP/every2.json" \
  || { cat "$TMP/out"; fail "sync run with --curve-every 2"; }
points "$TMP/every2.json" 2
read -r gap es < <(jq -r '"\(.epochs[0].wall_s - .curve[-1].wall_s) \(.epochs[0].epoch_s)"' "$TMP/every2.json")
echo "--curve-every 2: the epoch ended $gap s after its last snapshot; epoch_s $es"
awk -v g="$gap" -v e="$es" 'BEGIN { exit !(g >= 0 && g < e / 4) }' \
  || fail "the curve's evaluation counts in the run's wall time: the epoch ended $gap s after its last snapshot (epoch_s $es)"

# (b) partial modes under skew (the default 2048 training samples: 64 batches), and (c) bad values,
# as cases side by side (common.sh case_bg: their own folders; each refusal waits for mpirun's kill
# sequence after the first rank's exit)
partial() {
  local mode=$1
  run 2 --mode $mode --epochs 1 --imbalance linear:unit=10 --curve-every 16 --curve-test 512 \
    --out "$TMP/$mode.json" || { cat "$TMP/out"; fail "$mode with --curve-every"; }
  points "$TMP/$mode.json" 16
  echo "$mode: $(jq '.curve | length' "$TMP/$mode.json") points, top-1 $(jq -c '[.curve[].test_top1]' "$TMP/$mode.json")"
}
case_bg solo partial solo
case_bg majority partial majority

# (c) bad values: refused with a message naming the option, every rank non-zero, nothing trained
refused() {
  local want=$1; shift
  run 2 --epochs 1 --out "$TMP/bad.json" "$@" && fail "accepted: $*"
  grep -q -- "$want" "$TMP/out" || { cat "$TMP/out"; fail "$*: no message naming $want"; }
  echo "refused: $* -> $(grep -m1 -- "$want" "$TMP/out")"
}
n=0
r() { n=$((n + 1)); case_bg "bad$n" refused "$@"; }
r --curve-every --curve-every -1
r --curve-every --curve-every 1.5
r --curve-test --curve-every 8 --curve-test 0
r --curve-test --curve-every 8 --curve-test 513 # the test set: --limit-test 512
# the snapshots' memory bound: an epoch of 60000 one-sample batches, a snapshot each
r --curve-every --limit-train 60000 --batch 1 --curve-every 1 --curve-test 512
cases_wait
echo "ok"
