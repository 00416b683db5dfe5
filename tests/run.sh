#!/bin/bash
# Test runner: runs every line of tests/*.tests and ends with 'N passed, N failed[, N skipped]'.
# Line format:   name | timeout_s | tags | command        (# starts a comment)
#   tags: comma list; 'nosan' = not run under SAN builds, 'tsan-skip'/'asan-skip' likewise;
#   'mpi2' = also run in the second pass, against the build folder B2 of the other MPI family
#   (make test builds it: MPICH beside Open MPI), named NAME@<family> (e.g. pcoll_sync_p2@mpich).
#   'gpu' = the line depends on the machine's GPU or the CUDA toolchain (nvcc, cuDNN: make deps does
#   not install them): it may skip, without them (or, for a no-GPU counterpart, with a GPU).
#   A command that exits 77 is a skip; it prints one line saying why (its last line: the reason).
#   Only a line tagged gpu may skip: any other line that exits 77 counts as FAILED (make test
#   installs everything else a test needs), and so does a gpu line that exits 77 silently. Lines
#   not run under SAN (nosan, SAN-skip tags) are skips too. At the end the skips are listed
#   grouped by reason ("N skipped: <reason> (names)"; the reason is the skip line without
#   'SKIP:' and without its parenthesis), before the last line.
# Environment: B (build dir), B2 (second pass's build dir; none: no second pass), SAN
# (asan|tsan|''), T (regex: run only matching names), V=1 (show logs), FILES (the list files;
# default tests/*.tests).
# Commands see $B, $MPIRUN (the launcher of the MPI that built $B, with the options a shared node
# needs: jobs/mpi.sh), $MPI_FAMILY (openmpi|mpich|other), $PCOLL_RANK_ENV, $LOGDIR.
set -u
cd "$(dirname "$0")/.."
B=${B:-build}; B2=${B2:-}; SAN=${SAN:-}; T=${T:-}; FILES=${FILES:-tests/*.tests}
export B SAN
# shellcheck source=jobs/mpi.sh
. jobs/mpi.sh

# the launcher and run-time settings of the MPI that built folder $1
mpi_setup() {
  pcoll_mpi "$1" || exit 2
  pcoll_mpi_env 1 # tests oversubscribe: 8 ranks on 2 cores
  if [ "$MPI_FAMILY" = openmpi ]; then
    export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_plm_rsh_agent=false
  fi
  if [ "$SAN" = asan ] && [ "$MPI_FAMILY" = openmpi ]; then
    # keep Open MPI's plugins loaded at exit, so LeakSanitizer can name them in its stacks (a
    # dlclosed plugin shows as <unknown module> and no suppression can match it)
    export OMPI_MCA_mca_base_component_disable_dlclose=1
  fi
}
mpi_setup "$B"
if [ "$SAN" = asan ]; then
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:fast_unwind_on_malloc=0
  export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi
if [ "$SAN" = tsan ]; then
  export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 report_signal_unsafe=0"
fi
pass=0; fail=0; skip=0; failed=()
declare -A skipped_by=() # reason -> the names skipped for it
reasons=()               # the reasons, in the order first seen

# skipped NAME REASON: counts a skip under its reason
skipped() {
  skip=$((skip+1))
  [ -n "${skipped_by[$2]+x}" ] || { reasons+=("$2"); skipped_by[$2]=""; }
  skipped_by[$2]+="${skipped_by[$2]:+ }$1"
}
t0=$(date +%s)

# run_pass SUFFIX TAG: every line (TAG empty) or the lines tagged TAG, named NAME$SUFFIX
run_pass() {
  local sfx=$1 want=$2 f line name tmo tags cmd log s rc el why
  # shellcheck disable=SC2086 # FILES is a glob
  for f in $FILES; do
    while IFS= read -r line || [ -n "$line" ]; do
      case "$line" in ''|'#'*) continue;; esac
      name=$(echo "$line" | cut -d'|' -f1 | xargs)$sfx
      tmo=$(echo "$line" | cut -d'|' -f2 | xargs)
      tags=$(echo "$line" | cut -d'|' -f3 | xargs)
      cmd=$(echo "$line" | cut -d'|' -f4-)
      [ -n "$want" ] && [[ ",$tags," != *",$want,"* ]] && continue
      [ -n "$T" ] && ! [[ "$name" =~ $T ]] && continue
      if [ -n "$SAN" ] && [[ ",$tags," == *",nosan,"* || ",$tags," == *",$SAN-skip,"* ]]; then
        echo "SKIP $name (not run under $SAN)"; skipped "$name" "not run under $SAN"; continue
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
      elif [ $rc -eq 77 ] && [[ ",$tags," == *",gpu,"* ]] && [ -s "$log" ]; then
        printf 'SKIP %-40s %s\n' "$name" "$(tail -1 "$log")"
        # the reason: the skip line without SKIP: (or NAME NOT RUN:) and without its parenthesis
        why=$(tail -1 "$log" | sed -e 's/^SKIP:* *//' -e 's/^.* NOT RUN: *//' -e 's/ (.*$//')
        skipped "$name" "${why:-no reason printed}"
      else
        if [ $rc -eq 77 ]; then
          why="skipped, but it is not tagged gpu: only GPU tests may skip"
          [ -s "$log" ] || why="skipped without a line saying why"
        elif [ $rc -eq 124 ]; then why="timed out after ${tmo}s"
        else why="exit $rc"; fi
        printf 'FAIL %-40s %6.1f s (%s; log %s)\n' "$name" "$el" "$why" "$log"
        tail -15 "$log" | sed 's/^/    | /'
        fail=$((fail+1)); failed+=("$name")
      fi
    done < "$f"
  done
}

LOGDIR=$B/test-logs; export LOGDIR; mkdir -p "$LOGDIR"
echo "tests: $MPI_NAME ($B), launcher $MPIRUN"
run_pass "" ""
t1=$(date +%s)
if [ -n "$B2" ] && [ -z "$SAN" ]; then
  # the second MPI: the lines tagged mpi2, on the tree built against it
  for v in $(compgen -v OMPI_MCA_); do unset "$v"; done
  B=$B2; export B
  mpi_setup "$B"
  LOGDIR=$B/test-logs; mkdir -p "$LOGDIR"
  echo "tests: second pass, $MPI_NAME ($B), launcher $MPIRUN"
  run_pass "@$MPI_FAMILY" mpi2
  echo "second pass ($MPI_NAME) took $(( $(date +%s) - t1 )) s"
fi
echo "tests took $(( $(date +%s) - t0 )) s${SAN:+ under $SAN}"
[ $fail -gt 0 ] && echo "failed: ${failed[*]}"
for why in "${reasons[@]}"; do
  # shellcheck disable=SC2086 # the names, split to count them
  set -- ${skipped_by[$why]}
  echo "$# skipped: $why ($*)"
done
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
