#!/bin/bash
# fault_table.sh -- not a test: prints the fault table of docs (one rank killed with SIGKILL or
# stopped with SIGSTOP in each phase, under each launcher of LAUNCHERS): seconds from
# the signal to the job's end, the first line naming the rank, mpirun's and every rank's exit
# status, and what is left on disk (the run's JSON summary.exit, the checkpoint folder).
#   B=build bash tests/trainer/fault_table.sh        (about 20 s a row; t_warn 2 s, t_abort 8 s)
# LAUNCHERS: ';'-separated launcher commands without the rank count (default: mpirun, i.e. the
# launcher of the MPI that built $B, and with Open MPI also mpirun --enable-recovery; "srun
# --mpi=pmix" and "srun --mpi=pmix --kill-on-bad-exit=1" inside a Slurm allocation or with
# jobs/minicluster.sh's env).
# PHASES (default: all): of training, evaluation, checkpoint, between.
# Phases: training (the signal lands 3 s after rank 1 started its first epoch), evaluation,
# checkpoint (rank 0, the writer, held after writing latest.ckpt and before the agreement that
# follows), between epochs (before the second epoch's pcoll_create). EAGER_TEST_PAUSE holds the
# rank there (trainer/watchdog.h).
B=${B:-build}
. "$(dirname "$0")/common.sh"
# tests/run.sh's environment when run by hand: the launcher of the MPI that built $B
. jobs/mpi.sh
pcoll_mpi_use "$B" || exit 2
[ "$MPI_FAMILY" = openmpi ] && export OMPI_MCA_plm_rsh_agent=false
WRAP='"$0" "$@"; echo "rank '"$PCOLL_RANK_ENV"' rc=$?"'
# mpirun: the MPI's own launcher; --enable-recovery is Open MPI's
DEFAULT_LAUNCHERS=mpirun; [ "$MPI_FAMILY" = openmpi ] && DEFAULT_LAUNCHERS="mpirun;mpirun --enable-recovery"
LAUNCHERS=${LAUNCHERS:-$DEFAULT_LAUNCHERS}
WARN=2 ABORT=8
printf '| phase | fault | launcher | s to end | first line naming the rank | mpirun | ranks 0,1,2 | summary.exit | checkpoints |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
show() { # the launcher column: mpirun for the MPI's own, without the options every row has
  local x=${1/--oversubscribe --bind-to none/}
  echo "${x/$MPIEXEC/mpirun ($MPI_NAME)}"
}
row() { # row PHASE PAUSE VICTIM SIGNAL LAUNCHER
  local phase=$1 pause=$2 victim=$3 sig=$4 extra=$5 d="$TMP/$RANDOM" pid="" t0 rc el np="-np 3" ntrain=1024
  [[ " ${PHASES:-training evaluation checkpoint between} " == *" ${phase%% *} "* ]] || return 0
  [ "$phase" = training ] && ntrain=8192
  case $extra in srun*) np="-n 3";; esac
  mkdir -p "$d/ck"
  EAGER_TEST_PAUSE=$pause timeout 150 $extra $np bash -c "$WRAP" "$TRAIN" --experiment fmnist \
    --limit-train $ntrain --limit-test 256 --batch 32 --threads 1 --mode sync --epochs 2 \
    --t-warn $WARN --t-abort $ABORT --ckpt-dir "$d/ck" --ckpt-every 1 --out "$d/run.json" > "$d/log" 2>&1 &
  local job=$!
  pid=$(paused_pid "$d/log" $victim $job)
  [ -n "$pid" ] || { echo "| $phase | $sig | $(show "$extra") | the rank never got there |"; wait $job; return; }
  [ "$phase" = training ] && sleep 3 # into the rounds
  kill -$sig "$pid"; t0=$(date +%s.%N)
  wait $job; rc=$?
  el=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  kill -9 "$pid" 2>/dev/null
  local line ranks ex ck
  line=$(grep -v "EAGER_TEST_PAUSE\|^rank\|Killed" "$d/log" | grep -m1 -E "rank $victim\b" | cut -c1-200 | tr '|' '/')
  ranks=$(for r in 0 1 2; do sed -n "s/^rank $r rc=//p" "$d/log" | head -1 | grep . || echo -; done | paste -sd, -)
  ex=$(jq -r '.summary.exit // "no summary"' "$d/run.json" 2>/dev/null | cut -c1-80 | tr '|' '/')
  ck=$(cd "$d/ck" && ls | paste -sd' ' -)
  echo "| $phase | $sig | $(show "$extra") | $el | $line | $rc | $ranks | ${ex:-no file} | ${ck:-empty} |"
}
IFS=';' read -ra launchers <<< "$LAUNCHERS"
for extra in "${launchers[@]}"; do
  [ "${extra%% *}" = mpirun ] && extra="$MPIRUN${extra#mpirun}"
  for sig in KILL STOP; do
    row training 1:pcoll_create:0 1 $sig "$extra"
    row evaluation 1:evaluation:60 1 $sig "$extra"
    row checkpoint 0:checkpoint:60 0 $sig "$extra"
    row "between epochs" 1:pcoll_create:60:2 1 $sig "$extra"
  done
done
