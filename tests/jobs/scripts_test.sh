#!/bin/bash
# tests/jobs/scripts_test.sh: the jobs_slurm_scripts line of tests/jobs.tests (part of make
# slurm-test). The experiment scripts that need data files, and the hyperplane one, end to end
# under a Slurm cluster on this machine (two nodes in network namespaces; one node where the
# machine forbids namespaces), on small data sets that $B/tests/jobs/gen_data writes in the real
# formats (tests/jobs/gen_data.c), one epoch each at a tiny model size, MODE=sync,majority:
#   cifar10.sbatch     CIFAR-10 binary records, ResNet-8 (resnet-cifar n=1), batch 32
#   imagenet.sbatch    ImageNet-style JPEG tree, ResNet-50 at width 4 on 32 px crops, batch 16
#   ucf101.sbatch      UCF101 feature files + classInd.txt + split lists, LSTM 16 units over 8 frames
#   hyperplane.sbatch  synthetic: 256 features, 1024 samples
# each with its script's defaults (imbalance; DEVICE=auto finds no GPU: cpu) and 2 ranks (one per
# node). Checks: COMPLETED with exit
# 0:0, every run's JSON validates (pcoll-validate) with the job id, the experiment, the data folder,
# the script's default imbalance and device cpu recorded, and pcoll-compare reads each results folder.
# (allreduce.sbatch and fmnist.sbatch: tests/jobs/nodes_test.sh and tests/jobs/slurm_test.sh.)
# Exit: 0 pass, 1 fail, 77 skip (no Slurm / not root: one line says why).
# Environment: B (build folder), KEEP=1 keeps the temp folder, MINICLUSTER_PORT, MINICLUSTER_AUTH.
set -uo pipefail
# shellcheck source=tests/jobs/slurm_lib.sh
. "$(dirname "$0")/slurm_lib.sh"
slurm_setup "SLURM SCRIPTS TEST"
[ -x "$B/tests/jobs/gen_data" ] || fail "$B/tests/jobs/gen_data not built (make build-all)"
for d in cifar10 imagenet ucf101; do "$B/tests/jobs/gen_data" $d "$T/data/$d" || fail "gen_data $d"; done
echo "data: $(for d in cifar10 imagenet ucf101; do printf '%s %s files, ' $d "$(find "$T/data/$d" -type f | wc -l)"; done)"

# cifar10, imagenet and ucf101 ask for --gpus-per-task=1 --cpus-per-task=4: room for all four
# jobs at once (they mostly wait: injected delays, small batches)
export MINICLUSTER_GPUS=4
cluster_up 2 16
if [ $? = 3 ]; then
  echo "note: $(grep -o 'namespaces unavailable: .*' <<<"$cluster_msg" | tail -n 1); the scripts run on one node"
  cluster_up 1 16
  place=(-n 2)
else
  place=(-N 2 -n 2 --ntasks-per-node=1)
  # the two nodes share this machine's cores: waiting ranks must yield them
  export OMPI_MCA_mpi_yield_when_idle=1
fi

declare -A id
sub() {  # sub EXPERIMENT [eager-train args]: DATA from the generated folder when there is one
  local e=$1; shift
  id[$e]=$(DATA=$([ -d "$T/data/$e" ] && echo "$T/data/$e") OUT=$T/runs MODE=sync,majority \
    submit "$e" "${place[@]}" "jobs/$e.sbatch" --epochs 1 --quiet "$@") || fail "sbatch jobs/$e.sbatch"
}
sub cifar10 --model "resnet-cifar n=1 classes=10" --batch 32
sub imagenet --model "resnet50 width=4 classes=4 in=3x32x32" --image-size 32 --batch 16
sub ucf101 --model "lstm in=16 hidden=16 steps=8 classes=4" --max-t 8 --batch 8
sub hyperplane --hp-features 256 --hp-samples 1024
echo "submitted: $(for e in "${!id[@]}"; do printf '%s %s, ' "$e" "${id[$e]}"; done)"
wait_jobs 300 "${id[@]}"

imb() { sed -n 's/^IMBALANCE=\${IMBALANCE:-\(.*\)}$/\1/p' "jobs/$1.sbatch"; }  # the script's default
for e in cifar10 imagenet ucf101 hyperplane; do
  d=$T/runs/$e/${id[$e]}
  want=$(imb "$e"); want=${want//\$\{DELAY_MS:-300\}/300}; want=${want//\$\{UNIT_MS:-0.1\}/0.1}
  [ -n "$want" ] || fail "jobs/$e.sbatch: no IMBALANCE default found"
  for m in sync majority; do
    check_run "${id[$e]}" "$d/$m.json" 2
    [ "$(jq -r .experiment "$d/$m.json")" = "$e" ] || fail "$d/$m.json: experiment is not $e"
    [ "$(jq -r .config.mode "$d/$m.json")" = "$m" ] || fail "$d/$m.json: config.mode is not $m"
    got=$(jq -r .config.imbalance "$d/$m.json")
    [ "$got" = "$want" ] || fail "$d/$m.json: imbalance '$got', not the script's default '$want'"
    # the GPU scripts' DEVICE=auto: no GPU on these nodes, so cpu (hyperplane: the trainer's cpu)
    [ "$(jq -r .config.device "$d/$m.json")" = cpu ] || fail "$d/$m.json: device is not cpu"
    if [ -d "$T/data/$e" ]; then
      got=$(jq -r '.config["data-path"]' "$d/$m.json")
      [ "$got" = "$T/data/$e" ] || fail "$d/$m.json: data path '$got', not $T/data/$e"
    fi
  done
  if [ -d "$T/data/$e" ]; then
    grep -q "^device=cpu\$" "$d/job.txt" && grep -q "$e.sbatch: no GPU listed by nvidia-smi on pcnode1: --device cpu" "$T/out/${id[$e]}.out" \
      || fail "$e: DEVICE=auto did not say it chose cpu (job.txt: $(grep '^device=' "$d/job.txt"))"
  fi
  check_compare "$d" sync majority
  echo "$e (job ${id[$e]}): sync, majority valid, imbalance $want, pcoll-compare reads $d;" \
    "sync top-1 $(jq -r '.summary.final_test_top1 // "-"' "$d/sync.json"), $(jq -r .summary.wall_s "$d/sync.json") s"
done
echo "PASS (jobs done after $(elapsed) s)"
