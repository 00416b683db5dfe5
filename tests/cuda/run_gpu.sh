#!/bin/bash
# run_gpu.sh BIN COMMAND...: runs a GPU test command.  Exit 77 (skip) with one line naming the
# reason when there is no CUDA device, or when the CUDA targets are not built because this machine
# lacks nvcc/cuDNN(/NCCL); FAILS when they should have been built but BIN is missing.
B=${B:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
bin=$1; shift
have() { [ -f "$CUDA_HOME/include/$1" ] || [ -f "/usr/include/$1" ]; }
if [ ! -x "$bin" ]; then
  need="nvcc, cuDNN"
  ok=1
  command -v "${NVCC:-nvcc}" >/dev/null 2>&1 || ok=0
  have cudnn.h || ok=0
  case "$bin" in *pcoll*) need="$need, NCCL"; have nccl.h || ok=0 ;; esac
  if [ $ok = 1 ] && [ -z "${SAN:-}" ]; then
    echo "FAIL: $bin was not built although $need are present (run make build-all)"
    exit 1
  fi
  echo "SKIP: CUDA targets not built here (needs $need; SAN builds have none)"
  exit 77
fi
if ! why=$("$B/bench/nn_bench_gpu" --check 2>&1); then
  # a GPU the driver lists but the binaries cannot use (a library missing, a driver too old for
  # this CUDA) is a failure, not a machine without a GPU
  if command -v nvidia-smi > /dev/null && timeout 20 nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "FAIL: nvidia-smi lists a GPU but it is not usable: ${why#nn_bench_gpu: }"
    exit 1
  fi
  echo "SKIP: ${why#nn_bench_gpu: }"
  exit 77
fi
echo "device: $why"
"$@"
