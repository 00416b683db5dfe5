#!/bin/sh
# bench_cpu.sh BUILD_DIR: step time (forward+backward+update) of ResNet-32 (batch 128),
# ResNet-50 (batch 8, 224x224, 1000 classes) and the LSTM (batch 32, 40 x 2048, hidden 512,
# 101 classes): ours (build/bench/nn_bench_cpu) next to PyTorch CPU with the same thread count.
# Median of NN_BENCH_ITERS (5) steps after 2 warm-ups, the fastest step, and the median process
# CPU time per step (steadier than wall time on a shared machine).  Writes BUILD_DIR/bench/cpu.json.
# NN_BENCH_MODELS selects models; NN_BENCH_THREADS (2); NN_BENCH_NO_TORCH=1 skips PyTorch.
# NN_BENCH_PROFILE=1: instead, our step profile per kind of work (nn_bench_cpu --profile), the
# tables on stdout and BUILD_DIR/bench/cpu_profile.json.
# Where OpenBLAS does not know the CPU model and falls back to its generic SSE3 kernels,
# OPENBLAS_CORETYPE is set (unless already set) to the core matching the CPU's vector extensions
# (nn_blas_coretype_hint), as PyTorch's own kernels detect them.
B=${1:-build}
T=${NN_BENCH_THREADS:-2}
IT=${NN_BENCH_ITERS:-5}
MODELS=${NN_BENCH_MODELS:-"resnet32 resnet50 lstm"}
mkdir -p "$B/bench"
export OMP_NUM_THREADS=$T OPENBLAS_NUM_THREADS=$T MKL_NUM_THREADS=$T
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  ct=$("$B/bench/nn_bench_cpu" --blas-coretype) || ct=""
  if [ -n "$ct" ]; then
    echo "bench-cpu: OpenBLAS did not recognise this CPU (generic kernels); OPENBLAS_CORETYPE=$ct"
    export OPENBLAS_CORETYPE=$ct
  fi
fi
echo "bench-cpu: $T threads, median of $IT steps after 2 warm-ups ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
if [ -n "${NN_BENCH_PROFILE:-}" ]; then
  # shellcheck disable=SC2086
  "$B/bench/nn_bench_cpu" --profile "$B/bench/cpu_profile.json" "$IT" $MODELS || exit 1
  echo "wrote $B/bench/cpu_profile.json"
  exit 0
fi
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
awk -v tv="$tv" -v ct="${OPENBLAS_CORETYPE:-}" -v json="$B/bench/cpu.json" -v thr="$T" '
  FNR == NR { if (NF >= 5) { ob[$1] = $2; om[$1] = $3; on[$1] = $4; oc[$1] = $5; order[++n] = $1 } next }
  NF >= 5 { tm[$1] = $3; tn[$1] = $4; tc[$1] = $5 }
  END {
    if (tv == "") print "PyTorch not installed: our times only (torch_ms null)"
    printf "%-10s %6s %10s %10s %6s   %-20s %s\n", "model", "batch", "ours_ms", "torch_ms", "ratio", "(min: ours / torch)", "cpu ms: ours / torch = ratio"
    printf "[\n" > json
    for (i = 1; i <= n; i++) {
      m = order[i]; has = (m in tm)
      r = has ? sprintf("%.2f", om[m] / tm[m]) : "-"
      rc = has && tc[m] > 0 ? sprintf("%.2f", oc[m] / tc[m]) : "-"
      mins = sprintf("(%.1f / %s)", on[m], has ? sprintf("%.1f", tn[m]) : "-")
      printf "%-10s %6d %10.1f %10s %6s   %-20s %.1f / %s = %s\n", m, ob[m], om[m], has ? sprintf("%.1f", tm[m]) : "-", r, mins, oc[m], has ? sprintf("%.1f", tc[m]) : "-", rc
      printf "  {\"model\": \"%s\", \"batch\": %d, \"threads\": %d, \"ours_ms\": %.1f, \"torch_ms\": %s, \"ratio\": %s, \"ours_min_ms\": %.1f, \"torch_min_ms\": %s, \"ours_cpu_ms\": %.1f, \"torch_cpu_ms\": %s, \"cpu_ratio\": %s, \"openblas_coretype\": \"%s\", \"torch_version\": %s}%s\n", \
        m, ob[m], thr, om[m], has ? sprintf("%.1f", tm[m]) : "null", has ? r : "null", on[m], \
        has ? sprintf("%.1f", tn[m]) : "null", oc[m], has ? sprintf("%.1f", tc[m]) : "null", rc == "-" ? "null" : rc, ct, \
        tv == "" ? "null" : "\"" tv "\"", i < n ? "," : "" > json
    }
    printf "]\n" > json
  }' "$B/bench/ours.txt" "$B/bench/torch.txt"
echo "wrote $B/bench/cpu.json"
