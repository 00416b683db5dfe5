#!/bin/bash
# Bad input: a clear message naming the option / file, a non-zero exit on every rank, no hang.
. "$(dirname "$0")/common.sh"
expect() {  # expect PATTERN NP ARGS...: must fail (non-zero), print PATTERN, and not hang
  pat=$1; shift
  if run "$@"; then cat "$TMP/out"; fail "expected a failure for: $*"; fi
  grep -q -- "$pat" "$TMP/out" || { cat "$TMP/out"; fail "no message matching '$pat' for: $*"; }
  echo "ok: $* -> $(grep -m1 -- "$pat" "$TMP/out")"
}
expect "unknown option --no-such-flag" 2 --no-such-flag 3
expect "out of range" 2 --epochs 0
expect "needs a number" 2 --lr abc
expect "mode 'fast'" 2 --mode fast
expect "imbalance 'linear'" 2 --imbalance linear
expect "resume needs --ckpt-dir" 2 --resume
printf 'epochs = 1\nbogus = 3\n' > "$TMP/bad.cfg"
expect "bad.cfg:2: unknown option 'bogus'" 2 --config "$TMP/bad.cfg"
expect "$TMP/nope" 3 --data-path "$TMP/nope"
expect "--out $TMP/nodir/x.json: its folder $TMP/nodir does not exist" 2 --out "$TMP/nodir/x.json"
# a truncated IDX file: the message names the file
mkdir -p "$TMP/fm"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  zcat /usr/share/datasets/fashion-mnist/$f.gz > "$TMP/fm/$f"
done
head -c 100000 "$TMP/fm/train-images-idx3-ubyte" > "$TMP/fm/x" && mv "$TMP/fm/x" "$TMP/fm/train-images-idx3-ubyte"
expect "train-images-idx3-ubyte" 2 --data-path "$TMP/fm"
# a model whose input does not fit the data: both shapes named
expect "expects input" 2 --model "resnet-cifar n=1 classes=10"
echo "all bad-input cases refused cleanly"
