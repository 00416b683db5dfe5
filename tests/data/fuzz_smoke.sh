#!/bin/sh
# Short smoke run of the trainer/data fuzz targets (2000 executions each) for 'make test'.
# Skips (77) when clang or its libFuzzer runtime is missing.  The full run is 'make fuzz'.
B=${B:-build}
t=$(mktemp -d) || exit 1
trap 'rm -rf "$t"' EXIT
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }' >"$t/f.c"
if ! command -v clang >/dev/null 2>&1 || ! clang -fsanitize=fuzzer,address "$t/f.c" -o "$t/f" >/dev/null 2>&1; then
  echo "skip: clang with libFuzzer not available (apt-get install clang libclang-rt-14-dev)"
  exit 77
fi
make --no-print-directory -s -j2 fuzz B="$B" FUZZ_RUNS="${FUZZ_RUNS:-2000}"
