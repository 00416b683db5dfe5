#!/bin/bash
# tests/jobs/slurm_test.sh: `make slurm-test` and the jobs_slurm line of tests/jobs.tests.
# Installs Slurm + munge if missing (root: apt-get), brings up a throw-away single-node cluster
# (jobs/minicluster.sh: everything under a temp folder, no systemd), submits with sbatch
#   1. the Fig. 9 benchmark  (jobs/allreduce.sbatch, 4 ranks, 8 iterations, small sizes)
#   2. a tiny training job   (jobs/fmnist.sbatch, 4 ranks, majority, 1024/256 samples, 1 epoch)
#   3. a small sweep         (jobs/sweep.sh fmnist, MODES=sync,solo: sbatch path of the sweep)
# waits for them (scontrol show job; no accounting database), checks COMPLETED / exit 0, the JSON
# (pcoll-validate for runs; jq for the benchmark's keys and wrong == 0), that the metrics recorded
# the job id sbatch returned, and that srun --mpi=pmix launched the ranks. The daemons are stopped
# by their PIDs on every exit (trap). Prints the wall time at the end.
# Exit: 0 pass, 1 fail, 77 skip (Slurm could not be installed, or not root: one loud line says why).
# Environment: B (build folder), KEEP=1 keeps the temp folder, MINICLUSTER_PORT (default: first
# free of 16817, 16827, ...), MINICLUSTER_AUTH (munge|none).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
B=${B:-build}; export B
t0=$(date +%s.%N)
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
fail() { echo "FAIL: $*" >&2; dump; exit 1; }

# ---- 1. Slurm and munge ----------------------------------------------------------------------
need="slurmctld slurmd sbatch squeue scontrol srun munged"
missing_bins() { local m="" c; for c in $need; do command -v "$c" >/dev/null || m="$m $c"; done; echo "$m"; }
if [ -n "$(missing_bins)" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "SLURM TEST NOT RUN: slurm-wlm could not be installed: not root (missing:$(missing_bins); run: sudo apt-get install -y slurm-wlm munge)"
    exit 77
  fi
  echo "installing slurm-wlm munge (missing:$(missing_bins))"
  export DEBIAN_FRONTEND=noninteractive
  log=$(mktemp /tmp/pcoll-slurm-apt.XXXXXX)
  if ! apt-get install -y -q --no-install-recommends slurm-wlm munge >"$log" 2>&1; then
    apt-get update -q >>"$log" 2>&1
    apt-get install -y -q --no-install-recommends slurm-wlm munge >>"$log" 2>&1
  fi
  if [ -n "$(missing_bins)" ]; then
    tail -5 "$log"
    why=$(grep -E '^E:' "$log" | tail -1)
    echo "SLURM TEST NOT RUN: slurm-wlm could not be installed: ${why:-apt-get install slurm-wlm munge did not provide them} (still missing:$(missing_bins); log $log)"
    exit 77
  fi
  rm -f "$log"
fi
if [ "$(id -u)" != 0 ]; then  # slurmd starts job steps as their user: it must run as root
  echo "SLURM TEST NOT RUN: needs root to run slurmd (this user: $(id -un))"
  exit 77
fi
echo "slurm: $(slurmd -V 2>&1), munge: $(munged --version 2>&1 | head -1)"

for f in bin/eager-train bench/bench_collectives bin/pcoll-validate; do
  [ -x "$B/$f" ] || { echo "FAIL: $B/$f not built (make build-all)"; exit 1; }
done
command -v jq >/dev/null || { echo "FAIL: jq not installed (make deps)"; exit 1; }

# ---- 2. the cluster --------------------------------------------------------------------------
T=$(mktemp -d /tmp/pcoll-slurm.XXXXXX)
C=$T/cluster
ids=()
dump() {  # on failure: what the jobs and the daemons said
  local f
  for f in "$T"/out/*.out; do [ -f "$f" ] && { echo "--- $f"; tail -25 "$f"; }; done
  for f in "$C"/log/slurmctld.log "$C"/log/slurmd.log; do [ -f "$f" ] && { echo "--- $f"; tail -15 "$f"; }; done
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  bash "$ROOT/jobs/minicluster.sh" down "$C" >/dev/null 2>&1
  local p
  for p in "$C"/run/*.pid; do  # minicluster down removes them; any left is a daemon that survived
    [ -f "$p" ] && kill -0 "$(cat "$p")" 2>/dev/null && echo "WARNING: $(basename "$p" .pid) still running (pid $(cat "$p"))" >&2
  done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
  echo "slurm test wall time: $(elapsed) s (install check, cluster up, 4 jobs, checks, cluster down)$([ $rc = 0 ] || echo ", FAILED (exit $rc)")"
  exit $rc
}
trap cleanup EXIT
trap 'echo "slurm test interrupted" >&2; exit 1' INT TERM

port_free() { ! (ss -Hltn 2>/dev/null || netstat -ltn 2>/dev/null) | awk '{print $4}' | grep -Eq ":($1|$(( $1 + 1 )))\$"; }
if [ -z "${MINICLUSTER_PORT:-}" ]; then
  MINICLUSTER_PORT=16817
  while ! port_free $MINICLUSTER_PORT && [ $MINICLUSTER_PORT -lt 16917 ]; do MINICLUSTER_PORT=$((MINICLUSTER_PORT + 10)); done
fi
export MINICLUSTER_PORT
bash jobs/minicluster.sh up "$C" 8 || fail "the cluster did not come up"
# shellcheck disable=SC1091
. "$C/env"
mpis=$(srun --mpi=list 2>&1)
echo "srun --mpi=list: $(tr '\n\t' '  ' <<<"$mpis")"
pmix=0; grep -qw pmix <<<"$mpis" && pmix=1

# ---- 3. submit ---------------------------------------------------------------------------------
# The jobs must work from the scripts' own settings: drop what tests/run.sh exported for mpirun.
for v in $(compgen -v OMPI_MCA_); do unset "$v"; done
unset RANKS MODE POLICY IMBALANCE DATA EPOCHS OUT EXTRA PCOLL_ROOT PCOLL_JOB_ID LAUNCHER
mkdir -p "$T/out" "$T/runs"
submit() {  # submit NAME sbatch-args...: prints the job id
  local name=$1 id; shift
  id=$(sbatch --parsable --output="$T/out/%j.out" "$@" 2>&1) || { echo "sbatch $name: $id" >&2; return 1; }
  echo "${id%%;*}"
}
bench_id=$(OUT=$T/runs ITERS=8 SIZES=8,4096 submit allreduce -n 4 jobs/allreduce.sbatch) \
  || fail "sbatch jobs/allreduce.sbatch"
train_id=$(OUT=$T/runs MODE=majority submit fmnist -n 4 jobs/fmnist.sbatch \
  --limit-train 1024 --limit-test 256 --epochs 1 --quiet) || fail "sbatch jobs/fmnist.sbatch"
sweep_out=$(OUT=$T/runs MODES=sync,solo SBATCH_OPTS="-n 2 --output=$T/out/%j.out" \
  bash jobs/sweep.sh fmnist -- --limit-train 512 --limit-test 128 --epochs 1 --quiet) \
  || { echo "$sweep_out"; fail "jobs/sweep.sh fmnist (sbatch) failed"; }
echo "$sweep_out"
read -r -a sweep_ids <<<"$(echo "$sweep_out" | sed -n 's/.*submitted [0-9]* jobs: \([0-9 ]*\) .*/\1/p')"
[ ${#sweep_ids[@]} -eq 2 ] || fail "sweep.sh did not report 2 job ids"
ids=("$bench_id" "$train_id" "${sweep_ids[@]}")
echo "submitted: allreduce $bench_id, fmnist $train_id, sweep ${sweep_ids[*]}"

# ---- 4. wait (scontrol show job: jobs stay visible MinJobAge=600 s; no accounting needed) ------
declare -A state exitc
deadline=$(( $(date +%s) + 150 ))
while :; do
  pending=0
  for id in "${ids[@]}"; do
    line=$(scontrol show job -o "$id" 2>/dev/null) || fail "scontrol show job $id: job unknown"
    s=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$line")
    state[$id]=$s; exitc[$id]=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$line")
    case "$s" in PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|REQUEUED|RESIZING) pending=1;; esac
  done
  [ $pending = 0 ] && break
  [ "$(date +%s)" -lt "$deadline" ] || { squeue; fail "jobs not finished after 150 s"; }
  sleep 0.5
done
for id in "${ids[@]}"; do
  echo "job $id: ${state[$id]} exit ${exitc[$id]}"
  [ "${state[$id]}" = COMPLETED ] && [ "${exitc[$id]}" = 0:0 ] || fail "job $id ended ${state[$id]} (exit ${exitc[$id]})"
done

# ---- 5. check the results -----------------------------------------------------------------------
bj=$T/runs/allreduce/$bench_id/collectives.json
[ -f "$bj" ] || fail "no $bj (results folder not named by the job id?)"
jq -e '(.ranks == 4) and (.unit_ms | type == "number") and (.iterations == 8)
       and (.results | type == "array" and length > 0)
       and all(.results[]; has("mode") and has("skew") and has("bytes") and has("mean_latency_us") and has("wrong"))
       and all(.results[]; .wrong == 0)
       and ([.results[].mode] | index("majority") != null and index("solo") != null)' "$bj" >/dev/null \
  || { jq -c '{ranks, unit_ms, iterations, wrong: [.results[]?.wrong]}' "$bj"; fail "$bj: keys or values wrong"; }
echo "allreduce: $(jq -r '"\(.ranks) ranks, \(.iterations) iterations, \(.results|length) results, wrong=\([.results[].wrong]|add)"' "$bj")"

check_run() {  # check_run ID FILE RANKS
  local id=$1 f=$2 p=$3 got
  [ -f "$f" ] || fail "no $f (results folder not named by the job id?)"
  "$B/bin/pcoll-validate" results/schema/run.schema.json "$f" || fail "$f does not validate"
  got=$(jq -r '.environment.slurm_job_id' "$f")
  [ "$got" = "$id" ] || fail "$f: environment.slurm_job_id is '$got', sbatch returned '$id'"
  got=$(jq -r '.environment.slurm_nodelist' "$f")
  [ "$got" = "$(hostname -s)" ] || fail "$f: environment.slurm_nodelist is '$got', not $(hostname -s)"
  [ "$(jq -r '.environment.ranks' "$f")" = "$p" ] || fail "$f: environment.ranks is not $p"
  [ "$(jq -r '.summary.exit' "$f")" = ok ] || fail "$f: summary.exit is not ok"
  grep -q "^launcher=$want_launcher\$" "$(dirname "$f")/job.txt" || fail "$(dirname "$f")/job.txt: launcher is not $want_launcher"
}
want_launcher=mpirun; [ $pmix = 1 ] && want_launcher=srun
check_run "$train_id" "$T/runs/fmnist/$train_id/majority.json" 4
check_run "${sweep_ids[0]}" "$T/runs/fmnist/${sweep_ids[0]}/sync.json" 2
check_run "${sweep_ids[1]}" "$T/runs/fmnist/${sweep_ids[1]}/solo.json" 2
echo "fmnist: majority (job $train_id), sync (job ${sweep_ids[0]}), solo (job ${sweep_ids[1]}): valid, slurm_job_id recorded, launched with $want_launcher$([ $pmix = 1 ] && echo ' --mpi=pmix')"
echo "PASS (jobs done after $(elapsed) s)"
