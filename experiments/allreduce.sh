#!/bin/bash
# experiments/allreduce.sh: claim 4, the paper's Fig. 9: partial allreduce latency against
# MPI_Allreduce. bench_collectives (collectives/) runs every mode (mpi_allreduce, sync, solo,
# majority, quorum) side by side in each run, 8 B and 4 MiB, no skew and linear skew (rank r waits
# r x 1 ms), REPS=5 repetitions of every row per run; the baseline is in the same run. RUNS runs.
#
#   bash experiments/allreduce.sh [--ranks P] [--runs N] [--out DIR] [--table] [--dry-run]
#     --ranks P    8 (default); --runs N: 3 (default, at least 3 for a claim)
#     --out DIR    default results/runs/allreduce-pP: DIR/run-I.json and .log per run, DIR/figures
#                  (Fig. 9 per run: pcoll-compare --plot); --table: only print the table of DIR
#     --dry-run    print the commands
# Runs, I = 1..N: bash jobs/mpi.sh run build P build/bench/bench_collectives --unit-ms 1 --reps 5
# --sizes 8,4194304 --json DIR/run-I.json (= make bench-collectives P=8 REPS=5 with a file per run)
# Prints per size, skew and mode the median latency (us) of each run and the median over the runs,
# its ratio to the same run's MPI_Allreduce (median_ratio_mpi) per run, and the wrong results
# (#wrong: must be 0); kept in DIR/table.md. DIR/meta.txt: command, commit, machine, dates.
EXP_NAME=allreduce EXP_ARGS=("$@")
# shellcheck source=experiments/lib.sh
. "$(dirname "$0")/lib.sh"
OPT_ranks=8 OPT_runs=3 OPT_out=""
exp_opts "ranks runs out" "$@"
exp_count ranks runs
P=$OPT_ranks RUNS=$OPT_runs OUT=$OPT_out
OUT=${OUT:-results/runs/allreduce-p$P}
bench() { echo bash jobs/mpi.sh run "$B" "$P" "$B/bench/bench_collectives" --unit-ms 1 --reps 5 --sizes 8,4194304 --json "$OUT/run-$1.json"; }
rc=0
if [ $EXP_TABLE_ONLY = 0 ]; then
  [ "$DRY" = 1 ] || [ -x "$B/bench/bench_collectives" ] || exp_die "$B/bench/bench_collectives not built (make build-all)"
  exp_meta "$OUT" "$(bench I) (I = 1..$RUNS)"
  for i in $(seq "$RUNS"); do
    read -ra cmd <<<"$(bench "$i")"
    if [ "$DRY" = 1 ]; then exp_cmd "${cmd[@]}"; continue; fi
    exp_run "${cmd[@]}" >"$OUT/run-$i.log" 2>&1 || { rc=1; tail -5 "$OUT/run-$i.log"; }
  done
  exp_meta_end "$OUT" $rc
  exp_run "$B/bin/pcoll-compare" --plot "$OUT/figures" "$OUT" >/dev/null || true
fi
table() {
  python3 - "$@" <<'PY'
import json, statistics as st, sys
files = sys.argv[1:]
rows = {}
for f in files:
    for x in json.load(open(f))['results']:
        rows.setdefault((x['bytes'], x['skew'], x['mode']), []).append(x)
print(f"{len(files)} runs ({', '.join(files)}); median latency in us per run; x: over MPI_Allreduce of the same run")
print("| bytes | skew | mode | median per run | median of runs | x per run | wrong |")
print("|--:|---|---|---|--:|---|--:|")
for (b, sk, m), l in rows.items():
    lat = [x['median_latency_us'] for x in l]
    rat = [x.get('median_ratio_mpi') for x in l]
    print(f"| {b} | {sk} | {m} | {', '.join(f'{v:.1f}' for v in lat)} | {st.median(lat):.1f} | "
          f"{', '.join('-' if v is None else f'{v:.2f}' for v in rat)} | {sum(x.get('wrong', 0) for x in l)} |")
PY
}
if [ "$DRY" = 1 ]; then echo "(table of $OUT/run-*.json)"; exit 0; fi
ls "$OUT"/run-*.json >/dev/null 2>&1 || exp_die "no runs in $OUT"
exp_table "$OUT/table.md" table "$OUT"/run-*.json || rc=1
exit $rc
