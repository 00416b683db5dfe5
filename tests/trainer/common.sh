# common.sh: helpers for the trainer's end-to-end tests (sourced). $B and $MPIRUN come from run.sh.
set -u
TMP=$(mktemp -d /tmp/eager-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
TRAIN="$B/bin/eager-train"
fail() { echo "FAIL: $*"; exit 1; }
# run NP ARGS...: runs the trainer quietly on the small Fashion-MNIST subset; output in $TMP/out
run() {
  np=$1; shift
  timeout 240 $MPIRUN -np "$np" "$TRAIN" --experiment fmnist --limit-train 2048 --limit-test 512 \
    --batch 32 --quiet "$@" > "$TMP/out" 2>&1
}
# paused_pid LOG RANK JOB: the pid that RANK prints when EAGER_TEST_PAUSE holds it (trainer/watchdog.h),
# polled in LOG for up to 120 s while JOB (a background pid) runs; empty if it never got there
paused_pid() {
  local p=""
  for _ in $(seq 1 400); do
    p=$(sed -n "s/.*rank $2 (pid \([0-9]*\)): EAGER_TEST_PAUSE.*/\1/p" "$1")
    [ -n "$p" ] && break
    kill -0 "$3" 2>/dev/null || break
    sleep 0.3
  done
  echo "$p"
}
