#!/bin/bash
# Bad input: a clear message naming the option / file, a non-zero exit on every rank, no hang.
. "$(dirname "$0")/common.sh"
# run_each NP ARGS...: like run, and each rank appends "rank R exit S" (its own exit status)
run_each() {
  np=$1; shift
  timeout 240 $MPIRUN -np "$np" bash -c \
    '"$@"; s=$?; echo "rank ${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-?}} exit $s"; exit $s' eager-train \
    "$TRAIN" "${TRAIN_ARGS[@]}" "$@" > "$TMP/out" 2>&1
}
# expect PATTERN NP ARGS...: must print PATTERN and fail, every rank that got to report its exit
# non-zero (mpirun kills the ranks still running once one has failed), no hang (timeout: 124)
expect() {
  pat=$1; shift
  run_each "$@"; rc=$?
  exits=$(sed -n 's/^rank [0-9?]* exit \([0-9]*\)$/\1/p' "$TMP/out" | tr '\n' ' ')
  [ "$rc" != 0 ] || { cat "$TMP/out"; fail "expected a failure for: ${*:2}"; }
  [ "$rc" != 124 ] || { cat "$TMP/out"; fail "hung (killed after 240 s): ${*:2}"; }
  [ -n "$exits" ] || { cat "$TMP/out"; fail "no rank exited by itself for: ${*:2}"; }
  case " $exits" in *" 0 "*) cat "$TMP/out"; fail "a rank exited 0 (exits: $exits) for: ${*:2}";; esac
  grep -q -- "$pat" "$TMP/out" || { cat "$TMP/out"; fail "no message matching '$pat' for: ${*:2}"; }
  echo "ok: ${*:2} -> $(grep -m1 -- "$pat" "$TMP/out") [rank exits: ${exits% }; mpirun $rc]"
}
# ex PATTERN NP ARGS...: expect, as a case beside the others (common.sh case_bg: each refusal waits
# about a second and a half for mpirun's kill sequence, Open MPI's, after the first rank's exit)
n=0
ex() { n=$((n + 1)); case_bg "c$n" expect "$@"; }
ex "unknown option --no-such-flag" 2 --no-such-flag 3
ex "out of range" 2 --epochs 0
ex "needs a number" 2 --lr abc
ex "mode 'fast'" 2 --mode fast
ex "imbalance 'linear'" 2 --imbalance linear
ex "resume needs --ckpt-dir" 2 --resume
ex "ckpt-every-steps needs --ckpt-dir" 2 --ckpt-every-steps 4
ex "--momentum-per 'step' must be sample or round" 2 --momentum-per step
ex "--wd-per round needs --momentum-per round" 2 --momentum-per sample --wd-per round
ex "--late 'soon' must be wait or go" 2 --late soon
ex "--late go with --ckpt-every-steps" 2 --late go --ckpt-dir "$TMP/ck" --ckpt-every-steps 4
printf 'epochs = 1\nbogus = 3\n' > "$TMP/bad.cfg"
ex "bad.cfg:2: unknown option 'bogus'" 2 --config "$TMP/bad.cfg"
ex "$TMP/nope" 3 --data-path "$TMP/nope"
ex "--out $TMP/nodir/x.json: its folder $TMP/nodir does not exist" 2 --out "$TMP/nodir/x.json"
# values that look like numbers to a loose parser: every item must be one
ex "--milestones '.': item 1 '.' is not an epoch" 2 --milestones .
ex "--milestones '30,,60': item 2 '' is not an epoch" 2 --milestones 30,,60
ex "--milestones '30,60,': ends with ','" 2 --milestones 30,60,
ex "--imbalance 'linear:unit=nan': needs unit=" 2 --imbalance linear:unit=nan
ex "--imbalance 'random:k=1,d=inf': needs d=" 2 --imbalance random:k=1,d=inf
ex "--imbalance 'lognormal:mean=475,std=inf': needs std=" 2 --imbalance lognormal:mean=475,std=inf
# options that need the number of ranks
ex "--imbalance 'slow:rank=7,factor=2': rank 7 does not exist in this run of 2 ranks" 2 \
  --imbalance slow:rank=7,factor=2
ex "--mode 'quorum:9': quorum 9 is more than the 2 ranks of this run" 2 --mode quorum:9
# a folder as --config (fopen succeeds on it, reading fails)
mkdir -p "$TMP/cfgdir"
ex "--config $TMP/cfgdir: is a directory" 2 --config "$TMP/cfgdir"
# UCF101's classInd.txt with index 3 on line 2: the message names the index line 2 needs
mkdir -p "$TMP/ucf"
printf '1 ApplyEyeMakeup\r\n3 Archery\r\n' > "$TMP/ucf/classInd.txt"
ex "classInd.txt: line 2 (byte offset 18): expected \"2 ClassName\", got \"3 Archery\"" 2 \
  --experiment ucf101 --data-path "$TMP/ucf"
# a truncated IDX file: the message names the file
mkdir -p "$TMP/fm"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  zcat /usr/share/datasets/fashion-mnist/$f.gz > "$TMP/fm/$f"
done
head -c 100000 "$TMP/fm/train-images-idx3-ubyte" > "$TMP/fm/x" && mv "$TMP/fm/x" "$TMP/fm/train-images-idx3-ubyte"
ex "train-images-idx3-ubyte" 2 --data-path "$TMP/fm"
# a model whose input does not fit the data: both shapes named
ex "expects input" 2 --model "resnet-cifar n=1 classes=10"
# a config-file value that a flag overrides: rank 0 says which won (once), and the flag's value is used
printf 'epochs = 5\nlr = 0.05\n' > "$TMP/ov.cfg"
override() {
  run 2 --config "$1" --epochs 1 --max-steps 2 --out "$TMP/ov.json" || { cat "$TMP/out"; fail "override run"; }
  msg="--epochs 1 from the command line wins over epochs = 5 at $1:1"
  [ "$(grep -c -- "$msg" "$TMP/out")" = 1 ] || { cat "$TMP/out"; fail "no single line: $msg"; }
  jq -e '.config.epochs == 1 and .config.lr == 0.05' "$TMP/ov.json" > /dev/null || fail "config file + flag: wrong values"
  echo "ok: --config (epochs = 5) --epochs 1 -> $(grep -- "$msg" "$TMP/out") [exit 0]"
}
case_bg override override "$TMP/ov.cfg"
cases_wait
echo "all bad-input cases refused cleanly"
