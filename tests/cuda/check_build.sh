#!/bin/bash
# check_build.sh: the CUDA targets were built and linked (runs without a GPU).
# SKIP (77) without nvcc; FAIL when nvcc and cuDNN (and NCCL for libpcoll's device path) are
# present but a target is missing, does not link cuDNN/cuBLAS/CUDA runtime/NCCL, lacks its API
# symbols or the sm_80/sm_90 device code; also checks that the host-only libpcoll has no device
# code (the CPU-only build is unchanged).
B=${B:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
fail=0
# a header the compiler finds (its own search path, multiarch folders included, plus CUDA's): asked
# of the compiler, not of the Makefile's list of folders, so a folder the Makefile misses fails here
have() { echo "#include <$1>" | ${CC:-gcc} -E -I"$CUDA_HOME/include" -x c - > /dev/null 2>&1; }
if ! command -v "${NVCC:-nvcc}" >/dev/null 2>&1; then echo "SKIP: no nvcc on PATH"; exit 77; fi
if ! have cudnn.h; then echo "SKIP: nvcc but no cuDNN (cudnn.h): the CUDA backend needs cuDNN"; exit 77; fi
bad() { echo "FAIL: $*"; fail=1; }
exists() { for f in "$@"; do [ -e "$f" ] && echo "ok   built $f" || bad "$f missing (make build-all)"; done; }
links() { # binary lib...
  local b=$1; shift
  [ -e "$b" ] || return
  local l; l=$(ldd "$b" 2>&1)
  for x in "$@"; do
    if echo "$l" | grep -q "$x.*=> /"; then echo "ok   $b links $(echo "$l" | grep -o "$x[^ ]*" | head -1)"
    else bad "$b does not link $x (ldd: $(echo "$l" | grep "$x" | head -1))"; fi
  done
}
syms() { # archive symbol...
  local a=$1; shift
  [ -e "$a" ] || return
  local s; s=$(nm -g --defined-only "$a" 2>/dev/null)
  for x in "$@"; do echo "$s" | grep -qw "$x" && echo "ok   $a defines $x" || bad "$a lacks $x"; done
}
arch() { # archive: a .nv_fatbin with sm_80 and sm_90 code (cuobjdump if present, else strings)
  [ -e "$1" ] || return
  local e
  if command -v cuobjdump >/dev/null 2>&1; then e=$(cuobjdump --list-elf "$1" 2>/dev/null)
  else objdump -h "$1" 2>/dev/null | grep -q nv_fatbin || { bad "$1 has no .nv_fatbin section"; return; }
       e=$(strings -a "$1" | grep -oE 'sm_[0-9]+'); fi
  for sm in sm_80 sm_90; do echo "$e" | grep -q "$sm" && echo "ok   $1 has $sm code" || bad "$1 has no $sm device code"; done
}
exists "$B/libnn_cuda.a" "$B/tests/cuda/test_cuda_layers" "$B/tests/cuda/test_cuda_ref" "$B/bench/nn_bench_gpu"
links "$B/tests/cuda/test_cuda_layers" libcudnn libcublas libcudart
links "$B/bench/nn_bench_gpu" libcudnn libcublas libcudart
syms "$B/libnn_cuda.a" nn_cuda_model_build nn_cuda_forward nn_cuda_backward nn_cuda_step_graph \
  nn_cuda_sgd_step_grad nn_cuda_copy_params_to_host nn_cuda_available nn_cuda_pick_device \
  nn_cuda_select_local_device nn_cuda_graph_stats
arch "$B/libnn_cuda.a"
if have nccl.h; then
  exists "$B/libpcoll_cuda.a" "$B/tests/cuda/test_pcoll_device" "$B/bench/bench_collectives_cuda"
  links "$B/tests/cuda/test_pcoll_device" libnccl libcudart
  syms "$B/libpcoll_cuda.a" pcoll_create pcoll_dev_allreduce pcoll_dev_open
  arch "$B/libpcoll_cuda.a"
else
  echo "note: no nccl.h: libpcoll's device path not built"
fi
if [ -e "$B/libpcoll.a" ] && nm -g "$B/libpcoll.a" 2>/dev/null | grep -q pcoll_dev_; then
  bad "$B/libpcoll.a (host-only) contains device-path symbols"
else echo "ok   host-only libpcoll has no device path"; fi
# the binaries start and skip cleanly without a device (or run --check with one)
if [ -x "$B/bench/nn_bench_gpu" ]; then
  out=$("$B/bench/nn_bench_gpu" --check 2>&1); echo "ok   nn_bench_gpu --check: $out"
fi
[ $fail = 0 ] && echo "PASS: CUDA targets built and linked" || echo "FAIL"
exit $fail
