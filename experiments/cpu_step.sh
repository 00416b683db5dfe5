#!/bin/bash
# experiments/cpu_step.sh: claim 7, the CPU step (forward + backward + update) of ResNet-32,
# ResNet-50 and the LSTM against PyTorch CPU with the same thread count: make bench-cpu
# (jobs/bench_cpu.sh), ours and PyTorch alternated PAIRS times per model, the ratio the median of
# the pairs' ratios with their range.
#
#   bash experiments/cpu_step.sh [--pairs N] [--out DIR] [--table] [--dry-run]
#     --pairs N    3 (default): NN_BENCH_PAIRS
#     --out DIR    default results/runs/cpu-step: DIR/bench.log, DIR/cpu.json (a copy of
#                  $B/bench/cpu.json); --table: only print the table of DIR; --dry-run: print the commands
# Runs: NN_BENCH_PAIRS=3 make bench-cpu B=build
# Prints the bench's table (per model: ours and PyTorch's median step ms, ratio, pair range, CPU
# time), kept in DIR/table.md. DIR/meta.txt: command, commit, machine, dates.
EXP_NAME=cpu_step EXP_ARGS=("$@")
# shellcheck source=experiments/lib.sh
. "$(dirname "$0")/lib.sh"
OPT_pairs=3 OPT_out=results/runs/cpu-step
exp_opts "pairs out" "$@"
exp_count pairs
PAIRS=$OPT_pairs OUT=$OPT_out
cmd=(env "NN_BENCH_PAIRS=$PAIRS" make bench-cpu "B=$B")
rc=0
if [ $EXP_TABLE_ONLY = 0 ]; then
  exp_meta "$OUT" "$(exp_cmd "${cmd[@]}")"
  if [ "$DRY" = 1 ]; then exp_cmd "${cmd[@]}"; else
    exp_run "${cmd[@]}" 2>&1 | tee "$OUT/bench.log"
    rc=${PIPESTATUS[0]}
    cp "$B/bench/cpu.json" "$OUT/cpu.json" 2>/dev/null || rc=1
  fi
  exp_meta_end "$OUT" $rc
fi
if [ "$DRY" = 1 ]; then echo "(table of $OUT/bench.log)"; exit 0; fi
[ -s "$OUT/bench.log" ] || exp_die "no $OUT/bench.log"
exp_table "$OUT/table.md" sed -n '/^bench-cpu:/p; /^model /,/^wrote /p' "$OUT/bench.log" || rc=1
# the claim is a comparison: without PyTorch's times there is none
! grep -q "^PyTorch not installed" "$OUT/bench.log" ||
  exp_die "PyTorch was not found (jobs/bench_cpu.sh: DDP_PY, default $B/venv/bin/python3; make test makes that venv): no ratio measured"
exit $rc
