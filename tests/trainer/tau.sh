#!/bin/bash
# The staleness bound has one source, --tau, with a finite default: a tau key in --policy-opts is
# refused, a bound the policy cannot keep with tau_by=policy is refused naming --tau, and a run
# that does not name --tau still bounds every rank's streak of left-out deposits by the default
# printed in --help.
. "$(dirname "$0")/common.sh"
expect() {  # expect PATTERN ARGS...: must fail on 2 ranks and print PATTERN
  pat=$1; shift
  if run 2 "$@"; then cat "$TMP/out"; fail "expected a failure for: $*"; fi
  grep -q -- "$pat" "$TMP/out" || { cat "$TMP/out"; fail "no message matching '$pat' for: $*"; }
  echo "ok: $* -> $(grep -m1 -- "$pat" "$TMP/out")"
}
expect "set by --tau only" --mode adaptive --policy-opts window=16,tau=2
expect "tau_by=policy needs tau >= lag" --mode solo --tau 2 --policy-opts tau_by=policy,lag=3
def=$($MPIRUN -np 1 "$TRAIN" --help | awk '$1 == "--tau" { print $2 }')
echo "--help: --tau defaults to $def"
[ -n "$def" ] && [ "$def" -gt 0 ] 2>/dev/null || fail "--tau has no finite default in --help ('$def')"
run 2 --mode solo --epochs 1 --limit-train 512 --limit-test 128 --imbalance linear:unit=40 --out "$TMP/solo.json" \
  || { cat "$TMP/out"; fail "solo run without --tau"; }
read -r tau st < <(jq -r '"\(.config.tau) \(.summary.max_streak)"' "$TMP/solo.json")
echo "solo under skew without --tau: tau $tau, longest streak $st"
[ "$tau" = "$def" ] || fail "the run's tau $tau is not --help's default $def"
[ "$st" -le "$tau" ] || fail "a streak of $st exceeds the default bound $tau"
[ "$st" -gt 0 ] || fail "no rank was ever left out: the skew did not exercise the bound"
