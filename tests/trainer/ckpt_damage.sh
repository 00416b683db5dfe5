#!/bin/bash
# Damaged checkpoints are refused before any of it is used: a flipped bit anywhere (the epoch
# field, a weight) fails the whole-file checksum; values written with a valid checksum but out of
# range (epoch 1e6, NaN BN variance, a 5e37 weight) fail the range checks. Each message names the
# file and the field, and every rank exits non-zero. Leftover .NAME.tmp files of an interrupted
# checkpoint write are removed at the next start, with one line saying so.
. "$(dirname "$0")/common.sh"
EDIT="$B/tests/trainer/ckpt_edit"
[ -x "$EDIT" ] || fail "$EDIT not built (make)"
run 2 --mode sync --epochs 1 --ckpt-dir "$TMP/ck" --out "$TMP/a.json" || { cat "$TMP/out"; fail "first run"; }
# refused NAME WANT EDIT...: a copy of the checkpoint ($SRC, default the first run's) damaged by
# EDIT (none: as it is) must be refused (resumed with $ARGS too), the message naming the file and
# matching WANT. Each refusal runs as a case beside the others (common.sh case_bg: each waits for
# mpirun's kill sequence after the first rank's exit), in its own folder.
CK=$TMP/ck/latest.ckpt
refused() {
  name=$1 want=$2; shift 2
  mkdir -p "$TMP/$name" && cp "${SRC:-$CK}" "$TMP/$name/latest.ckpt"
  [ $# = 0 ] || $EDIT "$TMP/$name/latest.ckpt" "$@" || fail "$name: could not edit the checkpoint"
  if run 2 --mode sync --epochs 2 ${ARGS:-} --ckpt-dir "$TMP/$name" --resume --out "$TMP/$name.json"; then
    cat "$TMP/out"; fail "$name: damaged checkpoint accepted (exit 0)"; fi
  line=$(grep -m1 "$name/latest.ckpt" "$TMP/out") || { cat "$TMP/out"; fail "$name: no message naming the file"; }
  echo "$line" | grep -q -- "$want" || fail "$name: message does not say '$want': $line"
  echo "ok: $name -> $line"
}
r() { case_bg "$1" refused "$@"; }
r flip_epoch checksum flip trainer.meta 1 31
r flip_weight checksum flip param.conv1.weight 7 20
r epoch_1e6 "field 'epoch'" epoch 1000000
r bn_var_nan "bn.bn1.var" set bn.bn1.var 0 nan
r weight_5e37 "param.conv1.weight" set param.conv1.weight 3 5e37
# the epoch in progress of a mid-epoch checkpoint (trainer.meta words 19.., checkpoint.c): its
# position against the data and --batch, its counts against each other; at an epoch's end all 0
r end_part "'pos' is 0" word 21 3
# format 1 (earlier trainers: no checksum) is still read, with one line saying what it lacks; the
# temporary files of interrupted writes go at the start, with one line, and other files stay
format1() {
  mkdir -p "$TMP/v1" && cp "$1" "$TMP/v1/latest.ckpt"
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
}
# format 2 (no mid-epoch position) is still read: the same model as format 1's resume
format2() {
  mkdir -p "$TMP/v2" && cp "$1" "$TMP/v2/latest.ckpt"
  $EDIT "$TMP/v2/latest.ckpt" format2 || fail "could not rewrite the checkpoint as format 2"
  run 2 --mode sync --epochs 2 --ckpt-dir "$TMP/v2" --resume --out "$TMP/v2.json" || { cat "$TMP/out"; fail "format-2 checkpoint refused"; }
}
case_bg format1 format1 "$CK"
case_bg format2 format2 "$CK"
run 2 --mode sync --epochs 1 --limit-train 512 --ckpt-every-steps 3 --ckpt-dir "$TMP/mid" || { cat "$TMP/out"; fail "mid-epoch run"; }
SRC=$TMP/mid/ckpt-0000-00000006.ckpt
SRC=$SRC r mid_pos "not batches of --batch 32" word 19 200
SRC=$SRC r mid_beyond "field 'pos' = 100000 is beyond" word 19 100000
SRC=$SRC r mid_counts "inconsistent" word 27 5
SRC=$SRC ARGS="--batch 16" r mid_batch "resume mid-epoch with the --batch that wrote it"
cases_wait
h1=$(jq -r '.epochs[0].weights_hash' "$TMP/format1/v1.json") h2=$(jq -r '.epochs[-1] | "\(.epoch) \(.weights_hash)"' "$TMP/format2/v2.json")
[ "$h2" = "2 $h1" ] || fail "format-2 resume: epoch and weights hash '$h2', format 1's: 2 $h1"
echo "ok: format 2 -> epoch 2, weights hash $h1 as from format 1"
