#!/bin/bash
# tests/results/check.sh CASE: the results/ tests (listed in tests/results.tests).
# Needs $B (build dir). Exit 0 pass, 1 fail, 77 skip (one line saying why).
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
V=$B/bin/pcoll-validate
C=$B/bin/pcoll-compare
S=results/schema/run.schema.json
D=tests/results
TMP=$(mktemp -d "${TMPDIR:-/tmp}/res_test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# has FILE LINE: FILE contains LINE exactly (whole line)
has() { grep -qxF -- "$2" "$1" || { fail "missing line: $2"; echo "--- $1:"; cat "$1"; echo "---"; }; }
# contains FILE TEXT: FILE contains TEXT somewhere
contains() { grep -qF -- "$2" "$1" || { fail "missing text: $2"; echo "--- $1:"; cat "$1"; echo "---"; }; }
lacks() { ! grep -qF -- "$2" "$1" || fail "unexpected text: $2"; }
# rc WANT CMD...: runs CMD (stdout+stderr to $TMP/out), checks the exit status
rc() {
  local want=$1; shift
  "$@" >"$TMP/out" 2>&1
  local got=$?
  [ "$got" = "$want" ] || { fail "exit $got (want $want): $*"; cat "$TMP/out"; }
}

# curve_run IN OUT [JQ]: IN with the hand-made accuracy curve below (--curve-every 8), then JQ applied
CURVE='[{"epoch":1,"batches":8,"samples":512,"wall_s":2.5,"test_top1":0.5,"test_loss":1.2},
        {"epoch":2,"batches":16,"samples":1024,"wall_s":7.25,"test_top1":0.805,"test_loss":0.6},
        {"epoch":2,"batches":24,"samples":1536,"wall_s":9.5,"test_top1":0.79,"test_loss":0.6}]'
curve_run() {
  jq --argjson c "$CURVE" ".curve = \$c | .config[\"curve-every\"] = 8 | .config[\"curve-test\"] = 2000 | ${3:-.}" \
    "$1" >"$2"
}

HEAD_C='| mode/policy | ranks | imbalance | n | wall (s) | to target (s) | top-1 (%) | top-5 (%) | Δtop-1 (pts) | speedup | staleness mean | staleness max | max streak | fresh | wait per rank |'

case "${1:-}" in
validate_samples)
  rc 0 "$V" "$S" $D/runs/fmnist_*.json $D/runs/hyperplane_*.json $D/repeat/*.json $D/mismatch/*.json
  for f in $D/runs/fmnist_*.json $D/runs/hyperplane_*.json $D/repeat/*.json $D/mismatch/*.json; do
    has "$TMP/out" "$f: valid"
  done
  ;;
validate_ddp)
  # PyTorch DDP runs (trainer/ref/ddp_mirror.py) have their own schema, the subset compare reads
  rc 0 "$V" results/schema/ddp.schema.json $D/ddp/*.json
  for f in $D/ddp/*.json; do has "$TMP/out" "$f: valid"; done
  jq '.config.mode = "sync" | del(.summary.wall_s)' $D/ddp/fmnist_ddp.json >"$TMP/bad_ddp.json"
  rc 1 "$V" results/schema/ddp.schema.json "$TMP/bad_ddp.json"
  contains "$TMP/out" '$.config.mode: value "sync" is not one of ["ddp"]'
  has "$TMP/out" "$TMP/bad_ddp.json: \$.summary: missing required property \"wall_s\""
  ;;
validate_invalid)
  rc 1 "$V" "$S" $D/invalid/missing_field.json
  has "$TMP/out" "$D/invalid/missing_field.json: \$.summary: missing required property \"wall_s\""
  rc 1 "$V" "$S" $D/invalid/wrong_type.json
  has "$TMP/out" "$D/invalid/wrong_type.json: \$.epochs[3].test_top1: expected number or null, got string"
  rc 1 "$V" "$S" $D/invalid/percent_not_fraction.json
  has "$TMP/out" "$D/invalid/percent_not_fraction.json: \$.epochs[1].test_top1: 85 is above the maximum 1"
  rc 1 "$V" "$S" $D/invalid/extra_and_mode.json
  has "$TMP/out" "$D/invalid/extra_and_mode.json: \$.extra_key: unexpected property (not in the schema)"
  contains "$TMP/out" "$D/invalid/extra_and_mode.json: \$.config.mode: \"eager\" does not match the pattern"
  has "$TMP/out" "$D/invalid/extra_and_mode.json: INVALID (2 errors)"
  # a valid and an invalid file together: 1, and the valid one is still reported valid
  rc 1 "$V" "$S" $D/runs/fmnist_sync.json $D/invalid/wrong_type.json
  has "$TMP/out" "$D/runs/fmnist_sync.json: valid"
  # not JSON at all
  printf '{"schema": ' >"$TMP/trunc.json"
  rc 1 "$V" "$S" "$TMP/trunc.json"
  contains "$TMP/out" "$TMP/trunc.json: not valid JSON"
  ;;
validate_usage)
  rc 2 "$V"
  rc 2 "$V" "$S"
  rc 2 "$V" "$S" "$TMP/does-not-exist.json"
  contains "$TMP/out" "$TMP/does-not-exist.json: cannot read"
  rc 2 "$V" "$TMP/no-schema.json" $D/runs/fmnist_sync.json
  echo '{"type": "object", "properties": {"a": {"oneOf": []}, "b": {"$ref": "#/definitions/x"}}}' >"$TMP/bad.schema.json"
  rc 2 "$V" "$TMP/bad.schema.json" $D/runs/fmnist_sync.json
  contains "$TMP/out" 'schema error: #.properties.a.oneOf: unsupported keyword "oneOf"'
  contains "$TMP/out" 'schema error: #.properties.b["$ref"]: "#/definitions/x" does not resolve'
  ;;
compare_modes)
  # one setting, four modes: speedup = sync wall / wall; time to target = wall_s of the first epoch
  # with test_top1 >= 0.80 (summary.target_top1)
  rc 0 "$C" $D/runs/fmnist_sync.json $D/runs/fmnist_solo.json $D/runs/fmnist_majority.json $D/runs/fmnist_adaptive.json
  has "$TMP/out" '### fmnist: model=lenet data=fmnist ranks=4 epochs=4 batch=64, target top-1 80.00%'
  has "$TMP/out" "$HEAD_C"
  has "$TMP/out" '| sync | 4 | linear:unit=20 | 1 | 40.0 | 30.0 | 85.00 | 99.00 | +0.00 | 1.00x | 0.00 | 0 | 0 | 1.000 | w=[3.00,2.00,1.00,0.00]s |'
  has "$TMP/out" '| solo | 4 | linear:unit=20 | 1 | 20.0 | 15.0 | 83.00 | 99.00 | -2.00 | 2.00x | 0.75 | 3 | 3 | 0.500 | w=[0.10,0.10,0.20,0.00]s |'
  has "$TMP/out" '| majority | 4 | linear:unit=20 | 1 | 24.0 | 18.0 | 84.00 | 99.00 | -1.00 | 1.67x | 0.25 | 1 | 1 | 0.750 | w=[0.50,0.40,0.30,0.00]s |'
  has "$TMP/out" '| adaptive/streak | 4 | linear:unit=20 | 1 | 22.0 | 11.0 | 86.00 | 99.00 | +1.00 | 1.82x | 0.50 | 2 | 2 | 0.625 | w=[0.30,0.20,0.10,0.00]s |'
  lacks "$TMP/out" 'note:'
  # rows in the order sync, solo, majority, adaptive whatever the argument order
  rc 0 "$C" $D/runs/fmnist_adaptive.json $D/runs/fmnist_solo.json $D/runs/fmnist_majority.json $D/runs/fmnist_sync.json
  grep '^| [a-z]' "$TMP/out" | cut -d'|' -f2 | tr -d ' ' | tr '\n' ' ' >"$TMP/order"
  [ "$(cat "$TMP/order")" = "mode/policy sync solo majority adaptive/streak " ] || fail "row order: $(cat "$TMP/order")"
  # --target overrides summary.target_top1 (0.85 or 85): solo never reaches it
  rc 0 "$C" --target 85 $D/runs/fmnist_sync.json $D/runs/fmnist_solo.json $D/runs/fmnist_adaptive.json
  has "$TMP/out" '### fmnist: model=lenet data=fmnist ranks=4 epochs=4 batch=64, target top-1 85.00%'
  contains "$TMP/out" '| sync | 4 | linear:unit=20 | 1 | 40.0 | 40.0 | 85.00 |'
  contains "$TMP/out" '| solo | 4 | linear:unit=20 | 1 | 20.0 | - | 83.00 |'
  contains "$TMP/out" '| adaptive/streak | 4 | linear:unit=20 | 1 | 22.0 | 22.0 | 86.00 |'
  # no sync run: speedup and delta are '-'
  rc 0 "$C" $D/runs/fmnist_solo.json
  contains "$TMP/out" '| solo | 4 | linear:unit=20 | 1 | 20.0 | 15.0 | 83.00 | 99.00 | - | - |'
  contains "$TMP/out" "no sync run of the same setting"
  ;;
compare_repeats)
  rc 0 "$C" $D/runs/fmnist_sync.json $D/runs/fmnist_solo.json $D/repeat/fmnist_solo_seed2.json
  # solo: walls 20 and 22 -> 21.0 +- 1.4 (sample std); speedup 40/21; targets at 15 and 16.5
  # only seed 1 has a sync run: one pair, -2 points
  has "$TMP/out" '| solo | 4 | linear:unit=20 | 2 | 21.0 ± 1.4 | 15.8 ± 1.1 | 84.00 ± 1.41 | 99.00 ± 0.00 | -1.00 | -2.00 [1] | 1.00 [1] | 1.90x | 0.50 ± 0.35 | 2.0 ± 1.4 | 4.0 ± 1.4 | 0.500 ± 0.000 | w=[0.20,0.10,0.20,0.00]s |'
  contains "$TMP/out" 'note: rows with n > 1 are repeats of one setting and mode: mean ± sample std'
  # a repeat that does not reach the target is counted
  rc 0 "$C" --target 0.85 $D/runs/fmnist_sync.json $D/runs/fmnist_solo.json $D/repeat/fmnist_solo_seed2.json
  contains "$TMP/out" '| solo | 4 | linear:unit=20 | 2 | 21.0 ± 1.4 | 22.0 (1/2 reached) |'
  ;;
compare_adaptive_label)
  # an adaptive row is named by the options its policy was given: "adaptive" alone, else
  # adaptive/OPTIONS without repeating the mode ("adaptive,staleness=quadratic")
  jq '.controller.policy = "adaptive"' $D/runs/fmnist_adaptive.json >"$TMP/a.json"
  jq '.controller.policy = "adaptive,staleness=quadratic" | .config.seed = 2' $D/runs/fmnist_adaptive.json >"$TMP/b.json"
  rc 0 "$C" $D/runs/fmnist_sync.json "$TMP/a.json" "$TMP/b.json" $D/runs/fmnist_adaptive.json
  contains "$TMP/out" '| adaptive | 4 | linear:unit=20 | 1 | 22.0 |'
  contains "$TMP/out" '| adaptive/staleness=quadratic | 4 | linear:unit=20 | 1 | 22.0 |'
  contains "$TMP/out" '| adaptive/streak | 4 |'
  lacks "$TMP/out" 'adaptive/adaptive'
  ;;
compare_paired)
  # paired Δ: each run minus the sync run of its seed, which may have run under another imbalance
  # (sync is bit-identical under every imbalance). Seed 1: solo 83 - sync 85 = -2; seed 2: solo
  # 85 - sync 86 (run balanced) = -1 -> -1.50 ± 0.50 (standard error) [2 pairs]. The plain Δ
  # compares means under the same imbalance only (84 - 85).
  jq '.config.seed = 2 | .config.imbalance = "none" | .summary.final_test_top1 = 0.86 | .epochs[-1].test_top1 = 0.86' \
    $D/runs/fmnist_sync.json >"$TMP/sync_s2_none.json"
  # an adaptive run with --final-sync 1 and other policy options still pairs with sync seed 1
  jq '.config["final-sync"] = 1 | .config["policy-opts"] = "light_fresh=0.5"' $D/runs/fmnist_adaptive.json >"$TMP/adaptive_fs.json"
  rc 0 "$C" $D/runs/fmnist_sync.json "$TMP/sync_s2_none.json" $D/runs/fmnist_solo.json $D/repeat/fmnist_solo_seed2.json "$TMP/adaptive_fs.json"
  contains "$TMP/out" '| solo [final-sync=(unset)] | 4 | linear:unit=20 | 2 | 21.0 ± 1.4 | 15.8 ± 1.1 | 84.00 ± 1.41 | 99.00 ± 0.00 | -1.00 | -1.50 ± 0.50 [2] | 1.00 ± 0.00 [2] | 1.90x |'
  contains "$TMP/out" '| adaptive/streak [final-sync=1] | 4 | linear:unit=20 | 1 | 22.0 | 11.0 | 86.00 | 99.00 | +1.00 | +1.00 [1] | 0.67 [1] | 1.82x |'
  contains "$TMP/out" '| sync | 4 | none | 1 |'
  contains "$TMP/out" 'note: paired Δ: each run'
  # samples to target / sync's, paired: the adaptive run reaches 80% at its epoch 2 (51,200
  # samples), sync seed 1 at its epoch 3 (76,800): 0.67; a run that never reaches it is no pair
  jq '.epochs[].test_top1 = 0.7 | .summary.final_test_top1 = 0.7' $D/repeat/fmnist_solo_seed2.json >"$TMP/solo_s2_low.json"
  rc 0 "$C" $D/runs/fmnist_sync.json "$TMP/sync_s2_none.json" $D/runs/fmnist_solo.json "$TMP/solo_s2_low.json"
  contains "$TMP/out" '| samples to target / sync'"'"'s |'
  contains "$TMP/out" '| -9.00 ± 7.00 [2] | 1.00 [1] |'
  # --assume: runs written before --final-sync existed count as final-sync=0
  rc 0 "$C" --assume final-sync=0 $D/runs/fmnist_sync.json "$TMP/sync_s2_none.json" $D/runs/fmnist_solo.json "$TMP/adaptive_fs.json"
  contains "$TMP/out" 'note: runs differ in final-sync (0 vs 1)'
  contains "$TMP/out" '| solo [final-sync=0] | 4 | linear:unit=20 | 1 |'
  rc 2 "$C" --assume final-sync $D/runs/fmnist_sync.json
  contains "$TMP/out" '--assume final-sync: want KEY=VALUE'
  "$C" --json "$TMP/p.json" $D/runs/fmnist_sync.json "$TMP/sync_s2_none.json" $D/runs/fmnist_solo.json \
    $D/repeat/fmnist_solo_seed2.json >/dev/null 2>&1 || fail "--json"
  jq -e '.tables[0].rows[] | select(.mode == "solo") | .paired_delta_top1_pts | .n == 2 and (.mean + 1.5 | fabs) < 1e-9' \
    "$TMP/p.json" >/dev/null || fail "paired_delta_top1_pts in --json: $(jq -c '.tables[0].rows[].paired_delta_top1_pts' "$TMP/p.json")"
  jq -e '.tables[0].rows[] | select(.mode == "solo") | .paired_samples_to_target_vs_sync | .n == 2 and (.mean - 1 | fabs) < 1e-9' \
    "$TMP/p.json" >/dev/null || fail "paired_samples_to_target_vs_sync in --json"
  jq -e '[.tables[0].rows[] | select(.mode == "sync") | .samples_to_target.mean] | length == 2 and all(. == 76800)' \
    "$TMP/p.json" >/dev/null || fail "samples_to_target in --json: $(jq -c '.tables[0].rows[].samples_to_target' "$TMP/p.json")"
  "$V" results/schema/compare.schema.json "$TMP/p.json" >/dev/null || fail "compare schema"
  # single runs: the paired Δ where a row has no sync run under its own imbalance (its Δ is '-'):
  # solo seed 2 under linear skew against sync seed 2 run balanced, 85 - 86; not where every row
  # has its own sync (the paired Δ would repeat Δ)
  rc 0 "$C" "$TMP/sync_s2_none.json" $D/repeat/fmnist_solo_seed2.json
  contains "$TMP/out" '| - | -1.00 [1] |'
  contains "$TMP/out" 'note: paired Δ: each run'
  rc 0 "$C" $D/runs/fmnist_sync.json $D/runs/fmnist_solo.json
  grep -q 'paired Δ' "$TMP/out" && fail "paired Δ shown where every row has its own sync run"
  # two sync runs of seed 2 that end in different weights: a broken premise, named, not paired
  jq '.config.imbalance = "linear:unit=20" | .epochs[-1].weights_hash = "0123456789abcdef"' \
    "$TMP/sync_s2_none.json" >"$TMP/sync_s2_lin.json"
  rc 0 "$C" $D/runs/fmnist_sync.json "$TMP/sync_s2_none.json" "$TMP/sync_s2_lin.json" $D/runs/fmnist_solo.json $D/repeat/fmnist_solo_seed2.json
  contains "$TMP/out" 'have seed 2 but end in different weights'
  contains "$TMP/out" '| -2.00 [1] |'
  grep -q 'on different CPUs' "$TMP/out" && fail "CPUs named where the runs record none"
  # ... and where they record their CPUs and those differ, the note names both
  jq '.environment.cpu = "CPU A; avx2 fma"' "$TMP/sync_s2_none.json" >"$TMP/sync_s2_cpua.json"
  jq '.environment.cpu = "CPU B; avx2 fma avx512f"' "$TMP/sync_s2_lin.json" >"$TMP/sync_s2_cpub.json"
  rc 0 "$C" $D/runs/fmnist_sync.json "$TMP/sync_s2_cpua.json" "$TMP/sync_s2_cpub.json" $D/runs/fmnist_solo.json
  contains "$TMP/out" 'on different CPUs (CPU A; avx2 fma / CPU B; avx2 fma avx512f)'
  ;;
compare_mismatch)
  rc 0 "$C" $D/runs/fmnist_sync.json $D/runs/fmnist_solo.json $D/mismatch
  has "$TMP/out" 'note: fmnist: runs differ in batch (64 vs 128); they are not averaged and appear in 2 separate tables'
  has "$TMP/out" 'note: runs differ in lr (0.1 vs 0.05); such runs are not averaged (rows marked [lr=...])'
  has "$TMP/out" '### fmnist: model=lenet data=fmnist ranks=4 epochs=4 batch=128, target top-1 80.00%'
  contains "$TMP/out" '| solo [lr=0.1] | 4 | linear:unit=20 | 1 | 20.0 | 15.0 | 83.00 |'
  contains "$TMP/out" '| solo [lr=0.05] | 4 | linear:unit=20 | 1 | 20.0 | - | 79.00 |'
  contains "$TMP/out" '| sync | 4 | linear:unit=20 | 1 | 32.0 | 24.0 | 84.00 |'
  # differences in seeds and output paths are not mismatches
  lacks "$TMP/out" 'differ in seed'
  lacks "$TMP/out" 'differ in out'
  # --ignore lr: the two solo runs become repeats
  rc 0 "$C" --ignore lr $D/runs/fmnist_sync.json $D/runs/fmnist_solo.json $D/mismatch/fmnist_solo_lr05.json
  contains "$TMP/out" '| solo | 4 | linear:unit=20 | 2 | 20.0 ± 0.0 |'
  lacks "$TMP/out" 'differ in lr'
  ;;
compare_ddp)
  # DDP rows: "time vs DDP" = this wall / the DDP row's of the same imbalance (sync 40/36, solo
  # 20/36), "to target vs DDP" likewise (sync 30/27, solo 15/27); DDP's own speedup vs sync 40/36;
  # the DDP row comes first; keys eager-train has and DDP lacks (tau, div, policy-opts, eval-every,
  # quiet) split nothing; DDP without imbalance has no sync row of its own, so the paired columns
  # show (DDP's seed-1 run against sync seed 1 under linear skew: +0.00)
  rc 0 "$C" $D/runs/fmnist_sync.json $D/runs/fmnist_solo.json $D/ddp
  has "$TMP/out" '| mode/policy | ranks | imbalance | n | wall (s) | to target (s) | top-1 (%) | top-5 (%) | Δtop-1 (pts) | paired Δ (pts) | samples to target / sync'"'"'s | speedup | time vs DDP | to target vs DDP | staleness mean | staleness max | max streak | fresh | wait per rank |'
  has "$TMP/out" '| pytorch-ddp | 4 | linear:unit=20 | 1 | 36.0 | 27.0 | 85.00 | - | +0.00 | +0.00 [1] | 1.00 [1] | 1.11x | 1.00 | 1.00 | - | - | - | - | - |'
  has "$TMP/out" '| sync | 4 | linear:unit=20 | 1 | 40.0 | 30.0 | 85.00 | 99.00 | +0.00 | - | - | 1.00x | 1.11 | 1.11 | 0.00 | 0 | 0 | 1.000 | w=[3.00,2.00,1.00,0.00]s |'
  has "$TMP/out" '| solo | 4 | linear:unit=20 | 1 | 20.0 | 15.0 | 83.00 | 99.00 | -2.00 | -2.00 [1] | 1.00 [1] | 2.00x | 0.56 | 0.56 | 0.75 | 3 | 3 | 0.500 | w=[0.10,0.10,0.20,0.00]s |'
  has "$TMP/out" '| pytorch-ddp | 4 | none | 1 | 32.0 | 24.0 | 85.00 | - | - | +0.00 [1] | 1.00 [1] | - | 1.00 | 1.00 | - | - | - | - | - |'
  contains "$TMP/out" 'note: vs DDP: this row'
  lacks "$TMP/out" 'runs differ'
  grep '^| [a-z]' "$TMP/out" | cut -d'|' -f2,4 | tr -d ' ' | tr '\n' ' ' >"$TMP/order"
  [ "$(cat "$TMP/order")" = "mode/policy|imbalance pytorch-ddp|none pytorch-ddp|linear:unit=20 sync|linear:unit=20 solo|linear:unit=20 " ] ||
    fail "row order: $(cat "$TMP/order")"
  # a setting DDP ran differently splits its row as any other key would
  jq '.config.lr = 0.05' $D/ddp/fmnist_ddp.json >"$TMP/ddp_lr.json"
  rc 0 "$C" $D/runs/fmnist_sync.json "$TMP/ddp_lr.json"
  contains "$TMP/out" '| pytorch-ddp [lr=0.05] | 4 | linear:unit=20 | 1 | 36.0 |'
  # --json and --csv carry the ratios; the JSON validates
  rc 0 "$C" --json "$TMP/d.json" --csv="$TMP/d.csv" $D/runs/fmnist_sync.json $D/ddp/fmnist_ddp.json
  rc 0 "$V" results/schema/compare.schema.json "$TMP/d.json"
  jq -e '.tables[0].rows[] | select(.mode == "sync") | (.time_vs_ddp - 40/36 | fabs) < 1e-9 and (.time_to_target_vs_ddp - 30/27 | fabs) < 1e-9 and .ddp_baseline == "pytorch-ddp"' \
    "$TMP/d.json" >/dev/null || fail "time_vs_ddp in --json: $(jq -c '.tables[0].rows' "$TMP/d.json")"
  contains "$TMP/d.csv" ',sync,sync,linear:unit=20,,1,40,0,30,0,1,85,0,99,0,0,1,1.111111111,1.111111111,'
  # without DDP runs the table has no DDP columns
  rc 0 "$C" $D/runs/fmnist_sync.json
  lacks "$TMP/out" 'vs DDP'
  ;;
compare_ignore)
  # same_row JQ: the solo sample edited by JQ averages with the original (one row, no note);
  # split_row JQ NOTE: it does not, and the note names the key
  same_row() {
    jq "$1" $D/runs/fmnist_solo.json >"$TMP/solo_edit.json"
    rc 0 "$C" $D/runs/fmnist_solo.json "$TMP/solo_edit.json"
    contains "$TMP/out" '| solo | 4 | linear:unit=20 | 2 | 20.0 ± 0.0 |'
    lacks "$TMP/out" 'runs differ'
  }
  split_row() {
    jq "$1" $D/runs/fmnist_solo.json >"$TMP/solo_edit.json"
    rc 0 "$C" $D/runs/fmnist_solo.json "$TMP/solo_edit.json"
    contains "$TMP/out" "note: runs differ in $2"
  }
  # the keys that never split rows are the trainer's own (output, log, checkpoint, watchdog...);
  # any other key that differs splits rows
  same_row '.config["log-every"] = 50 | .config["ckpt-every"] = 2 | .config["ckpt-dir"] = "/tmp/x" | .config["round-agg"] = 1 | .config["t-abort"] = 99'
  split_row '.config["tag"] = "b"' 'tag ((unset) vs b)'
  # an option added after a run was written counts as the value those runs had (late=wait): a
  # run without it and one with --late wait share a row, --late go splits it
  same_row '.config["late"] = "wait"'
  split_row '.config["late"] = "go"' 'late (wait vs go)'
  ;;
compare_curve)
  # time to target from a run's accuracy curve (--curve-every): the wall time of its first point at
  # or above the target, not the epoch end; a run without a curve (or whose curve stays below the
  # target) keeps the epoch end, and the column head and a note say which was used
  curve_run $D/runs/fmnist_solo.json "$TMP/solo_curve.json"
  rc 0 "$V" $S "$TMP/solo_curve.json"
  rc 0 "$C" $D/runs/fmnist_sync.json "$TMP/solo_curve.json"
  contains "$TMP/out" '| mode/policy | ranks | imbalance | n | wall (s) | to target (curve/epoch, s) |'
  contains "$TMP/out" '| sync | 4 | linear:unit=20 | 1 | 40.0 | 30.0 |'
  contains "$TMP/out" '| solo | 4 | linear:unit=20 | 1 | 20.0 | 7.2 |'
  contains "$TMP/out" 'note: to target (curve/epoch): from the accuracy curve (--curve-every) for 1 of the 2 runs'
  lacks "$TMP/out" 'runs differ' # the curve's options leave the training as it is: same row
  rc 0 "$C" --json "$TMP/t.json" "$TMP/solo_curve.json"
  contains "$TMP/out" '| mode/policy | ranks | imbalance | n | wall (s) | to target (curve, s) |'
  contains "$TMP/out" 'note: to target (curve): the wall time of the first point'
  tr -d ' \n' <"$TMP/t.json" >"$TMP/t.flat"
  contains "$TMP/t.flat" '"time_to_target_s":{"mean":7.25'
  # a curve that never reaches the target: the first epoch end that does (20.0), no curve named
  rc 0 "$C" --target 0.81 "$TMP/solo_curve.json"
  contains "$TMP/out" '| mode/policy | ranks | imbalance | n | wall (s) | to target (s) |'
  contains "$TMP/out" '| solo | 4 | linear:unit=20 | 1 | 20.0 | 20.0 |'
  lacks "$TMP/out" 'to target (curve'
  jq '.curve[0].batches = -1' "$TMP/solo_curve.json" >"$TMP/bad_curve.json"
  rc 1 "$V" $S "$TMP/bad_curve.json"
  contains "$TMP/out" '$.curve[0].batches'
  ;;
compare_hold)
  # --hold: time to target from the first point after which the run stays at or above the target
  # (a snapshot on a test subset can spike above it while the learning rate is high); without it,
  # the first point that reaches it. A curve that ends below the target holds it nowhere: the
  # epoch ends are read the same way.
  curve_run $D/runs/fmnist_solo.json "$TMP/spike.json" \
    '.curve = [.curve[0], .curve[1] + {wall_s: 4.0, samples: 700, test_top1: 0.82}, .curve[1] + {wall_s: 5.0, test_top1: 0.6},
               .curve[1] + {wall_s: 7.25, samples: 1024, test_top1: 0.81}, .curve[2] + {test_top1: 0.83}]'
  rc 0 "$V" $S "$TMP/spike.json"
  rc 0 "$C" --target 0.8 --json "$TMP/first.json" "$TMP/spike.json"
  contains "$TMP/out" '| solo | 4 | linear:unit=20 | 1 | 20.0 | 4.0 |'
  lacks "$TMP/out" 'note: to target (--hold)'
  rc 0 "$C" --target 0.8 --hold --json "$TMP/held.json" "$TMP/spike.json"
  contains "$TMP/out" '| solo | 4 | linear:unit=20 | 1 | 20.0 | 7.2 |'
  contains "$TMP/out" 'note: to target (--hold): from the first point (curve) or epoch end after which'
  tr -d ' \n' <"$TMP/held.json" >"$TMP/held.flat"
  contains "$TMP/held.flat" '"target_held":true'
  contains "$TMP/held.flat" '"samples_to_target":{"mean":1024'
  tr -d ' \n' <"$TMP/first.json" >"$TMP/first.flat"
  contains "$TMP/first.flat" '"samples_to_target":{"mean":700'
  # the curve falls below 0.8 at its end: not held on the curve; the epoch ends decide
  jq '.curve[-1].test_top1 = 0.79' "$TMP/spike.json" >"$TMP/fall.json"
  rc 0 "$C" --target 0.8 --hold "$TMP/fall.json"
  lacks "$TMP/out" 'to target (curve'
  # held on the curve (a test subset) but the whole test set ends below the target: said per run
  lacks "$TMP/out" 'on all of it'
  rc 0 "$C" --target 0.8 --hold "$TMP/spike.json"
  lacks "$TMP/out" 'on all of it'
  jq '.summary.final_test_top1 = 0.79' "$TMP/spike.json" >"$TMP/below.json"
  rc 0 "$C" --target 0.8 --hold "$TMP/below.json"
  contains "$TMP/out" "$TMP/below.json: stays at the target (80.00%) on its curve, evaluated on part of the test set, but ends at 79.00% on all of it"
  ;;
compare_regression)
  rc 0 "$C" $D/runs/hyperplane_sync.json $D/runs/hyperplane_solo.json
  has "$TMP/out" '### hyperplane: model=hyperplane data=hyperplane ranks=2 epochs=3 batch=32 (regression: losses)'
  has "$TMP/out" '| mode/policy | ranks | imbalance | n | wall (s) | train loss | test loss | Δloss | speedup | staleness mean | staleness max | max streak | fresh | wait per rank |'
  has "$TMP/out" '| sync | 2 | none | 1 | 6.0 | 0.025 | 0.0275 | +0 | 1.00x | 0.00 | 0 | 0 | 1.000 | w=[0.10,0.20]s |'
  has "$TMP/out" '| solo | 2 | none | 1 | 3.0 | 0.03 | 0.033 | +0.0055 | 2.00x | 0.50 | 2 | 2 | 0.750 | w=[0.10,0.20]s |'
  ;;
compare_formats)
  rc 0 "$C" --json "$TMP/t.json" --csv=$TMP/t.csv $D/runs/fmnist_sync.json $D/runs/fmnist_solo.json $D/repeat
  rc 0 "$V" results/schema/compare.schema.json "$TMP/t.json"
  contains "$TMP/t.json" '"format": "pcoll-compare/1"'
  tr -d ' \n' <"$TMP/t.json" >"$TMP/t.flat"
  contains "$TMP/t.flat" '"label":"solo","imbalance":"linear:unit=20","n":2,"wall_s":{"mean":21.0,"std":1.41421356237,"n":2}'
  contains "$TMP/t.flat" '"speedup":1.90476190476'
  contains "$TMP/t.flat" '"wait_s":[3.0,2.0,1.0,0.0]'
  has "$TMP/t.csv" 'experiment,data,model,ranks,epochs,batch,target_top1,mode,policy_label,imbalance,extra,n,wall_s,wall_s_std,time_to_target_s,time_to_target_s_std,reached,final_top1_pct,final_top1_pct_std,final_top5_pct,final_top5_pct_std,delta_top1_pts,speedup,time_vs_ddp,time_to_target_vs_ddp,final_train_loss,final_train_loss_std,final_test_loss,final_test_loss_std,delta_loss,mean_staleness,mean_staleness_std,max_staleness,max_streak,fresh_fraction,wait_s,files'
  contains "$TMP/t.csv" 'fmnist,fmnist,lenet,4,4,64,0.8,solo,solo,linear:unit=20,,2,21,1.414213562,15.75,1.060660172,2,'
  # --csv alone prints CSV on stdout
  "$C" --csv $D/runs/fmnist_sync.json 2>/dev/null | head -1 | grep -q '^experiment,data,model' || fail "--csv: no CSV header on stdout"
  ;;
compare_inputs)
  # folders are searched recursively; JSON files that are not runs are skipped with a note
  rc 0 "$C" $D
  contains "$TMP/out" "note: skipping $D/runs/notes.json: not an eager-sgd-run/1 run file"
  contains "$TMP/out" "### allreduce benchmark: $D/bench/collectives.json (P=8, unit 1 ms): mean latency (us)"
  has "$TMP/out" '| sync/linear | 3560.0 | 3563.8 | 4520.0 |'
  contains "$TMP/out" '### hyperplane:'
  # the same file twice (directly and through its folder) counts once
  rc 0 "$C" $D/runs/fmnist_sync.json $D/runs
  contains "$TMP/out" '| sync | 4 | linear:unit=20 | 1 | 40.0 |'
  # nothing to compare: 1; a missing path: 2; bad option: 2
  rc 1 "$C" $D/runs/notes.json
  contains "$TMP/out" 'no eager-sgd-run/1 run files'
  rc 2 "$C" "$TMP/nope.json"
  rc 2 "$C" --bogus $D/runs
  rc 2 "$C"
  ;;
plot)
  if ! command -v gnuplot >/dev/null 2>&1; then
    echo "SKIP: gnuplot not installed (apt-get install -y gnuplot-nox, or 'sh jobs/deps.sh all')"; exit 77
  fi
  rc 0 "$C" --plot "$TMP/fig" $D/runs $D/repeat $D/bench
  for f in fmnist_lenet_fmnist_p4_e4_b64_loss fmnist_lenet_fmnist_p4_e4_b64_top1 \
           hyperplane_hyperplane_hyperplane_p2_e3_b32_loss hyperplane_hyperplane_hyperplane_p2_e3_b32_testloss \
           bench_collectives; do
    [ -s "$TMP/fig/$f.png" ] || { fail "$f.png missing or empty"; continue; }
    [ "$(head -c 4 "$TMP/fig/$f.png" | tail -c 3)" = PNG ] || fail "$f.png is not a PNG"
    [ -s "$TMP/fig/$f.svg" ] && grep -q '<svg' "$TMP/fig/$f.svg" || fail "$f.svg missing or not SVG"
  done
  for f in fmnist_lenet_fmnist_p4_e4_b64 bench_collectives; do
    [ -s "$TMP/fig/$f.dat" ] && [ -s "$TMP/fig/$f.gp" ] || fail "$f.dat/.gp missing"
  done
  # the curve data: solo is the mean of its two repeats epoch by epoch (wall 5.25, top-1 68.5%)
  has "$TMP/fig/fmnist_lenet_fmnist_p4_e4_b64.dat" "0 5.25 0.9 0.99 68.5 99"
  ;;
plot_curve)
  # rows whose runs all carry an accuracy curve: the test figure draws the curve points (repeats
  # averaged point by point up to the shortest curve) from a block after the epoch blocks; the
  # training-loss figure and rows without curves keep their epoch ends
  curve_run $D/runs/fmnist_solo.json "$TMP/solo1.json"
  curve_run $D/repeat/fmnist_solo_seed2.json "$TMP/solo2.json" \
    '.curve |= .[0:2] | .curve[0].wall_s = 3.5 | .curve[0].test_top1 = 0.6 | .curve[1].test_loss = 0.4'
  curve_run $D/runs/hyperplane_solo.json "$TMP/hp_solo.json" '.curve[].test_top1 = null'
  rc 0 "$V" $S "$TMP/solo1.json" "$TMP/solo2.json" "$TMP/hp_solo.json"
  PCOLL_GNUPLOT="$TMP/no-such-gnuplot" rc 0 "$C" --plot "$TMP/fig" $D/runs/fmnist_sync.json \
    "$TMP/solo1.json" "$TMP/solo2.json" $D/runs/hyperplane_sync.json "$TMP/hp_solo.json"
  dat=$TMP/fig/fmnist_lenet_fmnist_p4_e4_b64.dat gp=$TMP/fig/fmnist_lenet_fmnist_p4_e4_b64.gp
  contains "$dat" 'repeats are averaged point by point (same index, up to the shortest curve)'
  has "$dat" '# index 2: accuracy curve of solo imbalance=linear:unit=20 n=2'
  has "$dat" '# point wall_s epoch test_loss test_top1_pct batches samples'
  has "$dat" '0 3 1 1.2 55 8 512'
  has "$dat" '1 7.25 2 0.5 80.5 16 1024'
  lacks "$dat" ' 24 1536'
  has "$dat" "0 5.25 0.9 0.99 68.5 99" # the solo epoch block is still there (training loss)
  contains "$gp" '"fmnist_lenet_fmnist_p4_e4_b64.dat" index 1 using 2:3 with linespoints title "solo n=2"'
  contains "$gp" '"fmnist_lenet_fmnist_p4_e4_b64.dat" index 2 using 2:5 with lines title "solo n=2"'
  contains "$gp" '"fmnist_lenet_fmnist_p4_e4_b64.dat" index 0 using 2:5 with linespoints title "sync"'
  # regression: the test-loss figure draws the curve's test loss; top-1 is NaN
  dat=$TMP/fig/hyperplane_hyperplane_hyperplane_p2_e3_b32.dat gp=$TMP/fig/hyperplane_hyperplane_hyperplane_p2_e3_b32.gp
  has "$dat" '1 7.25 2 0.6 NaN 16 1024'
  contains "$gp" '"hyperplane_hyperplane_hyperplane_p2_e3_b32.dat" index 2 using 2:4 with lines title "solo"'
  # without curves: no curve block, no curve note
  PCOLL_GNUPLOT="$TMP/no-such-gnuplot" rc 0 "$C" --plot "$TMP/fig0" $D/runs/fmnist_sync.json $D/runs/fmnist_solo.json
  lacks "$TMP/fig0/fmnist_lenet_fmnist_p4_e4_b64.dat" 'curve'
  ;;
plot_no_gnuplot)
  # without gnuplot: data + script are written, a note says so, exit 0
  PCOLL_GNUPLOT="$TMP/no-such-gnuplot" rc 0 "$C" --plot "$TMP/fig" $D/runs/fmnist_sync.json $D/bench
  contains "$TMP/out" "note: gnuplot not found"
  for f in fmnist_lenet_fmnist_p4_e4_b64.dat fmnist_lenet_fmnist_p4_e4_b64.gp bench_collectives.dat bench_collectives.gp; do
    [ -s "$TMP/fig/$f" ] || fail "$f missing"
  done
  [ ! -e "$TMP/fig/bench_collectives.png" ] || fail "a PNG appeared without gnuplot"
  ;;
compare_versus)
  # --versus adaptive on crafted runs (4 epochs each, no curve: times are epoch ends), one imbalance,
  # seeds 1-3. Target 0.80. Per seed (top-1 at the epoch ends, wall times):
  #   sync      s1 .70 .81 .79 .85 @10-40: first 20, held 40; s2 .70 .78 .82 .86: 30, 30;
  #             s3 .81 .82 .83 .84 @12-48: 12, 12                  -> first 20.7 ± 9.0, held 27.3 ± 14.2
  #   majority  s1 .70 .82 .83 .84 @8-32: 16, 16; s2 .70 .81 .79 .79: 16, never;
  #             s3 .75 .78 .80 .82 @9-36: 27, 27                   -> 19.7 ± 6.4, 21.5 ± 7.8 (2/3 reached)
  #   solo      .50 .60 .70 .75: never
  #   adaptive  s1 .70 .80 .81 .85 @9-36: 18, 18; s2 .79 .81 .79 .83 @10-40: 20, 40; s3 .50 .70 .80 .84: 30, 30
  # Best static, first: majority (every run reaches it, mean 19.7 < sync's 20.7); held: sync (majority
  # misses seed 2, so its smaller mean over two runs does not count). Paired by seed:
  #   first: 18/16, 20/16, 30/27 = 1.125, 1.25, 1.111: mean 1.162, sd 0.0765, SE 0.0442, (1.162-1)/SE = 3.7
  #   held:  18/40, 40/30, 30/12 = 0.45, 1.333, 2.5:   mean 1.428, sd 1.028,  SE 0.594,  0.7
  # The files' sorted order is not their seeds' (majority: s3 s1 s2; adaptive: s2 s3 s1): pairing
  # by position would read 20/27, 30/16, 18/16 (mean 1.25 ± 0.33), and a held time that does not
  # require staying at the target reads the first crossing's numbers: both fail the lines below.
  mkv() { # FILE MODE SEED "T1 T2 T3 T4" "W1 W2 W3 W4" [JQ]
    jq --arg m "$2" --argjson s "$3" --argjson t "[${4// /,}]" --argjson w "[${5// /,}]" \
      '.config.mode = $m | .config.seed = $s | .controller.policy = (if $m == "adaptive" then "adaptive" else "none" end)
       | .epochs |= [range(0; 4) as $i | .[$i] + {test_top1: $t[$i], wall_s: $w[$i]}]
       | .summary.final_test_top1 = $t[3] | .summary.wall_s = $w[3] | '"${6:-.}" $D/runs/fmnist_sync.json >"$TMP/vs/$1"
  }
  lv() { # SYNC MAJORITY SOLO: an epoch's controller object with these rounds per level
    local l='"rate":null,"lag":null,"score":null,"score_se":null,"samples":0'
    echo '{"rule":"rate","level":"sync","chosen":"sync","probing":false,"switches":0,"probes":0,"levels":[{"level":"sync","rounds":'$1,$l'},{"level":"majority","rounds":'$2,$l'},{"level":"solo","rounds":'$3,$l'}]}'
  }
  mkdir -p "$TMP/vs"
  mkv sync-1.json sync 1 ".70 .81 .79 .85" "10 20 30 40"
  mkv sync-2.json sync 2 ".70 .78 .82 .86" "10 20 30 40"
  mkv sync-3.json sync 3 ".81 .82 .83 .84" "12 24 36 48"
  mkv majority-a.json majority 3 ".75 .78 .80 .82" "9 18 27 36"
  mkv majority-b.json majority 1 ".70 .82 .83 .84" "8 16 24 32"
  mkv majority-c.json majority 2 ".70 .81 .79 .79" "8 16 24 32"
  for s in 1 2 3; do mkv solo-$s.json solo $s ".50 .60 .70 .75" "5 10 15 20"; done
  mkv adaptive-a.json adaptive 2 ".79 .81 .79 .83" "10 20 30 40" ".epochs[].controller = $(lv 10 0 0)"
  mkv adaptive-b.json adaptive 3 ".50 .70 .80 .84" "10 20 30 40" \
    ".epochs[0].controller = $(lv 5 0 0) | .epochs[1:][].controller = $(lv 0 3 2)"
  mkv adaptive-c.json adaptive 1 ".70 .80 .81 .85" "9 18 27 36" ".epochs[].controller = $(lv 1 2 7)"
  rc 0 "$V" "$S" "$TMP"/vs/*.json
  rc 0 "$C" --versus adaptive --target 0.80 "$TMP/vs"
  has "$TMP/out" 'targets: 80.00% (--target)'
  has "$TMP/out" '| linear:unit=20 | sync | 3 | 85.00 ± 1.00 | 20.7 ± 9.0 | 27.3 ± 14.2 |'
  has "$TMP/out" '| linear:unit=20 | solo | 3 | 75.00 ± 0.00 | - (0/3 reached) | - (0/3 reached) |'
  has "$TMP/out" '| linear:unit=20 | majority | 3 | 81.67 ± 2.52 | 19.7 ± 6.4 | 21.5 ± 7.8 (2/3 reached) |'
  has "$TMP/out" '| linear:unit=20 | adaptive | 3 | 84.00 ± 1.00 | 22.7 ± 6.4 | 29.3 ± 11.0 |'
  has "$TMP/out" '| linear:unit=20 | adaptive | 1.16 ± 0.04 [3] +3.7 SE vs majority | 1.43 ± 0.59 [3] +0.7 SE vs sync | 84.00 ± 1.00; sync 85.00 | s1 10/20/70, s2 100/0/0, s3 25/45/30 |'
  lacks "$TMP/out" 'controller rounds' # the shares are in the table, not a note per run
  # an adaptive seed that never reaches the target is no pair, and is counted: seeds 1 and 2,
  # 1.125 and 1.25: mean 1.1875, SE 0.0625, +3.0
  jq '.epochs[].test_top1 = 0.7 | .summary.final_test_top1 = 0.7' "$TMP/vs/adaptive-b.json" >"$TMP/low.json"
  mv "$TMP/low.json" "$TMP/vs/adaptive-b.json"
  rc 0 "$C" --versus adaptive --target 80 "$TMP/vs"
  contains "$TMP/out" '| adaptive | 3 | 79.33 ± 8.14 | 19.0 ± 1.4 (2/3 reached) |'
  contains "$TMP/out" '| adaptive | 1.19 ± 0.06 [2 of 3] +3.0 SE vs majority |'
  # default targets: sync's mean final top-1 (85%) less 4 and 1 points; two targets, two pairs of columns
  rc 0 "$C" --versus adaptive "$TMP/vs"
  has "$TMP/out" "targets: 81.00% and 84.00% (sync's mean final top-1, 85.00% over 3 seed(s), less 4 and 1 points)"
  # one sync run per seed: seed 2's run again under no imbalance (86%) leaves the mean at 85%
  jq '.config.imbalance = "none"' "$TMP/vs/sync-2.json" >"$TMP/sync-2-none.json"
  rc 0 "$C" --versus adaptive "$TMP/vs" "$TMP/sync-2-none.json"
  has "$TMP/out" "targets: 81.00% and 84.00% (sync's mean final top-1, 85.00% over 3 seed(s), less 4 and 1 points)"
  contains "$TMP/out" '| imbalance | mode/policy | n | top-1 (%) | to 81.00%: first (s) | held (s) | to 84.00%: first (s) | held (s) |'
  rc 0 "$C" --versus adaptive --target 0.8 --target 0.84 "$TMP/vs"
  has "$TMP/out" 'targets: 80.00% and 84.00% (--target)'
  # without sync runs and --target: said, no table
  rc 0 "$C" --versus adaptive "$TMP"/vs/majority-*.json "$TMP"/vs/adaptive-*.json
  contains "$TMP/out" 'no target: no sync run with a final top-1 in this table (give --target T)'
  rc 2 "$C" --versus sync "$TMP/vs"
  contains "$TMP/out" '--versus sync: only adaptive is compared against the static modes'
  rc 2 "$C" --versus adaptive --hold "$TMP/vs"
  rc 2 "$C" --target 0.8 --target 0.9 "$TMP/vs"
  contains "$TMP/out" 'more than one: only with --versus'
  ;;
compare_partial)
  # a folder with a finished run and the partial file of an unfinished one (trainer/runlog.h): the
  # partial file validates, the folder skips it with a note, named on the command line it compares
  mkdir -p "$TMP/runs"
  cp $D/runs/fmnist_sync.json "$TMP/runs/a.json"
  jq '.summary.exit = "running"' $D/runs/fmnist_solo.json >"$TMP/runs/a.partial.json"
  rc 0 "$V" "$S" "$TMP/runs/a.partial.json"
  rc 0 "$C" "$TMP/runs"
  contains "$TMP/out" "note: skipping $TMP/runs/a.partial.json: the record of a run that is running or did not finish"
  contains "$TMP/out" '| sync | 4 |'
  lacks "$TMP/out" '| solo |'
  rc 0 "$C" "$TMP/runs/a.partial.json"
  contains "$TMP/out" "$TMP/runs/a.partial.json ended with exit \"running\""
  ;;
trainer_output)
  # real output: a tiny hyperplane run of the trainer validates and compares
  T=$B/bin/eager-train
  [ -x "$T" ] || { echo "SKIP: $T not built"; exit 77; }
  . jobs/mpi.sh && pcoll_mpi_use "$B" || exit 2  # tests/run.sh's MPIRUN, or the build's launcher
  for m in sync solo; do
    $MPIRUN -np 2 "$T" --experiment hyperplane --epochs 2 --hp-features 64 --hp-samples 512 --mode $m \
      --out "$TMP/hp-$m.json" --quiet >"$TMP/train.log" 2>&1 || { fail "eager-train --mode $m failed"; tail -20 "$TMP/train.log"; }
  done
  rc 0 "$V" "$S" "$TMP/hp-sync.json" "$TMP/hp-solo.json"
  rc 0 "$C" "$TMP/hp-sync.json" "$TMP/hp-solo.json"
  contains "$TMP/out" '| sync | 2 | none | 1 |'
  contains "$TMP/out" '| solo | 2 | none | 1 |'
  lacks "$TMP/out" 'runs differ'
  # a CPU run: no GPU per rank, libpcoll's host data path
  python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["environment"]; sys.exit(0 if e.get("gpus", 0) is None and e.get("data_path") == "host" else 1)' \
    "$TMP/hp-sync.json" || fail "environment.gpus / data_path of a CPU run: not null / host"
  ;;
*)
  echo "usage: $0 CASE"; exit 2 ;;
esac

[ $fails -eq 0 ] && echo "PASS ${1}" || echo "$fails failure(s) in ${1}"
[ $fails -eq 0 ]
