#!/bin/bash
# jobs/mpi.sh's MPI detection, each dialect against a wrapper that speaks only that one (fake
# wrappers printing the real flags of this machine's Open MPI and MPICH), and make itself with
# MPICH's wrapper first on PATH (as `module load mpich` does), no flag given by hand:
#   Open MPI's --showme, Cray's --cray-print-opts (MPICC=cc), MPICH's -compile_info/-link_info,
#   Intel MPI's -show (with -Xlinker pairs), MPI_CFLAGS/MPI_LIBS as given, pkg-config when there
#   is no wrapper, a clear error when there is nothing, a wrapper that answers nothing, a build
#   folder made with another MPI refused, the launcher found through a chain of links.
set -u
cd "$(dirname "$0")/../.." || exit 2
T=$(mktemp -d /tmp/mpi-detect.XXXXXX); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
unset MPIEXEC
command -v mpicc.openmpi >/dev/null && command -v mpicc.mpich >/dev/null ||
  { echo "SKIP: needs Debian's Open MPI and MPICH wrappers (make deps)"; exit 77; }
OCF=$(mpicc.openmpi --showme:compile) OLIB=$(mpicc.openmpi --showme:link)
MINC=$(pkg-config --cflags mpich) MLIB=$(pkg-config --libs mpich)
fake() { # fake NAME BODY: an executable $T/bin-NAME/<wrapper> running BODY (a case on "$1")
  mkdir -p "$T/$1"
  printf '#!/bin/sh\ncase "$1" in\n%s\n*) echo "unknown option $1" >&2; exit 1;;\nesac\n' "$3" >"$T/$1/$2"
  chmod +x "$T/$1/$2"
}
conf() { # conf B MPICC [MPI_CFLAGS MPI_LIBS]: configure into $T/B; output in $T/out, status $rc
  "$BASH" jobs/mpi.sh configure "$T/$1" gcc "$2" "${3:-}" "${4:-}" >"$T/out" 2>&1; rc=$?
}
want() { # want B FAMILY NAME_PATTERN DIALECT_PATTERN
  [ $rc = 0 ] || { cat "$T/out"; fail "$1: configure exited $rc"; }
  (. "$T/$1/mpi.env" && [ "$MPI_FAMILY" = "$2" ] && [[ "$MPI_NAME" =~ $3 ]] && [[ "$MPI_DIALECT" =~ $4 ]]) ||
    fail "$1: $(grep -E '^MPI_(FAMILY|NAME|DIALECT)' "$T/$1/mpi.env" | paste -sd' '), want $2 /$3/ /$4/"
  grep -q -- '-isystem' "$T/$1/mpi.env" || fail "$1: the include path is not -isystem"
  echo "ok: $1: $(cat "$T/out")"
}

fake ompi mpicc "--showme:compile) echo '$OCF';; --showme:link) echo '$OLIB';;"
conf b-ompi "$T/ompi/mpicc"; want b-ompi openmpi '^Open MPI [0-9]+\.[0-9]+' 'showme'

fake cray cc "--cray-print-opts=cflags) echo '$MINC';; --cray-print-opts=libs) echo '$MLIB';;"
conf b-cray "$T/cray/cc"; want b-cray mpich '^MPICH [0-9]' 'cray-print-opts'

fake mpich mpicc "-compile_info) echo 'gcc -O2 $MINC';; -link_info) echo 'gcc $MINC $MLIB';;"
conf b-mpich "$T/mpich/mpicc"; want b-mpich mpich '^MPICH [0-9]' 'compile_info'
grep -q "^MPI_LIBS='.*-lmpich" "$T/b-mpich/mpi.env" || fail "b-mpich: -link_info's libraries not in MPI_LIBS"
grep "^MPI_CFLAGS=" "$T/b-mpich/mpi.env" | grep -q -- '-lmpich' && fail "b-mpich: a library in MPI_CFLAGS"

fake impi mpicc "-show) echo 'gcc $MINC -Xlinker --enable-new-dtags $MLIB';;"
conf b-impi "$T/impi/mpicc"; want b-impi mpich '^MPICH [0-9]' '-show'
grep -q "^MPI_LIBS='-Xlinker --enable-new-dtags" "$T/b-impi/mpi.env" || fail "b-impi: -Xlinker pair not kept together in MPI_LIBS"

conf b-given nosuch "$MINC" "$MLIB"; want b-given mpich '^MPICH' 'MPI_CFLAGS'

# no wrapper anywhere: pkg-config; and with no pkg-config either, the error says what to set
mkdir -p "$T/path" # this machine's tools without any MPI wrapper
for t in gcc as ld sed grep head tr cat dirname basename readlink mktemp find rm mkdir timeout pkg-config; do
  ln -sf "$(command -v $t)" "$T/path/$t"
done
PATH=$T/path conf b-pc ""
want b-pc openmpi '^Open MPI' 'pkg-config ompi-c'
PATH=$T/path PKG_CONFIG_LIBDIR=$T/none conf b-none ""
[ $rc != 0 ] || fail "no MPI at all: configure exited 0"
grep -q "no MPI found: no mpicc on PATH.*MPICC=cc.*MPI_CFLAGS=" "$T/out" || { cat "$T/out"; fail "no MPI: the message does not say what to set"; }
echo "ok: no MPI: $(cat "$T/out")"
fake mute mpicc "--version) echo mute;;"
conf b-mute "$T/mute/mpicc"
[ $rc != 0 ] && grep -q "answered none of" "$T/out" || { cat "$T/out"; fail "a wrapper answering no dialect was accepted"; }
echo "ok: mute wrapper: $(cut -c1-150 "$T/out")"

# the launcher beside the wrapper's real file, through a chain of links: dir/mpicc -> mpicc.mpich
mkdir -p "$T/chain" && ln -s "$(command -v mpicc.mpich)" "$T/chain/mpicc"
conf b-chain "$T/chain/mpicc"; want b-chain mpich '^MPICH' 'compile_info'
l=$(. "$T/b-chain/mpi.env" && echo "$MPIEXEC")
[ "$l" = "$(dirname "$(command -v mpicc.mpich)")/mpiexec.mpich" ] || fail "b-chain: launcher '$l', not mpiexec.mpich"

# MPIEXEC naming the other family is refused
MPIEXEC=$(command -v mpiexec.openmpi) conf b-wrongl "$T/mpich/mpicc"
[ $rc != 0 ] && grep -q "is a launcher of the openmpi family" "$T/out" || { cat "$T/out"; fail "MPIEXEC of Open MPI accepted for MPICH"; }
echo "ok: refused: $(cut -c1-120 "$T/out")"

# a build folder made with one MPI is refused for another
mkdir -p "$T/b-ompi/x" && touch "$T/b-ompi/x/a.o"
conf b-ompi "$T/mpich/mpicc"
[ $rc != 0 ] && grep -q "One build folder per MPI" "$T/out" || { cat "$T/out"; fail "b-ompi reconfigured for MPICH"; }
echo "ok: refused: $(cut -c1-160 "$T/out")"

# make with MPICH's wrappers first on PATH, nothing given by hand: libpcoll's test builds and runs
mkdir -p "$T/mpich-bin" && ln -s "$(command -v mpicc.mpich)" "$T/mpich-bin/mpicc"
ln -s "$(command -v mpiexec.mpich)" "$T/mpich-bin/mpiexec"
PATH=$T/mpich-bin:$PATH make --no-print-directory B="$T/bm" "$T/bm/tests/collectives/test_pcoll" >"$T/make.log" 2>&1 ||
  { tail -20 "$T/make.log"; fail "make with MPICH first on PATH failed"; }
head -1 "$T/make.log" | grep -q '^config: mpi=MPICH' || fail "config line: $(head -1 "$T/make.log")"
bash jobs/mpi.sh run "$T/bm" 3 "$T/bm/tests/collectives/test_pcoll" --mode majority --steps 50 >"$T/run.log" 2>&1 ||
  { tail "$T/run.log"; fail "test_pcoll built against MPICH failed"; }
echo "ok: make with MPICH first on PATH: $(head -1 "$T/make.log" | cut -c1-120); test_pcoll on 3 ranks: $(tail -1 "$T/run.log")"
echo PASS
