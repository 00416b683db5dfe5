#!/bin/bash
# experiments/torch.sh: claim 3, the eager_sgd package (python/, PyTorch's kernels) against plain
# PyTorch DDP (gloo) on the same weights, data order and delays: jobs/torch_race.sh (issue 55's race)
# on a reduced setting; every mode and DDP in the same invocation, interleaved by seed (1 2 3).
#
#   bash experiments/torch.sh [--ranks P] [--seeds "1 2 3"] [--out DIR] [--table] [--dry-run]
#     --ranks P    4 (default) or any rank count: the same race with --ranks P
#     --seeds S    passed on as --seeds S (default: torch_race.sh's "1 2 3")
#     --out DIR    default results/runs/torch-race-pP; --table: only print the tables of DIR;
#     --dry-run    print the commands
# Runs (P = 4): bash jobs/torch_race.sh --ranks 4 --epochs 2 --limit-train 8192 --both-opts "--milestones 1"
# --out results/runs/torch-race-p4
# Prints DIR/compare-pP.md, DIR/compare-pP-held.md (time to DDP's mean final top-1, first crossing
# and held) and DIR/overhead-pP.txt (eager_sgd sync's per-step time over DDP's, paired by seed).
# DIR/meta.txt: command, commit, machine, dates. Needs $B/libeager.so and DDP's Python (make ddp-venv).
EXP_NAME=torch EXP_ARGS=("$@")
# shellcheck source=experiments/lib.sh
. "$(dirname "$0")/lib.sh"
OPT_ranks=4 OPT_seeds="" OPT_out=""
exp_opts "ranks seeds out" "$@"
exp_count ranks
P=$OPT_ranks SEEDS=$OPT_seeds OUT=${OPT_out:-results/runs/torch-race-p$OPT_ranks}
race=(bash jobs/torch_race.sh --ranks "$P" --epochs 2 --limit-train 8192 --both-opts "--milestones 1")
[ -n "$SEEDS" ] && race+=(--seeds "$SEEDS")
race+=(--out "$OUT")
rc=0
exp_go "$OUT" "${race[@]}" || rc=$?
exp_race_tables "$OUT" "$P" || rc=1
exit $rc
