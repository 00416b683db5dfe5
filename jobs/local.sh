#!/bin/bash
# jobs/local.sh SCRIPT.sbatch [ARGS...]: run a job script without Slurm, on this machine, with the
# launcher of the MPI that built $B (mpirun or mpiexec of that installation: jobs/mpi.sh).
#
#   jobs/local.sh jobs/fmnist.sbatch --limit-train 1024 --epochs 1
#   RANKS=2 MODE=sync,majority jobs/local.sh jobs/fmnist.sbatch
#   OUT=/tmp/runs jobs/local.sh jobs/allreduce.sbatch          (RANKS defaults to #SBATCH --ntasks)
#   jobs/local.sh --interfere cpu:ranks=1,start=5,end=20 jobs/fmnist.sbatch   (sets INTERFERE:
#                 a CPU hog beside rank 1 from 5 s to 20 s of each run; jobs/interfere.sh --help)
#
# Sets what the scripts read from Slurm: RANKS (unless set) from the script's '#SBATCH --ntasks'
# (or -n), a job id PCOLL_JOB_ID=local-<YYYYmmdd-HHMMSS>-<pid> (results go to
# $OUT/<experiment>/local-.../), PCOLL_ROOT, LAUNCHER=mpirun; clears SLURM_* so that a run started
# inside an allocation is not mistaken for a Slurm job (and the metrics record slurm_job_id null).
# Other #SBATCH lines (GPUs, time) are ignored. Exit status: the script's.
set -u
if [ "${1:-}" = --interfere ]; then
  [ $# -ge 2 ] || { echo "usage: $0 [--interfere SPEC] SCRIPT.sbatch [ARGS...]  (--interfere needs a SPEC)" >&2; exit 2; }
  export INTERFERE=$2
  shift 2
fi
[ $# -ge 1 ] && [ -f "$1" ] || { echo "usage: $0 [--interfere SPEC] SCRIPT.sbatch [ARGS...]  (no such script: '${1:-}')" >&2; exit 2; }
script=$1; shift
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${RANKS:-}" ]; then
  RANKS=$(sed -n -E 's/^#SBATCH[[:space:]]+(--ntasks[=[:space:]]|-n[=[:space:]]*)[[:space:]]*([0-9]+).*/\2/p' "$script" | head -1)
  [ -n "$RANKS" ] || RANKS=1
fi
for v in $(compgen -v SLURM_); do unset "$v"; done
export RANKS PCOLL_ROOT=$root LAUNCHER=mpirun
export PCOLL_JOB_ID=${PCOLL_JOB_ID:-local-$(date +%Y%m%d-%H%M%S)-$$}
echo "local.sh: $script as job $PCOLL_JOB_ID with $RANKS ranks (the MPI's own launcher)"
exec bash "$script" "$@"
