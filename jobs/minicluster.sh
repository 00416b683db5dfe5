#!/bin/bash
# jobs/minicluster.sh: a throw-away Slurm cluster on this machine, no systemd, everything in one folder.
#
#   jobs/minicluster.sh up DIR [CPUS] [NODES]  start munged, slurmctld and NODES slurmd (default 1),
#                                              CPUS each (default 8); wait until every node is idle
#   jobs/minicluster.sh down DIR [--now]       stop them (scancel everything, then the daemons by
#                                              their PIDs; --now: KILL at once), remove the namespaces
#   . DIR/env                                  point sbatch/squeue/scontrol at it (exports SLURM_CONF)
#
# DIR holds slurm.conf, the munge key and socket, state, spool, logs and pid files. CPUS are declared
# through SlurmdParameters=config_overrides although the machine may have fewer cores.
# NODES=1: the node is `hostname -s`, addressed as 127.0.0.1; nothing is made outside DIR.
# NODES>=2: node i is pcnode<i>: its slurmd (and so its job steps) runs in a network namespace of
#   its own (ip netns pcoll<N>n<i>) and a UTS namespace of its own (hostname pcnode<i>), with one
#   interface eth0 at 10.254.N.(i+1)/24, a veth whose other end sits on a bridge in one more
#   namespace (pcoll<N>br). slurmctld and munged stay in this namespace (munge through its socket
#   file), slurmctld reached at 10.254.N.1 on the veth pcoll<N>c, the third end on that bridge.
#   The node namespaces have no route but their /24, so no packet leaves the machine; the bridge's
#   namespace has its own (empty) firewall. N is the first of 1..254 whose 10.254.N.0/24 has no
#   route, address or pcoll<N>* namespace here, chosen under a lock so concurrent clusters differ.
#   Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and the veth and bridge drivers; when a namespace,
#   bridge or veth cannot be made, `up` prints one line 'minicluster: namespaces unavailable: ...'
#   and exits 3, having undone what it made.
# Slurm 22.05 (Debian 12: slurmctld slurmd slurm-client, or slurm-wlm), munge and iproute2.
# Environment: MINICLUSTER_PORT (slurmctld port, default 16817; slurmd uses PORT+1),
#   MINICLUSTER_AUTH=munge|none (default munge: munged started by hand with a key in DIR;
#   none: auth/none + cred/none, no munge needed), MINICLUSTER_GPUS (default 0: GPUs declared per
#   node as a generic resource count without device files, so that scripts asking for
#   --gpus-per-task are scheduled; the jobs see no GPU), MINICLUSTER_SLURMD_TIMEOUT (default 60:
#   SlurmdTimeout, the seconds after which slurmctld marks a node that answers no ping DOWN; a
#   node-failure test sets it short so that Slurm's verdict comes within its run).
# Settings (jobs/README.md#the-test-clusters-make-slurm-test): ProctrackType=proctrack/linuxproc,
# TaskPlugin=task/none, no accounting database (job states come from `scontrol show job`, kept
# MinJobAge seconds).
set -euo pipefail

die() { echo "minicluster: $*" >&2; exit 1; }
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: $0 up DIR [CPUS] [NODES] | down DIR [--now]"
now=0

stop_pids() {  # stop_pids FILE...: TERM the daemon of each DIR/run/FILE.pid at once, wait up to 8 s, then KILL
  local n pid i alive comm
  local -a pids=() names=()
  for n in "$@"; do
    [ -f "$dir/run/$n.pid" ] || continue
    pid=$(cat "$dir/run/$n.pid" 2>/dev/null || true)
    comm=${n%%-*}   # slurmd-pcnode1.pid holds a slurmd
    # only our daemon: the PID must still be a process of that name (not a reused PID)
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] || continue
    kill -"$([ $now = 1 ] && echo KILL || echo TERM)" "$pid" 2>/dev/null && { pids+=("$pid"); names+=("$n"); }
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

# ---- the namespaces of a multi-node cluster ------------------------------------------------------
net_free() {  # net_free N: 10.254.N.0/24 is unused here (no route into or around it but the default)
  local n=$1
  [ -z "$(ip -4 route show match "10.254.$n.0/24" | grep -v '^default')" ] \
    && [ -z "$(ip -4 route show root "10.254.$n.0/24")" ] \
    && ! ip -4 -o addr show | grep -q " 10\.254\.$n\." \
    && ! ip netns list | grep -Eq "^pcoll${n}(br|n[0-9]+)( |\$)"
}

net_down() {  # remove what DIR/run/net names: end every process left in the node namespaces first
  [ -f "$dir/run/net" ] || return 0
  local NETS="" CTL_IF="" ns pid
  # shellcheck disable=SC1091
  . "$dir/run/net"
  for ns in $NETS; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  for ns in $NETS; do ip netns del "$ns" 2>/dev/null || true; done
  # the bridge's namespace took the veths' far ends with it; the near end goes with them
  [ -n "$CTL_IF" ] && ip link del "$CTL_IF" 2>/dev/null || true
  rm -f "$dir/run/net"
}

net_fail() { echo "minicluster: namespaces unavailable: $*" >&2; net_down; exit 3; }

net_up() {  # net_up NODES: sets NET (10.254.N) and writes DIR/run/net
  local nodes=$1 n i ns br ctl
  command -v ip >/dev/null && command -v unshare >/dev/null && command -v nsenter >/dev/null \
    || net_fail "ip (iproute2), unshare or nsenter (util-linux) not found"
  [ "$(id -u)" = 0 ] || net_fail "not root (ip netns needs CAP_NET_ADMIN and CAP_SYS_ADMIN)"
  exec 9>"${TMPDIR:-/tmp}/pcoll-minicluster.lock"
  flock 9
  for n in $(seq 254) none; do [ "$n" != none ] && net_free "$n" && break; done
  [ "$n" != none ] || { flock -u 9; net_fail "every 10.254.N.0/24 (N = 1..254) is in use here"; }
  NET=10.254.$n br=pcoll${n}br ctl=pcoll${n}c
  printf 'NETS=%q\nCTL_IF=%q\nNET=%q\n' "$br" "$ctl" "$NET" >"$dir/run/net"
  ip netns add "$br" 2>"$dir/log/net.err" || { flock -u 9; net_fail "ip netns add: $(head -1 "$dir/log/net.err")"; }
  {
    ip -n "$br" link add br0 type bridge && ip -n "$br" link set br0 up \
      && ip link add "$ctl" type veth peer name ctl netns "$br" \
      && ip -n "$br" link set ctl master br0 up \
      && ip addr add "$NET.1/24" dev "$ctl" && ip link set "$ctl" up
  } 2>"$dir/log/net.err" || { flock -u 9; net_fail "bridge/veth: $(head -1 "$dir/log/net.err")"; }
  flock -u 9   # the route to 10.254.N.0/24 now marks N as taken
  for i in $(seq "$nodes"); do
    ns=pcoll${n}n$i
    printf 'NETS="$NETS %s"\n' "$ns" >>"$dir/run/net"
    {
      ip netns add "$ns" && ip link add "pcoll${n}v$i" type veth peer name eth0 netns "$ns" \
        && ip link set "pcoll${n}v$i" netns "$br" && ip -n "$br" link set "pcoll${n}v$i" master br0 up \
        && ip -n "$ns" link set lo up && ip -n "$ns" addr add "$NET.$((i + 1))/24" dev eth0 \
        && ip -n "$ns" link set eth0 up
    } 2>"$dir/log/net.err" || net_fail "node $i: $(head -1 "$dir/log/net.err")"
  done
  rm -f "$dir/log/net.err"
}

# ---- down / up -----------------------------------------------------------------------------------
down() {
  [ -d "$dir" ] || return 0
  dir=$(cd "$dir" && pwd)
  if [ $now = 0 ] && [ -f "$dir/slurm.conf" ] && [ -f "$dir/run/slurmctld.pid" ]; then
    # end the jobs first so slurmd can reap their steps, then the daemons
    SLURM_CONF=$dir/slurm.conf scancel --quiet --user="$(id -un)" 2>/dev/null || true
    local i
    for i in $(seq 50); do
      [ -z "$(SLURM_CONF=$dir/slurm.conf squeue -h -t running,completing,pending 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  # all at once: each takes 1.5-2 s to exit on TERM; nothing needs munge by then
  local -a files=()
  local f
  for f in "$dir"/run/slurmd*.pid; do [ -f "$f" ] && files+=("$(basename "$f" .pid)"); done
  stop_pids "${files[@]}" slurmctld munged
  rm -f "$dir"/run/launched-*
  net_down
  echo "minicluster: down ($dir)"
}

node_conf() {  # node_conf NODES CPUS GPUS: the NodeName and PartitionName lines
  local nodes=$1 cpus=$2 gres="" i
  [ "$3" -gt 0 ] && gres=" Gres=gpu:$3"
  if [ "$nodes" = 1 ]; then
    echo "NodeName=$(hostname -s) NodeAddr=127.0.0.1 CPUs=$cpus$gres State=UNKNOWN"
    echo "PartitionName=debug Nodes=$(hostname -s) Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
    return
  fi
  for i in $(seq "$nodes"); do echo "NodeName=pcnode$i NodeAddr=$NET.$((i + 1)) CPUs=$cpus$gres State=UNKNOWN"; done
  echo "PartitionName=debug Nodes=pcnode[1-$nodes] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
}

start_slurmd() {  # start_slurmd NODE NODES: in the node's namespaces when NODES > 1
  local node=$1 nodes=$2
  if [ "$nodes" = 1 ]; then
    setsid slurmd -D -N "$node" -f "$SLURM_CONF" >"$dir/log/slurmd-$node.out" 2>&1 </dev/null &
  else
    # nsenter joins the network namespace only (ip netns exec would also remount /sys, hiding
    # the cgroup file system slurmd needs). A mount namespace of its own gives the node a
    # private TmpFS (DIR/tmp; the pmix plugin's per-step folders are named by job and step
    # only, so two nodes sharing one would collide), as on a cluster's node-local /tmp.
    # nsenter, unshare and sh all exec: $! is slurmd's PID.
    mkdir -p "$dir/nodes/$node/tmp"
    # shellcheck disable=SC2016
    setsid nsenter --net="/run/netns/pcoll${NET##*.}n${node#pcnode}" unshare --uts --mount \
      sh -c 'hostname "$1" && mount --bind "$3" "$4" && exec slurmd -D -N "$1" -f "$2"' \
      sh "$node" "$SLURM_CONF" "$dir/nodes/$node/tmp" "$dir/tmp" \
      >"$dir/log/slurmd-$node.out" 2>&1 </dev/null &
  fi
  echo $! >"$dir/run/slurmd-$node.pid"
  echo $! >"$dir/run/launched-slurmd-$node"
}

up() {
  local cpus=${3:-8} nodes=${4:-1} port=${MINICLUSTER_PORT:-16817} auth=${MINICLUSTER_AUTH:-munge}
  local gpus=${MINICLUSTER_GPUS:-0} sdto=${MINICLUSTER_SLURMD_TIMEOUT:-60}
  case "$gpus" in ''|*[!0-9]*) die "MINICLUSTER_GPUS='$gpus' is not a count";; esac
  case "$sdto" in ''|*[!0-9]*|0) die "MINICLUSTER_SLURMD_TIMEOUT='$sdto' is not a positive number of seconds";; esac
  local host ctladdr=127.0.0.1 b
  host=$(hostname -s)
  case "$nodes" in ''|*[!0-9]*|0) die "NODES='$nodes' is not a positive integer";; esac
  for b in slurmctld slurmd sbatch squeue scontrol; do
    command -v "$b" >/dev/null || die "$b not found (install slurmctld slurmd slurm-client, e.g. apt-get install slurm-wlm)"
  done
  mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
  [ -f "$dir/run/slurmctld.pid" ] && die "$dir already has a running cluster (run: $0 down $dir)"
  mkdir -p "$dir"/{state,spool,log,run,munge,tmp}
  chmod 700 "$dir/munge"
  local -a names=("$host")
  if [ "$nodes" -gt 1 ]; then
    net_up "$nodes"
    ctladdr=$NET.1
    names=(); for b in $(seq "$nodes"); do names+=("pcnode$b"); done
  fi
  local authconf
  if [ "$auth" = munge ]; then
    command -v munged >/dev/null || die "munged not found (apt-get install munge), or use MINICLUSTER_AUTH=none"
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$dir/munge/munge.key"
    # -f: the folder may sit under a world-writable /tmp, which munged would otherwise refuse
    munged -f --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
      --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
      --seed-file="$dir/munge/munged.seed" >"$dir/log/munged.out" 2>&1 \
      || { cat "$dir/log/munged.out" "$dir/log/munged.log" >&2 2>/dev/null; down; die "munged did not start"; }
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
SlurmctldHost=$host($ctladdr)
SlurmUser=$(id -un)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
$authconf
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
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
SlurmdTimeout=$sdto
GresTypes=gpu
$(node_conf "$nodes" "$cpus" "$gpus")
EOF
  # declared GPUs: placeholder files DIR/gpu/<i> (Slurm drops a GPU without a File), never opened
  : >"$dir/gres.conf"
  if [ "$gpus" -gt 0 ]; then
    mkdir -p "$dir/gpu"
    for b in $(seq 0 $((gpus - 1))); do : >"$dir/gpu/$b"; echo "Name=gpu File=$dir/gpu/$b" >>"$dir/gres.conf"; done
  fi
  # the pmix plugin's per-step folders (else /tmp/spmix_appdir_*)
  echo "PMIxCliTmpDirBase=$dir/tmp" >"$dir/mpi.conf"
  printf 'export SLURM_CONF=%q\n' "$dir/slurm.conf" >"$dir/env"
  export SLURM_CONF=$dir/slurm.conf
  # -D: foreground (we keep the PID ourselves); -i: ignore state from an earlier run
  setsid slurmctld -D -i -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 </dev/null &
  echo $! >"$dir/run/slurmctld.pid"
  # the wait below checks the PIDs kept here: the daemons rewrite their *.pid files (Slurmctld-
  # and SlurmdPidFile), and a read while one is truncated saw an empty file, "slurmctld exited"
  echo $! >"$dir/run/launched-slurmctld"
  for b in "${names[@]}"; do mkdir -p "$dir/spool/$b"; start_slurmd "$b" "$nodes"; done
  local i state="" idle n
  for i in $(seq 150); do
    kill -0 "$(cat "$dir/run/launched-slurmctld")" 2>/dev/null || { tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmctld.out" >&2 || true; down; die "slurmctld exited"; }
    for n in "${names[@]}"; do
      kill -0 "$(cat "$dir/run/launched-slurmd-$n")" 2>/dev/null \
        || { tail -n 20 "$dir/log/slurmd-$n.log" "$dir/log/slurmd-$n.out" >&2 || true; down; die "slurmd of $n exited"; }
    done
    state=$(sinfo -h -N -o %t 2>/dev/null | sort | uniq -c | xargs || true)
    idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l || true)
    [ "$idle" = "$nodes" ] && break
    sleep 0.1
  done
  [ "$idle" = "$nodes" ] || {
    tail -n 20 "$dir/log/slurmctld.log" "$dir"/log/slurmd-*.log >&2 || true
    down; die "nodes ${names[*]} not all idle after 15 s (states: '${state}')"; }
  echo "minicluster: up in $dir: $nodes node(s) ${names[*]}, $cpus CPUs$([ "$gpus" = 0 ] || echo " + $gpus GPU slots") each, auth/$auth, port $port (. $dir/env)"
}

case "$cmd" in
  up) up "$@";;
  down) [ "${3:-}" = --now ] && now=1; down;;
  *) die "usage: $0 up DIR [CPUS] [NODES] | down DIR [--now]";;
esac
