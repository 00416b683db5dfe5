#!/bin/bash
# experiments/regimes.sh: claim 1, adaptive against the best static mode in five stationary regimes
# (none, linear skew, log-normal delays, a slow rank, a random straggler), every mode run in the
# same invocation, interleaved by seed (per imbalance, each seed's sync, solo, majority, adaptive in
# turn), then the regime table (pcoll-compare --versus adaptive).
#
#   bash experiments/regimes.sh [--ranks P] [--seeds "1 2 3"] [--out DIR] [--table] [--dry-run]
#     --ranks P    4 (default) or any rank count: the same race with --ranks P
#     --seeds S    the seeds (default "1 2 3")
#     --out DIR    default results/runs/regimes-pP; runs go to DIR/pP/<imbalance>/<mode>-sS.json
#                  (existing runs are kept: rerun to resume; meta.txt records each invocation)
#     --table      only print the table of the runs already in DIR
#     --dry-run    print the commands only
# Runs (P = 4): bash jobs/ddp_race.sh --epochs 3 --limit-train 8000 --curve-test 2000 --epoch-mode
# global --both-opts "--milestones 2" --no-ddp --seeds "1 2 3" --ranks 4 --modes "sync solo majority
# adaptive" --imbalances "none linear lognormal slow random1" --out results/runs/regimes-p4
# Prints: build/bin/pcoll-compare --versus adaptive DIR/pP (targets: sync's mean final top-1 less 4
# and 1 points; first crossing and held; adaptive / best static paired by seed), kept in
# DIR/table.md; DIR/meta.txt: command, commit, machine, dates.
EXP_NAME=regimes EXP_ARGS=("$@")
# shellcheck source=experiments/lib.sh
. "$(dirname "$0")/lib.sh"
OPT_ranks=4 OPT_seeds="1 2 3" OPT_out=""
exp_opts "ranks seeds out" "$@"
exp_count ranks
P=$OPT_ranks SEEDS=$OPT_seeds OUT=$OPT_out
OUT=${OUT:-results/runs/regimes-p$P}
race=(bash jobs/ddp_race.sh --epochs 3 --limit-train 8000 --curve-test 2000 --epoch-mode global
  --both-opts "--milestones 2" --no-ddp --seeds "$SEEDS" --ranks "$P" --modes "sync solo majority adaptive"
  --imbalances "none linear lognormal slow random1" --out "$OUT")
rc=0
exp_go "$OUT" "${race[@]}" || rc=$?
[ "$DRY" = 1 ] || [ -d "$OUT/p$P" ] || exp_die "no runs in $OUT/p$P"
exp_table "$OUT/table.md" "$B/bin/pcoll-compare" --versus adaptive "$OUT/p$P" || rc=1
exit $rc
