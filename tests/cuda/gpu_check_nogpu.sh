#!/bin/bash
# gpu_check_nogpu.sh: `make gpu-check` on a machine without a usable GPU, as if the build folder
# came from elsewhere (no jansson headers, no mpicc: HAVE_JANSSON= MPICC=): exits 0, one SKIP
# line per step, the summary table, and its log under $OUT.  Then, with an nvidia-smi that lists a
# GPU the binaries cannot use (a library missing, a driver too old): gpu-check fails in its
# preflight instead of skipping, and a GPU test fails instead of skipping.
set -u
B=${B:-build}
if [ -x "$B/bench/nn_bench_gpu" ] && "$B/bench/nn_bench_gpu" --check >/dev/null 2>&1; then
  echo "SKIP: a GPU is present (make gpu-check runs the real steps there)"; exit 77; fi
OUT=$(mktemp -d /tmp/gpu-check-test.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    /' "$OUT/stdout"; exit 1; }
OUT=$OUT make --no-print-directory -s gpu-check B="$B" HAVE_JANSSON= MPICC= > "$OUT/stdout" 2>&1 ||
  fail "make gpu-check exited $? without a GPU"
for s in pcoll tests bench-gpu collectives train train-direct python; do
  n=$(grep -c "^SKIP $s: no usable GPU" "$OUT/stdout")
  [ "$n" = 1 ] || fail "step $s: $n skip lines, want 1"
  grep -qE "^$s +SKIP" "$OUT/stdout" || fail "summary row of $s missing"
done
grep -q '^==== summary' "$OUT/stdout" || fail "no summary table"
grep -qE '^preflight +DONE' "$OUT/stdout" || fail "no preflight row"
[ -s "$OUT/gpu_check.log" ] || fail "no log under \$OUT"

# a GPU that nvidia-smi lists but nn_bench_gpu --check cannot use
mkdir -p "$OUT/fakebin"
printf '#!/bin/sh\ncase "$1" in -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-test)";; *) echo "fake nvidia-smi";; esac\n' \
  > "$OUT/fakebin/nvidia-smi"
chmod +x "$OUT/fakebin/nvidia-smi"
rc=0
PATH="$OUT/fakebin:$PATH" OUT=$OUT/u GPU_CHECK_BUDGET=1 make --no-print-directory -s gpu-check B="$B" HAVE_JANSSON= MPICC= \
  > "$OUT/stdout" 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "gpu-check exited 0 with a listed but unusable GPU"
grep -qE '^preflight +FAIL .*listed but not usable' "$OUT/stdout" || fail "no preflight FAIL row for the unusable GPU"
grep -q "^SKIP pcoll: no usable GPU" "$OUT/stdout" && fail "steps skipped although a GPU is listed"
rc=0
PATH="$OUT/fakebin:$PATH" bash tests/cuda/run_gpu.sh "$B/tests/cuda/test_cuda_layers" true > "$OUT/stdout" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q '^FAIL: nvidia-smi lists a GPU' "$OUT/stdout" ||
  fail "run_gpu.sh: exit $rc, want 1 and a FAIL line for the listed but unusable GPU"
echo "ok: make gpu-check without a GPU: 7 skip lines, summary, log under \$OUT; a listed but unusable GPU fails"
