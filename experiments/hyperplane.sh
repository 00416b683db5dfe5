#!/bin/bash
# experiments/hyperplane.sh: claim 5, the paper's Fig. 10: hyperplane regression at 8 ranks, one
# rank drawn per step delayed 200, 300 or 400 ms, modes sync, solo, majority and adaptive with the
# trainer's defaults (tau included), every mode in the same invocation, interleaved by seed.
#
#   bash experiments/hyperplane.sh [--seeds "1 2 3"] [--out DIR] [--table] [--dry-run]
#     --seeds S    default "1 2 3"; --out DIR: default results/runs/hyperplane-p8
#     --table      only print the table of DIR; --dry-run: print the commands
# Runs: bash jobs/ddp_race.sh --experiment hyperplane --epochs 3 --no-ddp --ranks 8 --seeds "1 2 3"
# --modes "sync solo majority adaptive" --imbalances "d200=random:k=1,d=200 d300=random:k=1,d=300
# d400=random:k=1,d=400" --out results/runs/hyperplane-p8
# Prints pcoll-compare's table of DIR/p8
# (regression: train and test loss, mean ± std over seeds, speedup against sync of the same delay),
# kept in DIR/table.md; figures in DIR/figures (loss against wall time). DIR/meta.txt: command,
# commit, machine, dates.
EXP_NAME=hyperplane EXP_ARGS=("$@")
# shellcheck source=experiments/lib.sh
. "$(dirname "$0")/lib.sh"
OPT_seeds="1 2 3" OPT_out=results/runs/hyperplane-p8
exp_opts "seeds out" "$@"
SEEDS=$OPT_seeds OUT=$OPT_out
race=(bash jobs/ddp_race.sh --experiment hyperplane --epochs 3 --no-ddp --ranks 8 --seeds "$SEEDS"
  --modes "sync solo majority adaptive"
  --imbalances "d200=random:k=1,d=200 d300=random:k=1,d=300 d400=random:k=1,d=400" --out "$OUT")
rc=0
exp_go "$OUT" "${race[@]}" || rc=$?
[ "$DRY" = 1 ] || [ -d "$OUT/p8" ] || exp_die "no runs in $OUT/p8"
exp_table "$OUT/table.md" "$B/bin/pcoll-compare" --plot "$OUT/figures" "$OUT/p8" || rc=1
exit $rc
