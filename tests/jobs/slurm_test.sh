#!/bin/bash
# tests/jobs/slurm_test.sh: the jobs_slurm line of tests/jobs.tests (part of make slurm-test).
# Installs Slurm + munge if missing (root: jobs/deps.sh all), brings up a throw-away single-node
# cluster (jobs/minicluster.sh: everything under a temp folder, no systemd), submits with sbatch
#   1. the Fig. 9 benchmark  (jobs/allreduce.sbatch, 4 ranks, 8 iterations, small sizes)
#   then, once it has ended (--dependency=afterany), at once:
#   2. a tiny training job   (jobs/fmnist.sbatch, 4 ranks, majority, 1024/256 samples, 1 epoch)
#   3. a small sweep         (jobs/sweep.sh fmnist, MODES=sync,solo: sbatch path of the sweep)
# waits for them (scontrol show job; no accounting database), checks COMPLETED / exit 0, the JSON
# (pcoll-validate for runs; jq for the benchmark's keys and wrong == 0), that the metrics recorded
# the job id sbatch returned, that srun launched the ranks with the plugin of the MPI that built $B
# (--mpi=pmix for Open MPI, pmi2 for MPICH: the test runs under both) and that pcoll-compare reads
# the results folders. The daemons are stopped by their PIDs on every exit (trap). Prints the
# wall time at the end.
# Exit: 0 pass, 1 fail, 77 skip (Slurm could not be installed, or not root: one loud line says why).
# Environment: B (build folder), KEEP=1 keeps the temp folder, MINICLUSTER_PORT, MINICLUSTER_AUTH.
set -uo pipefail
# shellcheck source=tests/jobs/slurm_lib.sh
. "$(dirname "$0")/slurm_lib.sh"
slurm_setup "SLURM TEST"
cluster_up 1 8
# the srun plugin of the MPI that built $B (jobs/mpi.sh: pmix for Open MPI, pmi2 for MPICH)
plugin=$(. jobs/mpi.sh && pcoll_mpi "$B" && echo "$PCOLL_SRUN_MPI") || fail "$B/mpi.env missing"
have=0; grep -qw "$plugin" <<<"$(srun --mpi=list 2>&1)" && have=1

bench_id=$(OUT=$T/runs ITERS=8 SIZES=8,4096 submit allreduce -n 4 jobs/allreduce.sbatch) \
  || fail "sbatch jobs/allreduce.sbatch"
held=$(after "$bench_id")
train_id=$(OUT=$T/runs MODE=majority submit fmnist "$held" -n 4 jobs/fmnist.sbatch \
  --limit-train 1024 --limit-test 256 --epochs 1 --quiet) || fail "sbatch jobs/fmnist.sbatch"
sweep_out=$(OUT=$T/runs MODES=sync,solo SBATCH_OPTS="$held -n 2 --output=$T/out/%j.out" \
  bash jobs/sweep.sh fmnist -- --limit-train 512 --limit-test 128 --epochs 1 --quiet) \
  || { echo "$sweep_out"; fail "jobs/sweep.sh fmnist (sbatch) failed"; }
echo "$sweep_out"
read -r -a sweep_ids <<<"$(echo "$sweep_out" | sed -n 's/.*submitted [0-9]* jobs: \([0-9 ]*\) .*/\1/p')"
[ ${#sweep_ids[@]} -eq 2 ] || fail "sweep.sh did not report 2 job ids"
# 4. a rank that dies before MPI_Init (the test aid EAGER_TEST_CRASH=1:init, a null call on rank
#    1), where neither the trainer's watchdog nor Open MPI's handlers exist yet: the launcher must
#    end the step (srun --kill-on-bad-exit), or rank 0 waits in MPI_Init's wire-up for ever
crash_id=$(EAGER_TEST_CRASH=1:init OUT=$T/runs MODE=sync submit crash "$held" -n 2 jobs/fmnist.sbatch \
  --limit-train 512 --limit-test 128 --epochs 1 --quiet) || fail "sbatch the crash job"
echo "submitted: allreduce $bench_id, fmnist $train_id, sweep ${sweep_ids[*]}, crash $crash_id"
wait_jobs 150 "$bench_id" "$train_id" "${sweep_ids[@]}"
wait_ended 120 "$crash_id"  # not ended 120 s after the others: the step waits for the dead rank
[ "${state[$crash_id]}" = FAILED ] || fail "crash job $crash_id ended ${state[$crash_id]}, not FAILED"
echo "crash before MPI_Init: job $crash_id ${state[$crash_id]}"

bj=$T/runs/allreduce/$bench_id/collectives.json
[ -f "$bj" ] || fail "no $bj (results folder not named by the job id?)"
jq -e '(.ranks == 4) and (.unit_ms | type == "number") and (.iterations == 8)
       and (.results | type == "array" and length > 0)
       and all(.results[]; has("mode") and has("skew") and has("bytes") and has("mean_latency_us") and has("wrong"))
       and all(.results[]; .wrong == 0)
       and ([.results[].mode] | index("majority") != null and index("solo") != null)' "$bj" >/dev/null \
  || { jq -c '{ranks, unit_ms, iterations, wrong: [.results[]?.wrong]}' "$bj"; fail "$bj: keys or values wrong"; }
echo "allreduce: $(jq -r '"\(.ranks) ranks, \(.iterations) iterations, \(.results|length) results, wrong=\([.results[].wrong]|add)"' "$bj")"
check_compare "$(dirname "$bj")" majority

want_launcher=mpirun; [ $have = 1 ] && want_launcher=srun
check_one() {  # check_one ID FILE RANKS: check_run, this host as the node list, the launcher
  check_run "$@"
  local f=$2 got
  got=$(jq -r '.environment.slurm_nodelist' "$f")
  [ "$got" = "$(hostname -s)" ] || fail "$f: environment.slurm_nodelist is '$got', not $(hostname -s)"
  grep -q "^launcher=$want_launcher\$" "$(dirname "$f")/job.txt" || fail "$(dirname "$f")/job.txt: launcher is not $want_launcher"
}
check_one "$train_id" "$T/runs/fmnist/$train_id/majority.json" 4
check_one "${sweep_ids[0]}" "$T/runs/fmnist/${sweep_ids[0]}/sync.json" 2
check_one "${sweep_ids[1]}" "$T/runs/fmnist/${sweep_ids[1]}/solo.json" 2
check_compare "$T/runs/fmnist" majority sync solo
echo "fmnist: majority (job $train_id), sync (job ${sweep_ids[0]}), solo (job ${sweep_ids[1]}): valid, slurm_job_id recorded, launched with $want_launcher$([ $have = 1 ] && echo " --mpi=$plugin") ($(jq -r .environment.mpi "$T/runs/fmnist/$train_id/majority.json" | tr '\t' ' ')), pcoll-compare reads them"
echo "PASS (jobs done after $(elapsed) s)"
