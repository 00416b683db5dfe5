#!/bin/bash
# summary.exit says how a run ended: "ok" for a run that finished; a run stopped by an error all
# ranks see (here: after epoch 1 the checkpoint folder cannot be created, its parent is a file)
# exits non-zero and still closes its JSON with a schema-valid summary whose exit names the cause.
. "$(dirname "$0")/common.sh"
args=(--mode sync --limit-train 512 --limit-test 256 --threads 1)
validate() { [ -x "$B/bin/pcoll-validate" ] || return 0; "$B/bin/pcoll-validate" results/schema/run.schema.json "$1"; }
run 2 "${args[@]}" --epochs 1 --out "$TMP/ok.json" || { cat "$TMP/out"; fail "finished run"; }
jq -e '.summary.exit == "ok"' "$TMP/ok.json" >/dev/null || fail "finished run: exit $(jq '.summary.exit' "$TMP/ok.json")"
touch "$TMP/file"
if run 2 "${args[@]}" --epochs 2 --ckpt-every 1 --ckpt-dir "$TMP/file/ck" --out "$TMP/bad.json"; then
  cat "$TMP/out"; fail "a run whose checkpoint failed exited 0"; fi
grep -q "checkpoint" "$TMP/out" || { cat "$TMP/out"; fail "no message naming the checkpoint"; }
ex=$(jq -r '.summary.exit // "no summary"' "$TMP/bad.json")
echo "stopped run: exit \"$ex\", epochs $(jq -c '[.summary.epochs, (.epochs | length)]' "$TMP/bad.json")"
case $ex in *checkpoint*"$TMP/file/ck"*) ;; *) fail "summary.exit does not name the checkpoint failure: $ex";; esac
jq -e '.summary.epochs == 1 and (.epochs | length) == 1' "$TMP/bad.json" >/dev/null || fail "summary.epochs is not the epochs completed"
validate "$TMP/bad.json" || fail "the stopped run's JSON is not schema-valid"
echo "ok: finished -> \"ok\"; stopped -> the cause"
