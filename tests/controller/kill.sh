#!/bin/bash
# One rank killed with SIGKILL mid-run: every other rank must exit non-zero within t_abort + 5 s,
# with a message naming the dead rank.
#  (a) mpirun's default: the launcher sees the death and ends the job (it names the rank).
#  (b) --enable-recovery (the launcher keeps the survivors running, as srun may): our stall
#      watchdog (t_warn 1 s, t_abort 3 s) must name the silent rank and abort.
set -u
TMP=$(mktemp -d /tmp/ctlkill.XXXXXX); trap 'rm -rf "$TMP"' EXIT
BIN="$B/tests/controller/test_ctl_mpi"
# each rank reports its own exit status through a wrapper (an aborted rank prints nothing or rc != 0)
WRAP='"$0" "$@"; echo "rank '"$PCOLL_RANK_ENV"' rc=$?"'
# (b) needs a launcher that keeps the survivors: Open MPI's --enable-recovery (MPICH's hydra ends
# the job at the first death, as (a))
variants=default; [ "$MPI_FAMILY" = openmpi ] && variants="default recovery"
for variant in $variants; do
  extra=""; [ $variant = recovery ] && extra="--enable-recovery"
  t0=$(date +%s.%N)
  timeout 60 $MPIRUN $extra -np 4 bash -c "$WRAP" "$BIN" --policy solo --rounds 100000000 \
      --kill 2 --kill-after 2 > "$TMP/$variant.log" 2>&1
  rc=$?
  el=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a-2}')
  echo "[$variant] mpirun exit $rc; the job ended ${el} s after the kill"
  grep -E "SIGKILL|SILENT|rank 2|rc=" "$TMP/$variant.log" | grep -v "^\s*$" | head -6 | sed 's/^/    /'
  if grep -q "rc=0" "$TMP/$variant.log"; then echo "FAIL: a surviving rank exited 0"; exit 1; fi
  awk -v e="$el" 'BEGIN{exit !(e <= 3 + 5)}' || { echo "FAIL: took $el s > t_abort + 5 s"; exit 1; }
  if [ $variant = default ]; then
    grep -q "rank 2" "$TMP/$variant.log" || { echo "FAIL: rank 2 not named"; cat "$TMP/$variant.log"; exit 1; }
  else
    grep -q "SILENT (dead or hung, no heartbeat): rank 2" "$TMP/$variant.log" || {
      echo "FAIL: the watchdog did not name rank 2 as silent"; cat "$TMP/$variant.log"; exit 1; }
  fi
done
echo "OK"
