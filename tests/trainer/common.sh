# common.sh: helpers for the trainer's end-to-end tests (sourced). $B and $MPIRUN come from run.sh.
set -u
TMP=$(mktemp -d /tmp/eager-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
TRAIN="$B/bin/eager-train"
fail() { echo "FAIL: $*"; exit 1; }
# run NP ARGS...: runs the trainer quietly on the small Fashion-MNIST subset; output in $TMP/out.
# The model is the fmnist preset's ResNet-8 at a quarter of its channels (width=4, TEST_MODEL
# overrides; a later --model in ARGS wins): these tests check rounds, replicas, records and exits,
# not accuracy, and its epoch takes about a quarter of the preset's (the preset's model is trained by
# nn_fmnist_train and against PyTorch by train_ddp_mirror).
# TRAIN_ARGS: those settings, for the tests that launch the trainer themselves (bad_input.sh).
TEST_MODEL=${TEST_MODEL:-resnet-fmnist width=4}
TRAIN_ARGS=(--experiment fmnist --model "$TEST_MODEL" --limit-train 2048 --limit-test 512 --batch 32 --quiet)
run() {
  np=$1; shift
  timeout 240 $MPIRUN -np "$np" "$TRAIN" "${TRAIN_ARGS[@]}" "$@" > "$TMP/out" 2>&1
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
# Cases that share no files and mostly wait (a failing mpirun's kill sequence, a watchdog's
# t_abort) run side by side. case_bg NAME CMD...: runs CMD (its arguments expanded here) in a
# background subshell whose TMP is its own folder $TMP/NAME (so run's $TMP/out is the case's own),
# its output kept; at most $CASE_JOBS (default 4) at a time. cases_wait: waits for them all, prints
# each case's output in the order started, and fails naming the first case that failed. Each case
# keeps its own limits (run's timeout 240, the hang checks), as when run one after another.
CASE_JOBS=${CASE_JOBS:-4}
CASES=()
case_bg() {
  local name=$1
  shift
  while [ "$(jobs -rp | wc -l)" -ge "$CASE_JOBS" ]; do wait -n; done
  mkdir -p "$TMP/$name"
  (
    TMP=$TMP/$name
    "$@"
    echo $? > "$TMP.rc"
  ) > "$TMP/$name.case" 2>&1 &
  CASES+=("$name")
}
cases_wait() {
  local c
  wait
  for c in "${CASES[@]}"; do
    cat "$TMP/$c.case"
    [ "$(cat "$TMP/$c.rc" 2>/dev/null)" = 0 ] || fail "case $c (its output above)"
  done
  CASES=()
}
