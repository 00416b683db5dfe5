#!/bin/bash
# A 2-rank --device cuda majority run (GPU machine; run through run_gpu.sh, which skips without
# one): the warm-up (trainer/warmup.c, docs/DESIGN.md#warm-up) ran on every rank before the first
# collective and the ranks chose the same convolution algorithms (warmup.fingerprint equal), no
# algorithm search or buffer growth happened after it (late_searches = late_grows = 0: the
# warm-up's shapes covered the run's, evaluation included), the steps replayed the graph captured
# in the warm-up, and the run file validates.
set -u
B=${B:-build}
TMP=$(mktemp -d /tmp/eager-warmup.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
data=()
[ -d "$B/gpu-data/fashion-mnist" ] && data=(--data-path "$B/gpu-data/fashion-mnist")
timeout 150 $MPIRUN -np 2 "$B/bin/eager-train" --experiment fmnist "${data[@]}" --device cuda --mode majority \
  --epochs 2 --limit-train 2048 --limit-test 500 --batch 64 --t-warn 30 --t-abort 90 --out "$TMP/run.json" \
  > "$TMP/out" 2>&1 || { cat "$TMP/out"; fail "the 2-rank --device cuda majority run failed"; }
grep -i 'warm-up\|nn_cuda' "$TMP/out"
j() { jq -r "$1" "$TMP/run.json"; }
echo "warmup: $(jq -c .warmup "$TMP/run.json")"
[ "$(j '.warmup.fingerprint | length')" = 2 ] || fail "warmup.fingerprint has not 2 ranks"
[ "$(j '.warmup.fingerprint | unique | length')" = 1 ] ||
  fail "the ranks chose different convolution algorithms: $(j '.warmup.fingerprint | join(" ")')"
[ "$(j '.warmup.shapes[-1].training')" = true ] || fail "the warm-up's last shape is not the training step"
[ "$(j '.warmup.late_searches')" = 0 ] || fail "$(j .warmup.late_searches) algorithm searches after the warm-up"
[ "$(j '.warmup.late_grows')" = 0 ] || fail "$(j .warmup.late_grows) buffer growths after the warm-up"
[ "$(j '.cuda_graph.graph')" = true ] || fail "the steps did not all replay a graph: $(jq -c .cuda_graph "$TMP/run.json")"
[ "$(j '.cuda_graph.invalidations')" = 0 ] || fail "the warm-up's graph was invalidated: $(jq -c .cuda_graph "$TMP/run.json")"
"$B/bin/pcoll-validate" -q results/schema/run.schema.json "$TMP/run.json" || fail "the run file does not validate"
echo "ok: fingerprints $(j '.warmup.fingerprint | join(" ")'), warm-up $(j '.warmup.seconds | map(tostring) | join(" / ")') s, no late search or growth"
