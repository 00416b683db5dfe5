#!/bin/bash
# experiments/schedules.sh: claim 8, adaptive against every static mode and PyTorch DDP when the
# imbalance changes during the run (jobs/ddp_race.sh's three schedules: strag_mid, balanced -> one
# random straggler -> balanced at a third and two thirds of the run; slow_half, a permanent 3x
# slow rank from halfway; ln_wave, log-normal delays whose spread doubles at a third and halves
# again at two thirds), every mode and DDP in the same invocation, interleaved by seed (per
# schedule, each seed's sync, solo, majority, adaptive, DDP in turn).
#
#   bash experiments/schedules.sh [--budget short|issue] [--ranks P] [--seeds "1 2 3"] [--out DIR]
#                                 [--table] [--dry-run]
#     --budget B   short (default): the setting below; issue: issue 56's, 6 epochs of 30,000 with
#                  the lr drop at epoch 4 (jobs/sched_race.sh), adaptive also with change=steps
#     --ranks P    4 (default) or any rank count: the same race with --ranks P
#     --seeds S    the seeds (default "1 2 3")
#     --out DIR    default results/runs/schedules-pP (short), results/runs/sched-race (issue); runs
#                  go to DIR/pP/<schedule>/<mode>-sS.json (existing runs are kept: rerun to
#                  resume; meta.txt records each invocation)
#     --table      only print the tables of the runs already in DIR
#     --dry-run    print the commands only
# Runs (P = 4): bash jobs/ddp_race.sh --epochs 3 --limit-train 8000 --curve-test 2000 --epoch-mode
# global --both-opts "--milestones 2" --seeds "1 2 3" --ranks 4 --modes "sync solo majority
# adaptive" --imbalances "strag_mid slow_half ln_wave" --out results/runs/schedules-p4
# --budget issue runs: bash jobs/sched_race.sh --ranks 4 --seeds "1 2 3" --modes "sync solo majority
# adaptive adaptive+change=steps" --out results/runs/sched-race
# Prints, kept in DIR/table.md (--budget issue: DIR/table-pP.md): build/bin/pcoll-compare --versus adaptive DIR/pP (targets: sync's
# mean final top-1 less 4 and 1 points; first crossing and held; adaptive / best static paired by
# seed); the race's tables against DDP (DIR/compare-pP.md, DIR/compare-pP-held.md: time to DDP's
# mean final top-1; their lists of files left out); the switch log: each adaptive run's switches
# at their position in global epochs (epoch + round / the epoch's rounds), marked 'detected' where
# the controller saw the change itself (rate or step times changed twice), 'probe due' where a
# scheduled probe (or a contest) began, 'probing' for the moves between the levels a probe
# measures, 'chosen' for the level it then keeps.
# DIR/meta.txt: command, commit, machine, dates. Needs DDP's Python (make ddp-venv).
EXP_NAME=schedules EXP_ARGS=("$@")
# shellcheck source=experiments/lib.sh
. "$(dirname "$0")/lib.sh"
OPT_budget=short OPT_ranks=4 OPT_seeds="1 2 3" OPT_out=""
exp_opts "budget ranks seeds out" "$@"
exp_count ranks
P=$OPT_ranks SEEDS=$OPT_seeds OUT=$OPT_out
case $OPT_budget in
short)
  OUT=${OUT:-results/runs/schedules-p$P}
  race=(bash jobs/ddp_race.sh --epochs 3 --limit-train 8000 --curve-test 2000 --epoch-mode global
    --both-opts "--milestones 2" --seeds "$SEEDS" --ranks "$P" --modes "sync solo majority adaptive"
    --imbalances "strag_mid slow_half ln_wave" --out "$OUT") ;;
issue)
  OUT=${OUT:-results/runs/sched-race}
  race=(bash jobs/sched_race.sh --ranks "$P" --seeds "$SEEDS"
    --modes "sync solo majority adaptive adaptive+change=steps" --out "$OUT") ;;
*) exp_die "--budget: '$OPT_budget' is neither short nor issue" ;;
esac

# switches DIR: the switch log of every adaptive run under DIR/<schedule>/
switches() {
  local f
  echo "### switch log: adaptive's switches (position in global epochs; the schedule's phases start at the spec's @E)"
  echo
  echo "| schedule | policy | seed | phases | switches: position from -> to (why) |"
  echo "|---|---|---|---|---|"
  for f in "$1"/*/adaptive-s*.json "$1"/*/adaptive_*-s*.json; do
    [ -s "$f" ] && [[ $f != *.partial.json ]] || continue
    jq -r --arg s "$(basename "$(dirname "$f")")" '
      [.epochs[] | .rounds] as $r
      | "| \($s) | \(.config["policy-opts"] // "" | if . == "" then "adaptive" else "adaptive," + . end) | \(.config.seed) | \(.config.imbalance | [scan("@([0-9.]+)ep")[0]] | join(", ")) | "
        + ([.controller.switches[]
            | "\((.epoch + .round / ([$r[.epoch], 1] | max)) * 100 | round / 100) \(.from) -> \(.to) ("
              + (if (.reason | test("changed twice")) then "detected"
                 elif (.reason | test("^(probe due|contest)")) then "probe due"
                 elif (.reason | test("probe: ")) then "probing" else "chosen" end) + ")"]
           | join("; ")) + " |"' "$f"
  done
}

# the issue budget's folder holds both rank counts: one table per P there
TABLE_FILE=$OUT/table.md
[ "$OPT_budget" = issue ] && TABLE_FILE=$OUT/table-p$P.md
rc=0
exp_go "$OUT" "${race[@]}" || rc=$?
[ "$DRY" = 1 ] || [ -d "$OUT/p$P" ] || exp_die "no runs in $OUT/p$P"
if [ "$DRY" = 1 ]; then
  exp_cmd "$B/bin/pcoll-compare" --versus adaptive "$OUT/p$P"
  exp_race_tables "$OUT" "$P" "compare-p$P.md" "compare-p$P-held.md"
  exit 0
fi
{
  "$B/bin/pcoll-compare" --versus adaptive "$OUT/p$P" || rc=1
  exp_race_tables "$OUT" "$P" "compare-p$P.md" "compare-p$P-held.md" || rc=1
  echo
  switches "$OUT/p$P"
} >"$TABLE_FILE" 2>&1
cat "$TABLE_FILE"
echo "experiments/schedules.sh: the tables above are in $TABLE_FILE"
exit $rc
