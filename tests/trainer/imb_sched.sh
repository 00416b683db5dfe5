#!/bin/bash
# An --imbalance schedule (collectives/sim/imbalance.c) end to end: a short run whose phases switch
# within the run (steps, and epochs resolved by the trainer) finishes, its JSON keeps the spec as
# given and validates; a phase that names a rank the run lacks, and a phase without @, are refused
# naming the part that is wrong.
. "$(dirname "$0")/common.sh"
# 2048 samples, 2 ranks, batch 32: 32 steps a rank per epoch
for spec in 'none@0/linear:unit=5@8/slow:rank=1,factor=2,busy=1@20/none@40' \
  'random:k=1,d=5@0ep/none@0.5ep/lognormal:mean=3,std=1@1.25ep'; do
  run 2 --mode sync --epochs 2 --imbalance "$spec" --out "$TMP/run.json" ||
    { cat "$TMP/out"; fail "run with --imbalance '$spec' failed"; }
  got=$(jq -r '.config.imbalance' "$TMP/run.json")
  [ "$got" = "$spec" ] || fail "the run file's config.imbalance is '$got', not the spec as given '$spec'"
  "$B/bin/pcoll-validate" results/schema/run.schema.json "$TMP/run.json" >"$TMP/v" 2>&1 || { cat "$TMP/v"; fail "the run file does not validate"; }
  echo "ok: --imbalance '$spec' ran, recorded as given"
done
for bad in 'none@0/slow:rank=5,factor=2@4|rank 5 does not exist' 'none@0/linear:unit=5|phase 2 '"'"'linear:unit=5'"'"' has no @START' \
  'none@0/linear:unit=5@8/none@8|phase 3 '"'"'none@8'"'"' starts at 8' 'none@0ep/linear:unit=5@1.01ep/none@1.02ep|start on the same step'; do
  spec=${bad%%|*} pat=${bad#*|}
  run 2 --mode sync --epochs 1 --imbalance "$spec" --out "$TMP/bad.json" && fail "--imbalance '$spec' was accepted"
  grep -q -- "$pat" "$TMP/out" || { cat "$TMP/out"; fail "--imbalance '$spec': no message matching '$pat'"; }
  echo "ok: --imbalance '$spec' refused: $(grep -m1 -- "$pat" "$TMP/out")"
done
echo PASS
