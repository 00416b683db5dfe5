#!/bin/bash
# header_detect.sh: the Makefile finds cuDNN's and NCCL's headers where distributions put them:
# CUDA's include folder, the system's, the system's multiarch folder (Ubuntu's and NVIDIA's
# packages: /usr/include/x86_64-linux-gnu/cudnn.h; the GPU machine has them there only), or
# /usr/local/include (a cuDNN tarball installed by hand; the VM has one there). Runs `make -n`
# against fake system and local include folders (SYS_INCLUDE, LOCAL_INCLUDE) and a CUDA_HOME
# without headers.
set -u
cd "$(dirname "$0")/../.."
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ma=$(${CC:-gcc} -print-multiarch 2> /dev/null)
[ -n "$ma" ] || { echo "SKIP: the compiler names no multiarch folder"; exit 77; }
fail=0
config() { make -n --no-print-directory B="$T/b" CUDA_HOME="$T/cuda" SYS_INCLUDE="$T/inc" LOCAL_INCLUDE="$T/local" 2>&1 | grep -m1 '^config:'; }
expect() { # what cudnn nccl
  local c; c=$(config)
  if echo "$c" | grep -q "cudnn=$2 nccl=$3"; then echo "ok   $1: $c"; else echo "FAIL $1: want cudnn=$2 nccl=$3, got: $c"; fail=1; fi
}
mkdir -p "$T/cuda/include" "$T/inc/$ma" "$T/local"
expect "no headers" no no
touch "$T/inc/$ma/cudnn.h" "$T/inc/$ma/nccl.h"
expect "headers in $ma/" yes yes
rm "$T/inc/$ma/cudnn.h" "$T/inc/$ma/nccl.h"
touch "$T/inc/cudnn.h" "$T/cuda/include/nccl.h"
expect "headers in the system's and CUDA's folders" yes yes
rm "$T/inc/cudnn.h" "$T/cuda/include/nccl.h"
touch "$T/local/cudnn.h" "$T/local/nccl.h"
expect "headers in the local folder" yes yes
exit $fail
