#!/bin/bash
# tests/python/lib.sh: sourced by run.sh and gpu.sh.
# on_ranks N FILE LINE: FILE (a job's log) holds the fixed string LINE N times, once per rank (two
# ranks' lines may share one line of the log: occurrences are counted), and no Python traceback;
# else prints FILE, one line naming what is wrong, and exits 1.
on_ranks() {
  local n; n=$(grep -oF -- "$3" "$2" | wc -l)
  [ "$n" = "$1" ] || { cat "$2"; echo "$(basename "$0"): '$3' on $n of $1 ranks ($2)"; exit 1; }
  ! grep -q Traceback "$2" || { cat "$2"; echo "$(basename "$0"): a traceback instead of one line ($2)"; exit 1; }
}
