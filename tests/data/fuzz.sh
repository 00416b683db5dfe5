#!/bin/sh
# Runs the trainer/data libFuzzer targets (built by 'make fuzz-build') in parallel.
# Usage: sh tests/data/fuzz.sh BINDIR RUNS TARGET...   (BINDIR holds fuzz_TARGET binaries)
# Each target starts from the seeds in tests/data/corpus/TARGET (copied; the repo is not written),
# runs RUNS executions, and its log goes to BINDIR/TARGET.log; crash inputs to BINDIR/TARGET-crash-*.
# Prints 'fuzz TARGET: N runs, ok|FAILED' per target; exits 1 if any target failed.
set -u
dir=$1; runs=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
pids=""
for t in "$@"; do
  c=$dir/corpus/$t
  rm -rf "$c"; mkdir -p "$c"
  cp "$here/corpus/$t/"* "$c/" 2>/dev/null
  maxlen=4096; [ "$t" = cifar ] && maxlen=16384
  "$dir/fuzz_$t" -runs="$runs" -seed=1 -max_len=$maxlen -timeout=20 -rss_limit_mb=2560 \
    -print_final_stats=1 -artifact_prefix="$dir/$t-" "$c" >"$dir/$t.log" 2>&1 &
  pids="$pids $!:$t"
done
fail=0
for pt in $pids; do
  pid=${pt%%:*}; t=${pt#*:}
  if wait "$pid"; then st=ok; else st=FAILED; fail=1; fi
  n=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$dir/$t.log" | tail -1)
  echo "fuzz $t: ${n:-?} runs, $st"
  [ $st = ok ] || tail -30 "$dir/$t.log"
done
exit $fail
