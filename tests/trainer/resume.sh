#!/bin/bash
# Checkpoints: in sync mode a resumed run reproduces the losses of an uninterrupted one exactly;
# a corrupt or mismatched checkpoint is refused with a clear message.
. "$(dirname "$0")/common.sh"
run 2 --mode sync --epochs 2 --out "$TMP/full.json" || { cat "$TMP/out"; fail "uninterrupted run"; }
run 2 --mode sync --epochs 1 --ckpt-dir "$TMP/ck" --out "$TMP/a.json" || { cat "$TMP/out"; fail "first half"; }
[ -f "$TMP/ck/latest.ckpt" ] || fail "no checkpoint written"
run 2 --mode sync --epochs 2 --ckpt-dir "$TMP/ck" --resume --out "$TMP/b.json" || { cat "$TMP/out"; fail "resumed run"; }
fl=$(jq -c '[.epochs[] | [.train_loss, .weights_hash]]' "$TMP/full.json")
rl=$(jq -c -s '[.[].epochs[] | [.train_loss, .weights_hash]]' "$TMP/a.json" "$TMP/b.json")
echo "uninterrupted: $fl"; echo "resumed:       $rl"
[ "$fl" = "$rl" ] || fail "resumed losses differ"
# corrupt: truncated file
head -c 1000 "$TMP/ck/latest.ckpt" > "$TMP/ck/x" && mv "$TMP/ck/x" "$TMP/ck/latest.ckpt"
if run 2 --mode sync --epochs 2 --ckpt-dir "$TMP/ck" --resume; then fail "truncated checkpoint accepted"; fi
grep -q "latest.ckpt" "$TMP/out" || { cat "$TMP/out"; fail "message does not name the checkpoint file"; }
echo "ok: truncated -> $(grep -m1 latest.ckpt "$TMP/out")"
# mismatched: another model
run 2 --mode sync --epochs 1 --ckpt-dir "$TMP/ck2" --out "$TMP/c.json" || fail "ckpt2"
if run 2 --mode sync --epochs 2 --ckpt-dir "$TMP/ck2" --resume --model "resnet-fmnist width=8"; then
  fail "mismatched checkpoint accepted"; fi
grep -q "model mismatch\|latest.ckpt" "$TMP/out" || { cat "$TMP/out"; fail "no mismatch message"; }
echo "ok: mismatch -> $(grep -m1 'ckpt' "$TMP/out")"
