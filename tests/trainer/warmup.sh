#!/bin/bash
# The warm-up before the first collective (trainer/warmup.c, docs/DESIGN.md#warm-up), on any
# backend (the CPU backend has no warm-up work, but the phases and the agreement are the same):
#  - order: a rank held before the first epoch's first phase ('training data', its 2nd entry: the
#    1st opens the data sets) is named by the waiting rank as past 'warm-up agreement': the
#    warm-up runs right before the first epoch, hence before its first pcoll_create;
#  - deadline: a rank that is late into the warm-up (as a slow cuDNN search would make it) is
#    waited for up to the warm-up's deadline, not --t-abort: the run succeeds although the peer
#    waits 4 s with --t-abort 1.5 (with a plain phase it is aborted after 1.5 s).
. "$(dirname "$0")/common.sh"
quick=(--mode sync --epochs 1 --limit-train 512 --limit-test 128 --t-warn 0.5 --t-abort 1.5)
if EAGER_TEST_PAUSE=1:'training data':6:2 run 2 "${quick[@]}"; then cat "$TMP/out"; fail "a rank held 6 s with --t-abort 1.5 was not aborted"; fi
line=$(grep -m1 "waiting in 'training data'" "$TMP/out")
[ -n "$line" ] || { cat "$TMP/out"; fail "no watchdog line for the rank held before the first epoch"; }
echo "$line" | grep -q "rank 1 (past 'warm-up agreement')" ||
  { cat "$TMP/out"; fail "the held rank's last phase before the first epoch is not the warm-up's agreement: $line"; }
echo "ok: order: $line"
EAGER_TEST_PAUSE=1:warm-up:4 run 2 "${quick[@]}" --out "$TMP/w.json" ||
  { cat "$TMP/out"; fail "a rank 4 s late into the warm-up ended the run (--t-abort 1.5; its deadline is the first-step bound)"; }
! grep -q aborting "$TMP/out" || { cat "$TMP/out"; fail "abort line in a run that succeeded"; }
grep -q "pausing 4 s before 'warm-up'" "$TMP/out" || { cat "$TMP/out"; fail "the test aid did not hold rank 1"; }
[ "$(jq -r '.warmup // "none"' "$TMP/w.json")" = none ] || fail "the CPU backend's run file has a warmup object"
echo "ok: deadline: rank 1 held 4 s before the warm-up, --t-abort 1.5, the run succeeded"
