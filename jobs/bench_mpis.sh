#!/bin/bash
# bench_mpis.sh [P] [RUNS]: the partial allreduce benchmark (bench_collectives: 8 B and 4 MiB, no
# skew and linear skew, every mode against MPI_Allreduce) under the two MPI families side by side:
# RUNS runs alternating between the tree $B (make's MPI, Open MPI by default) and $B2 (the other
# family's, built by make test: build-mpich), P ranks each on this machine. Writes each run's JSON
# to $B/bench/mpis/ and prints one table: per row the median latency (median over the runs, range
# in brackets), its ratio to the same MPI's MPI_Allreduce, and MPICH's over Open MPI's.
#   make bench-mpis P=4 RUNS=3
set -u
cd "$(dirname "$0")/.." || exit 2
P=${1:-4} RUNS=${2:-3} B=${B:-build}
B2=${B2:-$(bash jobs/mpi.sh second "$B" | cut -d' ' -f1)}
for b in "$B" "$B2"; do
  [ -n "$b" ] && [ -x "$b/bench/bench_collectives" ] || {
    echo "bench_mpis: $b/bench/bench_collectives not built (make test builds $B and the second tree)" >&2; exit 2; }
done
out=$B/bench/mpis; mkdir -p "$out"
for r in $(seq "$RUNS"); do
  for b in "$B" "$B2"; do
    echo "bench_mpis: run $r, $(. "$b/mpi.env" && echo "$MPI_NAME"), P=$P"
    bash jobs/mpi.sh run "$b" "$P" "$b/bench/bench_collectives" --sizes 8,4194304 --iters 64 --reps 1 \
      --unit-ms 1 --json "$out/$(basename "$b")-p$P-$r.json" >"$out/$(basename "$b")-p$P-$r.log" 2>&1 ||
      { tail "$out/$(basename "$b")-p$P-$r.log"; exit 1; }
  done
done
python3 - "$out" "$P" "$RUNS" "$B" "$B2" <<'PY'
import json, statistics as st, sys, subprocess
out, P, runs, builds = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
name = lambda b: subprocess.run(['bash', '-c', f'. {b}/mpi.env && echo "$MPI_NAME"'], capture_output=True, text=True).stdout.strip()
names = [name(b) for b in builds]
rows = {}
for b in builds:
    for r in range(1, runs + 1):
        d = json.load(open(f"{out}/{b.rstrip('/').split('/')[-1]}-p{P}-{r}.json"))
        for x in d['results']:
            rows.setdefault((x['bytes'], x['skew'], x['mode']), {}).setdefault(b, []).append(x)
print(f"P={P}, {runs} runs each, alternating; median latency in us (range over the runs); x: over the same MPI's MPI_Allreduce")
print(f"| bytes | skew | mode | {names[0]} | x | {names[1]} | x | {names[1]} / {names[0]} | wrong |")
print("|---|---|---|---|---|---|---|---|---|")
for k, v in rows.items():
    cell = lambda l: f"{st.median(x['median_latency_us'] for x in l):.1f} ({min(x['median_latency_us'] for x in l):.1f}-{max(x['median_latency_us'] for x in l):.1f})"
    ratio = lambda l: f"{st.median(x['median_ratio_mpi'] for x in l):.2f}"
    a, c = v[builds[0]], v[builds[1]]
    q = st.median(x['median_latency_us'] for x in c) / st.median(x['median_latency_us'] for x in a)
    print(f"| {k[0]} | {k[1]} | {k[2]} | {cell(a)} | {ratio(a)} | {cell(c)} | {ratio(c)} | {q:.2f} | {sum(x['wrong'] for x in a + c)} |")
PY
