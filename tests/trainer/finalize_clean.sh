#!/bin/bash
# Every message eager-train sends is received before MPI_Finalize (docs/DESIGN.md#finalize).
# A message left unreceived is erroneous MPI: MPICH over UCX prints 'unexpected tag-receive
# descriptor ... was not matched' for each; under any MPI eager-train's own check (run_unreceived:
# MPI_Iprobe on the watchdog's communicator before freeing it and on MPI_COMM_WORLD before
# MPI_Finalize; libpcoll's pcoll_finalize on its three) names it and fails the run. Runs: 4 ranks,
# global epochs, rank 1 three times slower, sync and adaptive; --help; a bad option that every
# rank refuses (the agreed-failure path, run_agree).
. "$(dirname "$0")/common.sh"
clean() { # clean NAME: no unreceived message in $TMP/out
  if grep -E 'was not matched|never received|left unreceived' "$TMP/out"; then
    fail "$1: a message was left unreceived at MPI_Finalize ($MPI_NAME)"
  fi
  echo "ok: $1: nothing left unreceived"
}
for m in sync adaptive; do
  run 4 --mode "$m" --epochs 2 --epoch-mode global --imbalance slow:rank=1,factor=3 --out "$TMP/$m.json" ||
    { cat "$TMP/out"; fail "$m: the run failed"; }
  jq -e '.summary.exit == "ok"' "$TMP/$m.json" >/dev/null || fail "$m: summary.exit is not ok"
  clean "$m"
done
timeout 60 $MPIRUN -np 3 "$TRAIN" --help >"$TMP/out" 2>&1 || { cat "$TMP/out"; fail "--help exited non-zero"; }
clean help
if run 3 --mode nosuch --epochs 1 --out "$TMP/bad.json"; then cat "$TMP/out"; fail "--mode nosuch was accepted"; fi
grep -q "configuration" "$TMP/out" || { cat "$TMP/out"; fail "--mode nosuch: no message naming the configuration"; }
clean "agreed failure"
echo "PASS ($MPI_NAME)"
