#!/bin/bash
# fault_table.sh -- not a test: prints the fault table of docs (one rank killed with SIGKILL or
# stopped with SIGSTOP in each phase, under mpirun and mpirun --enable-recovery): seconds from
# the signal to the job's end, the first line naming the rank, mpirun's and every rank's exit
# status, and what is left on disk (the run's JSON summary.exit, the checkpoint folder).
#   B=build bash tests/trainer/fault_table.sh        (about 20 s a row; t_warn 2 s, t_abort 8 s)
# Phases: training (the signal lands 1 s after rank 0's first progress line), evaluation,
# checkpoint (rank 0, the writer, held after writing latest.ckpt and before the agreement that
# follows), between epochs (before the second epoch's pcoll_create). EAGER_TEST_PAUSE holds the
# rank there (trainer/run.h).
B=${B:-build}
. "$(dirname "$0")/common.sh"
# tests/run.sh's environment when run by hand
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader} OMPI_MCA_pml=${OMPI_MCA_pml:-ob1} OMPI_MCA_plm_rsh_agent=false
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN=${MPIRUN:-mpirun --oversubscribe --bind-to none}
WRAP='"$0" "$@"; echo "rank $OMPI_COMM_WORLD_RANK rc=$?"'
WARN=2 ABORT=8
printf '| phase | fault | launcher | s to end | first line naming the rank | mpirun | ranks 0,1,2 | summary.exit | checkpoints |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
row() { # row PHASE PAUSE VICTIM SIGNAL EXTRA
  local phase=$1 pause=$2 victim=$3 sig=$4 extra=$5 d="$TMP/$RANDOM" pid="" t0 rc el
  mkdir -p "$d/ck"
  EAGER_TEST_PAUSE=$pause timeout 150 $MPIRUN $extra -np 3 bash -c "$WRAP" "$TRAIN" --experiment fmnist \
    --limit-train 1024 --limit-test 256 --batch 32 --threads 1 --mode sync --epochs 2 --log-every 1 \
    --t-warn $WARN --t-abort $ABORT --ckpt-dir "$d/ck" --ckpt-every 1 --out "$d/run.json" > "$d/log" 2>&1 &
  local job=$!
  for _ in $(seq 1 300); do
    if [ "$pause" = none ]; then
      grep -q "epoch 1 step" "$d/log" && sleep 1 && for p in $(pgrep -f "$d/run.json"); do
        [ "$(tr '\0' '\n' < /proc/$p/environ 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')" = "$victim" ] &&
          [ "$(cat /proc/$p/comm)" = eager-train ] && pid=$p; done
    else
      pid=$(sed -n "s/.*rank $victim (pid \([0-9]*\)): EAGER_TEST_PAUSE.*/\1/p" "$d/log")
    fi
    [ -n "$pid" ] && break
    kill -0 $job 2>/dev/null || break
    sleep 0.3
  done
  [ -n "$pid" ] || { echo "| $phase | $sig | ${extra:-mpirun} | the rank never got there |"; wait $job; return; }
  kill -$sig "$pid"; t0=$(date +%s.%N)
  wait $job; rc=$?
  el=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  kill -9 "$pid" 2>/dev/null
  local line ranks ex ck
  line=$(grep -v "EAGER_TEST_PAUSE\|^rank\|Killed" "$d/log" | grep -m1 -E "rank $victim\b" | cut -c1-200 | tr '|' '/')
  ranks=$(for r in 0 1 2; do sed -n "s/^rank $r rc=//p" "$d/log" | head -1 | grep . || echo -; done | paste -sd, -)
  ex=$(jq -r '.summary.exit // "no summary"' "$d/run.json" 2>/dev/null | cut -c1-80 | tr '|' '/')
  ck=$(cd "$d/ck" && ls | paste -sd' ' -)
  echo "| $phase | $sig | ${extra:-mpirun} | $el | $line | $rc | $ranks | ${ex:-no file} | ${ck:-empty} |"
}
for extra in "" "--enable-recovery"; do
  for sig in KILL STOP; do
    row training none 1 $sig "$extra"
    row evaluation 1:evaluation:60 1 $sig "$extra"
    row checkpoint 0:checkpoint:60 0 $sig "$extra"
    row "between epochs" 1:pcoll_create:60:2 1 $sig "$extra"
  done
done
