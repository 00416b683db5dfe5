#!/bin/bash
# Damaged checkpoints are refused before any of it is used: a flipped bit anywhere (the epoch
# field, a weight) fails the whole-file checksum; values written with a valid checksum but out of
# range (epoch 1e6, NaN BN variance, a 5e37 weight) fail the range checks. Each message names the
# file and the field, and every rank exits non-zero. Leftover .NAME.tmp files of an interrupted
# checkpoint write are removed at the next start, with one line saying so.
. "$(dirname "$0")/common.sh"
EDIT="$B/tests/ckpt_edit"
[ -x "$EDIT" ] || fail "$EDIT not built (make)"
run 2 --mode sync --epochs 1 --ckpt-dir "$TMP/ck" --out "$TMP/a.json" || { cat "$TMP/out"; fail "first run"; }
# refused NAME WANT EDIT...: a copy of the checkpoint damaged by EDIT must be refused, the message
# naming the file and matching WANT
refused() {
  name=$1 want=$2; shift 2
  mkdir -p "$TMP/$name" && cp "$TMP/ck/latest.ckpt" "$TMP/$name/latest.ckpt"
  $EDIT "$TMP/$name/latest.ckpt" "$@" || fail "$name: could not edit the checkpoint"
  if run 2 --mode sync --epochs 2 --ckpt-dir "$TMP/$name" --resume --out "$TMP/$name.json"; then
    cat "$TMP/out"; fail "$name: damaged checkpoint accepted (exit 0)"; fi
  line=$(grep -m1 "$name/latest.ckpt" "$TMP/out") || { cat "$TMP/out"; fail "$name: no message naming the file"; }
  echo "$line" | grep -q -- "$want" || fail "$name: message does not say '$want': $line"
  echo "ok: $name -> $line"
}
refused flip_epoch checksum flip trainer.meta 1 31
refused flip_weight checksum flip param.conv1.weight 7 20
refused epoch_1e6 "field 'epoch'" epoch 1000000
refused bn_var_nan "bn.bn1.var" set bn.bn1.var 0 nan
refused weight_5e37 "param.conv1.weight" set param.conv1.weight 3 5e37
# format 1 (earlier trainers: no checksum) is still read, with one line saying what it lacks; the
# temporary files of interrupted writes go at the start, with one line, and other files stay
mkdir -p "$TMP/v1" && cp "$TMP/ck/latest.ckpt" "$TMP/v1/latest.ckpt"
$EDIT "$TMP/v1/latest.ckpt" format1 || fail "could not rewrite the checkpoint as format 1"
touch "$TMP/v1/.latest.ckpt.tmp" "$TMP/v1/.ckpt-0002.ckpt.tmp" "$TMP/v1/notes.tmp"
run 2 --mode sync --epochs 2 --ckpt-dir "$TMP/v1" --resume --out "$TMP/v1.json" || { cat "$TMP/out"; fail "format-1 checkpoint refused"; }
grep -q "format-1 checkpoint" "$TMP/out" || { cat "$TMP/out"; fail "no line saying the checkpoint is format 1"; }
jq -e '.epochs | length == 1 and .[0].epoch == 2' "$TMP/v1.json" >/dev/null || fail "format-1 resume did not train epoch 2"
echo "ok: format 1 -> $(grep -m1 'format-1' "$TMP/out")"
left=$(ls -A "$TMP/v1" | grep '^\..*\.tmp$')
[ -z "$left" ] || fail "leftover temporary files not removed: $left"
[ -f "$TMP/v1/notes.tmp" ] || fail "a file the trainer did not write was removed"
grep -q "removed 2 temporary files" "$TMP/out" || { cat "$TMP/out"; fail "no line saying the temporary files were removed"; }
echo "ok: $(grep -m1 'removed 2 temporary' "$TMP/out")"
