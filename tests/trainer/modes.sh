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
  jq -r '"\(.config.mode) top1=\(.summary.final_test_top1) fresh=\(.summary.fresh_fraction) max_streak=\(.summary.max_streak)"' "$TMP/$mode.json"
  st=$(jq '.summary.max_streak' "$TMP/$mode.json")
  [ "$st" -le 4 ] || fail "$mode: streak $st above tau=4"
done
