#!/bin/bash
# A rank killed (SIGKILL) or stopped (SIGSTOP) outside the training rounds: every rank must exit
# non-zero within a bounded time, with a message naming the rank, under mpirun and under
# mpirun --enable-recovery (whose mpirun must exit non-zero too); a stopped rank that is woken
# says that it was the silent one instead of blaming the others; a rank alive but not arriving
# at a collective is named as well. The test aid EAGER_TEST_PAUSE=RANK:PHASE:SECONDS[:NTH]
# (trainer/watchdog.h) holds rank 1 just before a phase, so that the signal lands there.
# FAULTS (default: all): the cases to run, of kill, stop, stop-cont, hold.
. "$(dirname "$0")/common.sh"
WARN=1.5 ABORT=6
# each rank reports its exit status through a wrapper line "rank R rc=N"
WRAP='"$0" "$@"; echo "rank '"$PCOLL_RANK_ENV"' rc=$?"'
# mpirun --enable-recovery is Open MPI's (MPICH's hydra ends the job at a rank's death, always)
RECOVERY=""; [ "$MPI_FAMILY" = openmpi ] && RECOVERY="--enable-recovery"
want() { [[ " ${FAULTS:-kill stop stop-cont hold} " == *" $1 "* ]]; }
args=(--experiment fmnist --limit-train 512 --limit-test 256 --batch 32 --quiet --threads 1 --mode sync)

# start NAME PAUSE EXTRA_MPIRUN ARGS...: the job in the background; sets $job and $pid (rank 1)
start() {
  name=$1 pause=$2 extra=$3; shift 3
  EAGER_TEST_PAUSE=$pause timeout 120 $MPIRUN $extra -np 3 bash -c "$WRAP" "$TRAIN" "${args[@]}" \
    --out "$TMP/$name.json" "$@" > "$TMP/$name.log" 2>&1 &
  job=$!
  pid=$(paused_pid "$TMP/$name.log" 1 $job)
  [ -n "$pid" ] || { cat "$TMP/$name.log"; fail "$name: rank 1 never reached its pause"; }
}
# finish NAME: waits for the job; $rc: mpirun's status, $el: seconds since the signal
finish() {
  wait $job; rc=$?
  el=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  kill -9 "$pid" 2>/dev/null # a stopped rank that the launcher left behind
  echo "[$1] mpirun exit $rc, ${el} s after the signal"
  grep -E "eager-train: rank|rc=" "$TMP/$1.log" | grep -v "EAGER_TEST_PAUSE" | sed 's/^/    /' | head -12
  [ $rc -ne 124 ] || { cat "$TMP/$1.log"; fail "$1: the job hung (no rank ended it)"; }
}
failed_all() { # every rank that reported exited non-zero, and mpirun did
  [ $rc -ne 0 ] || fail "$1: mpirun exited 0"
  ! grep -q "rc=0$" "$TMP/$1.log" || fail "$1: a rank exited 0"
  awk -v e="$el" -v b="$ABORT" 'BEGIN{exit !(e <= b + 30)}' || fail "$1: took $el s (t_abort $ABORT s)"
}

# (1) SIGKILL in evaluation, under mpirun and mpirun --enable-recovery
case_kill() {
  local extra=$1 n=kill${1:+-recovery}
  start $n 1:evaluation:60 "$extra" --epochs 1 --t-warn $WARN --t-abort $ABORT
  kill -9 "$pid"; t0=$(date +%s.%N)
  finish $n
  failed_all $n
  if [ -z "$extra" ]; then # mpirun ends the job itself and names the rank
    grep -q "rank 1" "$TMP/$n.log" || fail "$n: rank 1 not named"
  else # the survivors' watchdog names it
    grep -Eq "eager-train: rank [02]: waiting in 'evaluation'.*silent.*: rank 1 .*aborting" "$TMP/$n.log" ||
      fail "$n: no abort line naming rank 1 as silent in evaluation"
  fi
}

# (2) SIGSTOP in evaluation: a warning after t_warn, then the abort, both naming rank 1
case_stop() {
  local extra=$1 n=stop${1:+-recovery}
  start $n 1:evaluation:60 "$extra" --epochs 1 --t-warn $WARN --t-abort $ABORT
  kill -STOP "$pid"; t0=$(date +%s.%N)
  finish $n
  failed_all $n
  grep -Eq "eager-train: rank [02]: waiting in 'evaluation'.*silent.*: rank 1 for [0-9.]+ s \(last heard [^;]*\)$" \
    "$TMP/$n.log" || fail "$n: no warning naming rank 1"
  grep -Eq "eager-train: rank [02]: waiting in 'evaluation'.*: rank 1 .*aborting" "$TMP/$n.log" ||
    fail "$n: no abort line naming rank 1"
}

# (3) SIGSTOP then SIGCONT before t_abort: the others warn, the woken rank names itself, no rank
#     blames another, the run finishes
case_stop_cont() {
  local n=stop-cont ABORT=30
  start $n 1:evaluation:8 "" --epochs 1 --t-warn $WARN --t-abort $ABORT
  kill -STOP "$pid"; t0=$(date +%s.%N); sleep 4; kill -CONT "$pid"
  finish $n
  [ $rc -eq 0 ] || { cat "$TMP/$n.log"; fail "$n: the run failed"; }
  grep -q "eager-train: rank 1: this rank was not running for .* it is the rank that went silent" "$TMP/$n.log" ||
    fail "$n: the woken rank did not say it was the silent one"
  grep -Eq "eager-train: rank [02]: .*silent.*: rank 1 " "$TMP/$n.log" || fail "$n: nobody warned about rank 1"
  ! grep -Eq "eager-train: rank 1: .*(silent \(no|aborting)" "$TMP/$n.log" || fail "$n: rank 1 blamed another rank"
}

# (4) a rank alive but held before the second epoch's pcoll_create (between epochs) for longer
#     than t_abort: the others name it and end the job
case_hold() {
  local n=hold
  start $n 1:pcoll_create:60:2 "" --epochs 2 --t-warn $WARN --t-abort $ABORT
  t0=$(date +%s.%N)
  finish $n
  failed_all $n
  grep -Eq "eager-train: rank [02]: waiting in 'pcoll_create'.*alive but not in it yet: rank 1 .*aborting" \
    "$TMP/$n.log" || fail "$n: no abort line naming rank 1 as not arrived"
}

# The cases run side by side (common.sh case_bg), each its own job and files: most of each is
# waiting for t_abort or the launcher. Three at a time (9 ranks on the machine's cores), the
# longest first.
CASE_JOBS=3
want stop && [ -n "$RECOVERY" ] && case_bg stop-recovery case_stop "$RECOVERY"
want hold && case_bg hold case_hold
want stop && case_bg stop case_stop ""
want kill && [ -n "$RECOVERY" ] && case_bg kill-recovery case_kill "$RECOVERY"
want stop-cont && case_bg stop-cont case_stop_cont
want kill && case_bg kill case_kill ""
cases_wait
echo "ok (${FAULTS:-all}): every fault named and the job ended non-zero; the woken rank named itself"
