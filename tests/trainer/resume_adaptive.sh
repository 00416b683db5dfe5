#!/bin/bash
# Resume continues the run: an adaptive run under imbalance, resumed from its own checkpoint after
# epoch 1, makes the decisions of the uninterrupted run (equal decision hash) and ends with the
# same weights and totals; the run JSON lists every restart (kept across a chain of resumes) with
# the world sizes and the position (0 batches into the next epoch: these resume at epoch ends), so
# a resume on another number of ranks (elastic) is recorded too, and continues the controller's
# level, which the resumed run's own start= does not override.
# The policy: started in sync with a window (65536 deposits) no run here fills and the step-time
# screen off (it may leave sync on one slow round), so it measures sync
# for the whole run and every round is deterministic; the continued state is what the run records
# (controller_continued) and the level it keeps.
. "$(dirname "$0")/common.sh"
POL="start=sync,window=65536,screen=off"
A=(--mode adaptive --policy-opts "$POL" --imbalance linear:unit=20)
run 2 "${A[@]}" --epochs 2 --ckpt-dir "$TMP/ck" --ckpt-every 1 --out "$TMP/full.json" || { cat "$TMP/out"; fail "uninterrupted run"; }
mkdir -p "$TMP/ck2" && cp "$TMP/ck/ckpt-0001.ckpt" "$TMP/ck2/latest.ckpt"
run 2 "${A[@]}" --epochs 2 --ckpt-dir "$TMP/ck2" --resume --out "$TMP/res.json" || { cat "$TMP/out"; fail "resumed run"; }
key='[.controller.decision_hash, .epochs[-1].weights_hash, .summary.fresh_fraction, .summary.mean_staleness, .summary.max_streak, .summary.final_test_top1]'
f=$(jq -c "$key" "$TMP/full.json") r=$(jq -c "$key" "$TMP/res.json")
echo "uninterrupted [decision hash, weights hash, fresh, staleness, streak, top-1]: $f"
echo "resumed:                                                             $r"
[ "$f" = "$r" ] || fail "the resumed run differs from the uninterrupted one"
jq -e '.restarts | length == 1 and .[0].epoch == 1 and .[0].ranks_before == 2 and .[0].ranks_after == 2
  and .[0].controller_continued == true and .[0].wall_lost_s >= 0
  and .[0].batches_done == 0 and .[0].samples_done == 0' "$TMP/res.json" >/dev/null \
  || fail "restarts: $(jq -c .restarts "$TMP/res.json")"
# a second resume, on 1 rank (elastic): the controller's state continues, converted to 1 rank
# (ctl_state_resize): its level, sync, is kept, so epoch 3 runs in sync from its first round;
# the restarts accumulate, and the run's fresh fraction
# stays a fraction although the earlier rounds had 2 ranks
run 1 "${A[@]}" --epochs 3 --ckpt-dir "$TMP/ck2" --resume --out "$TMP/el.json" || { cat "$TMP/out"; fail "elastic resume on 1 rank"; }
grep -q "controller state (2 ranks) continues on 1 ranks" "$TMP/out" || { cat "$TMP/out"; fail "no line saying the controller continues on 1 rank"; }
jq -e '.restarts | length == 2 and .[1].epoch == 2 and .[1].ranks_before == 2 and .[1].ranks_after == 1
  and .[1].controller_continued == true and .[1].batches_done == 0 and .[1].samples_done == 0' "$TMP/el.json" >/dev/null \
  || fail "restarts after the elastic resume: $(jq -c .restarts "$TMP/el.json")"
lv=$(jq -c '[.epochs[0].controller.levels[] | select(.rounds > 0) | .level]' "$TMP/el.json")
[ "$lv" = '["sync"]' ] || fail "epoch 3 on 1 rank did not run in sync only (the continued level): levels with rounds $lv"
jq -e '(.epochs | length) == 1 and .epochs[0].epoch == 3' "$TMP/el.json" >/dev/null || fail "the elastic run did not train epoch 3"
jq -e '.summary.fresh_fraction <= 1' "$TMP/el.json" >/dev/null || fail "fresh fraction $(jq .summary.fresh_fraction "$TMP/el.json") after 2 -> 1 ranks"
if [ -x "$B/bin/pcoll-validate" ]; then
  "$B/bin/pcoll-validate" results/schema/run.schema.json "$TMP/el.json" || fail "schema: elastic run"
fi
# The continued state decides the level, not the resumed run's start=: a run that started in solo
# (and stays there: its first probe never completes), resumed with start=sync, trains epoch 2 in
# solo; a controller that started afresh would run it in sync.
run 2 --mode adaptive --policy-opts "start=solo,window=65536,screen=off" --imbalance linear:unit=20 --epochs 1 \
  --ckpt-dir "$TMP/cs" --ckpt-every 1 --out "$TMP/solo1.json" || { cat "$TMP/out"; fail "solo run"; }
mkdir -p "$TMP/cs2" && cp "$TMP/cs/ckpt-0001.ckpt" "$TMP/cs2/latest.ckpt"
run 2 "${A[@]}" --epochs 2 --ckpt-dir "$TMP/cs2" --resume --out "$TMP/solo2.json" || { cat "$TMP/out"; fail "resume of the solo run with start=sync"; }
lv=$(jq -c '[.epochs[-1].controller.levels[] | select(.rounds > 0) | .level]' "$TMP/solo2.json")
[ "$lv" = '["solo"]' ] || fail "a solo state resumed with start=sync: epoch 2's levels with rounds $lv, not the continued [\"solo\"]"
echo "ok: restarts $(jq -c .restarts "$TMP/el.json"), fresh fraction $(jq .summary.fresh_fraction "$TMP/el.json")"
