#!/bin/bash
# make demo: eager-SGD against synchronous SGD on Fashion-MNIST (Debian's dataset-fashion-mnist),
# 4 ranks on this machine, with the paper's random straggler (Figs. 11-12: one rank drawn per step
# waits DELAY_X step times), for each of sync, solo, majority and the adaptive controller; then the
# comparison table and a figure.
# The delay is scaled to the step time this machine measures in a short balanced sync run first,
# so that the same command injects the same regime on any machine (a straggler costs sync about
# 1 + DELAY_X steps per round, and the partial modes little).
# Global epochs: batches are dealt from the round history, so the fast ranks take more of them
# (with shard epochs the permanently slowest rank would set every mode's epoch time).
# Every run records an accuracy curve (a model snapshot every tenth of an epoch, evaluated on the
# first 2,000 test samples outside the run's clock), so the table's time to TARGET is not rounded
# up to an epoch end; the adaptive run prints, per epoch, the level it chose and what it measured.
# Knobs (environment): NP=4 EPOCHS=3 LIMIT=24000 (training samples) DELAY_X=2 (step times)
# IMB (an --imbalance model instead, e.g. IMB=linear:unit=60) TAU (--tau; the trainer's default
# unless set) TARGET=0.80 EPOCH_MODE=global
# B=build
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}; NP=${NP:-4}; EPOCHS=${EPOCHS:-3}; LIMIT=${LIMIT:-24000}; DELAY_X=${DELAY_X:-2}
TARGET=${TARGET:-0.80}
CURVE=$(( LIMIT / 64 / 10 > 0 ? LIMIT / 64 / 10 : 1 ))  # batches (all ranks) per snapshot: a tenth of an epoch
# the launcher of the MPI that built $B (jobs/mpi.sh), set for more ranks than cores
. jobs/mpi.sh
pcoll_mpi_use "$B"
TAU_ARG=(); [ -n "${TAU:-}" ] && TAU_ARG=(--tau "$TAU")  # as jobs/lib.sh: the trainer's default unless set
OUT=results/runs/demo-$(date +%Y%m%d-%H%M%S)
FIG=results/figures/$(basename "$OUT")
mkdir -p "$OUT" "$FIG"
t0=$(date +%s)
if [ -z "${IMB:-}" ]; then
  # the step time: compute per step (mean over ranks) of 24 balanced sync steps per rank
  CAL=$(mktemp -d)
  trap 'rm -rf "$CAL"' EXIT
  $MPIRUN -np "$NP" "$B/bin/eager-train" --experiment fmnist --epochs 1 \
    --limit-train $(( NP * 64 * 24 )) --limit-test 64 --mode sync --imbalance none --quiet --out "$CAL/cal.json"
  STEP=$(jq '[.ranks[] | .compute_s / .steps] | add / length * 1000' "$CAL/cal.json")
  IMB=$(awk -v s="$STEP" -v x="$DELAY_X" 'BEGIN { printf "random:k=1,d=%.1f", s * x }')
  echo "demo: step time $(printf %.1f "$STEP") ms (balanced sync); straggler: one rank per step waits $DELAY_X steps ($IMB)"
fi
echo "demo: $NP ranks, $EPOCHS ${EPOCH_MODE:-global} epochs of $LIMIT Fashion-MNIST samples, --imbalance $IMB, tau ${TAU:-default of eager-train --help}"
echo "demo: runs -> $OUT, figures -> $FIG"
for mode in sync solo majority adaptive; do
  echo "== $mode"
  $MPIRUN -np "$NP" "$B/bin/eager-train" --experiment fmnist \
    --epochs "$EPOCHS" --limit-train "$LIMIT" --imbalance "$IMB" "${TAU_ARG[@]}" --epoch-mode "${EPOCH_MODE:-global}" \
    --mode "$mode" --milestones "$((EPOCHS - 1))" --curve-every "$CURVE" --curve-test 2000 \
    --target-top1 "$TARGET" --out "$OUT/$mode.json" 2>&1 | grep -E '^epoch|^eager-train: [a-z]+:|controller:|rror'
done
echo
"$B/bin/pcoll-validate" -q results/schema/run.schema.json "$OUT"/*.json
"$B/bin/pcoll-compare" "$OUT" --target "$TARGET" --plot "$FIG"
echo
echo "demo: done in $(( $(date +%s) - t0 )) s; runs in $OUT, figures in $FIG"
