#!/bin/bash
# experiments/staleness.sh: claim 6, the staleness bound: 8 ranks, rank 0 16x slower than the
# others, mode solo, 1,000 rounds on the real libpcoll with the controller thread
# (tests/controller/test_ctl_mpi.c): the longest rejection streak (rounds in a row a rank's
# gradient missed) with tau 4 and without a bound (tau 0), the two alternated run by run.
#
#   bash experiments/staleness.sh [--runs N] [--out DIR] [--table] [--dry-run]
#     --runs N     3 (default): N runs of each, tau 4 and tau 0 in turn
#     --out DIR    default results/runs/staleness-p8: DIR/tauT-I.log per run; --table: only print
#                  the table of DIR; --dry-run: print the commands
# Runs, I = 1..N, T = 4 then 0: bash jobs/mpi.sh run build 8 build/tests/controller/test_ctl_mpi
# --policy solo --tau T --slow 0 --factor 16 --rounds 1000 (the test ctl_mpi_tau4_solo_x16 checks
# tau 4's bound, ctl_mpi_notau_solo_x16 runs the unbounded one)
# Prints per tau the longest streak of each run (the program's "max"), and their largest; kept in
# DIR/table.md. DIR/meta.txt: command, commit, machine, dates.
EXP_NAME=staleness EXP_ARGS=("$@")
# shellcheck source=experiments/lib.sh
. "$(dirname "$0")/lib.sh"
OPT_runs=3 OPT_out=results/runs/staleness-p8
exp_opts "runs out" "$@"
exp_count runs
RUNS=$OPT_runs OUT=$OPT_out
prog=$B/tests/controller/test_ctl_mpi
ctl() { echo bash jobs/mpi.sh run "$B" 8 "$prog" --policy solo --tau "$1" --slow 0 --factor 16 --rounds 1000; }
rc=0
if [ $EXP_TABLE_ONLY = 0 ]; then
  [ "$DRY" = 1 ] || [ -x "$prog" ] || exp_die "$prog not built (make build-all)"
  exp_meta "$OUT" "$(ctl T) (T = 4, 0; $RUNS runs each, alternated)"
  for i in $(seq "$RUNS"); do
    for t in 4 0; do
      read -ra cmd <<<"$(ctl $t)"
      if [ "$DRY" = 1 ]; then exp_cmd "${cmd[@]}"; continue; fi
      exp_run "${cmd[@]}" >"$OUT/tau$t-$i.log" 2>&1 || { rc=1; tail -3 "$OUT/tau$t-$i.log"; }
    done
  done
  exp_meta_end "$OUT" $rc
fi
table() {
  echo "8 ranks, rank 0 16x slower, solo, 1,000 rounds; longest rejection streak (rounds) per run"
  echo "| bound | runs | longest streak per run | largest |"
  echo "|---|--:|---|--:|"
  local t f v list n max
  for t in 4 0; do
    list="" n=0 max=""
    for f in "$OUT"/tau$t-*.log; do
      [ -s "$f" ] || continue
      v=$(sed -n 's/.*; max \([0-9][0-9]*\);.*/\1/p' "$f" | head -1)
      [ -n "$v" ] || { echo "experiments/staleness.sh: $f: no 'max N' line (the run failed?)" >&2; v="?"; }
      list+="${list:+, }$v" n=$((n + 1))
      [[ $v =~ ^[0-9]+$ ]] && { [ -z "$max" ] || [ "$v" -gt "$max" ]; } && max=$v
    done
    echo "| $([ $t = 0 ] && echo none || echo "tau $t") | $n | ${list:--} | ${max:--} |"
  done
}
if [ "$DRY" = 1 ]; then echo "(table of $OUT/tau*.log)"; exit 0; fi
exp_table "$OUT/table.md" table || rc=1
exit $rc
