#!/bin/sh
# check_profile.sh BENCH OUT: nn_bench_cpu --profile on ResNet-8 (fmnist) for 2 steps; the JSON
# names the kinds of a ResNet's step (direct 3x3, 1x1 GEMM shortcut, batch norm, update), and
# the per-kind CPU times, which time disjoint regions of the step, add up to at most the step's
# CPU time and to most of it (the untimed rest: the loop around the layers).
B=$1; OUT=$2
"$B" --profile "$OUT" 2 fmnist > "$OUT.txt" || { echo "nn_bench_cpu --profile failed"; exit 1; }
for k in "conv 3x3 s1 direct" "conv 1x1 s2 im2col+GEMM" "batch norm + ReLU" "SGD momentum update"; do
  grep -q "\"kind\": \"$k\"" "$OUT" || { echo "profile lacks kind \"$k\""; cat "$OUT"; exit 1; }
done
grep -q "^profile fmnist" "$OUT.txt" || { echo "no profile table printed"; exit 1; }
awk -v steps=2 '
  /"median_cpu_ms"/ { match($0, /"median_cpu_ms": [0-9.]+/); med = substr($0, RSTART + 17, RLENGTH - 17) + 0 }
  /"nested": false/ { match($0, /"cpu_ms": [0-9.]+/); sum += substr($0, RSTART + 10, RLENGTH - 10) }
  END {
    printf "per-kind CPU ms sum %.2f, median step CPU ms %.2f\n", sum, med
    if (med <= 0 || sum > 1.05 * med || sum < 0.5 * med) { print "FAIL: per-kind sum out of range"; exit 1 }
    print "ok"
  }' "$OUT"
