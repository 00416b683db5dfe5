#!/bin/bash
# The measurements quoted in the README, reproducible on one machine (mpirun, no Slurm):
#   jobs/experiments.sh skew        issue 4: Fashion-MNIST, 4 ranks, linear skew ~ step time:
#                                   sync / solo / majority, same epochs: wall time, top-1, speedup
#   jobs/experiments.sh regimes     issue 5: light (one random rank delayed per step) and heavy
#                                   (log-normal step times) imbalance x sync/solo/majority/adaptive;
#                                   REPEATS=2 adds a second seed per run (run-to-run noise)
#   jobs/experiments.sh hyperplane  Fig. 10: 8 ranks, one random rank per step delayed
#                                   200/300/400 ms, sync/solo/majority/adaptive (16,384 samples)
# Fashion-MNIST runs decay the lr x0.1 for their last epoch (--milestones EPOCHS-1): evaluating right
# after an epoch at lr 0.1 with batch-norm running statistics swings test top-1 by 20 points.
# Results: results/runs/exp-<name>/..., tables: build/bin/pcoll-compare on that folder.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
mkdir -p results/figures
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
run() {  # run NP OUT ARGS...
  local np=$1 out=$2; shift 2
  mkdir -p "$(dirname "$out")"
  echo "== $(basename "$out" .json): $*"
  mpirun --oversubscribe --bind-to none -np "$np" "$B/bin/eager-train" --out "$out" "$@" 2>&1 |
    grep -E '^epoch|^eager-train: [a-z-]+:|controller:|rror' || true
}
case "${1:-}" in
skew)
  D=results/runs/exp-skew
  for mode in sync solo majority; do
    run 4 "$D/$mode.json" --experiment fmnist --epochs "${EPOCHS:-3}" --limit-train "${LIMIT:-30000}" \
      --imbalance "linear:unit=${UNIT:-100}" --mode "$mode" --milestones "$(( ${EPOCHS:-3} - 1 ))"
  done
  "$B/bin/pcoll-compare" "$D" --plot results/figures/exp-skew ;;
regimes)
  D=results/runs/exp-regimes
  for seed in $(seq 1 "${REPEATS:-1}"); do
    for regime in "random:k=1,d=${LIGHT_MS:-150}" "lognormal:mean=${HEAVY_MEAN:-300},std=${HEAVY_STD:-450}"; do
      tag=$( [ "${regime%%:*}" = random ] && echo light || echo heavy )
      for mode in sync solo majority adaptive; do
        run 4 "$D/$tag/$mode-s$seed.json" --experiment fmnist --epochs "${EPOCHS:-3}" \
          --limit-train "${LIMIT:-30000}" --imbalance "$regime" --mode "$mode" --tau 4 --seed "$seed" \
          --target-top1 "${TARGET:-0.80}" --milestones "$(( ${EPOCHS:-3} - 1 ))"
      done
    done
  done
  "$B/bin/pcoll-compare" "$D/light" "$D/heavy" --plot results/figures/exp-regimes ;;
hyperplane)
  D=results/runs/exp-hyperplane
  for d in 200 300 400; do
    for mode in sync solo majority adaptive; do
      run 8 "$D/d$d/$mode.json" --experiment hyperplane --epochs 3 --hp-samples 16384 \
        --imbalance "random:k=1,d=$d" --mode "$mode" --tau 4
    done
  done
  "$B/bin/pcoll-compare" "$D" --plot results/figures/exp-hyperplane ;;
*) echo "usage: jobs/experiments.sh skew|regimes|hyperplane" >&2; exit 2 ;;
esac
