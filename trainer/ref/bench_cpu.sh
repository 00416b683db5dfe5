#!/bin/sh
# bench_cpu.sh BUILD_DIR: step time (forward+backward+update) of ResNet-32 (batch 128),
# ResNet-50 (batch 8, 224x224, 1000 classes) and the LSTM (batch 32, 40 x 2048, hidden 512,
# 101 classes): ours (build/bench/nn_bench_cpu) next to PyTorch CPU with the same thread count.
# Median of NN_BENCH_ITERS (5) steps after 2 warm-ups.  Writes BUILD_DIR/bench/cpu.json.
# NN_BENCH_MODELS selects models; NN_BENCH_THREADS (2); NN_BENCH_NO_TORCH=1 skips PyTorch.
B=${1:-build}
T=${NN_BENCH_THREADS:-2}
IT=${NN_BENCH_ITERS:-5}
MODELS=${NN_BENCH_MODELS:-"resnet32 resnet50 lstm"}
mkdir -p "$B/bench"
export OMP_NUM_THREADS=$T OPENBLAS_NUM_THREADS=$T MKL_NUM_THREADS=$T
echo "bench-cpu: $T threads, median of $IT steps after 2 warm-ups ($(nproc) cores)"
if [ -z "${NN_BENCH_NO_TORCH:-}" ] && python3 -c 'import torch' 2>/dev/null; then
  tv=$(python3 -c 'import torch; print(torch.__version__)')
else
  tv=""
fi
# one model at a time, ours then PyTorch, so both see the same machine conditions
ours=""; theirs=""
for m in $MODELS; do
  o=$("$B/bench/nn_bench_cpu" "$IT" "$m") || { echo "nn_bench_cpu failed"; exit 1; }
  echo "  ours:  $o"
  ours="$ours$o
"
  if [ -n "$tv" ]; then
    t=$(python3 trainer/ref/bench_torch.py "$T" "$IT" "$m") || t=""
    echo "  torch: $t"
    theirs="$theirs$t
"
  fi
done
printf '%s\n' "$ours" > "$B/bench/ours.txt"
printf '%s\n' "$theirs" > "$B/bench/torch.txt"
awk -v tv="$tv" -v json="$B/bench/cpu.json" -v thr="$T" '
  FNR == NR { if (NF >= 4) { ob[$1] = $2; om[$1] = $3; on[$1] = $4; order[++n] = $1 } next }
  NF >= 4 { tm[$1] = $3; tn[$1] = $4 }
  END {
    if (tv == "") print "PyTorch not installed: our times only (torch_ms null)"
    printf "%-10s %6s %12s %12s %8s   %s\n", "model", "batch", "ours_ms", "torch_ms", "ratio", "(min: ours / torch)"
    printf "[\n" > json
    for (i = 1; i <= n; i++) {
      m = order[i]; has = (m in tm)
      r = has ? sprintf("%.2f", om[m] / tm[m]) : "-"
      printf "%-10s %6d %12.1f %12s %8s   (%.1f / %s)\n", m, ob[m], om[m], has ? sprintf("%.1f", tm[m]) : "-", r, on[m], has ? sprintf("%.1f", tn[m]) : "-"
      printf "  {\"model\": \"%s\", \"batch\": %d, \"threads\": %d, \"ours_ms\": %.1f, \"torch_ms\": %s, \"ratio\": %s, \"ours_min_ms\": %.1f, \"torch_min_ms\": %s, \"torch_version\": %s}%s\n", \
        m, ob[m], thr, om[m], has ? sprintf("%.1f", tm[m]) : "null", has ? r : "null", on[m], \
        has ? sprintf("%.1f", tn[m]) : "null", tv == "" ? "null" : "\"" tv "\"", i < n ? "," : "" > json
    }
    printf "]\n" > json
  }' "$B/bench/ours.txt" "$B/bench/torch.txt"
echo "wrote $B/bench/cpu.json"
