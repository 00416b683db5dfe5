# steps.sh: the step runner of the device-machine checks (tests/cuda/gpu_check.sh,
# tests/device/core_check.sh), sourced by them. Each step runs in its own session with its own
# time limit, cut to what is left of the caller's budget; on time-out the whole session (mpirun,
# its ranks, any child) is killed; a failing step never stops the next. One summary row per step.
#
# The caller calls steps_init first (OUT, BUDGET, T0, SUMMARY, FAILED), and may set
#   STEP_SKIP_WHY: non-empty: every step prints one SKIP line with it and does not run (e.g. no
#   usable GPU); STEP_NOTE: appended to the next step's summary row; STEP_ONLY: an extended regex:
#   only the steps whose names match it run, the others print one SKIP line ("not selected"), so a
#   rerun on a lent machine spends its time on the steps that failed.

# steps_init NAME BUDGET_S: OUT (default ./NAME-out, made absolute; logs go to $OUT/STEP.log), the
# budget, the start time, an empty summary
steps_init() {
  OUT=${OUT:-$PWD/$1-out}
  mkdir -p "$OUT" || { echo "$1: cannot create OUT=$OUT" >&2; exit 2; }
  OUT=$(cd "$OUT" && pwd)
  BUDGET=$2
  T0=$(date +%s)
  SUMMARY=()
  FAILED=0
}

elapsed() { echo $(($(date +%s) - T0)); }
row() { SUMMARY+=("$(printf '%-12s %-8s %6s  %s' "$1" "$2" "$3" "$4")"); }

# processes whose session id is $1 (from /proc/PID/stat: state ppid pgrp session after "(comm) ")
session_pids() {
  local d st f
  for d in /proc/[0-9]*; do
    { read -r st < "$d/stat"; } 2>/dev/null || continue
    f=(${st##*) })
    [ "${f[3]}" = "$1" ] && echo "${d#/proc/}"
  done
  return 0
}
kill_session() { local p; p=$(session_pids "$1"); [ -n "$p" ] && kill -"$2" $p 2>/dev/null; return 0; }

# step NAME LIMIT_S CMD...: CMD in a new session, log $OUT/NAME.log (and on stdout); verdict row
step() {
  local name=$1 limit=$2; shift 2
  if [ -n "${STEP_ONLY:-}" ] && ! [[ $name =~ ^($STEP_ONLY)$ ]]; then
    echo "SKIP $name: not selected (STEP_ONLY=$STEP_ONLY)"
    row "$name" SKIP - "not selected"
    return 0
  fi
  if [ -n "${STEP_SKIP_WHY:-}" ]; then
    echo "SKIP $name: $STEP_SKIP_WHY"
    row "$name" SKIP - "$STEP_SKIP_WHY"
    return 0
  fi
  local left=$((T0 + BUDGET - $(date +%s)))
  ((limit > left)) && limit=$left
  if ((limit < 10)); then
    echo "SKIP $name: time budget of ${BUDGET}s spent"
    row "$name" SKIP - "budget spent"; FAILED=1
    return 0
  fi
  echo; echo "==== [$name] limit ${limit}s, at t=$(elapsed)s: $*"
  local t0 log=$OUT/$name.log rc timed_out=0 mark=$OUT/.$name.timed-out
  t0=$(date +%s)
  rm -f "$mark"
  setsid bash -c '"$@"' "$name" "$@" > "$log" 2>&1 < /dev/null &
  local pid=$!
  # the limit: a watchdog that, unless ended first, marks the time-out and kills the session (the
  # step's end is waited for, not polled: the row comes as soon as the step ends)
  (
    trap 'kill "$s" 2> /dev/null; exit 0' TERM
    sleep "$limit" & s=$!
    wait "$s"
    : > "$mark"
    echo "==== [$name] TIME-OUT after ${limit}s: killing its session"
    kill_session "$pid" TERM
    sleep 3
    kill_session "$pid" KILL
  ) &
  local wd=$!
  wait "$pid" 2>/dev/null; rc=$?
  [ -e "$mark" ] && wait "$wd"  # the time-out: its KILL sent
  kill "$wd" 2>/dev/null; wait "$wd" 2>/dev/null
  kill_session "$pid" KILL  # anything that outlived the step's leader
  [ -e "$mark" ] && timed_out=1 && rm -f "$mark"
  ((timed_out)) && rc=124
  tail -40 "$log"
  local verdict=PASS note=${STEP_NOTE:-}
  if ((rc == 124)); then verdict=TIMEOUT; elif ((rc != 0)); then verdict=FAIL; fi
  [ "$verdict" = PASS ] || FAILED=1
  row "$name" "$verdict" "$(($(date +%s) - t0))s" "rc=$rc ${note}log $log"
  STEP_NOTE=""
  return 0
}

# the host and its CPU; libnn is built with -march=native (trainer/nn.mk) unless NN_ARCH says
# otherwise: the build machine's vector ISA must be here
host_lines() {
  echo "== host: $(uname -srm); $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}")"
  local fl miss_isa="" x
  fl=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  for x in avx2 fma bmi2 f16c; do [[ $fl == *" $x "* ]] || miss_isa="$miss_isa $x"; done
  echo "== cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') x $(nproc)${miss_isa:+; WARNING: lacks$miss_isa (libnn built with -march=native: expect SIGILL)}"
}

# the MPI settings of every step (those of tests/run.sh and make bench-collectives): the launcher
# of the MPI that built $B (jobs/mpi.sh: the same family's on PATH when the recorded one is not on
# this machine), as root, oversubscribed, Open MPI's shared-memory transport without UCX (a
# caller's OMPI_MCA_pml / _btl win), and MPIRUN, exported
mpi_env() {
  # shellcheck source=jobs/mpi.sh
  . jobs/mpi.sh
  if [ -f "$B/mpi.env" ]; then
    pcoll_mpi "$B"
  else # a build folder from before jobs/mpi.sh: Open MPI's mpirun on PATH
    export MPI_FAMILY=openmpi MPIRUN="mpirun --oversubscribe --bind-to none"
  fi
  pcoll_mpi_env 1
}

# the executables under $B (ELF files in bin/, tests/, bench/ and their subfolders), one per line
elf_binaries() {
  local f
  while IFS= read -r f; do
    head -c 4 "$f" 2> /dev/null | grep -q ELF && echo "$f"
  done < <(find "$B/bin" "$B/tests" "$B/bench" -type f -perm -u+x 2> /dev/null | sort)
  return 0
}
# the libraries binary $1 needs that the loader does not find here, space-separated
missing_libs() { ldd "$1" 2>&1 | awk '/not found/{print $1}' | tr '\n' ' '; }
# appends folder $1 to LD_LIBRARY_PATH (exported) unless it is there already
add_ld_path() {
  case ":${LD_LIBRARY_PATH:-}:" in *":$1:"*) ;; *) LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$1 ;; esac
  export LD_LIBRARY_PATH
}

# resolve_libraries: for every library a binary under $B cannot find here (ldd "not found"), the
# first folder that holds it among RESOLVE_DIRS (tried first), CUDA's, the system's, MPI's,
# /opt/*/lib and the nvidia/*/lib folders of Python's site-packages (pip's cuDNN, NCCL, cuBLAS)
# is added to LD_LIBRARY_PATH (exported, so every step and its ranks inherit it); also the folder
# of libcudnn.so.9 (it opens its sub-libraries at run time, which ldd does not see)
resolve_libraries() {
  local f miss="" so d found dirs cudnn
  # the path before this function: Python steps (PyTorch brings its own cuDNN, newer than the
  # system's, which LD_LIBRARY_PATH below would put first) run under it
  export LD_LIBRARY_PATH_BEFORE_RESOLVE=${LD_LIBRARY_PATH-}
  while IFS= read -r f; do miss="$miss $(missing_libs "$f")"; done < <(elf_binaries)
  miss=$(echo $miss | tr ' ' '\n' | sort -u | tr '\n' ' ')
  if [ -n "${miss// /}" ]; then
    dirs="${RESOLVE_DIRS:-} /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib"
    dirs="$dirs $(ls -d /usr/local/cuda-*/lib64 2> /dev/null | sort -rV | tr '\n' ' ')"
    dirs="$dirs /usr/lib/x86_64-linux-gnu /usr/local/lib /usr/local/lib64 /usr/lib/x86_64-linux-gnu/openmpi/lib"
    dirs="$dirs $(ls -d /opt/*/lib /opt/*/lib64 2> /dev/null | tr '\n' ' ')"
    dirs="$dirs $(python3 -c 'import site, glob; print(" ".join(d for s in site.getsitepackages() for d in glob.glob(s + "/nvidia/*/lib")))' 2> /dev/null)"
    echo "== libraries not found by the loader: $miss"
    for so in $miss; do
      found=""
      for d in $dirs; do [ -e "$d/$so" ] && { found=$d; break; }; done
      if [ -n "$found" ]; then
        echo "  $so -> $found (added to LD_LIBRARY_PATH)"
        add_ld_path "$found"
      else
        echo "  $so: not found in any of the usual folders"
      fi
    done
  fi
  cudnn=$(ldd "$B/tests/cuda/test_cuda_layers" 2> /dev/null | awk '$1 == "libcudnn.so.9" && $3 ~ /^\// {print $3}')
  [ -n "$cudnn" ] && add_ld_path "$(dirname "$(readlink -f "$cudnn")")"
  echo "  LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
}

# the binaries under $B whose libraries are missing on this machine (ldd), and how many were checked
check_binaries() {
  local f n=0 miss
  while IFS= read -r f; do
    n=$((n + 1))
    miss=$(missing_libs "$f")
    [ -n "$miss" ] && echo "  MISSING for $f: $miss"
  done < <(elf_binaries)
  echo "  $n binaries checked"
  [ "$n" -gt 0 ] || echo "  no binaries under $B: build with 'make build-all' and carry the build folder"
}
