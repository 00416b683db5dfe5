#!/bin/sh
# bench_gpu.sh BUILD_DIR: GPU step time (zero_grad + forward + backward + SGD update) of ResNet-32
# (batch 128), ResNet-50 (batch 64, 224x224, 1000 classes) and the LSTM (batch 32, 40 x 2048
# inputs, hidden 2048, dense 512, 101 classes), ours (build/bench/nn_bench_gpu) next to PyTorch on
# the same GPU in the same run, fp32 and TF32, each with the input in one of three places, the
# copy inside the timed step: pageable host memory (ours through the model's staging buffers,
# PyTorch's .to(device)), page-locked host memory (ours copied directly, PyTorch's non_blocking)
# and the device (no copy).  Median of NN_BENCH_ITERS (20) steps after 3
# warm-ups; NN_BENCH_MODELS picks models, NN_BENCH_SKIP drops model/precision pairs
# ("resnet50/fp32").  Prints the table (ours, PyTorch, ratio per model, precision and input) and
# both programs' cuDNN versions; writes BUILD_DIR/bench/gpu.json (one object per row); a program
# that fails keeps the rows it printed before.  Then the partial-allreduce benchmark with device
# buffers (PCOLL_BENCH_P ranks, default 4, sharing the GPU(s)) into BUILD_DIR/bench/collectives_gpu.json.
# Exits 1 with a clear message when there is no GPU, or when ours or the collectives failed.
B=${1:-build}
IT=${NN_BENCH_ITERS:-20}
MODELS=${NN_BENCH_MODELS:-"resnet32 resnet50 lstm"}
mkdir -p "$B/bench"
if ! dev=$("$B/bench/nn_bench_gpu" --check 2>&1); then
  echo "bench-gpu: no GPU available: $dev" >&2
  echo "bench-gpu: run it on a machine with an NVIDIA GPU (driver + CUDA 13, cuDNN 9, NCCL)" >&2
  exit 1
fi
echo "bench-gpu: $dev; median of $IT steps after 3 warm-ups"
# Each program writes its rows as it measures them: a later failure keeps the rows before it.
rc=0
"$B/bench/nn_bench_gpu" "$IT" $MODELS > "$B/bench/gpu_ours.txt" || {
  rc=1
  echo "bench-gpu: nn_bench_gpu failed; its rows so far are kept" >&2
}
: > "$B/bench/gpu_torch.txt"
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  # PyTorch loads its own cuDNN: without the folders gpu_check.sh added for our binaries
  # (LD_LIBRARY_PATH wins over PyTorch's RUNPATH, and an older system cuDNN is refused)
  LD_LIBRARY_PATH=${LD_LIBRARY_PATH_BEFORE_RESOLVE-${LD_LIBRARY_PATH-}} \
    python3 trainer/ref/bench_torch_gpu.py "$IT" $MODELS > "$B/bench/gpu_torch.txt" ||
    echo "bench-gpu: bench_torch_gpu.py failed (rc $?); its rows so far are kept" >&2
fi
# ours: "model batch precision input median min"; PyTorch's: the same after "# cudnn V torch T"
awk -v json="$B/bench/gpu.json" -v dev="$dev" '
  FNR == NR { if (NF >= 5) { k = $1 " " $3 " " $4; ob[k] = $2; om[k] = $5; order[++n] = k } next }
  /^# cudnn / { tc = $3; tv = $5; next }
  NF >= 5 { tm[$1 " " $3 " " $4] = $5 }
  END {
    oc = dev; if (!sub(/.*cuDNN /, "", oc)) oc = ""; sub(/[^0-9].*/, "", oc)
    if (tv == "") print "PyTorch with CUDA not available or failed before its first row: our times only (torch_ms null)"
    printf "cuDNN: ours %s, PyTorch %s\n", oc == "" ? "?" : oc, tc == "" ? "-" : tc
    printf "%-10s %6s %6s %7s %12s %12s %8s\n", "model", "batch", "prec", "input", "ours_ms", "torch_ms", "ratio"
    gsub(/"/, "\\\"", dev)
    printf "[\n" > json
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, f, " "); has = (k in tm)
      r = has ? sprintf("%.2f", om[k] / tm[k]) : "-"
      printf "%-10s %6d %6s %7s %12.2f %12s %8s\n", f[1], ob[k], f[2], f[3], om[k], has ? sprintf("%.2f", tm[k]) : "-", r
      printf "  {\"model\": \"%s\", \"batch\": %d, \"precision\": \"%s\", \"input\": \"%s\", \"ours_ms\": %.2f, \"torch_ms\": %s, \"ratio\": %s, \"ours_cudnn\": %s, \"torch_cudnn\": %s, \"torch_version\": %s, \"device\": \"%s\"}%s\n", \
        f[1], ob[k], f[2], f[3], om[k], has ? sprintf("%.2f", tm[k]) : "null", has ? r : "null", \
        oc == "" ? "null" : oc, tc == "" ? "null" : tc, tv == "" ? "null" : "\"" tv "\"", dev, i < n ? "," : "" > json
    }
    printf "]\n" > json
  }' "$B/bench/gpu_ours.txt" "$B/bench/gpu_torch.txt"
echo "wrote $B/bench/gpu.json"
if [ -x "$B/bench/bench_collectives_cuda" ]; then
  P=${PCOLL_BENCH_P:-4}
  echo "bench-gpu: partial allreduce with device buffers, $P ranks"
  bash jobs/mpi.sh run "$B" "$P" "$B/bench/bench_collectives_cuda" --device \
    --unit-ms "${UNIT_MS:-1}" --iters "${PCOLL_BENCH_ITERS:-32}" --sizes 8,4194304,102236160 \
    --json "$B/bench/collectives_gpu.json" || { echo "bench_collectives_cuda --device failed" >&2; exit 1; }
fi
exit $rc
