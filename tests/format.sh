#!/bin/sh
# format.sh -- C, C++ and CUDA sources in the project's style (.clang-format at the root).
#   sh tests/format.sh [--check] [FILE...]
# Without FILE: every tracked *.c, *.h, *.cu and *.cuh file. Without --check: rewrites the files
# in place. With --check: changes nothing, names every file that differs from the style and
# exits 1 if there is one (for CI). Needs clang-format 14 or newer (Debian: apt-get install
# clang-format); without it prints why and exits 77 (a skip for tests/run.sh).
set -u
cd "$(dirname "$0")/.."
check=0
[ "${1:-}" = --check ] && { check=1; shift; }
CF=${CLANG_FORMAT:-clang-format}
command -v "$CF" >/dev/null 2>&1 || { echo "SKIP: $CF not found (apt-get install clang-format)"; exit 77; }
ver=$("$CF" --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
[ "${ver:-0}" -ge 14 ] || { echo "SKIP: $CF is version ${ver:-?}, the style needs 14 or newer"; exit 77; }
[ $# -gt 0 ] || set -- $(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
if [ $check = 0 ]; then exec "$CF" -i --style=file "$@"; fi
# two clang-format processes at a time, 16 files each; a file out of style is named by its errors
# ('FILE:LINE:COL: error: code should be clang-formatted'); any other failure is printed
err=$(printf '%s\n' "$@" | xargs -P 2 -n 16 "$CF" --style=file --dry-run --Werror 2>&1 >/dev/null)
rc=$?
bad=$(printf '%s\n' "$err" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
for f in $bad; do echo "not formatted: $f (sh tests/format.sh $f)"; done
if [ $rc != 0 ] && [ -z "$bad" ]; then printf '%s\n' "$err"; echo "format: $CF failed (xargs exit $rc)"; exit 1; fi
[ -z "$bad" ] && echo "format: $# files in the style of .clang-format"
[ -z "$bad" ]
