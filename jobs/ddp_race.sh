#!/bin/bash
# ddp_race.sh: eager-train (sync, adaptive, majority) against PyTorch DDP (trainer/ref/ddp_mirror.py)
# on the same preset, weights, data order and stragglers, for each rank count, seed and imbalance.
#
#   bash jobs/ddp_race.sh [options]       (make bench-ddp runs it on a small setting)
#     --eager train|torch  the eager side: eager-train (train, the default), or torch:
#                          examples/fmnist_resnet.py (python/eager_sgd over $B/libeager.so, in
#                          $DDP_PY) under the same launcher, --mode M and the options DDP gets, into
#                          DIR/pP/<imbalance>/torch-<mode>-s<seed>.json: PyTorch's kernels on both
#                          sides (jobs/torch_race.sh runs issue 55's race with it). Its step time
#                          comes from a balanced torch sync run (DIR/pP/step_ms.torch); --train-opts
#                          and --epoch-mode global are eager-train's and refused; --partial-opts
#                          are the script's (e.g. "--tau 4"); MODE+OPTS is --mode MODE,OPTS
#     --ranks "4 8"        rank counts P
#     --seeds "1 2 3"      seeds (initial weights, data order, injected delays)
#     --imbalances "none random1 random2 lognormal"   any of (eager-train --imbalance model):
#                          none
#                          randomK    random:k=K,d=DELAY: K ranks drawn per step (with
#                                     replacement) wait DELAY (the paper's Figs. 11-12: K = 1, 2)
#                          lognormal  lognormal:mean=LN,std=LN_STD: every rank waits a log-normal
#                                     delay; LN_STD 0.3 LN by default (the delay alone has the
#                                     std/mean of the paper's cloud V100 step times, 144/475);
#                                     --ln-std-x 0.6 gives the step time itself (1 step of compute
#                                     + the delay, mean 2 steps, std 0.6) that ratio
#                          linear     linear:unit=LIN: rank r waits r x LIN (a fixed skew)
#                          slow       slow:rank=P-1,factor=SLOW: the last rank is SLOW times slower
#                                     (waits SLOW - 1 times its own compute time, every step)
#                        schedules (phases that start at fractions of --epochs E, which they need;
#                        phase starts in epochs: global epochs with --epoch-mode global):
#                          strag_mid  none@0ep/random:k=1,d=DELAY@(E/3)ep/none@(2E/3)ep: balanced,
#                                     one random straggler per step, balanced again
#                          slow_half  none@0ep/slow:rank=P-1,factor=3@(E/2)ep: a permanent 3x slow
#                                     rank appears halfway
#                          ln_wave    lognormal:mean=LN,std=LN_STD@0ep/...,std=2 LN_STD@(E/3)ep/
#                                     ...,std=LN_STD@(2E/3)ep: the log-normal spread doubles, then halves
#                        or NAME=SPEC: eager-train's --imbalance SPEC as given (delays in ms, not
#                        scaled; NAME: letters, digits, _ and -), into DIR/pP/NAME
#     --delay-x X          DELAY (2), --ln-x X: LN (1), --ln-std-x X: LN_STD (0.3 LN),
#                          --lin-x X: LIN (0.5), in step times, or
#                          with the suffix ms in milliseconds (e.g. --delay-x 150ms: the same
#                          absolute delay whatever P and the machine)
#     --slow-factor F      SLOW (2)
#     --busy               delays are computed on the rank's own thread, not slept (busy=1): on
#                          shared cores a sleeping straggler lends its core to the others
#     --modes "sync adaptive majority"   eager-train modes; MODE+OPTS passes --policy-opts OPTS
#                          (after --partial-opts), into MODE_OPTS-sS.json with + = , as _ (e.g.
#                          "adaptive adaptive+staleness=linear": both worths, interleaved per
#                          seed); MODE[+OPTS]/FLAG=V[/FLAG=V] also passes eager-train's --FLAG V
#                          (e.g. "solo solo/final-sync=2": the last 2 epochs in sync; / as _ in
#                          the file name; not with --eager torch); --no-ddp leaves DDP out
#     --partial-opts "--tau 4"           extra eager-train flags for the modes other than sync
#                          (none by default: the trainer's defaults, tau included)
#     --epoch-mode M       shard (default: eager-train's) or global: eager-train --epoch-mode M, and
#                          DDP draws its delays at the step index eager-train's M uses
#                          (ddp_mirror.py --imbalance-index M; DDP's own steps are the shard's)
#     --train-opts "..."   extra eager-train flags for every eager-train run (e.g. "--epoch-mode
#                          global"; DDP has no counterpart of most, so check what you compare)
#     --both-opts "..."    flags both programs take, for every run (e.g. "--milestones 1")
#     --curve-every N      accuracy curve (both programs): a snapshot every N batches applied by
#                          all ranks together, evaluated on the first --curve-test M (2000, at
#                          most --limit-test) test samples; default auto: a tenth of an epoch's
#                          batches; 0: no curve
#     --experiment fmnist --epochs E --batch B --limit-train N --limit-test N --threads T (0: cores / P)
#     --out DIR            runs go to DIR/pP/<imbalance>/<program>-s<seed>.json (default
#                          results/runs/ddp-race); existing files are kept (rerun to resume)
#     --cal-epochs E       measure the step time with a balanced sync run of E epochs (the race's
#                          options otherwise) into DIR/pP-cal/, not with the race's own
#                          balanced sync run of the first seed (a long race need not wait for a
#                          long calibration run: a step costs the same in epoch 2 as in epoch 16)
#     --targets "T P:T"    also pcoll-compare's tables at these target top-1s (0..1), each first
#                          crossing and held (--hold): DIR/compare-pP-tT{,-held}.{md,json,csv};
#                          P:T only for P ranks (e.g. "4:0.80 4:0.84 8:0.75 8:0.78")
#     --interfere SPEC     every run (eager-train and DDP) under jobs/interfere.sh SPEC: a CPU or
#                          memory-bandwidth hog beside chosen ranks for a span of each run
#     --dry-run            print the commands only
# A step time is what the balanced sync run of the first seed (--cal-epochs: its own run) measured
# about itself (ranks[] compute_s / steps, mean over ranks), so the delays given in step times scale
# with the model and the machine; delays given in ms do not. It is kept in DIR/pP/step_ms ("MS RUN",
# RUN relative to DIR/pP) and reused by every later call into DIR (seeds run one call at a time get
# the same delays); delete the file to measure it again. A later call on a machine whose CPU model
# differs from the one that measured it is refused (its delays would not be in its own step times).
# Per P, DIR/compare-pP.{md,json,csv} is pcoll-compare's table with the target set to DDP's mean
# final top-1 over the seeds in DIR/pP (one run per seed with a final top-1, the one without
# imbalance where there is one: DDP's steps do not depend on the delays): "to target vs DDP" is then
# how much sooner a mode reaches the accuracy DDP ends with; DIR/compare-pP-held.* the same, held
# (pcoll-compare --hold: from the first point after which the run stays at or above the target).
# DIR/overhead-pP.txt: the eager side's sync against DDP without imbalance, the per-step time (the
# epochs' epoch_s over one rank's steps) per seed, and the means, sample stds and sync/DDP ratio
# paired by seed (--eager torch: the overhead of eager_sgd's exchange over DDP's own allreduce).
# Needs $B/bin/eager-train (--eager torch: $B/libeager.so), $B/bin/pcoll-compare, jq or python3 (a machine without a registry may
# lack jq), and for DDP $DDP_PY with torch (ddp_venv.sh).
set -u
cd "$(dirname "$0")/.." || exit 2
B=${B:-build}
DDP_PY=${DDP_PY:-$B/venv/bin/python3}
# the launcher of the MPI that built $B (jobs/mpi.sh), or the caller's MPIRUN
. jobs/mpi.sh
pcoll_mpi_use "$B" || exit 2
RANKS="4 8"; SEEDS="1 2 3"; IMBS="none random1 random2 lognormal"; MODES="sync adaptive majority"
DELAY_X=2; LN_X=1; LN_STD_X=""; LIN_X=0.5; SLOW=2; BUSY=""; DDP=1; PARTIAL=""; TRAIN_OPTS=""; BOTH_OPTS=""; EXP=fmnist
EPOCHS=""; CAL_EPOCHS=""; BATCH=""; LT=0; LTE=0; THREADS=0; CURVE=auto; CURVE_TEST=2000; OUT=results/runs/ddp-race; DRY=0
EMODE=""; TARGETS=""; INTERFERE=""; EAGER=train
die() { echo "ddp_race: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
  --ranks) RANKS=$2; shift ;;
  --seeds) SEEDS=$2; shift ;;
  --imbalances) IMBS=$2; shift ;;
  --delay-x) DELAY_X=$2; shift ;;
  --ln-x) LN_X=$2; shift ;;
  --ln-std-x) LN_STD_X=$2; shift ;;
  --lin-x) LIN_X=$2; shift ;;
  --slow-factor) SLOW=$2; shift ;;
  --busy) BUSY=",busy=1" ;;
  --modes) MODES=$2; shift ;;
  --eager) EAGER=$2; shift ;;
  --no-ddp) DDP=0 ;;
  --partial-opts) PARTIAL=$2; shift ;;
  --train-opts) TRAIN_OPTS=$2; shift ;;
  --epoch-mode) EMODE=$2; shift ;;
  --targets) TARGETS=$2; shift ;;
  --interfere) INTERFERE=$2; shift ;;
  --both-opts) BOTH_OPTS=$2; shift ;;
  --curve-every) CURVE=$2; shift ;;
  --curve-test) CURVE_TEST=$2; shift ;;
  --batch) BATCH=$2; shift ;;
  --experiment) EXP=$2; shift ;;
  --epochs) EPOCHS=$2; shift ;;
  --cal-epochs) CAL_EPOCHS=$2; shift ;;
  --limit-train) LT=$2; shift ;;
  --limit-test) LTE=$2; shift ;;
  --threads) THREADS=$2; shift ;;
  --out) OUT=$2; shift ;;
  --dry-run) DRY=1 ;;
  -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown option $1 (see --help)" ;;
  esac
  shift
done
[ $# -eq 0 ] || die "unexpected argument $1"
for x in "$DELAY_X" "$LN_X" "${LN_STD_X:-0}" "$LIN_X"; do
  [[ $x =~ ^[0-9]+(\.[0-9]+)?(ms)?$ ]] || die "--delay-x / --ln-x / --ln-std-x / --lin-x take a number of step times or NUMBERms, not '$x'"
done
# the log-normal std by default: 0.3 x its mean, in the mean's unit
[ -n "$LN_STD_X" ] || LN_STD_X=$(awk -v m="${LN_X%ms}" -v u="${LN_X##*[0-9.]}" 'BEGIN { printf "%.10g%s", 0.3 * m, u }')
[[ $SLOW =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v f="$SLOW" 'BEGIN { exit !(f >= 1) }' || die "--slow-factor takes a number >= 1, not '$SLOW'"
[[ $CURVE =~ ^(auto|[0-9]+)$ ]] || die "--curve-every takes auto or a number of batches, not '$CURVE'"
[[ $CURVE_TEST =~ ^[0-9]+$ ]] && [ "$CURVE_TEST" -ge 1 ] || die "--curve-test takes a number of test samples >= 1, not '$CURVE_TEST'"
[ -z "$CAL_EPOCHS" ] || [[ $CAL_EPOCHS =~ ^[1-9][0-9]*$ ]] || die "--cal-epochs takes a number of epochs >= 1, not '$CAL_EPOCHS'"
[ -z "$BATCH" ] || [[ $BATCH =~ ^[1-9][0-9]*$ ]] || die "--batch takes a number >= 1, not '$BATCH'"
read -ra TRAIN_EXTRA <<<"$TRAIN_OPTS"
[ -n "$EMODE" ] && TRAIN_EXTRA+=(--epoch-mode "$EMODE")
read -ra BOTH_EXTRA <<<"$BOTH_OPTS"
[[ $LT =~ ^[0-9]+$ ]] && [[ $LTE =~ ^[0-9]+$ ]] || die "--limit-train / --limit-test take a number of samples (0: all)"
# the curve's test subset: at most the test samples used (both programs refuse a larger one)
ctest=$CURVE_TEST
[ "$LTE" -gt 0 ] && [ "$LTE" -lt "$ctest" ] && ctest=$LTE
for m in $MODES; do
  case ${m%%[+/]*} in sync | solo | majority | adaptive | quorum:*) ;; *) die "--modes: '${m%%[+/]*}' (of '$m') is not an eager-train mode" ;; esac
  case ${m%%/*} in sync+*) die "--modes: '$m': sync takes no policy options" ;; *+) die "--modes: '$m': no options after +" ;; esac
  [ "$m" = "${m%%/*}" ] && continue
  [ "$EAGER" = torch ] && die "--modes: '$m': /FLAG=VALUE is eager-train's (not with --eager torch)"
  IFS=/ read -ra fl <<<"${m#*/}"
  for kv in "${fl[@]}"; do
    [[ $kv =~ ^[a-z][a-z0-9-]*=[^/]+$ ]] || die "--modes: '$m': '$kv' is not FLAG=VALUE (eager-train's --FLAG VALUE)"
  done
done
for i in $IMBS; do
  [[ $i =~ ^(none|random[1-9][0-9]*|lognormal|linear|slow)$ ]] && continue
  case $i in
  strag_mid | slow_half | ln_wave) [ -n "$EPOCHS" ] || die "--imbalances: the schedule '$i' starts its phases at fractions of --epochs: give --epochs" ;;
  *=*) [[ ${i%%=*} =~ ^[A-Za-z0-9_-]+$ ]] && [ -n "${i#*=}" ] || die "--imbalances: '$i': NAME=SPEC needs a NAME of letters, digits, _ and - and a SPEC" ;;
  *) die "--imbalances: '$i' is not none, randomK, lognormal, linear, slow, strag_mid, slow_half, ln_wave or NAME=SPEC" ;;
  esac
done
[ -z "$EPOCHS" ] || [[ $EPOCHS =~ ^[1-9][0-9]*$ ]] || die "--epochs takes a number of epochs >= 1, not '$EPOCHS'"
case $EMODE in '' | shard | global) ;; *) die "--epoch-mode takes shard or global, not '$EMODE'" ;; esac
case $EAGER in train | torch) ;; *) die "--eager takes train (eager-train) or torch (examples/fmnist_resnet.py), not '$EAGER'" ;; esac
if [ "$EAGER" = torch ]; then
  [ -z "$TRAIN_OPTS" ] || die "--eager torch: --train-opts are eager-train's flags (the script's go in --partial-opts or --both-opts)"
  [ "$EMODE" != global ] || die "--eager torch: examples/fmnist_resnet.py draws its delays by shard steps; --epoch-mode global is eager-train's"
fi
for t in $TARGETS; do
  [[ $t =~ ^([1-9][0-9]*:)?(0(\.[0-9]+)?|1(\.0+)?)$ ]] || die "--targets: '$t' is not a top-1 in 0..1 or P:TOP1"
done
[[ $RANKS =~ ^[[:space:]]*[1-9][0-9]*([[:space:]]+[1-9][0-9]*)*[[:space:]]*$ ]] || die "--ranks takes rank counts >= 1, not '$RANKS'"
if [ -n "$INTERFERE" ]; then for P in $RANKS; do bash jobs/interfere.sh --ranks "$P" --check "$INTERFERE" || exit 2; done; fi
# the figures read from run files: the balanced step time (ms), a run's final top-1 (empty where it
# has none), and a run's per-step time (ms: its epochs' epoch_s, training and BN average without the
# evaluations, over the steps of one rank; eager-train, eager_sgd and ddp_mirror.py alike)
if command -v jq >/dev/null; then
  step_ms() { jq '[.ranks[] | .compute_s / .steps] | add / length * 1000' "$1"; }
  top1() { jq '.summary.final_test_top1 | numbers' "$1"; }
  per_step() { jq '([.epochs[].epoch_s] | add) * 1000 / (([.epochs[].steps] | add) / .environment.ranks)' "$1"; }
  run_cpu() { jq -r '(.environment.cpu // "") | split("; ")[0] // ""' "$1"; }
elif command -v python3 >/dev/null; then
  step_ms() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["ranks"]; print(sum(x["compute_s"]/x["steps"] for x in r)/len(r)*1000)' "$1"; }
  per_step() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); e=r["epochs"]
print(sum(x["epoch_s"] for x in e)*1000/(sum(x["steps"] for x in e)/r["environment"]["ranks"]))' "$1"; }
  top1() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["summary"].get("final_test_top1")
if isinstance(v,(int,float)) and not isinstance(v,bool): print(v)' "$1"; }
  run_cpu() { python3 -c 'import json,sys; print((json.load(open(sys.argv[1]))["environment"].get("cpu") or "").split("; ")[0])' "$1"; }
else die "needs jq or python3 to read the run files (make deps installs jq)"; fi
# this machine's CPU model as eager-train's run files name it (environment.cpu, up to "; "); empty
# where /proc/cpuinfo has no model name (the check below is then skipped)
this_cpu() { sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1; }
if [ $DRY = 0 ]; then
  [ -x "$B/bin/pcoll-compare" ] || die "build first: make build-all"
  if [ "$EAGER" = torch ]; then
    [ -f "$B/libeager.so" ] || die "--eager torch: $B/libeager.so missing: make build-all B=$B"
    "$DDP_PY" -c 'import torch' 2>/dev/null || die "--eager torch: $DDP_PY has no torch: make ddp-venv"
  elif [ ! -x "$B/bin/eager-train" ]; then die "build first: make build-all"
  elif ! "$B/bin/eager-train" --help 2>&1 | grep -q -- --curve-every; then
    [ "$CURVE" = auto ] || [ "$CURVE" = 0 ] || die "$B/bin/eager-train has no --curve-every: --curve-every 0"
    [ "$CURVE" = auto ] && echo "ddp_race: $B/bin/eager-train has no --curve-every: no accuracy curve"
    CURVE=0
  fi
  if [ $DDP = 1 ] && ! "$DDP_PY" -c 'import torch' 2>/dev/null; then die "$DDP_PY has no torch: make ddp-venv, or --no-ddp"; fi
fi

common=(--experiment "$EXP" --limit-train "$LT" --limit-test "$LTE" "${BOTH_EXTRA[@]}")
[ -n "$BATCH" ] && common+=(--batch "$BATCH")
# the race's epochs, and the calibration run's (the race's unless --cal-epochs)
ep=() cal_ep=()
[ -n "$EPOCHS" ] && ep=(--epochs "$EPOCHS") && cal_ep=("${ep[@]}")
[ -n "$CAL_EPOCHS" ] && cal_ep=(--epochs "$CAL_EPOCHS")

# curve_every P: the --curve-every of P ranks: CURVE, or auto: a tenth of an epoch's batches (all
# ranks together: P x floor(floor(N / P) / batch), N the training samples used), at least 1
curve_every() {
  [ "$CURVE" != auto ] && { echo "$CURVE"; return; }
  local n b
  case $EXP in fmnist) n=60000 b=64 ;; hyperplane) n=16384 b=64 ;; *) die "--curve-every auto knows fmnist and hyperplane; give a number" ;; esac
  [ "$LT" -gt 0 ] && [ "$LT" -lt "$n" ] && n=$LT
  [ -n "$BATCH" ] && b=$BATCH
  local e=$(( $1 * (n / $1 / b) / 10 ))
  [ $e -lt 1 ] && e=1
  echo $e
}

# run FILE CMD...: runs CMD unless FILE exists (resume); the log goes next to FILE
run() {
  local f=$1; shift
  if [ $DRY = 1 ]; then echo "$*"; return 0; fi
  if [ -s "$f" ]; then echo "  have $f"; return 0; fi
  mkdir -p "$(dirname "$f")"
  echo "  $(date +%H:%M:%S) $*"
  "$@" >"${f%.json}.log" 2>&1 || { echo "ddp_race: failed, see ${f%.json}.log:"; tail -5 "${f%.json}.log"; return 1; }
}

# ms X STEP_MS: the delay X (step times, or NUMBERms) in ms
ms() {
  case $1 in
  *ms) echo "${1%ms}" ;;
  *) [ "$2" = STEP_MS ] && echo "$1xSTEP_MS" || awk -v x="$1" -v s="$2" 'BEGIN { printf "%.1f", x * s }' ;;
  esac
}

# spec NAME STEP_MS P: the --imbalance value of NAME for a step time of STEP_MS and P ranks
# (schedules: phase starts at fractions of EPOCHS, in epochs: "@Xep")
spec() {
  local ln s1 s2 s3
  s1=$(at 1 3) s2=$(at 2 3) s3=$(at 1 2)
  ln="lognormal:mean=$(ms "$LN_X" "$2")"
  case $1 in
  none) echo none ;;
  random*) echo "random:k=${1#random},d=$(ms "$DELAY_X" "$2")$BUSY" ;;
  lognormal) echo "$ln,std=$(ms "$LN_STD_X" "$2")$BUSY" ;;
  linear) echo "linear:unit=$(ms "$LIN_X" "$2")$BUSY" ;;
  slow) echo "slow:rank=$(($3 - 1)),factor=$SLOW$BUSY" ;;
  strag_mid) echo "none@0ep/random:k=1,d=$(ms "$DELAY_X" "$2")$BUSY@$s1/none@$s2" ;;
  slow_half) echo "none@0ep/slow:rank=$(($3 - 1)),factor=3$BUSY@$s3" ;;
  ln_wave) echo "$ln,std=$(ms "$LN_STD_X" "$2")$BUSY@0ep/$ln,std=$(ms "$(times2 "$LN_STD_X")" "$2")$BUSY@$s1/$ln,std=$(ms "$LN_STD_X" "$2")$BUSY@$s2" ;;
  *=*) echo "${1#*=}" ;;
  esac
}
# overhead P DIR: the eager side's sync against DDP without imbalance, per-step time paired by seed
# (DIR/none/PREsync-sS.json and DIR/none/ddp-sS.json of each seed that has both): per seed, and the
# mean and sample std over the seeds of each and of their ratio
overhead() {
  local s a b rows="" who="eager-train sync"
  [ "$EAGER" = torch ] && who="eager_sgd sync (PyTorch)"
  for s in $SEEDS; do
    [ -s "$2/none/${pre}sync-s$s.json" ] && [ -s "$2/none/ddp-s$s.json" ] || continue
    a=$(per_step "$2/none/${pre}sync-s$s.json") b=$(per_step "$2/none/ddp-s$s.json")
    [ -n "$a" ] && [ -n "$b" ] && rows+="$s $b $a"$'\n'
  done
  [ -n "$rows" ] || { echo "ddp_race: P=$1: no seed with both none/${pre}sync and none/ddp runs: no overhead figure"; return 0; }
  echo "ddp_race: P=$1: overhead without imbalance, $who against DDP (gloo), per-step time in ms (epochs' epoch_s over one rank's steps):"
  printf '%s' "$rows" | awk -v who="$who" '
    function sd(x, m,   i, q) { if (n < 2) return "-"; for (i = 1; i <= n; i++) q += (x[i] - m) ^ 2; return sprintf("%.3g", sqrt(q / (n - 1))) }
    { n++; d[n] = $2; e[n] = $3; r[n] = $3 / $2; sd_ += $2; se += $3; sr += $3 / $2
      printf "  seed %s: DDP %.2f, %s %.2f, ratio %.4f\n", $1, $2, who, $3, $3 / $2 }
    END { md = sd_ / n; me = se / n; mr = sr / n
      printf "  mean over %d seed(s): DDP %.2f (sd %s), %s %.2f (sd %s), ratio %.4f (sd %s): %+.1f%%\n",
        n, md, sd(d, md), who, me, sd(e, me), mr, sd(r, mr), 100 * (mr - 1) }'
}
# at NUM DEN: the epoch NUM/DEN x EPOCHS as a phase start (Xep); times2 X: 2 X, in X's unit
at() { awk -v e="$EPOCHS" -v n="$1" -v d="$2" 'BEGIN { printf "%.6gep", e * n / d }'; }
times2() { awk -v m="${1%ms}" -v u="${1##*[0-9.]}" 'BEGIN { printf "%.10g%s", 2 * m, u }'; }

# every race run (not the calibration) under jobs/interfere.sh; DDP's delay index as eager-train's
wrap=() ddp_idx=()
[ -n "$EMODE" ] && ddp_idx=(--imbalance-index "$EMODE")
# the eager side's run files are PRE<mode>-sS.json, its step time DIR/pP/step_ms$SUF
pre="" suf=""
[ "$EAGER" = torch ] && pre=torch- suf=.torch
fails=0
first_seed=${SEEDS%% *}
for P in $RANKS; do
  th=$THREADS
  [ "$th" = 0 ] && th=$(( $(nproc) / P )) && [ "$th" -lt 1 ] && th=1
  D=$OUT/p$P
  [ -n "$INTERFERE" ] && wrap=(bash jobs/interfere.sh --ranks "$P" "$INTERFERE" --)
  # the eager side's command up to its options
  read -ra eager <<<"$MPIRUN"
  if [ "$EAGER" = torch ]; then eager+=(-np "$P" env "EAGER_SGD_LIB=$PWD/$B/libeager.so" "$DDP_PY" examples/fmnist_resnet.py)
  else eager+=(-np "$P" "$B/bin/eager-train"); fi
  ce=$(curve_every "$P")
  curve=()
  [ "$ce" -gt 0 ] && curve=(--curve-every "$ce" --curve-test "$ctest")
  echo "ddp_race: P=$P, $th thread(s) per rank, seeds $SEEDS, curve every $ce batches, into $D"
  # the step time the delays are scaled to: measured once per DIR/pP by the balanced sync run of
  # the first seed and kept in DIR/pP/step_ms, so that later calls into the same folder (one seed
  # per call, e.g. one Slurm job each) inject the same delays
  stepf=$D/step_ms$suf
  if [ $DRY = 0 ] && [ -s "$stepf" ]; then
    read -r step src <"$stepf"
    case $step in '' | *[!0-9.]*) die "$stepf: '$step' is not a step time in ms (delete the file to measure again)" ;; esac
    c0=$(run_cpu "$D/$src" 2>/dev/null) c1=$(this_cpu)
    [ -z "$c0" ] || [ -z "$c1" ] || [ "$c0" = "$c1" ] ||
      die "$stepf: measured on CPU '$c0' ($src), this machine's is '$c1': its delays would be scaled to the other machine's step time; give a new --out for this machine (delays given in ms do not scale)"
    echo "ddp_race: P=$P: step time $step ms from $stepf (measured by $src; delete it to measure again)"
  else
    rel=none/${pre}sync-s$first_seed.json
    [ -n "$CAL_EPOCHS" ] && rel=../p$P-cal/${pre}sync-s$first_seed.json
    cal=$D/$rel
    run "$cal" "${eager[@]}" "${common[@]}" "${cal_ep[@]}" "${curve[@]}" "${TRAIN_EXTRA[@]}" \
      --mode sync --seed "$first_seed" --imbalance none --threads "$th" --quiet --out "$cal" || { fails=$((fails + 1)); continue; }
    if [ $DRY = 1 ]; then step=STEP_MS
    else
      step=$(step_ms "$cal")
      echo "$step $rel" >"$stepf"
    fi
    echo "ddp_race: P=$P: balanced sync step time $step ms (compute per step, mean over ranks), kept in $stepf"
  fi
  for name in $IMBS; do
    imb=$(spec "$name" "$step" "$P")
    name=${name%%=*}
    for s in $SEEDS; do
      for msf in $MODES; do
        ms=${msf%%/*}
        m=${ms%%+*} marg=${ms%%+*}
        f=$D/$name/$pre${msf//[+=,\/]/_}-s$s.json
        extra=()
        [ "$m" != sync ] && read -ra extra <<<"$PARTIAL"
        if [ "$ms" != "$m" ]; then
          if [ "$EAGER" = torch ]; then marg=$m,${ms#*+}; else extra+=(--policy-opts "${ms#*+}"); fi
        fi
        if [ "$msf" != "$ms" ]; then
          IFS=/ read -ra fl <<<"${msf#*/}"
          for kv in "${fl[@]}"; do extra+=("--${kv%%=*}" "${kv#*=}"); done
        fi
        run "$f" "${wrap[@]}" "${eager[@]}" "${common[@]}" "${ep[@]}" "${curve[@]}" "${TRAIN_EXTRA[@]}" --mode "$marg" \
          "${extra[@]}" --seed "$s" --imbalance "$imb" --threads "$th" --quiet --out "$f" || fails=$((fails + 1))
      done
      if [ $DDP = 1 ]; then
        f=$D/$name/ddp-s$s.json
        run "$f" "${wrap[@]}" "$DDP_PY" trainer/ref/ddp_mirror.py --ranks "$P" "${common[@]}" "${ep[@]}" "${curve[@]}" --seed "$s" \
          --imbalance "$imb" "${ddp_idx[@]}" --threads "$th" --quiet --out "$f" || fails=$((fails + 1))
      fi
    done
  done
  [ $DRY = 1 ] && continue
  # the target: DDP's mean final top-1 over its seeds, one run per seed (else the preset's target;
  # regression presets have no top-1: each run's own target, i.e. none). DDP computes the same
  # steps whatever the delays, so a seed's run without imbalance or under any imbalance will do:
  # the one without is taken where there is one
  tgt=() ddpf=() seen=" " vals=""
  for f in "$D"/none/ddp-s*.json "$D"/*/ddp-s*.json; do
    [ -s "$f" ] || continue
    s=${f##*/ddp-s} && s=${s%.json}
    [[ $seen == *" $s "* ]] && continue
    v=$(top1 "$f" 2>/dev/null)
    [ -n "$v" ] || continue
    seen+="$s " && ddpf+=("$f") && vals+="$v "
  done
  if [ ${#ddpf[@]} -gt 0 ]; then
    t=$(echo "$vals" | awk '{ for (i = 1; i <= NF; i++) s += $i; printf "%.10g", s / NF }')
    tgt=(--target "$t")
    echo "ddp_race: P=$P: target top-1 = DDP's mean final top-1, $t, over seed(s)$seen(${ddpf[*]#"$D"/})"
  fi
  # at DDP's final top-1: first crossing (compare-pP) and held (compare-pP-held, --hold: the first
  # point from which the run stays at or above it)
  for h in "" -held; do
    C=$OUT/compare-p$P$h
    "$B/bin/pcoll-compare" "${tgt[@]}" ${h:+--hold} --json "$C.json" --csv="$C.csv" "$D" >/dev/null 2>&1
    "$B/bin/pcoll-compare" "${tgt[@]}" ${h:+--hold} "$D" >"$C.md" 2>&1 || fails=$((fails + 1))
    echo "ddp_race: P=$P: ${h:+held, }$C.md"
    cat "$C.md"
  done
  overhead "$P" "$D" | tee "$OUT/overhead-p$P.txt"
  # --targets: the tables at each given target, first crossing and held
  for t in $TARGETS; do
    [[ $t == *:* ]] && { [ "${t%%:*}" = "$P" ] || continue; t=${t#*:}; }
    for h in "" -held; do
      C=$OUT/compare-p$P-t$t$h
      "$B/bin/pcoll-compare" --target "$t" ${h:+--hold} --json "$C.json" --csv="$C.csv" "$D" >/dev/null 2>&1
      "$B/bin/pcoll-compare" --target "$t" ${h:+--hold} "$D" >"$C.md" 2>&1 || fails=$((fails + 1))
      echo "ddp_race: P=$P: target $t${h:+, held}: $C.md"
    done
  done
done
[ $fails -eq 0 ] || { echo "ddp_race: $fails run(s) failed"; exit 1; }
