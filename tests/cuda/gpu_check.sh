#!/bin/bash
# gpu_check.sh (`make gpu-check`): the first run on a GPU machine, in one command, from a build
# folder made on another machine (nothing is rebuilt; no compiler or headers needed there).
#
#   On the build machine:  make build-all -j2 NN_ARCH=x86-64-v3
#                          (build/ stays under 64 MiB and holds a Fashion-MNIST subset in
#                          build/gpu-data/; NN_ARCH: libnn's loops must run on the GPU machine's
#                          CPU, and -march=native would use the build machine's AVX-512)
#   On the GPU machine:    make gpu-check          (or: B=build bash tests/cuda/gpu_check.sh)
#
# Steps, each with its own time limit, in its own session (on time-out the whole session is
# killed: mpirun, its ranks, test binaries); a failing step never stops the next:
#   preflight   ldd of every binary (a missing library is looked up in the usual folders, pip's
#               nvidia/*/lib included, and LD_LIBRARY_PATH extended), nvidia-smi, cuDNN / NCCL / CUDA runtime /
#               MPI versions; decides whether a usable GPU is present (a GPU that nvidia-smi
#               lists but the binaries cannot use fails here, and the steps run to show why)
#   pcoll       libpcoll's device tests: tests/run.sh T='^cuda_pcoll_' (tests/cuda.tests)
#   tests       the backend's GPU tests (layers, PyTorch references) and the static CUDA checks
#   bench-gpu   jobs/bench_gpu.sh with NN_BENCH_ITERS (default 5) steps per model, the input in
#               pageable, page-locked and device memory, without strict-fp32 ResNet-50
#               (NN_BENCH_SKIP, default "resnet50/fp32"; set it empty to run it)
#   collectives the partial-allreduce benchmark with device buffers, 4 ranks, small sizes; then
#               8 B at 1 and 2 ranks (how much of a small round is ranks sharing the GPU)
#   train       mpirun -np 2 eager-train --device cuda, 2 epochs on the carried Fashion-MNIST
#               subset (epoch 2 replays the CUDA graph after epoch 1's evaluation); its JSON
#               must say the steps ran as a graph (cuda_graph.graph) and input_copy staged
#   train-direct  the same with NN_CUDA_DIRECT_INPUT=1 (page-locked batches copied straight in):
#               graph, and input_copy direct
#   python      the PyTorch package with CUDA tensors (tests/python/gpu.sh: T='^py_gpu$'): 2 ranks
#               sharing the GPU (libpcoll's staged path; NCCL too with 2+ GPUs), sync = the CPU run,
#               majority conserved; needs a python whose torch sees the GPU ($EAGER_PY or python3)
# Without a usable GPU every step after the preflight prints one SKIP line and the script exits 0.
# GPU_CHECK_STEPS (an extended regex of step names, e.g. 'python|train'): only those steps run after
# the preflight, the others print one SKIP line (a rerun of what failed, in less device time).
# The whole run stays within GPU_CHECK_BUDGET seconds (default 450, under 8 minutes): a step's
# limit is cut to what is left.  Ends with one summary table.  Everything (this log, test logs,
# benchmark and training JSON) is written under $OUT (default ./gpu-check-out); the test logs and
# the benchmark's files also packed into $OUT/logs.tgz.
# Exit: 0 when every step passed or was skipped for lack of a GPU, 1 otherwise.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
. tests/device/steps.sh # steps_init, step, row, elapsed, host_lines, resolve_libraries, check_binaries, mpi_env
steps_init gpu-check "${GPU_CHECK_BUDGET:-450}"
STEP_ONLY=${GPU_CHECK_STEPS:-}
GPU=""        # non-empty: a usable GPU (the device line of nn_bench_gpu --check)
NOGPU_WHY=""

preflight() {
  echo "gpu_check: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), build folder $B, OUT=$OUT, budget ${BUDGET}s"
  host_lines
  echo "== binaries (ldd: what is missing on this machine)"
  resolve_libraries
  check_binaries
  echo "== resolved libraries (eager-train, test_cuda_layers, test_pcoll_device)"
  { ldd "$B/bin/eager-train"; ldd "$B/tests/cuda/test_cuda_layers"; ldd "$B/tests/cuda/test_pcoll_device"; } 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
    grep -E 'cudnn|cublas|cudart|nccl|mpi|openblas|jansson|gomp|stdc' |
    while read -r so p; do printf '  %-24s %s\n' "$so" "$(readlink -f "$p")"; done
  echo "== nvidia-smi"
  if command -v nvidia-smi > /dev/null; then
    timeout 20 nvidia-smi 2>&1 | head -30
    timeout 20 nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_mode,mig.mode.current --format=csv 2>&1
  else echo "  nvidia-smi not found"; fi
  echo "== versions"
  local v
  v=$(ldd "$B/tests/cuda/test_cuda_layers" 2>/dev/null | awk '$1 ~ /libcudnn/ {print $3}'); echo "  cuDNN: ${v:+$(readlink -f "$v")}"
  v=$(ldd "$B/tests/cuda/test_pcoll_device" 2>/dev/null | awk '$1 ~ /libnccl/ {print $3}'); echo "  NCCL: ${v:+$(readlink -f "$v")}"
  v=$(ldd "$B/tests/cuda/test_cuda_layers" 2>/dev/null | awk '$1 ~ /libcudart/ {print $3}'); echo "  CUDA runtime: ${v:+$(readlink -f "$v")}"
  echo "  MPI: $(command -v mpirun > /dev/null && mpirun --version 2>&1 | head -1 || echo 'no mpirun')"
  if [ ! -x "$B/bench/nn_bench_gpu" ]; then
    NOGPU_WHY="$B/bench/nn_bench_gpu not built (no CUDA build)"
  elif GPU=$("$B/bench/nn_bench_gpu" --check 2>&1); then
    echo "== GPU: $GPU"
  else
    NOGPU_WHY=${GPU#nn_bench_gpu: }
    GPU=""
    # listed by the driver but not usable by the binaries (a library missing, a driver too old for
    # this CUDA): a failure, and the steps run anyway so that their logs say what breaks
    if command -v nvidia-smi > /dev/null && timeout 20 nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
      echo "== FAIL: nvidia-smi lists a GPU but it is not usable: $NOGPU_WHY"
      GPU_UNUSABLE=1
      GPU="unusable: $NOGPU_WHY"
    fi
  fi
  # GPU_CHECK_ASSUME_GPU=1 runs the steps anyway (to try this script's step runner without a GPU)
  [ -z "$GPU" ] && [ "${GPU_CHECK_ASSUME_GPU:-0}" = 1 ] && GPU="assumed (GPU_CHECK_ASSUME_GPU=1): $NOGPU_WHY"
  [ -n "$GPU" ] || echo "== no usable GPU: $NOGPU_WHY"
  [ -n "$GPU" ] || STEP_SKIP_WHY="no usable GPU ($NOGPU_WHY)"
  if [ "${GPU_UNUSABLE:-0}" = 1 ]; then
    FAILED=1
    row preflight FAIL "$(elapsed)s" "a GPU is listed but not usable: $NOGPU_WHY"
  else
    row preflight DONE "$(elapsed)s" "${GPU:-no GPU: $NOGPU_WHY}"
  fi
}

# the device collectives at PCOLL_BENCH_P ranks sharing the GPU(s), then 8 B at 1 and 2 ranks: at 1
# no context shares the GPU, so the three say how much of a small round is the sharing
collectives_gpu() {
  $MPIRUN -np "${PCOLL_BENCH_P:-4}" "$B/bench/bench_collectives_cuda" --device --unit-ms 1 \
    --iters "${PCOLL_BENCH_ITERS:-8}" --sizes 8,4194304 --json "$OUT/collectives_gpu.json" || return $?
  local p
  for p in 1 2; do
    echo "== $p rank(s), 8 B"
    $MPIRUN -np $p "$B/bench/bench_collectives_cuda" --device --unit-ms 1 --iters 20 --sizes 8 \
      --only mpi_allreduce,sync,solo --json "$OUT/collectives_gpu_p$p.json" | grep -E '^ +8 .* none ' || return 1
  done
}

# train_and_check FILE COPY CMD...: runs CMD (a training that writes FILE) with the input copy COPY
# (staged: the default; direct: NN_CUDA_DIRECT_INPUT=1, page-locked batches copied straight in);
# FILE must say the steps ran as a CUDA graph and environment.input_copy = COPY
train_and_check() {
  local file=$1 copy=$2
  shift 2
  if [ "$copy" = direct ]; then export NN_CUDA_DIRECT_INPUT=1; else unset NN_CUDA_DIRECT_INPUT; fi
  "$@" || return $?
  if ! command -v python3 > /dev/null; then
    grep -Eq '"graph": *true' "$file" && grep -Eq "\"input_copy\": *\"$copy\"" "$file" &&
      echo "cuda_graph: graph true; input_copy $copy"
    return $?
  fi
  python3 - "$file" "$copy" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
g = d.get("cuda_graph")
c = d.get("environment", {}).get("input_copy")
print("cuda_graph:", g, "input_copy:", c, "final_test_top1:", d["summary"]["final_test_top1"])
sys.exit(0 if g and g["graph"] and g["graph_steps"] > 0 and c == sys.argv[2] else 1)
PY
}

# the PyTorch package with CUDA tensors (py_gpu); its logs copied under $OUT. Run only where the
# preflight found a usable GPU, so a skip of py_gpu here (no python whose torch sees the GPU, no
# libeager_cuda.so) is a failure: the package's device path went untested
python_gpu() {
  local out rc=0
  out=$(T='^py_gpu$' bash tests/run.sh 2>&1) || rc=$?
  printf '%s\n' "$out"
  mkdir -p "$OUT/test-logs"
  cp -r "$B"/test-logs/py_gpu* "$OUT/test-logs/" 2> /dev/null
  if grep -q '^SKIP py_gpu ' <<< "$out"; then
    echo "FAIL: py_gpu skipped on a machine with a usable GPU: the PyTorch package's CUDA path was not tested"
    return 1
  fi
  return $rc
}

main() {
  mpi_env
  export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
  preflight

  # libpcoll's device tests first (about a minute), then the backend's (layers and references)
  local keep='rc=$?; mkdir -p "$LOGDIR_COPY/test-logs"; cp "$B"/test-logs/cuda_*.log "$LOGDIR_COPY/test-logs/" 2>/dev/null; exit $rc'
  step pcoll 120 env B="$B" LOGDIR_COPY="$OUT" T='^cuda_pcoll_' bash -c "bash tests/run.sh; $keep"
  step tests 240 env B="$B" LOGDIR_COPY="$OUT" T='^cuda_(compile|device_pick|rules|streams|layers|ref)$' bash -c \
    "bash tests/run.sh; $keep"

  mkdir -p "$OUT/bench-gpu/bench"
  [ -x "$B/bench/nn_bench_gpu" ] && ln -sf "$(readlink -f "$B/bench/nn_bench_gpu")" "$OUT/bench-gpu/bench/nn_bench_gpu"
  step bench-gpu 120 env NN_BENCH_ITERS="${NN_BENCH_ITERS:-5}" NN_BENCH_SKIP="${NN_BENCH_SKIP-resnet50/fp32}" \
    sh jobs/bench_gpu.sh "$OUT/bench-gpu"

  step collectives 90 collectives_gpu

  local data=$B/gpu-data/fashion-mnist
  [ -f "$data/train-images-idx3-ubyte.gz" ] || data=/usr/share/datasets/fashion-mnist
  step train 120 train_and_check "$OUT/train_fmnist_cuda.json" staged $MPIRUN -np 2 "$B/bin/eager-train" \
    --experiment fmnist --epochs 2 --device cuda --data-path "$data" --limit-train 4096 --batch 64 \
    --out "$OUT/train_fmnist_cuda.json" --t-warn 30 --t-abort 90
  # the same with the loader filling page-locked batches that the model copies straight in
  step train-direct 120 train_and_check "$OUT/train_fmnist_cuda_direct.json" direct $MPIRUN -np 2 \
    "$B/bin/eager-train" --experiment fmnist --epochs 2 --device cuda --data-path "$data" --limit-train 4096 \
    --batch 64 --out "$OUT/train_fmnist_cuda_direct.json" --t-warn 30 --t-abort 90

  step python 150 python_gpu

  # the test logs and benchmark files packed into one (a device tool may return only a few files)
  tar czf "$OUT/logs.tgz" -C "$OUT" --exclude=nn_bench_gpu test-logs bench-gpu 2> /dev/null
  echo; echo "==== summary (t=$(elapsed)s; logs and JSON under $OUT)"
  printf '%-12s %-8s %6s  %s\n' step verdict time detail
  printf '%s\n' "${SUMMARY[@]}"
  return $FAILED
}

export -f train_and_check collectives_gpu python_gpu
export B
export OUT
main "$@" 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
