#!/bin/bash
# tests/run.sh's skip rules, on the fixture tests/runner/skips.list: a line tagged gpu that exits
# 77 with a reason is a skip, listed at the end grouped by reason ("2 skipped: no CUDA device
# (fix_gpu_skip fix_gpu_skip2)"); a line not tagged gpu that exits 77, or a gpu line that says
# nothing, counts as failed; the run exits non-zero; the last line stays 'N passed, N failed, N
# skipped'. Needs $B (run.sh's build folder, for its MPI set-up).
set -u
cd "$(dirname "$0")/.." || exit 1
out=$(mktemp /tmp/runner-check.XXXXXX)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    | /' "$out"; exit 1; }
T='' B2='' V='' FILES=tests/runner/skips.list bash tests/run.sh >"$out" 2>&1 && fail "run.sh exited 0 with a test that skipped without the gpu tag"
grep -q '^SKIP fix_gpu_skip ' "$out" || fail "fix_gpu_skip (tagged gpu) not a SKIP"
grep -q '^FAIL fix_cpu_skip .*not tagged gpu' "$out" || fail "fix_cpu_skip (no gpu tag) did not FAIL naming the tag"
grep -q '^FAIL fix_gpu_silent .*without a line saying why' "$out" || fail "fix_gpu_silent (no reason) did not FAIL"
grep -qx '2 skipped: no CUDA device (fix_gpu_skip fix_gpu_skip2)' "$out" || fail "skips not grouped by reason"
[ "$(tail -1 "$out")" = "1 passed, 2 failed, 2 skipped" ] || fail "last line: $(tail -1 "$out")"
echo "ok: $(grep -c '^SKIP' "$out") gpu skips grouped by reason, 2 other skips failed; last line: $(tail -1 "$out")"
