#!/bin/sh
# bench_gpu.sh BUILD_DIR: GPU step time (zero_grad + forward + backward + SGD update) of ResNet-32
# (batch 128), ResNet-50 (batch 64, 224x224, 1000 classes) and the LSTM (batch 32, 40 x 2048
# inputs, hidden 2048, dense 512, 101 classes), ours (build/bench/nn_bench_gpu) next to PyTorch on
# the same GPU in the same run, fp32 and TF32.  Median of NN_BENCH_ITERS (20) steps after 3
# warm-ups.  Writes BUILD_DIR/bench/gpu.json; then the partial-allreduce benchmark with device
# buffers (PCOLL_BENCH_P ranks, default 4, sharing the GPU(s)) into BUILD_DIR/bench/collectives_gpu.json.
# Exits 1 with a clear message when there is no GPU.
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
ours=$("$B/bench/nn_bench_gpu" "$IT" $MODELS) || { echo "nn_bench_gpu failed" >&2; exit 1; }
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  tv=$(python3 -c 'import torch; print(torch.__version__)')
  # PyTorch loads its own cuDNN: without the folders gpu_check.sh added for our binaries
  # (LD_LIBRARY_PATH wins over PyTorch's RUNPATH, and an older system cuDNN is refused)
  theirs=$(LD_LIBRARY_PATH=${LD_LIBRARY_PATH_BEFORE_RESOLVE-${LD_LIBRARY_PATH-}} \
    python3 trainer/ref/bench_torch_gpu.py "$IT" $MODELS) || theirs=""
else
  tv=""
  theirs=""
fi
printf '%s\n' "$ours" > "$B/bench/gpu_ours.txt"
printf '%s\n' "$theirs" > "$B/bench/gpu_torch.txt"
awk -v tv="$tv" -v json="$B/bench/gpu.json" -v dev="$dev" '
  FNR == NR { if (NF >= 4) { k = $1 " " $3; ob[k] = $2; om[k] = $4; mm[k] = $1; pp[k] = $3; order[++n] = k } next }
  NF >= 4 { tm[$1 " " $3] = $4 }
  END {
    if (tv == "") print "PyTorch with CUDA not available: our times only (torch_ms null)"
    printf "%-10s %6s %6s %12s %12s %8s\n", "model", "batch", "prec", "ours_ms", "torch_ms", "ratio"
    gsub(/"/, "\\\"", dev)
    printf "[\n" > json
    for (i = 1; i <= n; i++) {
      k = order[i]; has = (k in tm)
      r = has ? sprintf("%.2f", om[k] / tm[k]) : "-"
      printf "%-10s %6d %6s %12.2f %12s %8s\n", mm[k], ob[k], pp[k], om[k], has ? sprintf("%.2f", tm[k]) : "-", r
      printf "  {\"model\": \"%s\", \"batch\": %d, \"precision\": \"%s\", \"ours_ms\": %.2f, \"torch_ms\": %s, \"ratio\": %s, \"torch_version\": %s, \"device\": \"%s\"}%s\n", \
        mm[k], ob[k], pp[k], om[k], has ? sprintf("%.2f", tm[k]) : "null", has ? r : "null", \
        tv == "" ? "null" : "\"" tv "\"", dev, i < n ? "," : "" > json
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
