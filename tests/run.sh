#!/bin/bash
# Test runner: runs every line of tests/*.tests and ends with 'N passed, N failed[, N skipped]'.
# Line format:   name | timeout_s | tags | command        (# starts a comment)
#   tags: comma list; 'nosan' = not run under SAN builds, 'tsan-skip'/'asan-skip' likewise.
#   A command that exits 77 is a skip; it should print one line saying why.
# Environment: B (build dir), SAN (asan|tsan|''), T (regex: run only matching names), V=1 (show logs).
# Commands see $B, $MPIRUN (mpirun with the flags this machine needs), $LOGDIR.
set -u
cd "$(dirname "$0")/.."
B=${B:-build}; SAN=${SAN:-}; T=${T:-}
export B SAN
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_plm_rsh_agent=false
export MPIRUN="mpirun --oversubscribe --bind-to none"
if [ "$SAN" = asan ]; then
  # keep Open MPI's plugins loaded at exit, so LeakSanitizer can name them in its stacks (a
  # dlclosed plugin shows as <unknown module> and no suppression can match it)
  export OMPI_MCA_mca_base_component_disable_dlclose=1
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:fast_unwind_on_malloc=0
  export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi
if [ "$SAN" = tsan ]; then
  export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 report_signal_unsafe=0"
fi
LOGDIR=$B/test-logs; export LOGDIR; mkdir -p "$LOGDIR"
pass=0; fail=0; skip=0; failed=()
t0=$(date +%s)
for f in tests/*.tests; do
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in ''|'#'*) continue;; esac
    name=$(echo "$line" | cut -d'|' -f1 | xargs)
    tmo=$(echo "$line" | cut -d'|' -f2 | xargs)
    tags=$(echo "$line" | cut -d'|' -f3 | xargs)
    cmd=$(echo "$line" | cut -d'|' -f4-)
    [ -n "$T" ] && ! [[ "$name" =~ $T ]] && continue
    if [ -n "$SAN" ] && [[ ",$tags," == *",nosan,"* || ",$tags," == *",$SAN-skip,"* ]]; then
      echo "SKIP $name (not run under $SAN)"; skip=$((skip+1)); continue
    fi
    [ -n "$SAN" ] && tmo=$((tmo*4))
    log=$LOGDIR/$name.log
    s=$(date +%s.%N)
    timeout -k 5 "$tmo" bash -c "$cmd" >"$log" 2>&1 </dev/null
    rc=$?
    el=$(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    if [ $rc -eq 0 ]; then
      printf 'PASS %-40s %6.1f s\n' "$name" "$el"; pass=$((pass+1))
      [ "${V:-}" = 1 ] && sed 's/^/    /' "$log"
    elif [ $rc -eq 77 ]; then
      printf 'SKIP %-40s %s\n' "$name" "$(tail -1 "$log")"; skip=$((skip+1))
    else
      [ $rc -eq 124 ] && why="timed out after ${tmo}s" || why="exit $rc"
      printf 'FAIL %-40s %6.1f s (%s; log %s)\n' "$name" "$el" "$why" "$log"
      tail -15 "$log" | sed 's/^/    | /'
      fail=$((fail+1)); failed+=("$name")
    fi
  done < "$f"
done
echo "tests took $(( $(date +%s) - t0 )) s${SAN:+ under $SAN}"
[ $fail -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
