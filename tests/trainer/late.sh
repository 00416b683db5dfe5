#!/bin/bash
# --late go: after its deposit a rank waits only for a round it has not applied yet; one that
# missed a round while it computed applies it and computes on, and its next gradient is added to
# the pending deposit (merged), which the next round takes. Checked on global epochs under
# log-normal delays (the replicas' weights are compared by the trainer at every evaluation):
# every batch trained exactly once, the gradients counted per deposit, not per fresh rank (the lr
# schedule and the decay: wd x batches/P in an epoch, as in every mode, merged or not), tau still
# bounding the streaks, and sync unchanged (it never returns before its deposit was taken).
. "$(dirname "$0")/common.sh"
NP=${NP:-4}
nb=$((2048 / 32))
wd_total() { jq '[.rounds.records[] | select(.epoch == 0) | .wd_sum] | add' "$1"; }
want=""
for mode in majority solo; do
  run $NP --mode $mode --late go --epochs 1 --epoch-mode global --imbalance lognormal:mean=40,std=40 --tau 2 \
    --round-agg 1 --out "$TMP/$mode.json" || { cat "$TMP/out"; fail "--late go $mode"; }
  if [ -x "$B/bin/pcoll-validate" ]; then
    "$B/bin/pcoll-validate" results/schema/run.schema.json "$TMP/$mode.json" >/dev/null || fail "schema: $mode"
  fi
  read -r st mg rd ff ms < <(jq -r '.epochs[0] | "\(.steps) \(.merged) \(.rounds) \(.fresh_fraction) \(.max_streak)"' "$TMP/$mode.json")
  [ -n "$want" ] || want=$(jq -n "$(jq '.config.wd' "$TMP/$mode.json") * $nb / $NP")
  w=$(wd_total "$TMP/$mode.json")
  echo "--late go $mode: $st steps, $mg merged, $rd rounds, fresh fraction $ff, max streak $ms; decay $w (want $want)"
  [ "$st" -eq $nb ] || fail "--late go $mode: $st steps, expected $nb batches (each once)"
  awk -v s="$st" -v m="$mg" -v r="$rd" -v f="$ff" -v P=$NP 'BEGIN { d = s - m - f * r * P; exit !(d * d < 1e-6) }' ||
    fail "--late go $mode: $st steps are not the fresh contributions ($ff x $rd rounds x $NP) plus $mg merged"
  [ "$ms" -le 2 ] || fail "--late go $mode: streak $ms above tau 2"
  awk -v a="$want" -v b="$w" 'BEGIN { exit !(a > 0 && (a - b) * (a - b) < 1e-12 * a * a) }' ||
    fail "--late go $mode: decayed $w in the epoch, expected $want (wd x batches / P)"
done
# sync: the same weights with either --late
for late in wait go; do
  run $NP --mode sync --late $late --epochs 1 --epoch-mode global --imbalance lognormal:mean=10,std=10 \
    --out "$TMP/sync_$late.json" || { cat "$TMP/out"; fail "sync --late $late"; }
done
h1=$(jq -r '.epochs[0].weights_hash' "$TMP/sync_wait.json") h2=$(jq -r '.epochs[0].weights_hash' "$TMP/sync_go.json")
[ "$h1" = "$h2" ] || fail "sync: --late go changed the weights ($h2; wait: $h1)"
echo "sync: the same weights with --late wait and go ($h1)"
