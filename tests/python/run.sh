#!/bin/bash
# run.sh CASE: one check of the PyTorch package (tests/python/check.py) under $MPIRUN with 4 ranks,
# in $B/venv's python with $B/libeager.so (tests/python.tests; tests/run.sh sets B, MPIRUN, LOGDIR).
#   ddp | partial M/M/..    check.py passes (partial: each mode's run file valid against run.schema.json,
#                           its data_path host, libeager_cuda.so never loaded)
#   refuse                  each refusal's line on every rank (parameters on two devices among them); the
#                           last, uncaught, ends the job non-zero with one line per rank and no traceback
#   mismatch RANK           a replica made to differ on RANK (test aid): every rank names RANK
#   lost RANK               RANK drops one round (test aid): the epoch's hash check names RANK
#   resume                  the controller's carried state and the run through a checkpoint (state_dict,
#                           torch.save, load_state_dict in new processes): epoch 2 resumed makes the
#                           uninterrupted run's decisions, weights and summary totals (start=sync); its
#                           file, majority's and a continued solo state's number the epoch 2 and hold
#                           both parts' totals and a restart (the resumed majority file valid, read by
#                           pcoll-compare); a solo state continued under start=sync keeps solo, also on
#                           2 ranks (converted); an old-style dict loads (controller fresh), a format-1
#                           key too (run file afresh, one line); corrupt bytes, another format, a bad
#                           run field, another policy, dicts that differ across ranks and calls
#                           mid-epoch refused on every rank
#   kill                    rank 1 SIGKILLs itself: the job ends non-zero within 60 s
#   hang                    rank 1 SIGSTOPs itself: the others name it and abort (t_abort 20 s) within 90 s
#   job                     jobs/torch.sbatch via jobs/local.sh (examples/fmnist_resnet.py), run file valid
# Exit 77 (skip) without the venv's torch or the library.
set -u
cd "$(dirname "$0")/../.." || exit 2
# the venv: $B's, else that of the tree the second MPI family's tree ($B-mpich, $B-openmpi) sits beside
for d in "$B" "${B%-mpich}" "${B%-openmpi}"; do PY=$d/venv/bin/python3; [ -x "$PY" ] && break; done
[ -x "$PY" ] && "$PY" -c 'import torch' 2>/dev/null || { echo "skip: no PyTorch in $B/venv (make test makes it)"; exit 77; }
[ -f "$B/libeager.so" ] || { echo "skip: no $B/libeager.so (not built under SAN)"; exit 77; }
export EAGER_SGD_LIB=$PWD/$B/libeager.so OMP_NUM_THREADS=1 PYTHONWARNINGS=ignore
out=$LOGDIR/py_$1_$(echo "${2:-}" | tr /: __).out
run() { $MPIRUN -np 4 "$PY" tests/python/check.py "$@" >"$out" 2>&1; }
# shellcheck source=tests/python/lib.sh
. tests/python/lib.sh
case $1 in
  ddp) d=$(cd "$LOGDIR" && pwd); rm -f "$d/rendezvous"; run ddp "$d" || { cat "$out"; exit 1; }; tail -1 "$out" ;;
  partial)
    run partial "$2" "$LOGDIR" || { cat "$out"; exit 1; }
    grep '^partial' "$out"
    for m in ${2//\// }; do "$B/bin/pcoll-validate" results/schema/run.schema.json "$LOGDIR/py_run_${m/:/_}.json" || exit 1; done ;;
  refuse)
    run refuse && { cat "$out"; echo "run.sh: refuse: the job succeeded"; exit 1; }
    on_ranks 4 "$out" "refused tau: tau -1: must be >= 0 (0: no bound) (on every rank)"
    on_ranks 4 "$out" "refused model: the model (its parameters' names and shapes) differs across ranks: rank 0 has"
    on_ranks 4 "$out" "(ranks differing from rank 0: 2)"
    on_ranks 4 "$out" "refused quorum: mode 'quorum:5': quorum 5 is more than the 4 ranks of this run (1..4) (on every rank)"
    on_ranks 4 "$out" "refused adam: the optimizer is Adam: eager_sgd wraps torch.optim.SGD (on every rank)"
    on_ranks 4 "$out" "refused devices: rank 2: parameters on cpu and meta: eager_sgd takes a model whose parameters are all on one device"
    on_ranks 4 "$out" "eager_sgd: mode 'bogus': unknown policy 'bogus'"
    echo "refuse: 6 refusals, each on all 4 ranks; the uncaught one ended the job non-zero" ;;
  mismatch|lost)
    aid=perturb; [ "$1" = lost ] && aid=skip-round
    EAGER_SGD_TEST_BREAK=$aid:$2 run partial majority "$LOGDIR/py_broken.json" &&
      { cat "$out"; echo "run.sh: $1 on rank $2 went unnoticed"; exit 1; }
    on_ranks 4 "$out" "the replicas' weights hash after epoch 1 differs across ranks" &&
      on_ranks 4 "$out" "(ranks differing from rank 0: $2)" ;;
  resume)
    d=$(cd "$LOGDIR" && pwd)/py_resume; rm -rf "$d"; mkdir -p "$d"
    run resume_save "$d" || { cat "$out"; exit 1; }
    grep '^resume_save' "$out"
    run resume_load "$d" || { cat "$out"; exit 1; }
    on_ranks 4 "$out" "refused corrupt: state_dict['eager_sgd']['state']: controller state: checksum mismatch (truncated or corrupt) (on every rank)"
    on_ranks 4 "$out" "refused version: state_dict['eager_sgd']['format']: 'eager-sgd-controller/9', this package reads 'eager-sgd-controller/2' and 'eager-sgd-controller/1' (on every rank)"
    on_ranks 4 "$out" "refused run: state_dict['eager_sgd']['run']['epochs']: -1, not a count >= 0 (on every rank)"
    on_ranks 4 "$out" "refused ranks: the state_dict loaded (its 'eager_sgd' key and SGD state) differs across ranks: rank 0 has"
    on_ranks 4 "$out" "(ranks differing from rank 0: 2)"
    on_ranks 4 "$out" "refused policy: state_dict['eager_sgd']: an adaptive controller's state (mode 'adaptive,start=solo,window=65536,screen=off'), and this optimizer's mode is 'majority' (on every rank)"
    on_ranks 4 "$out" "refused mid-epoch: rank "  # state_dict(): on the rank that calls it (here every rank)
    on_ranks 4 "$out" "refused mid-epoch: load_state_dict() in epoch 2 after a step(): a state is loaded between epochs (on every rank)"
    [ "$(grep -c "key is eager-sgd-controller/1: it has no run totals, so the run file's epochs and summary start afresh" "$out")" = 1 ] ||
      { cat "$out"; echo "run.sh: not one line (rank 0's) saying a format-1 key starts the run file afresh"; exit 1; }
    "$B/bin/pcoll-validate" results/schema/run.schema.json "$d/resumed_majority.json" || exit 1
    "$B/bin/pcoll-compare" "$d/resumed_majority.json" >"$out.compare" 2>&1 || { cat "$out.compare"; exit 1; }
    grep '^resume_load' "$out"
    $MPIRUN -np 2 "$PY" tests/python/check.py resume_elastic "$d" >"$out.elastic" 2>&1 || { cat "$out.elastic"; exit 1; }
    grep -q "controller state (4 ranks) continues on 2 ranks" "$out.elastic" || { cat "$out.elastic"; echo "run.sh: no line saying the state continues on 2 ranks"; exit 1; }
    grep '^resume_elastic' "$out.elastic" ;;
  job)
    [ -d /usr/share/datasets/fashion-mnist ] || { echo "skip: no Fashion-MNIST (apt-get install dataset-fashion-mnist)"; exit 77; }
    MODE=majority EPOCHS=1 RANKS=4 THREADS=1 OUT=$PWD/$LOGDIR/py_job PCOLL_JOB_ID=t B=$B PY=$PY \
      jobs/local.sh jobs/torch.sbatch --limit-train 1024 --limit-test 256 >"$out" 2>&1 || { cat "$out"; exit 1; }
    grep '^epoch 1' "$out"
    "$B/bin/pcoll-validate" results/schema/run.schema.json "$LOGDIR/py_job/torch/t/majority.json" ;;
  hang)  # check.py's t_abort is 20 s: the stall watchdog's bound, then the abort
    t0=$(date +%s)
    run hang && { cat "$out"; echo "run.sh: the job survived a stopped rank"; exit 1; }
    el=$(( $(date +%s) - t0 ))
    grep -q 'SILENT (dead or hung, no heartbeat): rank 1\|eager_sgd: rank [0-9]*: .*rank 1' "$out" ||
      { cat "$out"; echo "run.sh: no line names the stopped rank 1"; exit 1; }
    [ "$el" -le 90 ] || { cat "$out"; echo "run.sh: the job took ${el}s to end after rank 1 stopped"; exit 1; }
    echo "hang: the job ended non-zero ${el}s after start, rank 1 named silent" ;;
  kill)
    t0=$(date +%s)
    run kill && { cat "$out"; echo "run.sh: the job survived a killed rank"; exit 1; }
    el=$(( $(date +%s) - t0 ))
    [ "$el" -le 60 ] || { cat "$out"; echo "run.sh: the job took ${el}s to end after rank 1 died"; exit 1; }
    echo "kill: the job ended non-zero ${el}s after start (rank 1 killed at its step 5)" ;;
  *) echo "run.sh: unknown case $1"; exit 2 ;;
esac
