# shellcheck shell=bash
# tests/jobs/slurm_lib.sh: sourced by the Slurm tests (slurm_test.sh, nodes_test.sh, scripts_test.sh).
#
#   slurm_setup NAME             install slurm-wlm + munge when missing (root: apt-get); exit 77
#                                with 'NAME NOT RUN: <why>' when that or root is missing; checks
#                                the build ($B) and jq. Starts the wall clock.
#   cluster_up NODES CPUS        a throw-away cluster in $T/cluster (jobs/minicluster.sh), its
#                                daemons and namespaces removed on every exit (trap; on INT/TERM
#                                at once, so a test timeout leaves nothing behind); SLURM_CONF set.
#                                Returns 3 when NODES > 1 and the machine forbids network
#                                namespaces; minicluster's output is in $cluster_msg.
#   submit NAME SBATCH-ARGS...   sbatch --parsable, output in $T/out/<id>.out; prints the job id
#   wait_ended SECONDS ID...     wait until every job has ended (scontrol show job; no accounting
#                                database; fail after SECONDS); sets state[ID] and exitc[ID]
#   wait_jobs SECONDS ID...      wait_ended, then fail unless each is COMPLETED with exit 0:0
#   check_run ID FILE RANKS      pcoll-validate, slurm_job_id = ID, ranks, summary.exit ok
#   check_compare DIR WORD...    pcoll-compare reads DIR and its table names each WORD
#   fail MSG                     print, show the daemons' and jobs' last lines, exit 1
# Sets: ROOT (repository), T (temp folder, kept with KEEP=1), C ($T/cluster), B (build folder).
# Environment: KEEP=1, MINICLUSTER_PORT (default: first free of 16817, 16827, ...), MINICLUSTER_AUTH.

slurm_t0=$(date +%s.%N)
elapsed() { awk -v a="$slurm_t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
# (the reason again after the dump: the test runner shows a failing log's last lines)
fail() { echo "FAIL: $*" >&2; dump; echo "FAIL: $*" >&2; exit 1; }
dump() {  # on failure: what the daemons and the jobs said (the jobs last: nearest the reason)
  local f
  for f in "$C"/log/slurmctld.log "$C"/log/slurmd-*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 15 "$f"; }; done
  for f in "$T"/out/*.out; do [ -f "$f" ] && { echo "--- $f"; tail -n 25 "$f"; }; done
}

slurm_setup() {
  local name=$1 need="slurmctld slurmd sbatch squeue scontrol srun munged" log why f
  cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
  ROOT=$PWD; B=${B:-build}; export B
  missing_bins() { local m="" c; for c in $need; do command -v "$c" >/dev/null || m="$m $c"; done; echo "$m"; }
  if [ -n "$(missing_bins)" ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "$name NOT RUN: slurm-wlm could not be installed: not root (missing:$(missing_bins); run: sudo sh jobs/deps.sh all)"
      exit 77
    fi
    echo "installing slurm-wlm munge (missing:$(missing_bins)): sh jobs/deps.sh all"
    log=$(mktemp /tmp/pcoll-slurm-apt.XXXXXX)
    sh jobs/deps.sh all >"$log" 2>&1
    if [ -n "$(missing_bins)" ]; then
      tail -n 5 "$log"
      why=$(grep -E '^E:|deps: .*failed' "$log" | tail -n 1)
      echo "$name NOT RUN: slurm-wlm could not be installed: ${why:-jobs/deps.sh all did not provide them} (still missing:$(missing_bins); log $log)"
      exit 77
    fi
    rm -f "$log"
  fi
  if [ "$(id -u)" != 0 ]; then  # slurmd starts job steps as their user: it must run as root
    echo "$name NOT RUN: needs root to run slurmd (this user: $(id -un))"
    exit 77
  fi
  echo "slurm: $(slurmd -V 2>&1), munge: $(munged --version 2>&1 | head -n 1)"
  for f in bin/eager-train bench/bench_collectives bin/pcoll-validate bin/pcoll-compare; do
    [ -x "$B/$f" ] || { echo "FAIL: $B/$f not built (make build-all)"; exit 1; }
  done
  command -v jq >/dev/null || { echo "FAIL: jq not installed (make deps)"; exit 1; }
  T=$(mktemp -d /tmp/pcoll-slurm.XXXXXX)
  C=$T/cluster
  mkdir -p "$T/out" "$T/runs"
  slurm_name=$name
  # The jobs must work from the scripts' own settings: drop what tests/run.sh exported for mpirun.
  local v
  for v in $(compgen -v OMPI_MCA_); do unset "$v"; done
  unset RANKS MODE POLICY IMBALANCE DATA EPOCHS OUT EXTRA PCOLL_ROOT PCOLL_JOB_ID LAUNCHER
}

slurm_cleanup() {
  local rc=$? p
  trap - EXIT INT TERM
  if [ -n "${C:-}" ] && [ -d "$C" ]; then
    local -a now=(); [ "${slurm_now:-0}" = 1 ] && now=(--now)
    bash "$ROOT/jobs/minicluster.sh" down "$C" "${now[@]}" >/dev/null 2>&1
    for p in "$C"/run/*.pid; do  # minicluster down removes them; any left is a daemon that survived
      [ -f "$p" ] && kill -0 "$(cat "$p")" 2>/dev/null && echo "WARNING: $(basename "$p" .pid) still running (pid $(cat "$p"))" >&2
    done
    [ -f "$C/run/net" ] && echo "WARNING: namespaces left: $(cat "$C/run/net")" >&2
  fi
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
  [ $rc = 77 ] && exit 77   # the skip line stays the last
  echo "$slurm_name wall time: $(elapsed) s$([ $rc = 0 ] || echo ", FAILED (exit $rc)")"
  exit $rc
}

cluster_up() {  # cluster_up NODES CPUS
  local nodes=$1 cpus=$2 out rc
  trap slurm_cleanup EXIT
  trap 'echo "$slurm_name interrupted" >&2; slurm_now=1; exit 1' INT TERM
  port_free() { ! (ss -Hltn 2>/dev/null || netstat -ltn 2>/dev/null) | awk '{print $4}' | grep -Eq ":($1|$(( $1 + 1 )))\$"; }
  if [ -z "${MINICLUSTER_PORT:-}" ]; then
    MINICLUSTER_PORT=16817
    while ! port_free $MINICLUSTER_PORT && [ $MINICLUSTER_PORT -lt 16917 ]; do MINICLUSTER_PORT=$((MINICLUSTER_PORT + 10)); done
  fi
  export MINICLUSTER_PORT
  out=$(bash "$ROOT/jobs/minicluster.sh" up "$C" "$cpus" "$nodes" 2>&1); rc=$?
  echo "$out"
  # shellcheck disable=SC2034  # read by the caller
  cluster_msg=$out
  [ $rc = 3 ] && return 3
  [ $rc = 0 ] || fail "the cluster did not come up"
  # shellcheck disable=SC1091
  . "$C/env"
  echo "srun --mpi=list: $(srun --mpi=list 2>&1 | tr '\n\t' '  ')"
}

submit() {  # submit NAME sbatch-args...: prints the job id
  local name=$1 id; shift
  id=$(sbatch --parsable --output="$T/out/%j.out" "$@" 2>&1) || { echo "sbatch $name: $id" >&2; return 1; }
  echo "${id%%;*}"
}

# after ID: the sbatch flag that holds a job until job ID has ended, so that jobs sharing the
# machine's few cores run one after another (a latency benchmark's ranks poll without sleeping;
# the MPI transports stall under heavy oversubscription, docs/DESIGN.md#11-mpi-libraries).
after() { echo "--dependency=afterany:$1"; }

declare -A state exitc
wait_ended() {  # wait_ended SECONDS ID...: until every job has ended; sets state[ID], exitc[ID]
  local secs=$1 deadline id line s pending; shift
  deadline=$(( $(date +%s) + secs ))
  while :; do
    pending=0
    for id in "$@"; do
      # (slurmctld may not answer a loaded machine in time: asked again until the deadline)
      line=$(scontrol show job -o "$id" 2>&1) || {
        [ "$(date +%s)" -lt "$deadline" ] || fail "scontrol show job $id: $line"
        pending=1; continue
      }
      s=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$line")
      state[$id]=$s; exitc[$id]=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$line")
      case "$s" in PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|REQUEUED|RESIZING) pending=1;; esac
    done
    [ $pending = 0 ] && break
    [ "$(date +%s)" -lt "$deadline" ] || { squeue; fail "jobs not finished after $secs s"; }
    sleep 0.5
  done
}

wait_jobs() {  # wait_jobs SECONDS ID...
  wait_ended "$@"
  shift
  local id
  for id in "$@"; do
    echo "job $id: ${state[$id]} exit ${exitc[$id]}"
    [ "${state[$id]}" = COMPLETED ] && [ "${exitc[$id]}" = 0:0 ] || fail "job $id ended ${state[$id]} (exit ${exitc[$id]})"
  done
}

check_run() {  # check_run ID FILE RANKS
  local id=$1 f=$2 p=$3 got
  [ -f "$f" ] || fail "no $f (results folder not named by the job id?)"
  "$B/bin/pcoll-validate" results/schema/run.schema.json "$f" || fail "$f does not validate"
  got=$(jq -r '.environment.slurm_job_id' "$f")
  [ "$got" = "$id" ] || fail "$f: environment.slurm_job_id is '$got', sbatch returned '$id'"
  [ "$(jq -r '.environment.ranks' "$f")" = "$p" ] || fail "$f: environment.ranks is not $p"
  [ "$(jq -r '.summary.exit' "$f")" = ok ] || fail "$f: summary.exit is not ok"
}

check_compare() {  # check_compare DIR WORD...
  local d=$1 out w; shift
  out=$("$B/bin/pcoll-compare" "$d" 2>&1) || { echo "$out"; fail "pcoll-compare $d exited non-zero"; }
  for w in "$@"; do grep -q -- "$w" <<<"$out" || { echo "$out"; fail "pcoll-compare $d: no '$w' in its table"; }; done
}
