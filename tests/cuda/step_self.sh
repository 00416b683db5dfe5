#!/bin/bash
# step_self.sh (test cuda_step_self): the machinery of test_cuda_layers without a GPU, the GPU's
# place taken by a second CPU model (tests/cuda/step_ref.h).  Must pass with identical state and
# fail when it is broken:
#   1. reference of the LSTMs and the hyperplane model (no ReLU: the margin holds at draw 0);
#      self-check passes; the largest gradient tensor times 1 + 3e-4 (3x the 1e-4 bound) fails
#   2. custom-bias-before-bn (conv1.bias is n/a, in its list): passes; with the lists ignored, fails
#   3. the redraw rule: resnet-fmnist's first draw has a pre-activation inside the margin, so
#      --no-redraw must fail
# Cases 2-3 run at SR_MARGIN_K=1e-6: at the design's 1e-4 no draw of 64 clears any model with ReLU
# layers (docs/DESIGN.md#8-the-device-path).
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
expect pass "reference: LSTMs" "$T" --make-ref "$D/lstm.ref" "lstm in=20"
expect pass "reference: hyperplane" "$T" --make-ref "$D/hp.ref" hyperplane
expect pass "self-check, identical (LSTMs)" "$T" --self-check "$D/lstm.ref"
expect pass "self-check, identical (hyperplane)" "$T" --self-check "$D/hp.ref"
expect fail "self-check, a gradient off by 3e-4 (LSTMs)" "$T" --self-check --perturb 3e-4 "$D/lstm.ref"
expect fail "self-check, a gradient off by 3e-4 (hyperplane)" "$T" --self-check --perturb 3e-4 "$D/hp.ref"
export SR_MARGIN_K=1e-6
expect pass "reference: custom-bias-before-bn" "$T" --make-ref "$D/cb.ref" custom-bias-before-bn
expect pass "self-check: conv1.bias n/a, in the list" "$T" --self-check "$D/cb.ref"
expect fail "self-check: n/a lists ignored" "$T" --self-check --no-na-list "$D/cb.ref"
expect fail "reference without redraws: resnet-fmnist's first draw" "$T" --make-ref --no-redraw "$D/rf.ref" resnet-fmnist
[ $fail = 0 ] && echo PASS || echo FAIL
exit $fail
