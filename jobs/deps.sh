#!/bin/sh
# Installs every Debian package the project needs, idempotently. Open MPI stays the default MPI
# (Debian's alternatives rank it above MPICH); MPICH is for make test's second pass.
# As root: apt-get installs what is missing. Not root: prints exactly what is missing
# and the command that installs it, and exits 1.
# Usage: sh jobs/deps.sh [core|all]   (core: build + test; all: adds Slurm, gnuplot, PAPI)
set -eu
CORE="build-essential clang-format openmpi-bin libopenmpi-dev mpich libmpich-dev libjansson-dev libopenblas-dev libjpeg62-turbo-dev zlib1g-dev dataset-fashion-mnist clang libclang-rt-14-dev jq gnuplot-nox libpapi-dev"
EXTRA="slurm-wlm munge papi-tools"
want=$CORE
[ "${1:-core}" = all ] && want="$CORE $EXTRA"
missing=""
for p in $want; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then echo "deps: all present (${1:-core})"; exit 0; fi
echo "deps: missing:$missing"
if [ "$(id -u)" != 0 ]; then
  echo "deps: not root; install them with:  sudo apt-get install -y$missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || echo "deps: apt-get update failed; trying the cached lists" >&2
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/tmp/pcoll-deps.log 2>&1 || {
  echo "deps: apt-get install failed; see /tmp/pcoll-deps.log" >&2; tail -20 /tmp/pcoll-deps.log >&2; exit 1; }
echo "deps: installed:$missing"
