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
