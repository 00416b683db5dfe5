# shellcheck shell=bash
# jobs/lib.sh: sourced by every jobs/*.sbatch (bash). Not run on its own.
#
# A job script sets its defaults, then calls:
#   pcoll_init EXPERIMENT        repo root, build, ranks, job id, launcher, results folder
#   pcoll_need_data PATH HINT    stop with a clear error (exit 2) when the data is missing
#   pcoll_rundir                 create $RUN_DIR = $OUT/<experiment>/<jobid> and its job.txt
#   pcoll_train [ARGS...]        one eager-train run per entry of $MODE, JSON to $RUN_DIR/<mode>.json
#   pcoll_launch PROG [ARGS...]  srun --mpi=<the MPI's plugin> (under Slurm) or the MPI's own launcher
#                                (mpirun/mpiexec of the installation that built $B) with $RANKS ranks
#
# Environment read here (all optional):
#   RANKS       MPI ranks (default: $SLURM_NTASKS under Slurm; jobs/local.sh sets it from #SBATCH --ntasks)
#   MODE        comma list of modes, one run each: sync,solo,majority,adaptive,quorum:Q  (alias: POLICY)
#   POLICY_OPTS adaptive policy options (--policy-opts), e.g. 'window=32,staleness=quadratic'
#   IMBALANCE   --imbalance value (each script has the paper's default)
#   DATA        data folder (--data-path)
#   EPOCHS      --epochs (default: the trainer's paper default for the experiment)
#   SEED        --seed
#   TAU         --tau (staleness bound: a rank rejected TAU rounds in a row is waited for)
#   DEVICE      --device: cpu | cuda | auto (cuda when `nvidia-smi -L` lists a GPU on the node that
#               runs the script, else cpu, said on stderr). The GPU scripts (cifar10, imagenet,
#               ucf101) default to auto; unset elsewhere: the trainer's cpu
#   OUT         results root (default: <repo>/results/runs); runs go to $OUT/<experiment>/<jobid>/
#   EXTRA       more eager-train (or bench_collectives) arguments, word-split
#   B           build folder (default: build)
#   LAUNCHER    srun | mpirun (default: srun under Slurm when it has the plugin of the MPI that
#               built $B: pmix for Open MPI, pmi2 for the MPICH family; else mpirun, which means
#               that MPI's own launcher, recorded in $B/mpi.env by make)
#   RESTARTS    restart a failed run up to N times from its last checkpoint on one rank fewer
#               (default 0; see pcoll_elastic); CKPT_EVERY (default 1) epochs between checkpoints;
#               CKPT_STEPS (default none) also checkpoints every N steps of each rank within an
#               epoch (--ckpt-every-steps), and a restart continues the epoch from there
#   INTERFERE   a real noisy neighbour beside chosen ranks for a span of each launch: every
#               pcoll_launch runs under jobs/interfere.sh "$INTERFERE" (its --help: e.g.
#               'cpu:ranks=1,start=30,end=90', seconds from each run's start; on a cluster on the
#               batch script's node); checked by pcoll_init (a bad SPEC: one line, exit 2)
#   PCOLL_JOB_ID  job id used in the results folder when not under Slurm (jobs/local.sh sets
#               local-<timestamp>); under Slurm it is $SLURM_JOB_ID
# Exit status of pcoll_train: the first failing run's, after all modes were tried.

pcoll_die() { echo "${PCOLL_SCRIPT:-jobs}: error: $*" >&2; exit 2; }

pcoll_init() {
  EXPERIMENT=$1
  PCOLL_SCRIPT=${PCOLL_SCRIPT:-$EXPERIMENT.sbatch}
  [ -n "${PCOLL_ROOT:-}" ] || pcoll_die "PCOLL_ROOT not set (the script's preamble sets it)"
  # relative OUT / DATA are taken from where the job was started, before we move to the repo root
  case "${OUT:-/}" in /*) ;; *) OUT=$PWD/$OUT;; esac
  case "${DATA:-/}" in /*) ;; *) DATA=$PWD/$DATA;; esac
  cd "$PCOLL_ROOT" || pcoll_die "cannot cd to $PCOLL_ROOT"
  B=${B:-build}
  MODE=${MODE:-${POLICY:-}}
  if [ -n "${SLURM_JOB_ID:-}" ]; then
    JOB_ID=$SLURM_JOB_ID
    RANKS=${RANKS:-${SLURM_NTASKS:-1}}
  else
    JOB_ID=${PCOLL_JOB_ID:-local-$(date +%Y%m%d-%H%M%S)-$$}
    RANKS=${RANKS:-1}
  fi
  case "$RANKS" in ''|*[!0-9]*|0) pcoll_die "RANKS='$RANKS' is not a positive integer";; esac
  OUT=${OUT:-$PCOLL_ROOT/results/runs}
  RUN_DIR=$OUT/$EXPERIMENT/$JOB_ID
  export RUN_DIR JOB_ID RANKS EXPERIMENT

  # the MPI that built $B: its launcher and settings (jobs/mpi.sh; docs/DESIGN.md#11-mpi-libraries)
  # shellcheck source=jobs/mpi.sh
  . "$PCOLL_ROOT/jobs/mpi.sh"
  pcoll_mpi "$B" 2>/dev/null || pcoll_die "$B/mpi.env missing: build first (make B=$B in $PCOLL_ROOT)"
  local nodes=${SLURM_JOB_NUM_NODES:-1} cores per_node
  cores=$(nproc 2>/dev/null || echo 1)
  per_node=$(( (RANKS + nodes - 1) / nodes ))
  # more ranks on a node than it has cores: spin-waiting ranks steal the cores (8-rank allreduce
  # 6 ms instead of 0.1)
  pcoll_mpi_env "$([ "$per_node" -gt "$cores" ] && echo 1 || echo 0)" "$nodes"

  if [ -z "${LAUNCHER:-}" ]; then
    LAUNCHER=mpirun
    # srun --mpi=PLUGIN: the plugin the build's MPI speaks (PCOLL_SRUN_MPI: pmix for Open MPI 4,
    # built against PMIx; pmi2 for the MPICH family). Where Slurm lacks it, the MPI's own
    # launcher inside the allocation still works (Open MPI's mpirun and MPICH's hydra read the
    # Slurm allocation and start their daemons with srun).
    if [ -n "${SLURM_JOB_ID:-}" ] && command -v srun >/dev/null; then
      if grep -qw "$PCOLL_SRUN_MPI" <<<"$(srun --mpi=list 2>&1)"; then LAUNCHER=srun
      else echo "$PCOLL_SCRIPT: srun has no $PCOLL_SRUN_MPI plugin (for $MPI_NAME); using $MPIEXEC inside the allocation" >&2; fi
    fi
  fi
  if [ -n "${INTERFERE:-}" ]; then
    bash "$PCOLL_ROOT/jobs/interfere.sh" --ranks "$RANKS" --check "$INTERFERE" 2>&1 | sed 's/^interfere: /INTERFERE: /' >&2
    [ "${PIPESTATUS[0]}" = 0 ] || pcoll_die "INTERFERE='$INTERFERE' refused (above)"
  fi
  [ "$LAUNCHER" = srun ] || [ -n "$MPIEXEC" ] || pcoll_die "no launcher of $MPI_NAME found beside the wrapper that built $B: set MPIEXEC=/path/to/its/mpiexec and rebuild, or run under Slurm (srun)"
}

pcoll_hosts() {  # the job's host names, comma separated (scontrol expands a Slurm node list)
  if [ -n "${SLURM_JOB_NODELIST:-}" ] && command -v scontrol >/dev/null; then
    scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null | paste -sd, -
  else
    hostname -s
  fi
}

pcoll_rundir() {  # create $RUN_DIR and its job.txt (after the checks, so a failed check leaves nothing)
  [ -f "$RUN_DIR/job.txt" ] && return 0
  mkdir -p "$RUN_DIR" || pcoll_die "cannot create $RUN_DIR"
  {
    echo "experiment=$EXPERIMENT"; echo "job_id=$JOB_ID"; echo "ranks=$RANKS"
    echo "launcher=$LAUNCHER"; echo "mpi=$MPI_NAME"; echo "mpiexec=$MPIEXEC"; echo "nodelist=${SLURM_JOB_NODELIST:-$(hostname -s)}"
    echo "nodes=$(pcoll_hosts)"; echo "ompi_btl=${OMPI_MCA_btl:-}"; echo "ompi_pml=${OMPI_MCA_pml:-}"
    echo "mode=${MODE:-}"; echo "imbalance=${IMBALANCE:-}"; echo "data=${DATA:-}"
    echo "epochs=${EPOCHS:-}"; echo "tau=${TAU:-}"; echo "device=${DEVICE:-}"; echo "extra=${EXTRA:-}"; echo "interfere=${INTERFERE:-}"; echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "git=$(git -C "$PCOLL_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  } >"$RUN_DIR/job.txt"
  echo "$PCOLL_SCRIPT: job $JOB_ID, $RANKS ranks via $LAUNCHER, results in $RUN_DIR"
}

pcoll_launch() {  # one dead rank ends the step at once (the others would wait for it: a rank dead
  # before MPI_Init, e.g. in Open MPI's wire-up, leaves the rest in MPI_Init for ever; mpirun
  # ends the job itself); under jobs/interfere.sh "$INTERFERE" when set
  local -a wrap=()
  [ -n "${INTERFERE:-}" ] && wrap=(bash "$PCOLL_ROOT/jobs/interfere.sh" --ranks "$RANKS" "$INTERFERE" --)
  if [ "$LAUNCHER" = srun ]; then
    local -a opts=(--kill-on-bad-exit=1)
    # after a node loss Slurm 22.05 can keep the dead step's CPUs on the nodes left marked busy
    # ('unable to update job's core use information due to job resizing'): a new step would wait
    # for them forever, so it may overlap them
    [ -n "${PCOLL_SLOTS:-}" ] && opts+=(--overlap)
    "${wrap[@]}" srun --mpi="$PCOLL_SRUN_MPI" -n "$RANKS" "${opts[@]}" "$@"
  else
    # mpirun starts one daemon per node with srun, which would read the job's per-task GPU
    # request (SLURM_GPUS_PER_TASK, SLURM_TRES_PER_TASK) and bind each daemon, so every rank of
    # the node, to one GPU; without them the step gets all the job's GPUs of the node, and the
    # trainer gives local rank i GPU i (docs/DESIGN.md#gpu-choice)
    # shellcheck disable=SC2086  # MPIRUN: the launcher and its options
    "${wrap[@]}" env -u SLURM_GPUS_PER_TASK -u SLURM_TRES_PER_TASK $MPIRUN -np "$RANKS" "$@"
  fi
}

pcoll_down_nodes() {  # pcoll_down_nodes [STATES]: under Slurm, the job's nodes in STATES (default
  # down,fail,no_respond: marked down, or not answering pings yet), comma list
  sinfo -h -N -n "$SLURM_JOB_NODELIST" -t "${1:-down,fail,no_respond}" -o %N 2>/dev/null | sort -u | paste -sd, -
}

pcoll_settle() {  # under Slurm, after a failed step: wait until Slurm has its verdict, i.e. no
  # step of this job is left and no node of it is unresponsive, or a node is marked down and gone
  # from the job (a dead node answers no ping: down after the cluster's SlurmdTimeout, then Slurm
  # removes it from a --no-kill job); at most 2 x SlurmdTimeout
  local limit i dn nodes
  limit=$(scontrol show config 2>/dev/null | sed -n 's/^SlurmdTimeout *= *\([0-9]*\) sec.*/\1/p')
  limit=${limit:-300}
  for ((i = 0; i < 4 * limit; i++)); do
    dn=$(pcoll_down_nodes down,fail)
    if [ -n "$dn" ]; then
      nodes=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/.* NodeList=\([^ ]*\).*/\1/p')
      [ -z "$(comm -12 <(scontrol show hostnames "$nodes" 2>/dev/null | sort) <(tr , '\n' <<<"$dn" | sort))" ] && return 0
    elif [ -z "$(pcoll_down_nodes no_respond)" ]; then
      squeue -h -s -j "$SLURM_JOB_ID" -o %i 2>/dev/null | grep -q '^[0-9]*\.[0-9]*$' || return 0
    fi
    sleep 0.5
  done
  echo "$PCOLL_SCRIPT: no verdict from Slurm on job $SLURM_JOB_ID after $((2 * limit)) s (a step still listed, or node(s) $(pcoll_down_nodes) not responding or still in the job)" >&2
}

pcoll_tasks_per_node() {  # Slurm's task counts per node, '2(x2),1' -> '2 2 1'
  local t n c out=""
  IFS=, read -r -a t <<<"$1"
  for n in "${t[@]}"; do
    if [[ "$n" =~ ^([0-9]+)\(x([0-9]+)\)$ ]]; then
      for ((c = 0; c < BASH_REMATCH[2]; c++)); do out+="${BASH_REMATCH[1]} "; done
    else out+="$n "; fi
  done
  echo "$out"
}

# pcoll_shrink DEAD: the job lost the nodes DEAD (comma list). When Slurm keeps the job running on
# the others (sbatch --no-kill: it removes a failed node from the allocation), point this script's
# Slurm variables at them as Slurm's own resize script does (SLURM_JOB_NODELIST, SLURM_NODELIST,
# SLURM_JOB_NUM_NODES, SLURM_NNODES, SLURM_TASKS_PER_NODE: else srun asks for the lost nodes) and
# set PCOLL_SLOTS to the tasks Slurm placed on the remaining nodes. Returns 1 when the job has no
# node left, or still lists a dead one.
pcoll_shrink() {
  local dead=",$1," line left h i cnt=0 sum=0 tpn=""
  local -a all per
  line=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null) || return 1
  left=$(sed -n 's/.* NodeList=\([^ ]*\).*/\1/p' <<<"$line")
  [ -n "$left" ] && [ "$left" != "(null)" ] || return 1
  mapfile -t all < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
  read -r -a per <<<"$(pcoll_tasks_per_node "${SLURM_TASKS_PER_NODE:-}")"
  for i in "${!all[@]}"; do
    h=${all[$i]}
    [[ "$dead" == *",$h,"* ]] && continue
    scontrol show hostnames "$left" | grep -qx "$h" || continue
    cnt=$((cnt + 1)); sum=$((sum + ${per[$i]:-1})); tpn+="${tpn:+,}${per[$i]:-1}"
  done
  [ "$cnt" -ge 1 ] && [ "$(scontrol show hostnames "$left" | wc -l)" = "$cnt" ] || return 1
  export SLURM_JOB_NODELIST=$left SLURM_NODELIST=$left SLURM_JOB_NUM_NODES=$cnt SLURM_NNODES=$cnt \
    SLURM_TASKS_PER_NODE=$tpn
  PCOLL_SLOTS=$sum
}

# pcoll_elastic NAME PROG ARGS...: one training run, restarted up to $RESTARTS times (default 0)
# when it fails. With RESTARTS > 0 the run checkpoints to $RUN_DIR/ckpt-NAME every $CKPT_EVERY
# epochs (default 1), and every $CKPT_STEPS steps within an epoch when set (--ckpt-every-steps), and
# a restart resumes from its latest.ckpt (from scratch when there is none
# yet) on one rank fewer (a rank died; srun --kill-on-bad-exit or mpirun ended the others). Under
# Slurm it first waits for Slurm's verdict on the failed step (pcoll_settle). When one of the job's
# nodes is marked down, the restart runs on the nodes left with at most the tasks Slurm placed on
# them (pcoll_shrink; the job must be submitted with sbatch --no-kill, else Slurm ends or requeues
# the whole job at the node's failure); when Slurm keeps no node, the loop stops with a message.
# Each restart is a line in job.txt and on stderr:
#   restart.NAME.K=exit R, ranks P -> P'[, node(s) N down], resumed after epoch E[ + B batches], lost S s
# (+ B batches: a mid-epoch checkpoint, B batches of epoch E+1 trained)
# (S: seconds from the checkpoint it resumes from, or from the start, to the failure). RANKS is
# restored afterwards, at most the tasks of the nodes left (PCOLL_SLOTS) once the job lost nodes.
# Returns the last launch's exit status.
pcoll_elastic() {
  local name=$1 k=0 r p0=$RANKS prev t0 tf dead e lost ck why
  shift
  case "${RESTARTS:-0}" in ''|*[!0-9]*) pcoll_die "RESTARTS='${RESTARTS}' is not a count";; esac
  local -a opts=()
  ck=$RUN_DIR/ckpt-$name
  [ "${RESTARTS:-0}" -gt 0 ] && opts=(--ckpt-dir "$ck" --ckpt-every "${CKPT_EVERY:-1}")
  [ "${RESTARTS:-0}" -gt 0 ] && [ -n "${CKPT_STEPS:-}" ] && opts+=(--ckpt-every-steps "$CKPT_STEPS")
  t0=$(date +%s)
  while :; do
    pcoll_launch "$@" "${opts[@]}"
    r=$?
    # srun can exit 0 after Slurm force-terminated a step that lost a node (seen with Slurm 22.05)
    if [ $r -eq 0 ] && [ -n "${SLURM_JOB_NODELIST:-}" ] && command -v sinfo >/dev/null \
      && [ -n "$(pcoll_down_nodes)" ]; then
      echo "$PCOLL_SCRIPT: $name: srun exited 0, but node(s) $(pcoll_down_nodes) of the step are down: counted as a failure" >&2
      r=1
    fi
    [ $r -eq 0 ] || [ $k -ge "${RESTARTS:-0}" ] && break
    tf=$(date +%s); k=$((k + 1)); prev=$RANKS why=""
    RANKS=$((RANKS - 1))
    if [ -n "${SLURM_JOB_NODELIST:-}" ] && command -v sinfo >/dev/null; then
      pcoll_settle
      dead=$(pcoll_down_nodes down,fail)
      if [ -n "$dead" ]; then
        pcoll_shrink "$dead" || {
          echo "$PCOLL_SCRIPT: $name: node(s) $dead of job $SLURM_JOB_ID are down and Slurm keeps no other node for it; no restart in this allocation (to continue from the last checkpoint, submit again with EXTRA='--ckpt-dir $ck --resume')" >&2
          break; }
        [ "$PCOLL_SLOTS" -lt "$RANKS" ] && RANKS=$PCOLL_SLOTS
        why=", node(s) $dead down"
      fi
    fi
    [ "$RANKS" -ge 1 ] || { echo "$PCOLL_SCRIPT: $name: no ranks left to restart on" >&2; break; }
    e=0; lost=$((tf - t0))
    if [ -f "$ck/latest.ckpt" ]; then
      # the newest checkpoint (latest.ckpt is a copy of it): ckpt-EEEE.ckpt after epoch E,
      # ckpt-EEEE-BBBBBBBB.ckpt B batches into epoch E+1
      e=$(find "$ck" -name 'ckpt-*.ckpt' -printf '%T@ %f\n' | sort -n | tail -n 1 | sed -e 's/^[^ ]* //' \
          -e 's/^ckpt-0*\([0-9][0-9]*\)\.ckpt$/\1/' -e 's/^ckpt-0*\([0-9][0-9]*\)-0*\([0-9][0-9]*\)\.ckpt$/\1 + \2 batches/')
      lost=$((tf - $(stat -c %Y "$ck/latest.ckpt")))
      [[ " ${opts[*]} " == *" --resume "* ]] || opts+=(--resume)
    fi
    echo "restart.$name.$k=exit $r, ranks $prev -> $RANKS$why, resumed after epoch $e, lost $lost s" \
      | tee -a "$RUN_DIR/job.txt" | sed "s/^/$PCOLL_SCRIPT: $(date +%T) /" >&2
    t0=$tf
  done
  RANKS=$p0
  [ -n "${PCOLL_SLOTS:-}" ] && [ "$PCOLL_SLOTS" -lt "$RANKS" ] && RANKS=$PCOLL_SLOTS
  return $r
}

pcoll_need_bin() {
  [ -x "$PCOLL_ROOT/$B/$1" ] || pcoll_die "$B/$1 not built (run: make build-all in $PCOLL_ROOT)"
}

pcoll_need_data() {  # PATH HINT
  [ -n "$1" ] || pcoll_die "no data path: set DATA=... ($2)"
  [ -d "$1" ] || pcoll_die "data folder '$1' not found: set DATA=/path/to/it ($2)"
}

pcoll_train() {
  pcoll_need_bin bin/eager-train
  if [ "${DEVICE:-}" = auto ]; then
    DEVICE=cpu
    if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then DEVICE=cuda
    else echo "$PCOLL_SCRIPT: no GPU listed by nvidia-smi on $(hostname -s): --device cpu" >&2; fi
  fi
  pcoll_rundir
  local m name rc=0 r
  local -a args=(--experiment "$EXPERIMENT")
  [ -n "${IMBALANCE:-}" ] && args+=(--imbalance "$IMBALANCE")
  [ -n "${DATA:-}" ] && args+=(--data-path "$DATA")
  [ -n "${EPOCHS:-}" ] && args+=(--epochs "$EPOCHS")
  [ -n "${SEED:-}" ] && args+=(--seed "$SEED")
  [ -n "${TAU:-}" ] && args+=(--tau "$TAU")
  [ -n "${DEVICE:-}" ] && args+=(--device "$DEVICE")
  IFS=, read -r -a modes <<<"${MODE:-sync}"
  for m in "${modes[@]}"; do
    name=${m//[^A-Za-z0-9_-]/}   # quorum:3 -> quorum3
    local -a margs=(--mode "$m")
    [ "$m" = adaptive ] && [ -n "${POLICY_OPTS:-}" ] && margs+=(--policy-opts "$POLICY_OPTS")
    echo "$PCOLL_SCRIPT: $m -> $RUN_DIR/$name.json"
    # shellcheck disable=SC2086  # EXTRA is word-split on purpose
    pcoll_elastic "$name" "$B/bin/eager-train" "${args[@]}" "${margs[@]}" "$@" ${EXTRA:-} \
      --out "$RUN_DIR/$name.json"
    r=$?
    if [ $r -ne 0 ]; then
      echo "$PCOLL_SCRIPT: mode $m failed (exit $r)" >&2
      [ $rc -eq 0 ] && rc=$r
    fi
  done
  return $rc
}
