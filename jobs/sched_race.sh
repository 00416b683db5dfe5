#!/bin/bash
# sched_race.sh: issue 56's measurement in one command: imbalance that changes during the run.
# Fashion-MNIST, 4 and 8 ranks, seeds 1 2 3 (every mode of a seed back to back, so the baselines
# are interleaved by seed), global epochs, 6 epochs of 30,000 samples with the lr drop at epoch 4,
# under the three schedules of jobs/ddp_race.sh (strag_mid: balanced -> one random straggler ->
# balanced; slow_half: a permanent 3x slow rank from halfway; ln_wave: log-normal delays whose
# spread doubles, then halves), static sync, solo and majority against adaptive, plus PyTorch DDP
# on the same delays. It is jobs/ddp_race.sh with these options:
#
#   --ranks "4 8" --seeds "1 2 3" --imbalances "strag_mid slow_half ln_wave"
#   --modes "sync solo majority adaptive" --epoch-mode global --epochs 6 --limit-train 30000
#   --both-opts "--milestones 4" --curve-test 1000 --targets "4:0.80 4:0.84 8:0.75 8:0.78"
#   --out results/runs/sched-race
#
#   bash jobs/sched_race.sh [--stationary] [--small] [ddp_race.sh options...]
#     --stationary   also the stationary regime table: --imbalances adds "none linear lognormal
#                    slow random1" (the same folder, step time and seeds)
#     --small        a check that it works end to end, not a measurement: 4 ranks, seed 1, 3
#                    epochs of 3,000 samples (lr drop at 2), 1,000 test samples, targets 0.60 and
#                    0.70, into build/bench/sched-race-small
#     ddp_race.sh options after these override them (e.g. --dry-run, --out DIR, --seeds 1,
#     --interfere SPEC, --no-ddp); see bash jobs/ddp_race.sh --help.
# Output (per P): DIR/pP/<schedule>/<mode>-s<seed>.json, DIR/compare-pP.{md,json,csv} (target: DDP's
# mean final top-1) and DIR/compare-pP-tT{,-held}.{md,json,csv} at each target, first crossing and
# held: times to the target (mean ± std over the seeds), final top-1 on the full test set. The
# controller's switches are in each adaptive run file (controller.switches).
set -u
cd "$(dirname "$0")/.." || exit 2
imbs="strag_mid slow_half ln_wave"
args=(--ranks "4 8" --seeds "1 2 3" --modes "sync solo majority adaptive" --epoch-mode global --epochs 6
  --limit-train 30000 --both-opts "--milestones 4" --curve-test 1000 --targets "4:0.80 4:0.84 8:0.75 8:0.78"
  --out results/runs/sched-race)
small=(--ranks 4 --seeds 1 --epochs 3 --limit-train 3000 --limit-test 1000 --both-opts "--milestones 2"
  --targets "0.60 0.70" --out build/bench/sched-race-small)
rest=()
while [ $# -gt 0 ]; do
  case $1 in
  --stationary) imbs+=" none linear lognormal slow random1" ;;
  --small) args+=("${small[@]}") ;;
  -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) rest+=("$1") ;;
  esac
  shift
done
exec bash jobs/ddp_race.sh "${args[@]}" --imbalances "$imbs" "${rest[@]}"
