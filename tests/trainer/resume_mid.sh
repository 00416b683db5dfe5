#!/bin/bash
# Mid-epoch checkpoints (--ckpt-every-steps): a run resumed from one continues the epoch where it
# stopped. On the world size that wrote it, sync's resumed epoch equals the uninterrupted run's
# exactly (train loss, weights hash): global epochs deal from the same batch cursor on, shard epochs
# continue every rank's shard. On another world size (3 ranks from a 2-rank checkpoint) the rest of
# the epoch is re-sharded: the epoch still adds up to the checkpoint's batches plus the rest's.
# Every resume's entry in the run file's restarts says where it resumed (batches_done, samples_done:
# the mid-epoch checkpoint's 6 batches and 192 samples, 0 at an epoch's end), kept across a chain
# of resumes; checkpoints of formats 3 and 2 (ckpt_edit) still load, their restarts' position null
# (format 3: not recorded) or 0 (format 2: only epoch ends); a damaged position is refused.
. "$(dirname "$0")/common.sh"
EDIT="$B/tests/trainer/ckpt_edit"
[ -x "$EDIT" ] || fail "$EDIT not built (make)"
# restarts FILE WANT: the run file's restarts as [epoch, ranks_before, ranks_after, batches_done,
# samples_done] must be WANT, and the file must validate against the schema
restarts() {
  local got; got=$(jq -c '[.restarts[] | [.epoch, .ranks_before, .ranks_after, .batches_done, .samples_done]]' "$1")
  [ "$got" = "$2" ] || fail "$1: restarts $got, want $2"
  "$B/bin/pcoll-validate" results/schema/run.schema.json "$1" >/dev/null || fail "$1 does not validate"
  echo "ok: $(basename "$1") restarts [epoch, before, after, batches_done, samples_done] $got"
}
a=(--mode sync --epochs 2 --limit-train 512 --ckpt-every-steps 3)
q='[.epochs[] | select(.epoch == 2) | [.train_loss, .train_top1, .test_loss, .weights_hash, .steps, .samples]]'
for em in global shard; do
  run 2 "${a[@]}" --epoch-mode $em --ckpt-dir "$TMP/$em" --out "$TMP/$em.json" || { cat "$TMP/out"; fail "$em: uninterrupted run"; }
  # 512 samples, batch 32: 16 batches per epoch; every 3 steps of 2 ranks: after 6 and 12 batches
  ck="$TMP/$em/ckpt-0001-00000006.ckpt"
  [ -f "$ck" ] || fail "$em: no mid-epoch checkpoint $ck: $(ls "$TMP/$em")"
  mkdir -p "$TMP/$em-2" && cp "$ck" "$TMP/$em-2/latest.ckpt"
  run 2 "${a[@]}" --epoch-mode $em --ckpt-dir "$TMP/$em-2" --resume --out "$TMP/$em-2.json" || { cat "$TMP/out"; fail "$em: resumed run"; }
  grep -q "epoch 2 continues after 6 of its batches (192 samples of its permutation), on 2 ranks" "$TMP/out" \
    || { cat "$TMP/out"; fail "$em: no line saying where epoch 2 continues"; }
  u=$(jq -c "$q" "$TMP/$em.json"); r=$(jq -c "$q" "$TMP/$em-2.json")
  echo "$em: uninterrupted epoch 2: $u"; echo "$em: resumed at batch 6:    $r"
  [ "$u" = "$r" ] || fail "$em: the resumed epoch differs from the uninterrupted one"
  # the batch count of the checkpoint's name and of the line above
  restarts "$TMP/$em-2.json" '[[1,2,2,6,192]]'
done
# a second resume of the global run, from its epoch-2 end: position 0, the first one's kept
run 2 "${a[@]}" --epochs 3 --ckpt-dir "$TMP/global-2" --resume --out "$TMP/g3.json" || { cat "$TMP/out"; fail "resume at an epoch end"; }
restarts "$TMP/g3.json" '[[1,2,2,6,192],[2,2,2,0,0]]'
# the same checkpoint as format 3 (restarts without a position) and format 2 (epoch ends only)
for v in 3 2; do
  mkdir -p "$TMP/v$v" && cp "$TMP/global-2/ckpt-0002.ckpt" "$TMP/v$v/latest.ckpt"
  $EDIT "$TMP/v$v/latest.ckpt" format$v || fail "could not rewrite the checkpoint as format $v"
  run 2 "${a[@]}" --epochs 3 --ckpt-dir "$TMP/v$v" --resume --out "$TMP/v$v.json" || { cat "$TMP/out"; fail "format-$v checkpoint refused"; }
done
restarts "$TMP/v3.json" '[[1,2,2,null,null],[2,2,2,0,0]]'
restarts "$TMP/v2.json" '[[1,2,2,0,0],[2,2,2,0,0]]'
# a position out of range (more batches than samples) is refused, naming the file and the field
mkdir -p "$TMP/bad" && cp "$TMP/global-2/ckpt-0002.ckpt" "$TMP/bad/latest.ckpt"
$EDIT "$TMP/bad/latest.ckpt" rword 0 5 500 || fail "could not edit restart 0"
if run 2 "${a[@]}" --epochs 3 --ckpt-dir "$TMP/bad" --resume; then cat "$TMP/out"; fail "a damaged restart position accepted"; fi
line=$(grep -m1 "bad/latest.ckpt" "$TMP/out") || { cat "$TMP/out"; fail "no message naming the file"; }
echo "$line" | grep -q "restart 0: field 'batches_done' = 500" || fail "message does not name the field: $line"
echo "ok: damaged restart position -> $line"
# 3 ranks from the 2-rank shard checkpoint: the rest, 320 samples, is 3 shards of 106 = 3 steps each
mkdir -p "$TMP/s3" && cp "$TMP/shard/ckpt-0001-00000006.ckpt" "$TMP/s3/latest.ckpt"
run 3 "${a[@]}" --ckpt-dir "$TMP/s3" --resume --out "$TMP/s3.json" || { cat "$TMP/out"; fail "3 ranks: resumed run"; }
jq -e '.epochs | length == 1 and .[0].epoch == 2 and .[0].steps == 15 and .[0].samples == 480' "$TMP/s3.json" >/dev/null \
  || fail "3 ranks: epoch 2 is not 6 + 3 x 3 batches: $(jq -c '.epochs[] | [.epoch, .steps, .samples]' "$TMP/s3.json")"
echo "3 ranks from the 2-rank checkpoint: $(jq -c '.epochs[] | [.epoch, .steps, .samples, .train_loss]' "$TMP/s3.json")"
restarts "$TMP/s3.json" '[[1,2,3,6,192]]'
echo PASS
