#!/bin/sh
# jobs/plot.sh [OUTDIR [RUN.json|DIR ...]]: draws every figure (PNG + SVG) with pcoll-compare.
#   defaults: OUTDIR=results/figures, inputs results/runs and build/bench/collectives.json (if present)
#   B=build-dir selects the build; extra pcoll-compare options via PCOLL_COMPARE_OPTS (e.g. "--target 0.9").
set -eu
cd "$(dirname "$0")/.."
B=${B:-build}
out=${1:-results/figures}
[ $# -gt 0 ] && shift
if [ $# -eq 0 ]; then
  [ -d results/runs ] && set -- "$@" results/runs
  [ -f "$B/bench/collectives.json" ] && set -- "$@" "$B/bench/collectives.json"
fi
[ $# -gt 0 ] || { echo "plot.sh: nothing to plot (no results/runs, no $B/bench/collectives.json)" >&2; exit 1; }
[ -x "$B/bin/pcoll-compare" ] || { echo "plot.sh: $B/bin/pcoll-compare not built (make)" >&2; exit 2; }
# shellcheck disable=SC2086
exec "$B/bin/pcoll-compare" ${PCOLL_COMPARE_OPTS:-} --plot "$out" "$@"
