#!/bin/bash
# interfere.sh: a real noisy neighbour for a job: a CPU or memory-bandwidth hog ($B/bin/pcoll-hog,
# jobs/hog.c) pinned beside chosen ranks for a scheduled span of the job, so that an imbalance
# schedule can be tried without injected sleeps.
#
#   bash jobs/interfere.sh [--ranks P] SPEC -- CMD [ARGS...]   runs CMD (e.g. mpirun -np 4 eager-train
#                                                         ...) under SPEC; exits with CMD's status
#   bash jobs/interfere.sh [--ranks P] --check SPEC      checks SPEC only (exit 0, or 2 and one line)
#
# SPEC: one or more items separated by ';', each
#   KIND:ranks=R[+R...],start=S[,end=E][,procs=N][,mb=M]     or     KIND:cores=LIST,start=S,...
#   KIND     cpu (spins: takes its core from the rank) or mem (copies 2 x M MiB buffers: takes
#            memory bandwidth from the socket, and its core)
#   ranks=   the MPI ranks (R < P with --ranks P) beside which it runs: the hog is pinned to the
#            cores the rank may run on (its affinity, /proc/PID/status Cpus_allowed_list, read at
#            the span's start). Bind the ranks (srun --cpu-bind=cores, mpirun --bind-to core) for a
#            hog that shares one rank's core; an unbound rank's affinity is the whole node, and
#            the hog then competes with every rank there
#   cores=   a taskset CPU list with + for , (e.g. 0+2-3): pinned there instead, no rank needed
#   start=S, end=E   seconds from CMD's start (numbers, E > S; no end: until CMD ends)
#   procs=N  hog processes per rank (or for the cores), default 1; mb=M (mem) MiB per buffer, 64
#   e.g.  cpu:ranks=1,start=30,end=90     mem:ranks=0+2,start=10,procs=2;cpu:cores=3,start=0,end=5
# A rank is a process of CMD's (it inherits PCOLL_INTERFERE_TAG from CMD) whose environment has
# OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK (Open MPI, srun --mpi=pmix, MPICH / pmi2), or whose
# name is ddp-rank-R (trainer/ref/ddp_mirror.py's ranks), on this node: under Slurm the batch
# script's node, inside the allocation. A rank not found there 10 s into its span is named on
# stderr, and its hog starts whenever it appears before the span ends.
# Never outlives CMD: every hog is killed at its span's end, when CMD ends (any way), on SIGINT,
# SIGTERM or SIGHUP to this script (forwarded to CMD as SIGTERM), and, should this script itself
# be killed with SIGKILL, by the hog itself (pcoll-hog --watch: it exits within 50 ms of this
# script's end).
# Each start and stop is a line on stderr: 'interfere: T s: cpu hog PID on cpus L beside rank R
# (pid Q, NAME)' and 'interfere: T s: cpu hog PID stopped (span end)'.
# Needs $B/bin/pcoll-hog (make build-all) and taskset (util-linux).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
case $B in /*) HOG=$B/bin/pcoll-hog ;; *) HOG=$root/$B/bin/pcoll-hog ;; esac
die() { echo "interfere: $*" >&2; exit 2; }
P="" CHECK=0
while [ $# -gt 0 ]; do
  case $1 in
  --ranks) P=${2:-}; shift ;;
  --check) CHECK=1 ;;
  -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) break ;;
  esac
  shift
done
[ -z "$P" ] || [[ $P =~ ^[1-9][0-9]*$ ]] || die "--ranks takes a number of ranks >= 1, not '$P'"
SPEC=${1:-}
[ -n "$SPEC" ] || die "no SPEC (see --help)"
shift
num='^[0-9]+(\.[0-9]+)?$'
# items: one line per (item, rank or cores): "KIND|rank R or cores LIST|START|END|PROCS|MB"
items=()
IFS=';' read -ra parts <<<"$SPEC"
for it in "${parts[@]}"; do
  kind=${it%%:*} rest=${it#*:}
  [ "$kind" = cpu ] || [ "$kind" = mem ] || die "'$it': the kind must be cpu or mem, not '$kind'"
  [ "$rest" != "$it" ] && [ -n "$rest" ] || die "'$it': no fields after $kind: (ranks= or cores=, start=)"
  ranks="" cores="" start="" end="" procs=1 mb=64
  IFS=, read -ra fields <<<"$rest"
  for f in "${fields[@]}"; do
    k=${f%%=*} v=${f#*=}
    [ "$k" != "$f" ] || die "'$it': field '$f' is not KEY=VALUE"
    case $k in
    ranks) [[ $v =~ ^[0-9]+(\+[0-9]+)*$ ]] || die "'$it': ranks= takes ranks joined by +, not '$v'"
      if [ -n "$P" ]; then
        for r in ${v//+/ }; do [ "$r" -lt "$P" ] || die "'$it': ranks=: rank $r is not below the job's $P ranks"; done
      fi
      ranks=$v ;;
    cores) [[ $v =~ ^[0-9]+(-[0-9]+)?(\+[0-9]+(-[0-9]+)?)*$ ]] || die "'$it': cores= takes a CPU list with + for , (0+2-3), not '$v'"
      cores=${v//+/,} ;;
    start) [[ $v =~ $num ]] || die "'$it': start= takes seconds (a number >= 0), not '$v'"; start=$v ;;
    end) [[ $v =~ $num ]] || die "'$it': end= takes seconds (a number), not '$v'"; end=$v ;;
    procs) [[ $v =~ ^[1-9][0-9]*$ ]] && [ "$v" -le 256 ] || die "'$it': procs= takes a number in 1..256, not '$v'"; procs=$v ;;
    mb) [[ $v =~ ^[1-9][0-9]*$ ]] && [ "$v" -le 65536 ] || die "'$it': mb= takes MiB in 1..65536, not '$v'"; mb=$v ;;
    *) die "'$it': unknown field '$k' (ranks, cores, start, end, procs, mb)" ;;
    esac
  done
  [ -n "$ranks" ] || [ -n "$cores" ] || die "'$it': needs ranks= or cores="
  [ -z "$ranks" ] || [ -z "$cores" ] || die "'$it': ranks= and cores= together: give one"
  [ -n "$start" ] || die "'$it': needs start= (seconds from the job's start)"
  [ -z "$end" ] || awk -v s="$start" -v e="$end" 'BEGIN { exit !(e > s) }' || die "'$it': end=$end is not after start=$start"
  if [ -n "$cores" ]; then items+=("$kind|cores $cores|$start|$end|$procs|$mb")
  else for r in ${ranks//+/ }; do items+=("$kind|rank $r|$start|$end|$procs|$mb"); done; fi
done
[ $CHECK = 1 ] && exit 0
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || die "no command after SPEC (interfere.sh SPEC -- CMD ...)"
[ -x "$HOG" ] || die "$HOG not built (make build-all)"
command -v taskset >/dev/null || die "taskset not found (util-linux)"

MAIN=$$
TAG=pcoll-interfere-$$-$RANDOM
T0=$(date +%s.%N)
el() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
# sleep_to T: sleeps until T s from T0; returns 1 (at once) if this script is gone
sleep_to() {
  while awk -v a="$T0" -v b="$(date +%s.%N)" -v t="$1" 'BEGIN { exit !(b - a < t) }'; do
    kill -0 $MAIN 2>/dev/null || return 1
    sleep 0.1
  done
  kill -0 $MAIN 2>/dev/null
}
# rank_pid R: the pid of CMD's rank R on this node, or nothing
rank_pid() {
  local e p r
  for e in $(grep -lsz "^PCOLL_INTERFERE_TAG=$TAG\$" /proc/[0-9]*/environ); do
    p=${e#/proc/} p=${p%/environ}
    r=$(tr '\0' '\n' <"$e" 2>/dev/null | sed -n 's/^\(OMPI_COMM_WORLD_RANK\|PMIX_RANK\|PMI_RANK\)=//p' | head -1)
    [ -n "$r" ] || r=$(sed -n 's/^ddp-rank-\([0-9]*\)$/\1/p' "/proc/$p/comm" 2>/dev/null)
    [ "$r" = "$1" ] && { echo "$p"; return; }
  done
}
# span ITEM: one item's hogs for its span (a background subshell; TERM stops its hogs)
span() {
  local kind who start end procs mb hogs=() pid="" cpus i noted=0
  IFS='|' read -r kind who start end procs mb <<<"$1"
  trap '[ ${#hogs[@]} -gt 0 ] && kill -TERM "${hogs[@]}" 2>/dev/null; exit 0' TERM
  sleep_to "$start" || exit 0
  if [ "${who%% *}" = cores ]; then cpus=${who#cores }
  else
    while :; do
      pid=$(rank_pid "${who#rank }")
      [ -n "$pid" ] && cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null) && [ -n "$cpus" ] && break
      [ -n "$end" ] && ! awk -v a="$T0" -v b="$(date +%s.%N)" -v t="$end" 'BEGIN { exit !(b - a < t) }' && exit 0
      if [ $noted = 0 ] && awk -v a="$T0" -v b="$(date +%s.%N)" -v t="$start" 'BEGIN { exit !(b - a >= t + 10) }'; then
        echo "interfere: $(el) s: $who of the job not found on $(hostname -s) (another node?): its $kind hog waits for it" >&2
        noted=1
      fi
      sleep 0.1
      kill -0 $MAIN 2>/dev/null || exit 0
    done
  fi
  for ((i = 0; i < procs; i++)); do
    taskset -c "$cpus" "$HOG" "$kind" --mb "$mb" --watch $MAIN &
    hogs+=($!)
    echo "interfere: $(el) s: $kind hog $! on cpus $cpus beside $who${pid:+ (pid $pid, $(cat "/proc/$pid/comm" 2>/dev/null))}" >&2
  done
  if [ -n "$end" ]; then
    sleep_to "$end"
    kill -TERM "${hogs[@]}" 2>/dev/null
    wait "${hogs[@]}" 2>/dev/null
    echo "interfere: $(el) s: $kind hog(s) ${hogs[*]} stopped (span end)" >&2
    exit 0
  fi
  wait "${hogs[@]}" 2>/dev/null
}

spans=()
for it in "${items[@]}"; do
  span "$it" &
  spans+=($!)
done
PCOLL_INTERFERE_TAG=$TAG "$@" &
cpid=$!
# forward a signal to CMD (a background command of a script ignores SIGINT: SIGTERM), then wait
trap 'kill -TERM $cpid 2>/dev/null' INT TERM HUP
while :; do
  wait $cpid
  rc=$?
  kill -0 $cpid 2>/dev/null || break
done
kill -TERM "${spans[@]}" 2>/dev/null
wait "${spans[@]}" 2>/dev/null
exit $rc
