#!/bin/bash
# bench_table.sh: jobs/bench_gpu.sh's table without a GPU, from stand-ins for both programs (a
# stub nn_bench_gpu in a build folder, a stub python3 on PATH): one row per model, precision and
# input placement with both times and their ratio; both cuDNN versions in the table and the JSON;
# a PyTorch run that fails after its first model keeps that model's rows (the others have no
# PyTorch time); a failing nn_bench_gpu keeps its rows and makes the script exit 1.
set -u
T=$(mktemp -d /tmp/bench-table.XXXXXX)
trap 'rm -rf "$T"' EXIT
PY=$(command -v python3)
fail() { echo "FAIL: $*"; sed 's/^/    /' "$T/out"; exit 1; }
mkdir -p "$T/b/bench" "$T/bin"
cat > "$T/b/bench/nn_bench_gpu" <<'S'
#!/bin/sh
[ "$1" = --check ] && { echo "NVIDIA Stub (sm_90, 139.8 GiB), CUDA runtime 13.0 driver 13.0, cuDNN 91400, cuBLAS 130000"; exit 0; }
for m in resnet32 lstm; do for p in fp32 tf32; do for i in pageable pinned device; do
  echo "$m 32 $p $i 10.00 9.00"; done; done; done
[ -n "${STUB_OURS_FAIL-}" ] && { echo "lstm: out of memory" >&2; exit 1; }
exit 0
S
cat > "$T/bin/python3" <<'S'
#!/bin/sh
[ "$1" = -c ] && exit 0
echo "# cudnn 91900 torch 2.11.0+cu130"
for p in fp32 tf32; do for i in pageable pinned; do echo "resnet32 32 $p $i 8.00 7.00"; done; echo "resnet32 32 $p device 5.00 4.00"; done
echo "RuntimeError: CUDA out of memory (lstm)" >&2
exit 1
S
chmod +x "$T/b/bench/nn_bench_gpu" "$T/bin/python3"
PATH="$T/bin:$PATH" sh jobs/bench_gpu.sh "$T/b" > "$T/out" 2>&1 || fail "exit $? with both programs' rows"
grep -q "cuDNN: ours 91400, PyTorch 91900" "$T/out" || fail "no line with both cuDNN versions"
grep -q "bench_torch_gpu.py failed" "$T/out" || fail "PyTorch's failure not said"
grep -Eq "^resnet32 +32 +tf32 +pinned +10.00 +8.00 +1.25$" "$T/out" || fail "resnet32 tf32 pinned row (10.00 / 8.00 = 1.25)"
grep -Eq "^resnet32 +32 +fp32 +device +10.00 +5.00 +2.00$" "$T/out" || fail "resnet32 fp32 device row"
grep -Eq "^lstm +32 +tf32 +device +10.00 +- +-$" "$T/out" || fail "lstm row without a PyTorch time"
[ "$(grep -Ec '^(resnet32|lstm) +32 ' "$T/out")" = 12 ] || fail "want 12 rows"
"$PY" - "$T/b/bench/gpu.json" <<'P' || fail "gpu.json"
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r) == 12, len(r)
a = [x for x in r if x["model"] == "resnet32" and x["precision"] == "tf32" and x["input"] == "pinned"][0]
assert (a["ours_ms"], a["torch_ms"], a["ratio"]) == (10.0, 8.0, 1.25), a
assert a["ours_cudnn"] == 91400 and a["torch_cudnn"] == 91900 and a["torch_version"] == "2.11.0+cu130", a
l = [x for x in r if x["model"] == "lstm"]
assert all(x["torch_ms"] is None and x["ratio"] is None for x in l), l
assert {x["input"] for x in r} == {"pageable", "pinned", "device"}
P
rc=0
STUB_OURS_FAIL=1 PATH="$T/bin:$PATH" sh jobs/bench_gpu.sh "$T/b" > "$T/out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "exit $rc when nn_bench_gpu fails, want 1"
grep -q "nn_bench_gpu failed; its rows so far are kept" "$T/out" || fail "our failure not said"
[ "$(grep -Ec '^(resnet32|lstm) +32 ' "$T/out")" = 12 ] || fail "our rows before the failure not kept"
echo "ok: bench-gpu table: 12 rows (model, precision, input), ratios, both cuDNN versions; rows kept when either program fails"
