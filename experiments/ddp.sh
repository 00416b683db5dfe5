#!/bin/bash
# experiments/ddp.sh: claim 2, eager-train (sync, majority, adaptive) against PyTorch DDP (gloo,
# trainer/ref/ddp_mirror.py) on the same initial weights, data order and injected delays; every
# mode and DDP in the same invocation, interleaved by seed.
#
#   bash experiments/ddp.sh [--ranks P] [--seeds "1 2 3"] [--out DIR] [--table] [--dry-run]
#     --ranks P    4 (default); --seeds S: default "1 2 3"; --out DIR: default results/runs/ddp-pP
#     --table      only print the tables of the runs already in DIR; --dry-run: print the commands
# Runs (P = 4): bash jobs/ddp_race.sh --epochs 2 --limit-train 12000 --curve-test 2000 --epoch-mode
# global --both-opts "--milestones 1" --seeds "1 2 3" --ranks 4 --modes "sync majority adaptive"
# --imbalances "none random1 random2 lognormal" --out results/runs/ddp-p4
# Prints the race's tables: DIR/compare-pP.md (time to DDP's mean final top-1, first crossing),
# DIR/compare-pP-held.md (held), DIR/overhead-pP.txt (sync's per-step time against DDP's, paired
# by seed). DIR/meta.txt: command, commit, machine, dates. Needs DDP's Python (make ddp-venv).
EXP_NAME=ddp EXP_ARGS=("$@")
# shellcheck source=experiments/lib.sh
. "$(dirname "$0")/lib.sh"
OPT_ranks=4 OPT_seeds="1 2 3" OPT_out=""
exp_opts "ranks seeds out" "$@"
exp_count ranks
P=$OPT_ranks SEEDS=$OPT_seeds OUT=$OPT_out
OUT=${OUT:-results/runs/ddp-p$P}
race=(bash jobs/ddp_race.sh --epochs 2 --limit-train 12000 --curve-test 2000 --epoch-mode global
  --both-opts "--milestones 1" --seeds "$SEEDS" --ranks "$P" --modes "sync majority adaptive"
  --imbalances "none random1 random2 lognormal" --out "$OUT")
rc=0
exp_go "$OUT" "${race[@]}" || rc=$?
exp_race_tables "$OUT" "$P" || rc=1
exit $rc
