#!/bin/bash
# The measurements quoted in the README, reproducible on one machine (mpirun, no Slurm):
#   jobs/experiments.sh regimes     Fashion-MNIST (LIMIT=30000 samples, EPOCHS=4), NP=4 ranks,
#                                   REGIMES (default: light heavy) x REPEATS seeds x MODES:
#                                     none (alias balanced): no imbalance (sync is bit-identical
#                                       under any imbalance, so its seeds run here, cheaply)
#                                     linear (alias light): rank r sleeps r x UNIT=100 ms per step
#                                     lognormal (alias heavy): log-normal step delays, HEAVY_MEAN=300
#                                       and HEAVY_STD=450 ms
#                                     slow: rank NP-1 is SLOW_F=2 times slower (waits its compute)
#                                     random / random2: RAND_K=1 / 2 ranks drawn per step sleep
#                                       RAND_D=1000 ms (the paper's Figs. 11-12 injection)
#                                   MODES (sync solo majority adaptive;
#                                   MODE+OPTS passes --policy-opts OPTS, MODE[+OPTS]@N --final-sync N,
#                                   e.g. adaptive+staleness=quadratic@1); REPEATS=2 runs seeds 1 and 2;
#                                   SEED0=3 REPEATS=8 runs seeds 3..8; SKIP_DONE=1 keeps existing
#                                   runs; RUNS=DIR writes there; EXTRA="--momentum 0.7" adds
#                                   trainer options; TAU=2 sets the staleness bound; EPOCH_MODE=global (default: batches
#                                   dealt from the rounds, fast ranks take more) or shard
#   jobs/experiments.sh table       the controller's regime x mode table (docs/EXPERIMENTS.md):
#                                   the regimes above with sync/solo/majority/adaptive, 3 seeds,
#                                   2 epochs of 12,000 samples, an accuracy curve every 24 batches
#                                   (time to target between epoch ends); NP=, EXTRA= as above
#   jobs/experiments.sh skew        issue 4 alone: the light regime, sync / solo / majority
#   jobs/experiments.sh hyperplane  Fig. 10: 8 ranks, one random rank per step delayed
#                                   200/300/400 ms, sync/solo/majority/adaptive (16,384 samples)
# Fashion-MNIST runs decay the lr x0.1 for their last epoch (--milestones EPOCHS-1): evaluating right
# after an epoch at lr 0.1 with batch-norm running statistics swings test top-1 by 20 points.
# Results: results/runs/exp-<name>/..., tables: build/bin/pcoll-compare on that folder.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
mkdir -p results/figures
# the launcher of the MPI that built $B (jobs/mpi.sh), set for more ranks than cores
. jobs/mpi.sh
pcoll_mpi_use "$B"
run() {  # run NP OUT ARGS...
  local np=$1 out=$2; shift 2
  mkdir -p "$(dirname "$out")"
  echo "== $(basename "$out" .json): $*"
  $MPIRUN -np "$np" "$B/bin/eager-train" --out "$out" "$@" 2>&1 |
    grep -E '^epoch|^eager-train: [a-z-]+:|controller:|rror' || true
}
regimes_run() {  # REGIMES (light heavy) x REPEATS seeds x MODES
  local D=${RUNS:-results/runs/exp-regimes} regime NP=${NP:-4}
  for seed in $(seq "${SEED0:-1}" "${REPEATS:-1}"); do
    for tag in ${REGIMES:-light heavy}; do
      case $tag in
        light | linear) regime="linear:unit=${UNIT:-100}" ;;
        heavy | lognormal) regime="lognormal:mean=${HEAVY_MEAN:-300},std=${HEAVY_STD:-450}" ;;
        slow) regime="slow:rank=$((NP - 1)),factor=${SLOW_F:-2}" ;;
        random) regime="random:k=${RAND_K:-1},d=${RAND_D:-1000}" ;;
        random2) regime="random:k=2,d=${RAND_D:-1000}" ;;
        balanced | none) regime="none" ;;  # sync is bit-identical under any imbalance: cheap sync seeds
        *) echo "experiments.sh: unknown regime '$tag' (none, linear, lognormal, slow, random, random2; light, heavy, balanced)" >&2; exit 2 ;;
      esac
      for spec in ${MODES:-sync solo majority adaptive}; do
        local name=${spec//[+=,]/_} fs=0 rule=${spec%@*}
        name=${name/@/_fs}
        [ "$rule" != "$spec" ] && fs=${spec##*@}
        [ -n "${SKIP_DONE:-}" ] && [ -s "$D/$tag/$name-s$seed.json" ] && continue
        local mode=${rule%%+*} opts=""
        [ "$rule" != "$mode" ] && opts=${rule#*+}
        run "$NP" "$D/$tag/$name-s$seed.json" --experiment fmnist --epochs "${EPOCHS:-4}" \
          --limit-train "${LIMIT:-30000}" --imbalance "$regime" --mode "$mode" --policy-opts "$opts" \
          --final-sync "$fs" ${EXTRA:-} \
          --tau "${TAU:-4}" --seed "$seed" --epoch-mode "${EPOCH_MODE:-global}" \
          --target-top1 "${TARGET:-0.80}" --milestones "$(( ${EPOCHS:-4} - 1 ))"
      done
    done
  done
  local dirs=""
  for tag in ${REGIMES:-light heavy}; do dirs="$dirs $D/$tag"; done
  "$B/bin/pcoll-compare" $dirs --plot "results/figures/$(basename "$D")"
}
case "${1:-}" in
skew) REGIMES=light MODES="${MODES:-sync solo majority}" regimes_run ;;
regimes) regimes_run ;;
table)
  T=${RUNS:-results/runs/exp-table}
  common="EPOCHS=2 LIMIT=12000 REPEATS=${REPEATS:-3}"
  X="--curve-every 24 --curve-test 2000 --eval-every 2 ${EXTRA:-}"
  env $common RUNS="$T" REGIMES=none MODES=sync EXTRA="$X" SKIP_DONE=1 "$0" regimes
  env $common RUNS="$T" REGIMES="${REGIMES:-none linear lognormal slow random}" MODES="${MODES:-solo majority adaptive}" \
    EXTRA="$X" SKIP_DONE=1 "$0" regimes ;;
hyperplane)
  D=results/runs/exp-hyperplane
  for d in 200 300 400; do
    for mode in sync solo majority adaptive; do
      run 8 "$D/d$d/$mode.json" --experiment hyperplane --epochs 3 --hp-samples 16384 \
        --imbalance "random:k=1,d=$d" --mode "$mode" --tau 4
    done
  done
  "$B/bin/pcoll-compare" "$D" --plot results/figures/exp-hyperplane ;;
*) echo "usage: jobs/experiments.sh skew|regimes|table|hyperplane" >&2; exit 2 ;;
esac
