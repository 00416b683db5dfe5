# shellcheck shell=bash
# jobs/mpi.sh: which MPI the project builds with, and how it launches with that same MPI.
# Standard MPI only in the code; everything that differs between MPI libraries is here.
#
# As a command (the Makefile runs it at every make; bash jobs/mpi.sh configure ...):
#   configure B CC MPICC MPI_CFLAGS MPI_LIBS
#     Finds the MPI's compile and link flags, first match wins:
#       1. MPI_CFLAGS / MPI_LIBS as given (either non-empty): used as they are;
#       2. the wrapper MPICC (default: mpicc on PATH) in the dialect it speaks:
#          --showme:compile/--showme:link   Open MPI
#          --cray-print-opts=cflags/libs    Cray's compiler wrapper (MPICC=cc)
#          -compile_info/-link_info, -show  MPICH, Intel MPI, MVAPICH (a whole command line, split)
#       3. no wrapper at all: pkg-config, ompi-c then mpich;
#       4. none, or a wrapper that answers no dialect: exit 1 with what to set.
#     Names the MPI from its mpi.h (OPEN_MPI, MPICH_VERSION, I_MPI_VERSION, MVAPICH2_VERSION),
#     checks that a program links with the flags, finds the launcher of the same installation
#     (MPIEXEC if set, refused when its --version names the other family; else mpiexec/mpirun beside each link of the wrapper's path, with the
#     wrapper's suffix: /usr/bin/mpicc.mpich -> /usr/bin/mpiexec.mpich; its --version must name
#     the same MPI), and writes B/mpi.mk (make) and B/mpi.env (sh). Include paths become
#     -isystem, so that warnings in the MPI's headers cannot stop a -Werror build.
#     A folder B configured for another MPI is refused (one build folder per MPI).
#     Prints one line 'mpi=NAME VERSION (...)' for the Makefile's config: line.
#
#   second B
#     'B2 WRAPPER': the folder and wrapper of make test's second pass, with the other MPI family
#     (MPICH when Open MPI built B, and the reverse); nothing when none is installed.
#   run B NP PROG [ARGS...]
#     PROG on NP ranks of this machine with the launcher of the MPI that built B (make's
#     bench-collectives, jobs/demo.sh); oversubscribed settings when NP > cores.
#
# Sourced (bash), for launching:
#   pcoll_mpi B    reads B/mpi.env (fails with a message when B was not built) and sets:
#     MPI_FAMILY   openmpi | mpich | other (the MPICH family: MPICH, Intel MPI, MVAPICH, Cray MPICH)
#     MPI_NAME     e.g. 'Open MPI 4.1.4', 'MPICH 4.0.2'
#     MPIEXEC      that MPI's launcher (absolute path; not exported: make would take it for an
#                  override)
#     MPIRUN       MPIEXEC with the options a shared, oversubscribed node needs (Open MPI:
#                  --oversubscribe --bind-to none; MPICH's hydra oversubscribes and binds
#                  nothing by default); the caller adds -np N
#     PCOLL_SRUN_MPI  the srun --mpi= plugin for this MPI: pmix (Open MPI 4+ is built on PMIx),
#                  pmi2 (the MPICH family: Slurm's pmi2 plugin also serves PMI-1 clients)
#     PCOLL_RANK_ENV  a shell expression for a launched process's rank in every launcher
#   pcoll_mpi_use B [OVERSUBSCRIBED]  pcoll_mpi B unless MPIRUN and MPI_FAMILY are set already
#     (by tests/run.sh), then pcoll_mpi_env (default OVERSUBSCRIBED=1)
#   pcoll_mpi_env [OVERSUBSCRIBED [NODES]]  exports the family's run-time settings: Open MPI's
#     run-as-root variables (as root), its shared-memory copy mechanism, and its transports (one
#     node, NODES=1 the default: btl self,vader and pml ob1; several without an RDMA device: btl
#     self,vader,tcp; with one, Open MPI's own choice); with OVERSUBSCRIBED=1
#     (more ranks than cores) idle ranks yield their core (Open MPI: mpi_yield_when_idle and
#     rmaps_base_oversubscribe; MPICH's hydra oversubscribes by default and has no such setting).
#     Values already in the environment win.

pcoll_mpi_die() { echo "jobs/mpi.sh: $*" >&2; return 1; }

# ---- detection ----------------------------------------------------------------------------------

# split a wrapper's whole command line ('gcc -I... -L... -lmpi ...') into MPI_CFLAGS / MPI_LIBS
mpi_split_cmdline() {
  local w next="" first=1
  MPI_CFLAGS="" MPI_LIBS=""
  for w in $1; do
    if [ $first = 1 ]; then first=0; continue; fi # the compiler itself
    if [ -n "$next" ]; then
      if [ "$next" = c ]; then MPI_CFLAGS+=" $w"; else MPI_LIBS+=" $w"; fi
      next=""; continue
    fi
    case "$w" in
      -I|-isystem|-include|-D|-U) MPI_CFLAGS+=" $w"; next=c ;;
      -Xlinker|-L|-l) MPI_LIBS+=" $w"; next=l ;;
      -I*|-D*|-U*|-isystem*|-std=*) MPI_CFLAGS+=" $w" ;;
      -pthread|-fopenmp) MPI_CFLAGS+=" $w"; MPI_LIBS+=" $w" ;;
      -L*|-l*|-Wl,*|-rdynamic|-static*|*.so|*.so.*|*.a) MPI_LIBS+=" $w" ;;
      -c|-o|-E|-S) ;;
      -f*|-m*|-O*|-g*|-W*) MPI_CFLAGS+=" $w" ;;
      *) MPI_LIBS+=" $w" ;;
    esac
  done
  MPI_CFLAGS=${MPI_CFLAGS# } MPI_LIBS=${MPI_LIBS# }
}

# MPI_CFLAGS, MPI_LIBS, MPI_DIALECT from the wrapper $1; 1 when it answers no dialect
mpi_ask_wrapper() {
  local w=$1 c l
  if c=$("$w" --showme:compile 2>/dev/null) && l=$("$w" --showme:link 2>/dev/null); then
    MPI_CFLAGS=$c MPI_LIBS=$l MPI_DIALECT="$w --showme"; return 0
  fi
  if c=$("$w" --cray-print-opts=cflags 2>/dev/null) && l=$("$w" --cray-print-opts=libs 2>/dev/null); then
    MPI_CFLAGS=$c MPI_LIBS=$l MPI_DIALECT="$w --cray-print-opts"; return 0
  fi
  if c=$("$w" -compile_info 2>/dev/null) && l=$("$w" -link_info 2>/dev/null) && [ -n "$c" ]; then
    mpi_split_cmdline "$c"; c=$MPI_CFLAGS
    mpi_split_cmdline "$l"; MPI_CFLAGS=$c MPI_DIALECT="$w -compile_info/-link_info"; return 0
  fi
  if c=$("$w" -show 2>/dev/null) && [ -n "$c" ]; then
    mpi_split_cmdline "$c"; MPI_DIALECT="$w -show"; return 0
  fi
  return 1
}

# -I DIR -> -isystem DIR (not for the compiler's own /usr/include: that would reorder its search)
mpi_isystem() {
  local w out="" next=0
  for w in $1; do
    if [ $next = 1 ]; then
      [ "$w" = /usr/include ] && out+=" -I$w" || out+=" -isystem $w"; next=0; continue
    fi
    case "$w" in
      -I) next=1 ;;
      -I/usr/include) out+=" $w" ;;
      -I*) out+=" -isystem ${w#-I}" ;;
      *) out+=" $w" ;;
    esac
  done
  echo "${out# }"
}

# MPI_FAMILY, MPI_NAME from the macros of mpi.h ($1: compiler, $2: flags)
mpi_name_from_header() {
  local cc=$1 flags=$2 defs
  # shellcheck disable=SC2086
  defs=$(echo '#include <mpi.h>' | $cc $flags -E -dM -x c - 2>/dev/null) || return 1
  mac() { sed -n "s/^#define $1 \(.*\)\$/\1/p" <<<"$defs" | head -1 | tr -d '"'; }
  if [ -n "$(mac OPEN_MPI)" ]; then
    MPI_FAMILY=openmpi MPI_NAME="Open MPI $(mac OMPI_MAJOR_VERSION).$(mac OMPI_MINOR_VERSION).$(mac OMPI_RELEASE_VERSION)"
  elif [ -n "$(mac MPICH_VERSION)" ]; then
    MPI_FAMILY=mpich MPI_NAME="MPICH $(mac MPICH_VERSION)"
    [ -n "$(mac I_MPI_VERSION)" ] && MPI_NAME="Intel MPI $(mac I_MPI_VERSION)"
    [ -n "$(mac MVAPICH2_VERSION)" ] && MPI_NAME="MVAPICH2 $(mac MVAPICH2_VERSION)"
    [ -n "$(mac MVAPICH_VERSION)" ] && MPI_NAME="MVAPICH $(mac MVAPICH_VERSION)"
    [ -n "$(mac CRAY_MPICH_VERSION)" ] && MPI_NAME="Cray MPICH $(mac CRAY_MPICH_VERSION)"
    return 0
  elif [ -n "$(mac MPI_VERSION)" ]; then
    MPI_FAMILY=other MPI_NAME="MPI-$(mac MPI_VERSION).$(mac MPI_SUBVERSION) library"
  else
    return 1
  fi
}

# does launcher $1 belong to family $2 (its --version names it)?
mpi_launcher_is() {
  local v
  v=$(timeout 10 "$1" --version 2>&1 </dev/null) || true
  case "$2" in
    openmpi) grep -qE 'Open MPI|OpenRTE' <<<"$v" ;;
    mpich) grep -qE 'HYDRA|Intel\(R\) MPI|MVAPICH|MPICH' <<<"$v" ;;
    *) [ -n "$v" ] ;;
  esac
}

# MPIEXEC: the launcher beside the wrapper $1, of family $2. Each link of the wrapper's path is a
# place to look, the last (the real file's folder) first, so that a launcher switched elsewhere
# (Debian's alternatives) is not taken for this MPI's own.
mpi_find_launcher() {
  local p=$1 d n sfx l i
  local -a places=()
  case "$p" in */*) ;; *) p=$(command -v "$p" 2>/dev/null) || return 1 ;; esac
  for ((i = 0; i < 16; i++)); do
    places=("$p" "${places[@]}")
    [ -L "$p" ] || break
    l=$(readlink "$p"); case "$l" in /*) p=$l ;; *) p=$(dirname "$p")/$l ;; esac
  done
  for p in "${places[@]}"; do
    d=$(dirname "$p") n=$(basename "$p")
    case "$n" in mpicc*) ;; *) continue ;; esac
    sfx=${n#mpicc}
    for l in "$d/mpiexec$sfx" "$d/mpirun$sfx" "$d/mpiexec" "$d/mpirun"; do
      [ -x "$l" ] && mpi_launcher_is "$l" "$2" && { MPIEXEC=$l; return 0; }
    done
  done
  return 1
}

mpi_q() { printf "'%s'" "${1//\'/\'\\\'\'}"; } # sh single-quoting

mpi_configure() {
  local b=$1 cc=${2:-gcc} wrapper=${3:-} cflags_in=${4:-} libs_in=${5:-} key old tmp
  MPI_CFLAGS="" MPI_LIBS="" MPI_DIALECT="" MPI_FAMILY="" MPI_NAME="" MPIEXEC=${MPIEXEC:-}
  if [ -n "$cflags_in$libs_in" ]; then
    MPI_CFLAGS=$cflags_in MPI_LIBS=$libs_in MPI_DIALECT="MPI_CFLAGS/MPI_LIBS"
  else
    [ -n "$wrapper" ] || wrapper=$(command -v mpicc 2>/dev/null) || wrapper=""
    if [ -n "$wrapper" ] && ! command -v "$wrapper" >/dev/null 2>&1; then
      pcoll_mpi_die "MPICC=$wrapper: no such command"; return 1
    fi
    if [ -n "$wrapper" ] && ! mpi_ask_wrapper "$wrapper"; then
      pcoll_mpi_die "the wrapper '$wrapper' answered none of --showme:compile, --cray-print-opts=cflags, -compile_info, -show: set MPI_CFLAGS='-I<dir of mpi.h>' and MPI_LIBS='-L<dir> -l<mpi library>', or MPICC=<another wrapper>"
      return 1
    fi
    if [ -z "$wrapper" ]; then
      local pc
      for pc in ompi-c mpich; do
        if pkg-config --exists "$pc" 2>/dev/null; then
          MPI_CFLAGS=$(pkg-config --cflags "$pc") MPI_LIBS=$(pkg-config --libs "$pc") MPI_DIALECT="pkg-config $pc"
          break
        fi
      done
    fi
    if [ -z "$MPI_DIALECT" ]; then
      pcoll_mpi_die "no MPI found: no mpicc on PATH, no pkg-config ompi-c or mpich. Run 'make deps' (Debian's Open MPI), load your MPI's module, or set MPICC=<its C wrapper> (MPICC=cc with Cray's programming environment), or MPI_CFLAGS='-I...' MPI_LIBS='-L... -lmpi'"
      return 1
    fi
  fi
  MPI_CFLAGS=$(mpi_isystem "$MPI_CFLAGS")
  mpi_name_from_header "$cc" "$MPI_CFLAGS" || {
    pcoll_mpi_die "mpi.h not found with the flags from $MPI_DIALECT: '$MPI_CFLAGS' (set MPI_CFLAGS='-I<dir of mpi.h>')"
    return 1
  }
  key="$MPI_NAME|$MPI_CFLAGS|$MPI_LIBS"
  mkdir -p "$b" || return 1
  if [ -f "$b/mpi.env" ]; then
    old=$(sed -n "s/^MPI_KEY=//p" "$b/mpi.env")
    old=${old#\'} old=${old%\'}
    if [ "$old" = "$key" ]; then
      sed -n "s/^MPI_SUMMARY='\(.*\)'\$/mpi=\1/p" "$b/mpi.env"
      return 0
    fi
    if [ -n "$(find "$b" -name '*.o' -print -quit 2>/dev/null)" ]; then
      local was
      was=$(sed -n "s/^MPI_NAME='\(.*\)'\$/\1/p" "$b/mpi.env")
      pcoll_mpi_die "build folder '$b' was built with ${was:-another MPI} ($(sed -n "s/^MPI_DIALECT='\(.*\)'\$/\1/p" "$b/mpi.env")); this make finds $MPI_NAME ($MPI_DIALECT) with other flags. One build folder per MPI: pass B=<another folder> (e.g. B=build-mpich), or 'rm -rf $b' to rebuild it"
      return 1
    fi
  fi
  # the flags must link a program
  tmp=$(mktemp -d) || return 1
  printf '#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); return MPI_Finalize(); }\n' >"$tmp/p.c"
  # shellcheck disable=SC2086
  if ! $cc $MPI_CFLAGS "$tmp/p.c" -o "$tmp/p" $MPI_LIBS >"$tmp/log" 2>&1; then
    pcoll_mpi_die "a program with $MPI_NAME's flags from $MPI_DIALECT does not link: $cc $MPI_CFLAGS p.c $MPI_LIBS: $(head -3 "$tmp/log" | tr '\n' ' ')"
    rm -rf "$tmp"; return 1
  fi
  rm -rf "$tmp"
  if [ -n "$MPIEXEC" ]; then
    MPIEXEC=$(command -v "$MPIEXEC") || { pcoll_mpi_die "MPIEXEC: no such command"; return 1; }
    local f
    for f in openmpi mpich; do # a launcher that names another family than the build's is refused
      if [ "$f" != "$MPI_FAMILY" ] && mpi_launcher_is "$MPIEXEC" "$f"; then
        pcoll_mpi_die "MPIEXEC=$MPIEXEC is a launcher of the $f family; the MPI found is $MPI_NAME ($MPI_DIALECT): unset MPIEXEC or give that MPI's own"
        return 1
      fi
    done
  elif [ -n "$wrapper" ]; then
    mpi_find_launcher "$wrapper" "$MPI_FAMILY" || MPIEXEC=""
  fi
  local summary="$MPI_NAME (flags: $MPI_DIALECT; launcher: ${MPIEXEC:-none found, set MPIEXEC or use srun})"
  {
    echo "# written by jobs/mpi.sh configure: the MPI this build folder uses"
    echo "MPI_FAMILY=$(mpi_q "$MPI_FAMILY")"; echo "MPI_NAME=$(mpi_q "$MPI_NAME")"
    echo "MPI_DIALECT=$(mpi_q "$MPI_DIALECT")"; echo "MPIEXEC=$(mpi_q "$MPIEXEC")"
    echo "MPI_CFLAGS=$(mpi_q "$MPI_CFLAGS")"; echo "MPI_LIBS=$(mpi_q "$MPI_LIBS")"
    echo "MPI_KEY=$(mpi_q "$key")"; echo "MPI_SUMMARY=$(mpi_q "$summary")"
  } >"$b/mpi.env"
  {
    echo "# written by jobs/mpi.sh configure from $b/mpi.env"
    echo "MPI_FAMILY := $MPI_FAMILY"; echo "MPI_NAME := $MPI_NAME"; echo "MPIEXEC := $MPIEXEC"
    echo "MPI_CFLAGS := $MPI_CFLAGS"; echo "MPI_LIBS := $MPI_LIBS"
  } >"$b/mpi.mk"
  echo "mpi=$summary"
}

# ---- launching ----------------------------------------------------------------------------------

pcoll_mpi() {
  local b=${1:-build}
  [ -f "$b/mpi.env" ] || { pcoll_mpi_die "$b/mpi.env missing: build first (make B=$b)"; return 1; }
  # shellcheck disable=SC1090,SC1091
  . "$b/mpi.env"
  if [ -n "$MPIEXEC" ] && [ ! -x "$MPIEXEC" ]; then
    # the build folder was carried to another machine: that MPI family's launcher on PATH
    local l
    for l in mpiexec mpirun; do
      l=$(command -v "$l") && mpi_launcher_is "$l" "$MPI_FAMILY" || continue
      echo "jobs/mpi.sh: $b was built with $MPI_NAME, launcher $MPIEXEC, not on this machine: using $l" >&2
      MPIEXEC=$l
      break
    done
  fi
  export MPI_FAMILY MPI_NAME # not MPIEXEC: make reads it from the environment as an override
  case "$MPI_FAMILY" in
    openmpi) MPIRUN="$MPIEXEC --oversubscribe --bind-to none"; PCOLL_SRUN_MPI=pmix ;;
    mpich) MPIRUN=$MPIEXEC; PCOLL_SRUN_MPI=pmi2 ;;
    *) MPIRUN=$MPIEXEC; PCOLL_SRUN_MPI=pmi2 ;;
  esac
  # shellcheck disable=SC2016
  PCOLL_RANK_ENV='${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-${SLURM_PROCID:-?}}}}'
  export MPIRUN PCOLL_SRUN_MPI PCOLL_RANK_ENV
}

pcoll_mpi_env() {
  local over=${1:-0} nodes=${2:-1}
  case "$MPI_FAMILY" in
    openmpi)
      if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
      export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
      [ "$over" = 1 ] && export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1
      if [ "$nodes" = 1 ]; then
        # one node: shared memory only (there is no InfiniBand device for UCX on these machines)
        export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader} OMPI_MCA_pml=${OMPI_MCA_pml:-ob1}
      elif [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
        # several nodes without an RDMA device: TCP between nodes, shared memory within one
        export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader,tcp} OMPI_MCA_pml=${OMPI_MCA_pml:-ob1}
      fi
      ;;
    # MPICH: nothing to set. Its progress engine spins without yielding (there is no setting
    # for it in MPICH 4); libpcoll yields itself on an oversubscribed node (pcoll_inflight_yield)
  esac
  return 0
}

# second B: the other MPI family's build folder and wrapper for make test's second pass,
# 'B2 WRAPPER' (Open MPI built B: B-mpich and MPICH's wrapper; MPICH built B: B-openmpi and Open
# MPI's), or nothing when that family is not installed. MPI2_CC overrides the wrapper.
mpi_second() {
  local b=$1 w="" fam c
  fam=$(. "$b/mpi.env" 2>/dev/null && echo "$MPI_FAMILY")
  if [ -n "${MPI2_CC:-}" ]; then w=$MPI2_CC
  else
    case "$fam" in
      openmpi) c="mpicc.mpich mpicc.mvapich2 mpiicc" ;;
      *) c="mpicc.openmpi" ;;
    esac
    for w in $c ""; do [ -n "$w" ] && command -v "$w" >/dev/null && break; done
  fi
  [ -n "$w" ] || return 0
  case "$fam" in openmpi) echo "$b-mpich $w" ;; *) echo "$b-openmpi $w" ;; esac
}

# pcoll_mpi_use B [OVERSUBSCRIBED]: the launcher of a caller that set MPIRUN and MPI_FAMILY
# (tests/run.sh does), else B's; then pcoll_mpi_env. For scripts that launch themselves.
pcoll_mpi_use() {
  if [ -z "${MPIRUN:-}" ] || [ -z "${MPI_FAMILY:-}" ]; then pcoll_mpi "$1" || return 1; fi
  MPIEXEC=${MPIEXEC:-${MPIRUN%% *}}
  pcoll_mpi_env "${2:-1}"
}

# run B NP PROG [ARGS...]: PROG on NP ranks with the launcher of the MPI that built B, settings
# for NP ranks on this machine's cores
mpi_run() {
  local b=$1 np=$2
  shift 2
  pcoll_mpi "$b" || exit 2
  pcoll_mpi_env "$([ "$np" -gt "$(nproc 2>/dev/null || echo 1)" ] && echo 1 || echo 0)"
  [ -n "$MPIEXEC" ] || { pcoll_mpi_die "no launcher recorded in $b/mpi.env: set MPIEXEC and rebuild"; exit 2; }
  # shellcheck disable=SC2086  # MPIRUN: the launcher and its options
  exec $MPIRUN -np "$np" "$@"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    configure) shift; mpi_configure "$@" ;;
    run) shift; mpi_run "$@" ;;
    second) shift; mpi_second "$@" ;;
    *) echo "usage: bash jobs/mpi.sh configure B CC MPICC MPI_CFLAGS MPI_LIBS | second B | run B NP PROG [ARGS...]" >&2; exit 2 ;;
  esac
fi
