#!/bin/bash
# ddp_race.sh --modes MODE+OPTS: the run takes --policy-opts OPTS after --partial-opts, into a file
# named with + = , as _, so two adaptive specs run interleaved per seed; bad specs are refused;
# --ln-std-x sets the log-normal delay's std; --cal-epochs the calibration run's epochs.
. "$(dirname "$0")/common.sh"
R=jobs/ddp_race.sh
out=$(B=$B bash $R --no-ddp --ranks 2 --seeds 1 --imbalances none --partial-opts "--tau 4" \
  --modes "adaptive adaptive+staleness=linear,window=16" --out "$TMP/race" --dry-run 2>&1) ||
  fail "dry run failed: $out"
echo "$out" | grep -q -- "--mode adaptive --tau 4 --seed 1 .*--out $TMP/race/p2/none/adaptive-s1.json" ||
  fail "plain adaptive run missing: $out"
echo "$out" | grep -q -- "--mode adaptive --tau 4 --policy-opts staleness=linear,window=16 --seed 1 .*--out $TMP/race/p2/none/adaptive_staleness_linear_window_16-s1.json" ||
  fail "adaptive+OPTS run missing: $out"
for bad in "sinc:mode" "sync+tau=2:sync takes no policy options" "adaptive+:no options after"; do
  spec=${bad%%:*} msg=${bad#*:}
  m=$(B=$B bash $R --no-ddp --modes "$spec" --out "$TMP/race" --dry-run 2>&1) && fail "--modes '$spec' accepted"
  echo "$m" | grep -q -- "$msg" || fail "--modes '$spec': '$m' does not say '$msg'"
done
# --ln-std-x: the log-normal delay's std (default 0.3 x its mean), in step times or ms
for c in ":std=0.3xSTEP_MS" "--ln-std-x 0.6:std=0.6xSTEP_MS" "--ln-x 100ms:mean=100,std=30" \
  "--ln-x 100ms --ln-std-x 60ms:mean=100,std=60" "--ln-x 2:mean=2xSTEP_MS,std=0.6xSTEP_MS"; do
  read -ra a <<<"${c%%:*}"
  out=$(B=$B bash $R --no-ddp --ranks 2 --seeds 1 --imbalances lognormal --modes sync --out "$TMP/race" --dry-run "${a[@]}" 2>&1)
  echo "$out" | grep -q -- "--imbalance lognormal:[^ ]*${c#*:}" || fail "'${c%%:*}': no lognormal ${c#*:} in: $out"
done
m=$(B=$B bash $R --ln-std-x 0.6x --dry-run 2>&1) && fail "--ln-std-x 0.6x accepted"
echo "$m" | grep -q -- "--ln-std-x .* not '0.6x'" || fail "--ln-std-x 0.6x: $m"
# --cal-epochs E: the step time from a balanced sync run of E epochs into DIR/pP-cal, the race's
# runs keep their own epochs
out=$(B=$B bash $R --no-ddp --ranks 2 --seeds 1 --imbalances random1 --modes adaptive --epochs 16 --cal-epochs 2 \
  --out "$TMP/race" --dry-run 2>&1) || fail "--cal-epochs dry run failed: $out"
echo "$out" | grep -q -- "--epochs 2 .*--mode sync --seed 1 --imbalance none .*--out $TMP/race/p2/../p2-cal/sync-s1.json" ||
  fail "--cal-epochs 2: no 2-epoch calibration run into p2-cal: $out"
echo "$out" | grep -q -- "--epochs 16 .*--mode adaptive .*--out $TMP/race/p2/random1/adaptive-s1.json" ||
  fail "--cal-epochs 2: the race's run lost its 16 epochs: $out"
[ "$(echo "$out" | grep -c -- '--epochs')" = 2 ] || fail "--cal-epochs: a run with two --epochs: $out"
m=$(B=$B bash $R --cal-epochs 0 --dry-run 2>&1) && fail "--cal-epochs 0 accepted"
echo "$m" | grep -q -- "--cal-epochs takes a number of epochs >= 1, not '0'" || fail "--cal-epochs 0: $m"
echo "race_modes: ok"
