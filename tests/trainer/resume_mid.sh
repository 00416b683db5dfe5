#!/bin/bash
# Mid-epoch checkpoints (--ckpt-every-steps): a run resumed from one continues the epoch where it
# stopped. On the world size that wrote it, sync's resumed epoch equals the uninterrupted run's
# exactly (train loss, weights hash): global epochs deal from the same batch cursor on, shard epochs
# continue every rank's shard. On another world size (3 ranks from a 2-rank checkpoint) the rest of
# the epoch is re-sharded: the epoch still adds up to the checkpoint's batches plus the rest's.
. "$(dirname "$0")/common.sh"
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
done
# 3 ranks from the 2-rank shard checkpoint: the rest, 320 samples, is 3 shards of 106 = 3 steps each
mkdir -p "$TMP/s3" && cp "$TMP/shard/ckpt-0001-00000006.ckpt" "$TMP/s3/latest.ckpt"
run 3 "${a[@]}" --ckpt-dir "$TMP/s3" --resume --out "$TMP/s3.json" || { cat "$TMP/out"; fail "3 ranks: resumed run"; }
jq -e '.epochs | length == 1 and .[0].epoch == 2 and .[0].steps == 15 and .[0].samples == 480' "$TMP/s3.json" >/dev/null \
  || fail "3 ranks: epoch 2 is not 6 + 3 x 3 batches: $(jq -c '.epochs[] | [.epoch, .steps, .samples]' "$TMP/s3.json")"
echo "3 ranks from the 2-rank checkpoint: $(jq -c '.epochs[] | [.epoch, .steps, .samples, .train_loss]' "$TMP/s3.json")"
echo PASS
