#!/bin/bash
# gpu.sh: the PyTorch package with CUDA tensors (libeager_cuda.so, libpcoll's device data path), 2 ranks
# under $MPIRUN (tests/python.tests py_gpu, tag gpu; `make gpu-check` runs it). Cases of tests/python/check.py:
#   gpu_sync cpu, then shared (both ranks on cuda:0: the staged path): the GPU run's weights = the CPU
#     run's after every epoch, to float tolerance (same model, batches, seed); the run files' data_path
#     (host, staged) and gpus
#   gpu_partial shared majority: replicas bitwise equal (end_epoch's hash check), gradients conserved,
#     streaks within tau, the run file valid (pcoll-validate) and read by pcoll-compare
#   gpu_refuse_kind, gpu_refuse_split: a rank on the CPU beside one on the GPU, a CUDA model after
#     libeager.so was loaded, a model split over CPU and GPU: one line on every rank
#   with 2+ GPUs also gpu_sync own and gpu_partial own (rank r on cuda:r: NCCL)
# The python: $EAGER_PY, else $B/venv's, else python3 on PATH: the first whose torch sees a GPU.
# Exit 77 (SKIP, one line) without one, or without $B/libeager_cuda.so.
set -u
cd "$(dirname "$0")/../.." || exit 2
PY="" seen=""
for p in "${EAGER_PY:-}" "$B/venv/bin/python3" "$(command -v python3)"; do
  [ -n "$p" ] && [ -x "$p" ] || continue
  out=$("$p" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>&1)
  n=$(tail -1 <<< "$out")
  [ "$n" -ge 1 ] 2>/dev/null && { PY=$p; NGPU=$n; break; }
  # what each python said (an import error, or 0 GPUs): printed before the skip line
  seen="$seen  $p: $( [[ $n =~ ^[0-9]+$ ]] && echo "torch sees $n GPUs" || echo "${n:0:300}")"$'\n'
done
[ -n "$PY" ] || { printf '%s' "$seen"; echo "SKIP: no CUDA device (no python among \$EAGER_PY, $B/venv, python3 has torch with a usable GPU)"; exit 77; }
[ -f "$B/libeager_cuda.so" ] || { echo "SKIP: no $B/libeager_cuda.so (built only with CUDA and NCCL)"; exit 77; }
echo "gpu.sh: $PY (torch $("$PY" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null)), $NGPU GPU(s)"
export EAGER_SGD_LIB=$PWD/$B/libeager.so OMP_NUM_THREADS=1 PYTHONWARNINGS=ignore
d=$(mkdir -p "$LOGDIR/py_gpu" && cd "$LOGDIR/py_gpu" && pwd)
run() {  # run NAME ARGS...: 2 ranks of check.py ARGS, the log in $d/NAME.out
  local name=$1; shift
  $MPIRUN -np 2 "$PY" tests/python/check.py "$@" >"$d/$name.out" 2>&1
}
# shellcheck source=tests/python/lib.sh
. tests/python/lib.sh
ok() { grep -h "^$2" "$d/$1.out"; }
die() { cat "$d/$1.out"; echo "gpu.sh: $2"; exit 1; }
valid() { "$B/bin/pcoll-validate" results/schema/run.schema.json "$1" && "$B/bin/pcoll-compare" "$1" >/dev/null ||
  { echo "gpu.sh: $1 not valid or not read by pcoll-compare"; exit 1; }; }
run sync_cpu gpu_sync cpu "$d" || die sync_cpu "the CPU reference run failed"
kinds=shared; [ "$NGPU" -ge 2 ] && kinds="shared own"
[ "$NGPU" -ge 2 ] || echo "gpu.sh: one GPU: the NCCL cases (rank r on cuda:r) not run"
for k in $kinds; do
  run "sync_$k" gpu_sync "$k" "$d" || die "sync_$k" "sync on the GPU ($k) failed"
  ok "sync_$k" "gpu_sync $k"; valid "$d/gpu_sync_$k.json"
  run "partial_$k" gpu_partial "$k" majority "$d" || die "partial_$k" "majority on the GPU ($k) failed"
  ok "partial_$k" "partial $k"; valid "$d/py_run_${k}_majority.json"
done
run refuse_kind gpu_refuse_kind || die refuse_kind "check.py failed"
on_ranks 2 "$d/refuse_kind.out" "refused kind: the model is on a GPU on ranks 0 and on the CPU on ranks 1: every rank's model on the same kind of device"
on_ranks 2 "$d/refuse_kind.out" "refused loaded: rank 1: the model is on cuda:0 and libeager.so is loaded already"
run refuse_split gpu_refuse_split || die refuse_split "check.py failed"
on_ranks 2 "$d/refuse_split.out" "refused split: rank 1: parameters on cpu and cuda:0: eager_sgd takes a model whose parameters are all on one device"
echo "gpu.sh: CUDA tensors through the device path ($kinds): sync = CPU, majority conserved and replicas equal, 3 refusals on both ranks"
