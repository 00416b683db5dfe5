#!/bin/bash
# A rank that crashes names the code that crashed it (trainer/crash.c): the test aid
# EAGER_TEST_CRASH=1 makes rank 1 call a null function pointer, which leaves no frame of its
# caller for a backtrace. The report must give the rank, the signal, pc 0, and a caller address
# that addr2line resolves to crash_test_null_call; the job must fail (mpirun non-zero) in bounded
# time with the signal still the rank's cause of death (Open MPI's own report follows ours).
. "$(dirname "$0")/common.sh"
EAGER_TEST_CRASH=1 timeout 120 $MPIRUN -np 2 "$TRAIN" --experiment fmnist --limit-train 512 --limit-test 256 \
  --batch 32 --quiet --threads 1 --out "$TMP/crash.json" > "$TMP/out" 2>&1
rc=$?
cat "$TMP/out"
[ $rc -ne 124 ] || fail "the job hung after the crash"
[ $rc -ne 0 ] || fail "mpirun exited 0 after a rank crashed"
grep -q "^eager-train: rank 1: SIGSEGV at address 0x0, pc 0x0$" "$TMP/out" || fail "no report line naming rank 1, SIGSEGV, pc 0"
grep -q "^eager-train: rank 1: pc 0 is a call through a null pointer, made from:$" "$TMP/out" || fail "no caller line"
off=$(grep -A1 "made from:" "$TMP/out" | sed -n 's/.*eager-train(+\(0x[0-9a-f]*\)).*/\1/p' | head -1)
[ -n "$off" ] || fail "the caller's line has no eager-train(+OFFSET)"
if command -v addr2line >/dev/null; then
  fn=$(addr2line -f -e "$TRAIN" "$off" | head -1)
  echo "addr2line $off: $fn"
  [ "$fn" = crash_test_null_call ] || fail "the caller $off resolves to '$fn', not crash_test_null_call"
fi
grep -q "exited on signal 11\|Segmentation fault" "$TMP/out" || fail "the launcher did not report the signal"
grep -q "EAGER_TEST_CRASH: the null call returned" "$TMP/out" && fail "the null call returned"
echo "PASS"
