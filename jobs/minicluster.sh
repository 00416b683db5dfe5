#!/bin/bash
# jobs/minicluster.sh: a throw-away single-node Slurm cluster, no systemd, everything in one folder.
#
#   jobs/minicluster.sh up DIR [CPUS]   start munged, slurmctld, slurmd; wait until the node is idle
#   jobs/minicluster.sh down DIR        stop them (scancel everything, then the daemons by their PIDs)
#   . DIR/env                           point sbatch/squeue/scontrol at it (exports SLURM_CONF)
#
# DIR holds slurm.conf, the munge key and socket, state, spool, logs and pid files; nothing is
# written outside it. The node is `hostname -s`, addressed as 127.0.0.1, with CPUS (default 8)
# declared through SlurmdParameters=config_overrides although the machine has fewer cores.
# Slurm 22.05 (Debian 12: slurmctld slurmd slurm-client, or slurm-wlm) and munge must be installed.
# Environment: MINICLUSTER_PORT (slurmctld port, default 16817; slurmd uses PORT+1),
#   MINICLUSTER_AUTH=munge|none (default munge: munged started by hand with a key in DIR;
#   none: auth/none + cred/none, no munge needed).
# Settings from DESIGN.md section 7: ProctrackType=proctrack/linuxproc, TaskPlugin=task/none,
# no accounting database (job states come from `scontrol show job`, kept MinJobAge seconds).
set -euo pipefail

die() { echo "minicluster: $*" >&2; exit 1; }
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: $0 up|down DIR [CPUS]"

stop_pids() {  # stop_pids NAME...: TERM all of DIR/run/NAME.pid at once, wait up to 8 s, then KILL
  local n pid i alive
  local -a pids=() names=()
  for n in "$@"; do
    [ -f "$dir/run/$n.pid" ] || continue
    pid=$(cat "$dir/run/$n.pid" 2>/dev/null || true)
    # only our daemon: the PID must still be a process of that name (not a reused PID)
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$n" ] || continue
    kill -TERM "$pid" 2>/dev/null && { pids+=("$pid"); names+=("$n"); }
  done
  for i in $(seq 160); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.05
  done
  for i in "${!pids[@]}"; do
    if kill -0 "${pids[$i]}" 2>/dev/null; then
      echo "minicluster: ${names[$i]} (${pids[$i]}) did not stop on TERM; KILL" >&2
      kill -KILL "${pids[$i]}" 2>/dev/null || true
    fi
  done
  for n in "$@"; do rm -f "$dir/run/$n.pid"; done   # the daemons remove theirs; munged may not
}

down() {
  [ -d "$dir" ] || return 0
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/slurm.conf" ] && [ -f "$dir/run/slurmctld.pid" ]; then
    # end the jobs first so slurmd can reap their steps, then the daemons
    SLURM_CONF=$dir/slurm.conf scancel --quiet --user="$(id -un)" 2>/dev/null || true
    local i
    for i in $(seq 50); do
      [ -z "$(SLURM_CONF=$dir/slurm.conf squeue -h -t running,completing,pending 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  # all three at once: each takes 1.5-2 s to exit on TERM; nothing needs munge by then
  stop_pids slurmd slurmctld munged
  echo "minicluster: down ($dir)"
}

up() {
  local cpus=${3:-8} port=${MINICLUSTER_PORT:-16817} auth=${MINICLUSTER_AUTH:-munge}
  local host; host=$(hostname -s)
  for b in slurmctld slurmd sbatch squeue scontrol; do
    command -v "$b" >/dev/null || die "$b not found (install slurmctld slurmd slurm-client, e.g. apt-get install slurm-wlm)"
  done
  mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
  [ -f "$dir/run/slurmctld.pid" ] && die "$dir already has a running cluster (run: $0 down $dir)"
  mkdir -p "$dir"/{state,spool,log,run,munge,tmp}
  chmod 700 "$dir/munge"
  local authconf
  if [ "$auth" = munge ]; then
    command -v munged >/dev/null || die "munged not found (apt-get install munge), or use MINICLUSTER_AUTH=none"
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$dir/munge/munge.key"
    # -f: the folder may sit under a world-writable /tmp, which munged would otherwise refuse
    munged -f --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
      --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
      --seed-file="$dir/munge/munged.seed" >"$dir/log/munged.out" 2>&1 \
      || { cat "$dir/log/munged.out" "$dir/log/munged.log" >&2 2>/dev/null; die "munged did not start"; }
    authconf="AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket"
  else
    authconf="AuthType=auth/none
CredType=cred/none"
  fi
  cat >"$dir/slurm.conf" <<EOF
# written by jobs/minicluster.sh
ClusterName=pcoll
SlurmctldHost=$host(127.0.0.1)
SlurmUser=$(id -un)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
$authconf
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmdTimeout=60
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  # the pmix plugin's per-step folders (else /tmp/spmix_appdir_*)
  echo "PMIxCliTmpDirBase=$dir/tmp" >"$dir/mpi.conf"
  printf 'export SLURM_CONF=%q\n' "$dir/slurm.conf" >"$dir/env"
  export SLURM_CONF=$dir/slurm.conf
  # -D: foreground (we keep the PID ourselves); -i: ignore state from an earlier run
  setsid slurmctld -D -i -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 </dev/null &
  echo $! >"$dir/run/slurmctld.pid"
  setsid slurmd -D -N "$host" -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 </dev/null &
  echo $! >"$dir/run/slurmd.pid"
  local i state=""
  for i in $(seq 150); do
    kill -0 "$(cat "$dir/run/slurmctld.pid")" 2>/dev/null || { tail -20 "$dir/log/slurmctld.log" "$dir/log/slurmctld.out" >&2; down; die "slurmctld exited"; }
    kill -0 "$(cat "$dir/run/slurmd.pid")" 2>/dev/null || { tail -20 "$dir/log/slurmd.log" "$dir/log/slurmd.out" >&2; down; die "slurmd exited"; }
    state=$(sinfo -h -n "$host" -o %t 2>/dev/null || true)
    case "$state" in idle*) break;; esac
    sleep 0.1
  done
  case "$state" in idle*) ;; *)
    tail -20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
    down; die "node $host not idle after 15 s (state '${state}')";;
  esac
  echo "minicluster: up in $dir: node $host, $cpus CPUs, auth/$auth, port $port (. $dir/env)"
}

case "$cmd" in
  up) up "$@";;
  down) down;;
  *) die "usage: $0 up|down DIR [CPUS]";;
esac
