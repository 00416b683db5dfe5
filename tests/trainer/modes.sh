#!/bin/bash
# Every mode trains under imbalance with bitwise-equal replicas (the trainer checks a weight hash
# across ranks at every evaluation and aborts on a mismatch) and writes schema-valid JSON.
. "$(dirname "$0")/common.sh"
NP=${NP:-3}
for mode in sync solo majority quorum:2 adaptive; do
  run $NP --mode $mode --epochs 1 --imbalance linear:unit=5 --tau 4 --out "$TMP/$mode.json" \
    || { cat "$TMP/out"; fail "mode $mode"; }
  if [ -x "$B/bin/pcoll-validate" ]; then
    "$B/bin/pcoll-validate" results/schema/run.schema.json "$TMP/$mode.json" || fail "schema: $mode"
  fi
  # the CPU the run's floating-point sums depend on (-march=native), where /proc/cpuinfo says it
  if [ -r /proc/cpuinfo ]; then
    jq -e '.environment.cpu | type == "string" and test("; ")' "$TMP/$mode.json" >/dev/null \
      || fail "$mode: environment.cpu is $(jq -c .environment.cpu "$TMP/$mode.json")"
  fi
  jq -r '"\(.config.mode) top1=\(.summary.final_test_top1) fresh=\(.summary.fresh_fraction) max_streak=\(.summary.max_streak)"' "$TMP/$mode.json"
  st=$(jq '.summary.max_streak' "$TMP/$mode.json")
  [ "$st" -le 4 ] || fail "$mode: streak $st above tau=4"
done
# The lr schedule follows the samples learnt, not the round count: a solo epoch has several times
# more rounds than steps, and each of them must still run at that epoch's lr (a milestone at
# epoch 1 must not reach into epoch 0's rounds past 'steps').
run $NP --mode solo --epochs 2 --milestones 1 --lr 0.1 --imbalance linear:unit=5 --tau 4 \
  --round-agg 1 --out "$TMP/lr.json" || { cat "$TMP/out"; fail "solo lr run"; }
jq -e '[.rounds.records[] | select(.epoch == 0) | .lr_last] | length > 0 and all(. > 0.099)' "$TMP/lr.json" >/dev/null \
  || fail "solo epoch 0 rounds ran below lr 0.1: $(jq -c '[.rounds.records[] | select(.epoch == 0) | .lr_last] | unique' "$TMP/lr.json")"
jq -e '[.rounds.records[] | select(.epoch == 1) | .lr_first] | all(. < 0.0101)' "$TMP/lr.json" >/dev/null \
  || fail "solo epoch 1 rounds not at lr 0.01"
n0=$(jq '[.rounds.records[] | select(.epoch == 0)] | length' "$TMP/lr.json")
echo "solo lr schedule: $n0 rounds in epoch 0, all at lr 0.1"
# Global epochs: batches are dealt from the round history. Every batch of the epoch is trained
# once (steps summed over ranks = batches), the replicas stay equal (the trainer's hash check),
# sync deals evenly and, with one rank four times slower, solo lets the fast ranks take more
# batches (a straggler slowed relative to its own compute, so a busy machine cannot hide it).
for mode in sync solo; do
  run $NP --mode $mode --epochs 1 --epoch-mode global --imbalance slow:rank=$((NP - 1)),factor=4 --tau 4 \
    --out "$TMP/g_$mode.json" || { cat "$TMP/out"; fail "global $mode"; }
  read -r st lo hi < <(jq -r '.epochs[0] | "\(.steps) \(.rank_steps_min) \(.rank_steps_max)"' "$TMP/g_$mode.json")
  echo "global $mode: $st steps in all, $lo-$hi per rank"
  [ "$st" -eq $((2048 / 32)) ] || fail "global $mode: $st steps, expected $((2048 / 32)) batches"
  case $mode in
    sync) [ "$hi" -le $((lo + 1)) ] || fail "global sync dealt unevenly: $lo-$hi" ;;
    solo) [ "$hi" -gt $((lo + 2)) ] || fail "global solo with a slow rank: fast ranks took no more batches ($lo-$hi)" ;;
  esac
done
# --wd-per sample (default): a round decays by wd x |F|/P, so every mode decays by wd x batches/P
# in an epoch (sync as much as solo, which runs about three times its rounds here); --wd-per round
# decays in full every round, and solo then decays far more than sync.
wd_total() { jq '[.rounds.records[] | select(.epoch == 0) | .wd_sum] | add' "$1"; }
want=$(jq -n "$(jq '.config.wd' "$TMP/g_sync.json") * $((2048 / 32)) / $NP")
for mode in sync solo; do
  w=$(wd_total "$TMP/g_$mode.json")
  echo "decay in epoch 1 (sum of round wd): $mode $w over $(jq '.epochs[0].rounds' "$TMP/g_$mode.json") rounds (wd x batches/P = $want)"
  awk -v a="$want" -v b="$w" 'BEGIN { exit !(a > 0 && (a - b) * (a - b) < 1e-12 * a * a) }' \
    || fail "--wd-per sample: $mode decayed $w in an epoch, expected $want"
done
run $NP --mode solo --epochs 1 --epoch-mode global --imbalance linear:unit=40 --tau 4 --wd-per round --momentum-per round \
  --out "$TMP/g_round.json" || { cat "$TMP/out"; fail "--wd-per round run"; }
w=$(wd_total "$TMP/g_round.json")
echo "decay in epoch 1 under --wd-per round: solo $w"
awk -v a="$want" -v b="$w" 'BEGIN { exit !(b > 1.5 * a) }' || fail "--wd-per round: solo decayed $w, not more than $want"
# --momentum-per sample (default): a round of every rank is a whole step, so sync ends with the
# weights of --momentum-per round (PyTorch's step per round) while no round is partial (1,920
# samples: 60 batches of 32, rounds of all 3 ranks); solo's partial rounds step by their share and
# decay by wd x |F|/P per round, as --wd-per sample says: that is the global solo run above
# (g_solo.json, --momentum-per sample being the default), whose decay the --wd-per sample loop
# checks, so no second run of the same configuration here.
for m in round sample; do
  run $NP --mode sync --epochs 1 --limit-train 1920 --momentum-per $m --out "$TMP/ms_$m.json" ||
    { cat "$TMP/out"; fail "sync --momentum-per $m"; }
done
jq -e "[.rounds.records[] | .min_fresh] | min == $NP" "$TMP/ms_round.json" > /dev/null || fail "sync had a partial round"
h1=$(jq -r '.epochs[0].weights_hash' "$TMP/ms_round.json") h2=$(jq -r '.epochs[0].weights_hash' "$TMP/ms_sample.json")
[ "$h1" = "$h2" ] || fail "--momentum-per sample changed sync's weights ($h2; round: $h1)"
jq -e '.config["momentum-per"] == "sample"' "$TMP/g_solo.json" >/dev/null \
  || fail "g_solo.json: not run with --momentum-per sample, which its decay check above stands for here"
echo "--momentum-per sample: sync's weights as with round ($h1); solo's decay: the global solo run's"
# --initial-sync 1 --final-sync 1: the first and last epochs run synchronously whatever --mode says
# (every round all fresh, no switch logged in them), the epoch between keeps the partial mode.
# The policy starts that epoch in solo (start=solo: its first measurement, of solo, takes at least a
# 32-round window): by default it starts in sync and may rightly stay there on a busy machine.
run $NP --mode adaptive --policy-opts start=solo --epochs 3 --initial-sync 1 --final-sync 1 \
  --imbalance linear:unit=5 --tau 4 --out "$TMP/fs.json" || { cat "$TMP/out"; fail "initial/final-sync run"; }
echo "initial-sync 1, final-sync 1: fresh fraction per epoch $(jq -c '[.epochs[].fresh_fraction]' "$TMP/fs.json")"
for e in 0 2; do
  jq -e ".epochs[$e].fresh_fraction == 1 and .epochs[$e].max_streak == 0" "$TMP/fs.json" >/dev/null \
    || fail "initial/final-sync: epoch $((e + 1)) was not synchronous"
  jq -e "[.controller.switches[] | select(.epoch == $e)] | length == 0" "$TMP/fs.json" >/dev/null \
    || fail "initial/final-sync: the controller switched in synchronous epoch $((e + 1))"
done
jq -e '.epochs[1].fresh_fraction < 1' "$TMP/fs.json" >/dev/null || fail "initial/final-sync: epoch 2 was synchronous too"
# The rate rule's measurement carries across the per-epoch handles: started in sync with a window
# of 100 deposits, more than one epoch holds (about 22 sync rounds of 3 ranks here), the measurement
# of sync completes in the second epoch and the probe moves on to the next level; restarting the
# measurement with every handle would keep it in sync for good (the screen off: its replays could
# end the measurement early).
run $NP --mode adaptive --policy-opts start=sync,window=100,screen=off --epochs 2 --tau 4 --out "$TMP/carry.json" \
  || { cat "$TMP/out"; fail "measurement carry run"; }
jq -r '.controller.switches[] | "  switch: epoch \(.epoch) round \(.round): \(.reason)"' "$TMP/carry.json"
jq -e '[.controller.switches[] | select(.epoch == 0)] | length == 0' "$TMP/carry.json" >/dev/null \
  || fail "measurement carry: a switch in epoch 1, before 100 deposits ($(jq -c '.epochs | map(.rounds)' "$TMP/carry.json") rounds)"
jq -e '[.controller.switches[] | select(.epoch == 1 and .from == "sync")] | length >= 1' "$TMP/carry.json" >/dev/null \
  || fail "measurement carry: sync's measurement did not complete in epoch 2 ($(jq -c '.epochs | map(.rounds)' "$TMP/carry.json") rounds)"
# Which level the policy chooses for given step times is tested on the mock (test_rate):
# here it would depend on how busy the machine is, and no test may.
