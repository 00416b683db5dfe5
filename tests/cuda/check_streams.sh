#!/bin/bash
# check_streams.sh: no device operation of the CUDA code runs on the legacy default stream, which
# is not ordered with the non-blocking streams the backend and libpcoll use (a copy there can
# read or write a buffer while a kernel on another stream still uses it).  Static check of
# trainer/cuda/*.cu, collectives/pcoll_nccl.cu and tests/cuda/*.c (runs without a GPU); FAIL on
#   cudaMemcpy( / cudaMemset( / cudaMemcpy2D( / cudaMemcpyToSymbol( (the legacy-stream calls),
#   an ...Async( call or kernel launch whose stream is 0, NULL or cudaStreamLegacy,
#   a kernel launch <<<grid, block>>> or <<<grid, block, shmem>>> without a stream,
#   cudaStreamCreate( (a blocking stream).
cd "$(dirname "$0")/../.."
files=$(ls trainer/cuda/*.cu collectives/pcoll_nccl.cu tests/cuda/*.c 2>/dev/null)
[ -n "$files" ] || { echo "FAIL: no CUDA sources found"; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
report() { while IFS= read -r l; do [ -n "$l" ] && echo "FAIL: $l  ($1)"; done >> "$out"; }
# strip // comments and one-line /* */ comments before matching
strip() { sed -e 's|//.*$||' -e 's|/\*.*\*/||g' "$1"; }
for f in $files; do
  strip "$f" | grep -nE '\bcuda(Memcpy|Memset|Memcpy2D|Memcpy3D|MemcpyToSymbol|MemcpyFromSymbol|Memset2D)\(' |
    sed "s|^|$f:|" | report "synchronous call on the legacy default stream"
  strip "$f" | grep -nE 'Async\([^;]*,[[:space:]]*(0|NULL|nullptr|cudaStreamLegacy)[[:space:]]*\)[[:space:]]*(\)|;|!=|==|\|\||&&)' |
    sed "s|^|$f:|" | report "async call on the legacy default stream"
  strip "$f" | grep -oE '<<<[^>]*>>>' >/dev/null && strip "$f" | grep -nE '<<<[^>]*>>>' | while IFS= read -r l; do
    cfg=$(echo "$l" | grep -oE '<<<[^>]*>>>' | head -1)
    args=$(echo "$cfg" | sed -e 's/^<<<//' -e 's/>>>$//' | awk -F, '{print NF}')
    last=$(echo "$cfg" | sed -e 's/^<<<//' -e 's/>>>$//' | awk -F, '{gsub(/ /, "", $NF); print $NF}')
    if [ "$args" -lt 4 ] || [ "$last" = 0 ] || [ "$last" = NULL ] || [ "$last" = cudaStreamLegacy ]; then
      echo "$f:$l"
    fi
  done | report "kernel launch on the legacy default stream"
  strip "$f" | grep -nE '\bcudaStreamCreate\(' | sed "s|^|$f:|" | report "blocking stream (use cudaStreamCreateWithFlags(..., cudaStreamNonBlocking))"
done
cat "$out"
[ -s "$out" ] && exit 1
echo "PASS: $(echo "$files" | wc -w) files: every copy, memset and kernel names a non-legacy stream"
