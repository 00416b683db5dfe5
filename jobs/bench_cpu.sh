#!/bin/sh
# bench_cpu.sh BUILD_DIR: step time (forward+backward+update) of ResNet-32 (batch 128),
# ResNet-50 (batch 8, 224x224, 1000 classes) and the LSTM (batch 32, 40 x 2048, hidden 512,
# 101 classes): ours (build/bench/nn_bench_cpu) next to PyTorch CPU with the same thread count.
# Median of NN_BENCH_ITERS (5) steps after 2 warm-ups, the fastest step, and the median process
# CPU time per step (steadier than wall time on a shared machine).  Writes BUILD_DIR/bench/cpu.json.
# Ours and PyTorch alternate NN_BENCH_PAIRS (3) times per model; the ratio is the median of the
# pairs' ratios, with their range.
# NN_BENCH_MODELS selects models; NN_BENCH_THREADS (2); NN_BENCH_NO_TORCH=1 skips PyTorch.
# PyTorch: DDP_PY, as for the DDP race (default BUILD_DIR/venv/bin/python3, the venv make test
# makes; python3 where that venv is absent).
# NN_BENCH_PROFILE=1: instead, our step profile per kind of work (nn_bench_cpu --profile), the
# tables on stdout and BUILD_DIR/bench/cpu_profile.json.
# Where OpenBLAS does not know the CPU model and falls back to its generic SSE3 kernels,
# OPENBLAS_CORETYPE is set (unless already set) to the core matching the CPU's vector extensions
# (nn_blas_coretype_hint), as PyTorch's own kernels detect them.
B=${1:-build}
PY=${DDP_PY:-$B/venv/bin/python3}
[ -n "${DDP_PY:-}" ] || [ -x "$PY" ] || PY=python3
T=${NN_BENCH_THREADS:-2}
IT=${NN_BENCH_ITERS:-5}
PAIRS=${NN_BENCH_PAIRS:-3}
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
if [ -z "${NN_BENCH_NO_TORCH:-}" ] && "$PY" -c 'import torch' 2>/dev/null; then
  tv=$("$PY" -c 'import torch; print(torch.__version__)')
else
  tv=""
fi
# one model at a time, ours then PyTorch, PAIRS times in turn: each pair sees the same machine
# conditions, and the reported ratio is the median of the pairs' own ratios (a shared machine's
# speed drifts by up to 1.5x over minutes; one pair, taken at two moments, can read anything)
ours=""; theirs=""
for m in $MODELS; do
  k=1
  while [ "$k" -le "$PAIRS" ]; do
    o=$("$B/bench/nn_bench_cpu" "$IT" "$m") || { echo "nn_bench_cpu failed"; exit 1; }
    echo "  pair $k ours:  $o"
    ours="$ours$o
"
    if [ -n "$tv" ]; then
      t=$("$PY" trainer/ref/bench_torch.py "$T" "$IT" "$m") || t=""
      echo "  pair $k torch: $t"
      theirs="$theirs$t
"
    fi
    k=$((k + 1))
  done
done
printf '%s\n' "$ours" > "$B/bench/ours.txt"
printf '%s\n' "$theirs" > "$B/bench/torch.txt"
awk -v tv="$tv" -v ct="${OPENBLAS_CORETYPE:-}" -v json="$B/bench/cpu.json" -v thr="$T" '
  function med(a, n,    i, j, v) { # median of a[1..n] (sorts a)
    for (i = 2; i <= n; i++) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  FNR == NR { if (NF >= 5) { if (!($1 in no)) order[++n] = $1; k = ++no[$1]; ob[$1] = $2
                             om[$1, k] = $3; on[$1, k] = $4; oc[$1, k] = $5 } next }
  NF >= 5 { k = ++nt[$1]; tm[$1, k] = $3; tn[$1, k] = $4; tc[$1, k] = $5 }
  END {
    if (tv == "") print "PyTorch not installed: our times only (torch_ms null)"
    printf "%-10s %6s %10s %10s %6s %12s   %-20s %s\n", "model", "batch", "ours_ms", "torch_ms", "ratio", "pair range", "(min: ours / torch)", "cpu ms: ours / torch = ratio"
    printf "[\n" > json
    for (i = 1; i <= n; i++) {
      m = order[i]; K = no[m]; has = nt[m] == K
      split("", a); split("", b); split("", c); split("", d); split("", e); split("", f); split("", rr); split("", cr)
      lo = 1e30; hi = 0; list = ""
      for (k = 1; k <= K; k++) {
        a[k] = om[m, k]; b[k] = on[m, k]; c[k] = oc[m, k]
        if (has) { d[k] = tm[m, k]; e[k] = tn[m, k]; f[k] = tc[m, k]; rr[k] = om[m, k] / tm[m, k]
                   cr[k] = tc[m, k] > 0 ? oc[m, k] / tc[m, k] : 0
                   if (rr[k] < lo) lo = rr[k]; if (rr[k] > hi) hi = rr[k]
                   list = list sprintf("%s%.2f", k > 1 ? ", " : "", rr[k]) }
      }
      Om = med(a, K); On = med(b, K); Oc = med(c, K)
      if (has) { Tm = med(d, K); Tn = med(e, K); Tc = med(f, K); R = med(rr, K); CR = med(cr, K) }
      r = has ? sprintf("%.2f", R) : "-"
      rc = has && CR > 0 ? sprintf("%.2f", CR) : "-"
      rg = has ? sprintf("%.2f-%.2f", lo, hi) : "-"
      mins = sprintf("(%.1f / %s)", On, has ? sprintf("%.1f", Tn) : "-")
      printf "%-10s %6d %10.1f %10s %6s %12s   %-20s %.1f / %s = %s\n", m, ob[m], Om, has ? sprintf("%.1f", Tm) : "-", r, rg, mins, Oc, has ? sprintf("%.1f", Tc) : "-", rc
      printf "  {\"model\": \"%s\", \"batch\": %d, \"threads\": %d, \"pairs\": %d, \"ours_ms\": %.1f, \"torch_ms\": %s, \"ratio\": %s, \"pair_ratios\": [%s], \"ours_min_ms\": %.1f, \"torch_min_ms\": %s, \"ours_cpu_ms\": %.1f, \"torch_cpu_ms\": %s, \"cpu_ratio\": %s, \"openblas_coretype\": \"%s\", \"torch_version\": %s}%s\n", \
        m, ob[m], thr, K, Om, has ? sprintf("%.1f", Tm) : "null", has ? r : "null", list, On, \
        has ? sprintf("%.1f", Tn) : "null", Oc, has ? sprintf("%.1f", Tc) : "null", rc == "-" ? "null" : rc, ct, \
        tv == "" ? "null" : "\"" tv "\"", i < n ? "," : "" > json
    }
    printf "]\n" > json
  }' "$B/bench/ours.txt" "$B/bench/torch.txt"
echo "wrote $B/bench/cpu.json"
