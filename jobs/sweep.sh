#!/bin/bash
# jobs/sweep.sh EXPERIMENT [--local] [--dry-run] [-- ARGS...]: every run one figure needs.
#
#   jobs/sweep.sh cifar10                 sbatch one job per mode (sync, solo, majority, adaptive)
#   jobs/sweep.sh hyperplane              one job per mode x imbalance level (200, 300, 400 ms)
#   jobs/sweep.sh fmnist --local -- --epochs 1 --limit-train 4096   one after another, no Slurm
#   jobs/sweep.sh allreduce               one job: the benchmark runs every mode and skew itself
#   jobs/sweep.sh imagenet --dry-run      print the commands only
#
# EXPERIMENT: allreduce (Fig. 9), hyperplane (Fig. 10), imagenet (Fig. 11), cifar10 (Fig. 12),
# ucf101 (Fig. 13), fmnist (the demo). ARGS after -- go to every run (eager-train / bench args).
# The environment is passed on to every job (sbatch --export=ALL; locally inherited): DATA, RANKS,
# EPOCHS, OUT, EXTRA, SEED, POLICY_OPTS, B... work as in the job scripts. MODES (default
# sync,solo,majority,adaptive) and LEVELS (hyperplane: 200,300,400; ms) override the sets.
# SBATCH_OPTS: more sbatch options (e.g. '--partition=gpu --account=x'), word-split.
# Each job writes $OUT/<experiment>/<jobid>/<mode>.json; sbatch mode prints the job ids. Compare:
#   build/bin/pcoll-compare results/runs/<experiment>    (figures: --plot DIR)
set -u
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
exp=$1; shift
local_run=0; dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --local) local_run=1;; --dry-run|-n) dry=1;;
    --) shift; break;;
    -h|--help) usage;;
    *) echo "sweep.sh: unknown option '$1'" >&2; usage;;
  esac
  shift
done
root=$(cd "$(dirname "$0")/.." && pwd)
script=$root/jobs/$exp.sbatch
[ -f "$script" ] || { echo "sweep.sh: no experiment '$exp' (jobs/$exp.sbatch missing)" >&2; usage; }
export PCOLL_ROOT=$root

modes=${MODES:-sync,solo,majority,adaptive}
levels=-
case "$exp" in
  allreduce) modes=-;;
  hyperplane) levels=${LEVELS:-200,300,400}
    [ -n "${IMBALANCE:-}" ] && echo "sweep.sh: warning: IMBALANCE=$IMBALANCE is set and overrides every level (DELAY_MS); unset it for the Fig. 10 levels" >&2;;
esac

runs=()   # "MODE LEVEL" pairs; '-' = not set
IFS=, read -r -a ms <<<"$modes"; IFS=, read -r -a ls <<<"$levels"
for m in "${ms[@]}"; do for l in "${ls[@]}"; do runs+=("$m $l"); done; done

n=0; fail=0; ids=()
for r in "${runs[@]}"; do
  read -r m l <<<"$r"
  vars=()
  [ "$m" != - ] && vars+=("MODE=$m")
  [ "$l" != - ] && vars+=("DELAY_MS=$l")
  n=$((n + 1))
  if [ $local_run = 1 ]; then
    echo "sweep.sh: [$n/${#runs[@]}] ${vars[*]} jobs/local.sh jobs/$exp.sbatch $*"
    [ $dry = 1 ] && continue
    env "${vars[@]}" "$root/jobs/local.sh" "$script" "$@" || { echo "sweep.sh: run failed: ${vars[*]}" >&2; fail=$((fail + 1)); }
  else
    exp_list=ALL; for v in "${vars[@]}"; do exp_list="$exp_list,$v"; done
    # shellcheck disable=SC2206  # SBATCH_OPTS is word-split on purpose
    cmd=(sbatch --parsable --export="$exp_list" ${SBATCH_OPTS:-} "$script" "$@")
    echo "sweep.sh: [$n/${#runs[@]}] ${cmd[*]}"
    [ $dry = 1 ] && continue
    command -v sbatch >/dev/null || { echo "sweep.sh: sbatch not found (no Slurm here?): use --local" >&2; exit 2; }
    id=$("${cmd[@]}") || { echo "sweep.sh: sbatch failed: ${vars[*]}" >&2; fail=$((fail + 1)); continue; }
    ids+=("${id%%;*}")
  fi
done
[ ${#ids[@]} -gt 0 ] && echo "sweep.sh: submitted ${#ids[@]} jobs: ${ids[*]}  (squeue -j $(IFS=,; echo "${ids[*]}"))"
echo "sweep.sh: results under ${OUT:-results/runs}/$exp/; compare: $root/${B:-build}/bin/pcoll-compare ${OUT:-results/runs}/$exp"
[ $fail -eq 0 ]
