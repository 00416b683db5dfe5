#!/bin/bash
# --grad-stats FILE: rank 0's CSV of the applied results' statistics. (a) It leaves the training
# as it is (same weights hashes as without it); one line per round applied, in order (the round
# counts within its epoch: one libpcoll handle per epoch), the
# header's ten columns, |u|^2 > 0, no inner product before there is a previous result, and
# Cauchy-Schwarz on every one that there is (|<u, u'>| <= |u| |u'|); two runs write the same
# file. (b) Solo rounds are named and counted the same way. (c) A file it cannot write is an
# error naming it, with a non-zero exit.
. "$(dirname "$0")/common.sh"
hashes() { jq -r '[.epochs[].weights_hash] | join(" ")' "$1"; }
# check CSV RUNJSON: the structure and the bounds above against the run file's rounds
check() {
  local csv=$1 json=$2 rounds
  rounds=$(jq '[.epochs[].rounds] | add' "$json")
  [ "$(head -1 "$csv")" = "round,epoch,mode,fresh,lr,sq,dot1,dot2,dot3,dot4" ] || fail "$csv: header $(head -1 "$csv")"
  [ "$(($(wc -l < "$csv") - 1))" = "$rounds" ] || fail "$csv: $(($(wc -l < "$csv") - 1)) lines, $rounds rounds applied"
  awk -F, 'BEGIN { le = 0; last = -1 } NR == 1 { next }
    NF != 10 { print "line " NR ": " NF " fields"; bad = 1 }
    { k = NR - 2
      if ($2 + 0 < le || ($2 + 0 == le && $1 + 0 <= last)) { print "line " NR ": epoch " $2 " round " $1 " after epoch " le " round " last; bad = 1 }
      le = $2 + 0; last = $1 + 0
      if (!($6 > 0)) { print "line " NR ": |u|^2 = " $6; bad = 1 }
      for (s = 1; s <= 4; s++) {
        v = $(6 + s)
        if (s > k) { if (v != "") { print "line " NR ": an inner product with no round " s " before"; bad = 1 } continue }
        if (v == "") { print "line " NR ": missing <u, u-" s ">"; bad = 1; continue }
        if (v * v > sq[k - s] * $6 * (1 + 1e-5)) { print "line " NR ": |<u, u-" s ">| " v " > |u| |u-" s "|"; bad = 1 }
      }
      sq[k] = $6 }
    END { exit bad }' "$csv" || fail "$csv: see above"
}

# (a) sync, 2 ranks, 1024 samples of 32: 32 rounds per epoch
args=(--mode sync --seed 1 --limit-train 1024 --limit-test 256 --epochs 2 --threads 1)
run 2 "${args[@]}" --out "$TMP/plain.json" || { cat "$TMP/out"; fail "sync run"; }
run 2 "${args[@]}" --grad-stats "$TMP/a.csv" --out "$TMP/a.json" || { cat "$TMP/out"; fail "sync run with --grad-stats"; }
hp=$(hashes "$TMP/plain.json"); ha=$(hashes "$TMP/a.json")
[ -n "$hp" ] && [ "$hp" = "$ha" ] || fail "--grad-stats changed the training: $hp vs $ha"
check "$TMP/a.csv" "$TMP/a.json"
awk -F, 'NR > 1 && ($3 != "sync" || $4 != 2) { exit 1 }' "$TMP/a.csv" || fail "sync rounds not named sync with 2 fresh ranks"
run 2 "${args[@]}" --grad-stats "$TMP/b.csv" --out "$TMP/b.json" || { cat "$TMP/out"; fail "second run"; }
cmp -s "$TMP/a.csv" "$TMP/b.csv" || fail "two runs of one seed wrote different statistics"
sed -n '2,4p' "$TMP/a.csv"

# (b) solo under skew
run 2 --mode solo --epochs 1 --limit-train 1024 --imbalance linear:unit=10 --grad-stats "$TMP/s.csv" \
  --out "$TMP/s.json" || { cat "$TMP/out"; fail "solo with --grad-stats"; }
check "$TMP/s.csv" "$TMP/s.json"
awk -F, 'NR > 1 && $3 != "solo" { exit 1 }' "$TMP/s.csv" || fail "solo rounds not named solo"

# (c) a file it cannot write
run 2 "${args[@]}" --epochs 1 --grad-stats "$TMP/no/such/dir/g.csv" --out "$TMP/c.json" && fail "an unwritable --grad-stats file was accepted"
grep -q "no/such/dir/g.csv" "$TMP/out" || { cat "$TMP/out"; fail "the error does not name the file"; }
echo "PASS"
