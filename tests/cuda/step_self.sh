#!/bin/bash
# step_self.sh (test cuda_step_self): the machinery of test_cuda_layers without a GPU, the GPU's
# place taken by a second CPU model (tests/cuda/step_ref.h).  Must pass with identical state and
# fail when it is broken:
#   1. reference of the LSTMs and the hyperplane model (no ReLU: the margin holds at draw 0);
#      self-check passes; the largest gradient tensor times 1 + 3e-4 (3x the 1e-4 bound) fails
#   2. custom-bias-before-bn (conv1.bias is n/a, in its list): passes; with the lists ignored, fails
#   3. resnet-fmnist (ReLU layers: the fewest near-zero pre-activations of 16 draws): the kept draw
#      is the first with the fewest of the draws it printed; self-check passes, the gradient
#      3e-4 off fails
#   4. a rule that no draw can meet is a FAIL, never widened: the logits' near-tie margin raised to
#      0.5 (SR_MARGIN_K) leaves no draw of 64 of the 5-class LSTM
#   5. the build's reference ($B/gpu-data/cuda_step.ref) holds every model of the list and reads
#      as this binary's; a file made for some models only is refused without a model filter
set -u
B=${B:-build}
T=$B/tests/cuda/test_cuda_layers
[ -x "$T" ] || { echo "SKIP: $T not built (no nvcc + cuDNN)"; exit 77; }
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
export OMP_NUM_THREADS=1
fail=0
expect() { # expect pass|fail what command...
  local want=$1 what=$2 rc=0
  shift 2
  "$@" > "$D/log" 2>&1 || rc=$?
  if { [ "$want" = pass ] && [ $rc = 0 ]; } || { [ "$want" = fail ] && [ $rc = 1 ] && grep -q '^FAIL' "$D/log"; }; then
    echo "ok   $what (rc $rc)"
  else
    echo "FAIL $what: rc $rc, wanted $want"; cat "$D/log"; fail=1
  fi
  grep -E '^(FAIL|n/a)' "$D/log" | head -3 | sed 's/^/       /'
}
# kept_fewest LOG: every "step S draw K: X near zero" line before "draw D (fewest of 16): Y" has X >= Y,
# and draw D printed Y (the first such draw)
kept_fewest() {
  awk '/^ +step [0-9]+ draw +[0-9]+: [0-9]+ near zero/ { k = $4 + 0; x = $5 + 0; tie = /near tie/
         if (!tie && (best == "" || x < best)) { best = x; bd = k } }
       /fewest of/ { d = $2 + 0; y = $6 + 0; n++
         if (best == "" || y != best || d != bd) { print "kept draw " d " (" y ") is not the first fewest: draw " bd " (" best ")"; bad = 1 }
         best = "" }
       END { if (n == 0) { print "no kept draw printed"; bad = 1 }; exit bad }' "$1"
}
expect pass "reference: LSTMs" "$T" --make-ref "$D/lstm.ref" "lstm in=20"
expect pass "reference: hyperplane" "$T" --make-ref "$D/hp.ref" hyperplane
expect pass "self-check, identical (LSTMs)" "$T" --self-check "$D/lstm.ref" lstm
expect pass "self-check, identical (hyperplane)" "$T" --self-check "$D/hp.ref" hyperplane
expect fail "self-check, a gradient off by 3e-4 (LSTMs)" "$T" --self-check --perturb 3e-4 "$D/lstm.ref" lstm
expect fail "self-check, a gradient off by 3e-4 (hyperplane)" "$T" --self-check --perturb 3e-4 "$D/hp.ref" hyperplane
expect pass "reference: custom-bias-before-bn" "$T" --make-ref "$D/cb.ref" custom-bias-before-bn
expect pass "self-check: conv1.bias n/a, in the list" "$T" --self-check "$D/cb.ref" custom-bias-before-bn
expect fail "self-check: n/a lists ignored" "$T" --self-check --no-na-list "$D/cb.ref" custom-bias-before-bn
expect pass "reference: resnet-fmnist" "$T" --make-ref "$D/rf.ref" resnet-fmnist
cp "$D/log" "$D/rf.log"
expect pass "resnet-fmnist: the kept draw is the first with the fewest near-zero values" kept_fewest "$D/rf.log"
grep -E 'fewest of' "$D/rf.log" | cut -c1-160 | sed 's/^ */       /'
expect pass "self-check, identical (resnet-fmnist)" "$T" --self-check "$D/rf.ref" resnet-fmnist
expect fail "self-check, a gradient off by 3e-4 (resnet-fmnist)" "$T" --self-check --perturb 3e-4 "$D/rf.ref" resnet-fmnist
expect fail "reference: no draw of 64 clear of a 0.5 near-tie margin (LSTM)" env SR_MARGIN_K=0.5 "$T" --make-ref "$D/x.ref" "lstm in=20 hidden=16 steps=7 classes"
R=$B/gpu-data/cuda_step.ref
if [ -f "$R" ]; then
  expect pass "the build's reference: every model, read as this binary's" "$T" --self-check "$R" hyperplane
  expect fail "a reference of some models only, no filter" "$T" --self-check "$D/hp.ref"
else
  echo "FAIL $R missing: make build-all makes it where CUDA is built"; fail=1
fi
[ $fail = 0 ] && echo PASS || echo FAIL
exit $fail
