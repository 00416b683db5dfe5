#!/bin/bash
# tests/jobs/nodes_test.sh: the jobs_slurm_nodes line of tests/jobs.tests (part of make slurm-test).
# A two-node Slurm cluster on this machine (jobs/minicluster.sh up DIR 12 2: each node's slurmd in
# its own network and UTS namespace, joined by veths on a bridge; slurmctld and munged shared), then
#   0. the nodes: srun on both gives two host names, and neither node has a route out of its /24
#   1. the Fig. 9 benchmark      sbatch -N 2 -n 2 jobs/allreduce.sbatch     (8 iterations; one
#                                rank a node: see below)
#   2. Fashion-MNIST training    sbatch -N 2 -n 4 jobs/fmnist.sbatch, MODE=sync,adaptive
#   3. the same sync run on one  sbatch -N 1 -n 4 jobs/fmnist.sbatch, MODE=sync
#   4. a restart across nodes    sbatch --no-kill -N 2 -n 4 jobs/hyperplane.sbatch, RESTARTS=2, one
#                                rank on pcnode2 killed in epoch 2 of 3: resumes on 3 ranks (the
#                                second restart is for a relaunch that dies inside MPI_Init: below)
#   each held until the one before has ended (--dependency=afterany): 4 ranks at a time on the
#   machine's cores. (Open MPI 4.1's TCP transport, used between the nodes, stalls for tens of
#   seconds when threads of several ranks call MPI on cores they share many times over, and
#   libpcoll's liveness check then ends the job: docs/DESIGN.md#open-mpis-tcp-transport-under-threads.
#   The benchmark, whose ranks poll, runs one rank a node for that reason.)
# The training jobs run 2 ranks per node (--ntasks-per-node=2), srun --mpi=pmix, Open MPI over TCP
# between the nodes and shared memory within one (jobs/lib.sh: btl self,vader,tcp when there is no
# RDMA device).
# Checks: COMPLETED with exit 0:0; job.txt names both nodes; the benchmark's JSON (ranks, wrong == 0)
# and its hosts (rank 0 on pcnode1, 1 on pcnode2); each run validates, its ranks[].host puts ranks 0-1 on
# pcnode1 and 2-3 on pcnode2; sync's final weights hash on two nodes equals the one-node run's;
# pcoll-compare reads the results folders; the restarted job COMPLETED, its job.txt has
# 'restart.sync.1=... ranks 4 -> 3, resumed after epoch 1' (or 2) and its run has 3 ranks on both nodes.
# Or, where the relaunch on 3 ranks lost a rank inside MPI_Init (Open MPI 4.1 over TCP between the
# namespaces, seen in 1 of 8 runs here: a segfault reported by Open MPI's handler, before eager-train's own
# crash handler is installed, trainer/crash.c), 'restart.sync.2=... ranks 3 -> 2' and 2 ranks on both
# nodes; accepted only with that evidence in the job's output, any other second failure fails.
# Everything is removed on every exit (trap).
# Exit: 0 pass, 1 fail, 77 skip (no Slurm/root, or the machine forbids network namespaces: one
# line says why).
# Environment: B (build folder), KEEP=1 keeps the temp folder, MINICLUSTER_PORT, MINICLUSTER_AUTH.
set -uo pipefail
# shellcheck source=tests/jobs/slurm_lib.sh
. "$(dirname "$0")/slurm_lib.sh"
slurm_setup "SLURM TWO-NODE TEST"
cluster_up 2 12  # 12 CPUs declared a node: every job fits
rc=$?
if [ $rc = 3 ]; then
  echo "SLURM TWO-NODE TEST NOT RUN: this machine forbids network namespaces ($(grep -o 'namespaces unavailable: .*' <<<"$cluster_msg" | tail -n 1))"
  exit 77
fi
# the two nodes share this machine's cores: waiting ranks must yield them
export OMPI_MCA_mpi_yield_when_idle=1

# ---- 0. the nodes ------------------------------------------------------------------------------
# (stdout only: srun may say on stderr that it waits for the previous step's nodes)
hosts=$(srun -Q -N 2 --ntasks-per-node=1 -l hostname 2>"$T/out/srun.err" | sort) || fail "srun hostname: $(cat "$T/out/srun.err")"
[ "$(cut -d' ' -f2 <<<"$hosts" | xargs)" = "pcnode1 pcnode2" ] || fail "srun -N 2 hostname: '$hosts', not pcnode1 and pcnode2"
routes=$(srun -Q -N 2 --ntasks-per-node=1 ip -4 route 2>"$T/out/srun.err") || fail "srun ip route: $(cat "$T/out/srun.err")"
net=$(sed -n 's/^NET=//p' "$C/run/net")
bad=$(grep -v "^$net\.0/24 dev eth0 " <<<"$routes")
[ -z "$bad" ] || fail "a node has a route beyond its $net.0/24: $bad"
echo "nodes: pcnode1, pcnode2 (hostname in their UTS namespaces); their only route: $net.0/24 dev eth0"

# ---- 1-3. submit -------------------------------------------------------------------------------
two=(-N 2 -n 4 --ntasks-per-node=2)
targs=(--limit-train 1024 --limit-test 256 --epochs 1 --quiet)
bench_id=$(OUT=$T/runs ITERS=8 SIZES=8,4096 submit allreduce -N 2 -n 2 --ntasks-per-node=1 jobs/allreduce.sbatch) \
  || fail "sbatch jobs/allreduce.sbatch"
train_id=$(OUT=$T/runs MODE=sync,adaptive submit fmnist "$(after "$bench_id")" "${two[@]}" jobs/fmnist.sbatch "${targs[@]}") \
  || fail "sbatch -N 2 jobs/fmnist.sbatch"
one_id=$(OUT=$T/one MODE=sync submit fmnist1 "$(after "$train_id")" -N 1 -n 4 jobs/fmnist.sbatch "${targs[@]}") \
  || fail "sbatch -N 1 jobs/fmnist.sbatch"
# 4. RESTARTS=2 across the nodes: one rank on pcnode2 killed in epoch 2 of 3 (--no-kill: the
#    allocation outlives it); the script must resume on 3 ranks from epoch 1's checkpoint
#    (hyperplane: negligible compute; its default imbalance, one random rank waiting 300 ms per
#    step, 4 steps per epoch, keeps epoch 2 longer than the 0.3 s the kill waits)
el_id=$(OUT=$T/el MODE=sync RESTARTS=2 submit elastic --no-kill "$(after "$one_id")" "${two[@]}" \
  jobs/hyperplane.sbatch --hp-features 64 --hp-samples 1024 --epochs 3 --quiet) || fail "sbatch RESTARTS=2 jobs/hyperplane.sbatch"
echo "submitted: allreduce $bench_id (2 nodes), fmnist $train_id (2 nodes), fmnist $one_id (1 node), hyperplane RESTARTS=2 $el_id (2 nodes)"
ns2=pcoll${net##*.}n2 killed=""
for _ in $(seq 3000); do  # up to 300 s: epoch 1's checkpoint, then kill one rank in pcnode2's namespace
  if [ -f "$T/el/hyperplane/$el_id/ckpt-sync/ckpt-0001.ckpt" ]; then
    sleep 0.3
    for p in $(ip netns pids "$ns2"); do
      [ "$(cat "/proc/$p/comm" 2>/dev/null)" = eager-train ] && grep -q "$T/el/" "/proc/$p/cmdline" 2>/dev/null && killed=$p
    done
    [ -n "$killed" ] && kill -KILL "$killed"
    break
  fi
  case "$(scontrol show job -o "$el_id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')" in
    COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE) break;;
  esac
  sleep 0.1
done
[ -n "$killed" ] || fail "RESTARTS job $el_id: no rank on pcnode2 to kill after epoch 1's checkpoint"
echo "killed rank pid $killed on pcnode2 (job $el_id)"
wait_jobs 300 "$bench_id" "$train_id" "$one_id" "$el_id"

# ---- checks ------------------------------------------------------------------------------------
both_nodes() {  # both_nodes JOB.TXT
  grep -q '^nodes=pcnode1,pcnode2$' "$1" || fail "$1: nodes= is not pcnode1,pcnode2: $(grep '^nodes=' "$1")"
  grep -q '^nodelist=pcnode\[1-2\]$' "$1" || fail "$1: nodelist is not pcnode[1-2]"
  grep -q '^launcher=srun$' "$1" || fail "$1: launcher is not srun (--mpi=pmix)"
  grep -q '^ompi_btl=self,vader,tcp$' "$1" || fail "$1: Open MPI btl is not self,vader,tcp"
}
bd=$T/runs/allreduce/$bench_id
both_nodes "$bd/job.txt"
jq -e '.ranks == 2 and .iterations == 8 and (.results | length > 0) and all(.results[]; .wrong == 0)' \
  "$bd/collectives.json" >/dev/null || fail "$bd/collectives.json: ranks, iterations or wrong"
got=$(jq -r '.hosts | join(",")' "$bd/collectives.json")
[ "$got" = pcnode1,pcnode2 ] || fail "$bd/collectives.json: hosts is '$got', not pcnode1,pcnode2 (ranks 0-1)"
check_compare "$bd" majority
echo "allreduce on 2 nodes: $(jq -r '"\(.ranks) ranks, \(.results|length) results, wrong=\([.results[].wrong]|add)"' "$bd/collectives.json")"

td=$T/runs/fmnist/$train_id
both_nodes "$td/job.txt"
for m in sync adaptive; do
  check_run "$train_id" "$td/$m.json" 4
  got=$(jq -r '[.ranks | sort_by(.rank)[] | .host] | join(",")' "$td/$m.json")
  [ "$got" = pcnode1,pcnode1,pcnode2,pcnode2 ] || fail "$td/$m.json: ranks[].host is '$got', not pcnode1,pcnode1,pcnode2,pcnode2"
  [ "$(jq -r '.environment.hosts | unique | join(",")' "$td/$m.json")" = pcnode1,pcnode2 ] \
    || fail "$td/$m.json: environment.hosts is $(jq -c .environment.hosts "$td/$m.json")"
done
od=$T/one/fmnist/$one_id
check_run "$one_id" "$od/sync.json" 4
[ "$(jq -r '[.ranks[].host] | unique | length' "$od/sync.json")" = 1 ] || fail "$od/sync.json: not on one node"
h2=$(jq -r '.epochs[-1].weights_hash' "$td/sync.json"); h1=$(jq -r '.epochs[-1].weights_hash' "$od/sync.json")
[ -n "$h2" ] && [ "$h2" = "$h1" ] || fail "sync's final weights hash: $h2 on 2 nodes, $h1 on 1 node"
check_compare "$td" sync adaptive
echo "fmnist on 2 nodes: sync, adaptive valid, ranks 0-1 on pcnode1 and 2-3 on pcnode2; sync weights hash $h2 = one node's"
ed=$T/el/hyperplane/$el_id
# (epoch 2 when the killed rank had made all its epoch-2 deposits: the others end the epoch)
grep -Eq '^restart\.sync\.1=exit [1-9][0-9]*, ranks 4 -> 3, resumed after epoch [12], lost [0-9]* s$' "$ed/job.txt" \
  || fail "$ed/job.txt: no restart line 'ranks 4 -> 3, resumed after epoch 1 (or 2)': $(grep restart "$ed/job.txt")"
left=3
if grep -q '^restart\.sync\.2=' "$ed/job.txt"; then
  # the relaunch lost a rank inside MPI_Init: Open MPI's signal report, none from eager-train's
  out=$T/out/$el_id.out
  grep -Eq '^restart\.sync\.2=exit [1-9][0-9]*, ranks 3 -> 2, resumed after epoch [12], lost [0-9]* s$' "$ed/job.txt" \
    && grep -q '\*\*\* Process received signal \*\*\*' "$out" && ! grep -q '^eager-train: rank [0-9]*: SIG' "$out" \
    || fail "$ed/job.txt: a second restart, not after a rank lost inside MPI_Init: $(grep restart "$ed/job.txt"); $out: $(grep -E 'Process received|Signal:|eager-train: rank' "$out" | head -n 4)"
  echo "note: the relaunch on 3 ranks lost a rank inside MPI_Init ($(grep -m1 'Signal:' "$out")); restarted on 2"
  left=2
fi
check_run "$el_id" "$ed/sync.json" $left
[ "$(jq -r '.environment.hosts | unique | join(",")' "$ed/sync.json")" = pcnode1,pcnode2 ] \
  || fail "$ed/sync.json: the $left resumed ranks are not on both nodes: $(jq -c .environment.hosts "$ed/sync.json")"
echo "RESTARTS=2 on 2 nodes: $(grep '^restart' "$ed/job.txt" | tr '\n' ' '); the resumed run: $left ranks on pcnode1, pcnode2"
echo "PASS (jobs done after $(elapsed) s)"
