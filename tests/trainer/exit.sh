#!/bin/bash
# How a run ends, in its JSON. A finished run writes --out atomically (summary.exit "ok") and
# leaves no partial file. A run stopped by an error all ranks see (here: after epoch 1 the
# checkpoint folder cannot be created, its parent is a file) exits non-zero, leaves the earlier
# complete --out as it was, and says why in OUT.partial.json (schema-valid, exit naming the cause).
# A run killed with SIGKILL after an epoch leaves --out as it was and a schema-valid partial file
# whose exit is "running".
. "$(dirname "$0")/common.sh"
args=(--mode sync --limit-train 512 --limit-test 256 --threads 1)
validate() { [ -x "$B/bin/pcoll-validate" ] || return 0; "$B/bin/pcoll-validate" results/schema/run.schema.json "$1"; }
out=$TMP/run.json part=$TMP/run.partial.json
run 2 "${args[@]}" --epochs 1 --out "$out" || { cat "$TMP/out"; fail "finished run"; }
jq -e '.summary.exit == "ok"' "$out" >/dev/null || fail "finished run: exit $(jq '.summary.exit' "$out")"
[ ! -e "$part" ] || fail "the finished run left $part"
validate "$out" || fail "the finished run's JSON is not schema-valid"
cp "$out" "$TMP/kept.json"

touch "$TMP/file"
if run 2 "${args[@]}" --epochs 2 --ckpt-every 1 --ckpt-dir "$TMP/file/ck" --out "$out"; then
  cat "$TMP/out"; fail "a run whose checkpoint failed exited 0"; fi
grep -q "checkpoint" "$TMP/out" || { cat "$TMP/out"; fail "no message naming the checkpoint"; }
cmp -s "$out" "$TMP/kept.json" || fail "the stopped run changed the earlier complete $out"
ex=$(jq -r '.summary.exit // "no summary"' "$part")
echo "stopped run: $part exit \"$ex\", epochs $(jq -c '[.summary.epochs, (.epochs | length)]' "$part")"
case $ex in *checkpoint*"$TMP/file/ck"*) ;; *) fail "summary.exit does not name the checkpoint failure: $ex";; esac
jq -e '.summary.epochs == 1 and (.epochs | length) == 1' "$part" >/dev/null || fail "summary.epochs is not the epochs completed"
validate "$part" || fail "the stopped run's partial JSON is not schema-valid"
rm "$part"

# killed: every rank gets SIGKILL once the partial file holds an epoch
timeout 240 $MPIRUN -np 2 bash -c 'echo $$ > "$0.'"$PCOLL_RANK_ENV"'"; exec "$@"' "$TMP/pid" \
  "$TRAIN" --experiment fmnist --batch 32 --quiet "${args[@]}" --epochs 1000 --out "$out" > "$TMP/out" 2>&1 &
job=$!
for _ in $(seq 1200); do
  jq -e '(.epochs | length) >= 1' "$part" >/dev/null 2>&1 && break
  kill -0 $job 2>/dev/null || break
  sleep 0.1
done
kill -9 "$(cat "$TMP/pid.0")" "$(cat "$TMP/pid.1")" || fail "no rank to kill (the run ended early?)"
wait $job && fail "mpirun exited 0 after its ranks were killed"
cmp -s "$out" "$TMP/kept.json" || fail "the killed run changed the earlier complete $out"
ex=$(jq -r '.summary.exit // "no summary"' "$part")
echo "killed run: $part exit \"$ex\", epochs $(jq -c '[.summary.epochs, (.epochs | length)]' "$part")"
[ "$ex" = running ] || fail "the killed run's partial file says exit \"$ex\", not \"running\""
validate "$part" || fail "the killed run's partial JSON is not schema-valid"
echo "ok: finished -> --out, exit \"ok\"; stopped -> --out kept, partial names the cause; killed -> --out kept, partial \"running\""
