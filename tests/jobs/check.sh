#!/bin/bash
# tests/jobs/check.sh CASE: the job scripts without Slurm (jobs/local.sh), cases of tests/jobs.tests.
#   local_fmnist      jobs/local.sh jobs/fmnist.sbatch, tiny: schema-valid JSON in OUT/fmnist/local-*/
#   local_allreduce   jobs/local.sh jobs/allreduce.sbatch, tiny: benchmark JSON, wrong == 0, hosts
#   elastic_local     RESTARTS=1: a rank killed mid-epoch, the script resumes on the ranks left
#   elastic_mid       the same with mid-epoch checkpoints (CKPT_STEPS): the restart continues the epoch
#   missing_data      cifar10 (and imagenet, ucf101) without data: clear error, non-zero exit, no folder
#   sweep_dry         jobs/sweep.sh --dry-run: the run sets of Figs. 9-13
#   mpirun_gpus       pcoll_launch's mpirun fallback drops the per-task GPU request (SLURM_*_PER_TASK)
#   syntax            bash -n on every script; #SBATCH defaults of each experiment
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
B=${B:-build}; export B
T=$(mktemp -d /tmp/pcoll-jobs.XXXXXX); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
unset RANKS MODE POLICY IMBALANCE DATA EPOCHS OUT EXTRA PCOLL_ROOT PCOLL_JOB_ID LAUNCHER SLURM_JOB_ID

case "${1:-}" in
local_fmnist)
  out=$(OUT=$T/runs RANKS=2 MODE=sync,majority jobs/local.sh jobs/fmnist.sbatch \
        --limit-train 512 --limit-test 128 --epochs 1 --quiet 2>&1) || { rc=$?; echo "$out"; fail "local.sh fmnist exit $rc"; }
  echo "$out"
  dirs=("$T"/runs/fmnist/local-*)
  [ ${#dirs[@]} = 1 ] && [ -d "${dirs[0]}" ] || fail "expected one folder $T/runs/fmnist/local-*, got: ${dirs[*]}"
  d=${dirs[0]}
  [[ "$(basename "$d")" =~ ^local-[0-9]{8}-[0-9]{6}-[0-9]+$ ]] || fail "job id '$(basename "$d")' is not local-<timestamp>-<pid>"
  "$B/bin/pcoll-validate" results/schema/run.schema.json "$d/sync.json" "$d/majority.json" || fail "JSON does not validate"
  tau=$(bash jobs/mpi.sh run "$B" 1 "$B/bin/eager-train" --help | awk '$1 == "--tau" { print $2 }')
  for m in sync majority; do
    [ "$(jq -r .config.tau "$d/$m.json")" = "$tau" ] || fail "$m.json: tau is not the trainer's default $tau"
    [ "$(jq -r .config.mode "$d/$m.json")" = $m ] || fail "$m.json: config.mode is not $m"
    [ "$(jq -r .environment.ranks "$d/$m.json")" = 2 ] || fail "$m.json: ranks is not 2"
    [ "$(jq -r .environment.slurm_job_id "$d/$m.json")" = null ] || fail "$m.json: local run recorded a Slurm job id"
    [ "$(jq -r .config.imbalance "$d/$m.json")" = linear:unit=60 ] || fail "$m.json: imbalance is not the script default"
  done
  grep -q "^job_id=$(basename "$d")\$" "$d/job.txt" && grep -q '^launcher=mpirun$' "$d/job.txt" || fail "job.txt wrong"
  # launched with the MPI that built $B: job.txt and every run's MPI_Get_library_version say so
  built=$(. "$B/mpi.env" && echo "$MPI_NAME|$MPIEXEC")
  [ "$(sed -n 's/^mpi=//p' "$d/job.txt")|$(sed -n 's/^mpiexec=//p' "$d/job.txt")" = "$built" ] \
    || fail "job.txt: mpi/mpiexec $(grep '^mpi' "$d/job.txt" | paste -sd' '), the build's: $built"
  v=${built%%|*}; v=${v##* }  # the version, e.g. 4.0.2
  for m in sync majority; do
    jq -r .environment.mpi "$d/$m.json" | grep -qF "$v" || fail "$m.json: environment.mpi '$(jq -r .environment.mpi "$d/$m.json")' is not ${built%%|*}"
  done
  # RANKS defaults to '#SBATCH --ntasks' (4 for fmnist)
  out=$(OUT=$T/r4 MODE=sync jobs/local.sh jobs/fmnist.sbatch --limit-train 256 --limit-test 64 --epochs 1 --quiet 2>&1) \
    || { echo "$out"; fail "local.sh fmnist (default ranks)"; }
  [ "$(jq -r .environment.ranks "$T"/r4/fmnist/local-*/sync.json)" = 4 ] || fail "default ranks is not the #SBATCH --ntasks 4"
  echo "PASS";;
local_allreduce)
  OUT=$T/runs RANKS=4 ITERS=4 SIZES=8,4096 jobs/local.sh jobs/allreduce.sbatch || fail "local.sh allreduce exit $?"
  f=$(echo "$T"/runs/allreduce/local-*/collectives.json)
  [ -f "$f" ] || fail "no $T/runs/allreduce/local-*/collectives.json"
  jq -e --arg h "$(hostname)" '.ranks == 4 and .iterations == 4 and (.results | length > 0) and all(.results[]; .wrong == 0)
         and .hosts == [$h, $h, $h, $h]' "$f" >/dev/null \
    || fail "$f: wrong keys/values"
  echo "PASS";;
missing_data)
  for e in cifar10 imagenet ucf101; do
    for data in "" /nonexistent/data "$T"; do
      out=$(DATA=$data OUT=$T/runs RANKS=2 jobs/local.sh jobs/$e.sbatch 2>&1); rc=$?
      echo "$e DATA='$data': exit $rc: $(tail -1 <<<"$out")"
      [ $rc -ne 0 ] || fail "$e with DATA='$data' exited 0"
      grep -q "$e.sbatch: error: .*\(data\|DATA\|has no\)" <<<"$out" || fail "$e with DATA='$data': no clear error: $out"
    done
  done
  [ ! -e "$T/runs" ] || fail "a failed data check left a results folder: $(find "$T/runs")"
  echo "PASS";;
elastic_local|elastic_mid)
  # RESTARTS=1, 4 ranks, 3 epochs checkpointed every epoch: one rank killed in epoch 2, the script
  # resumes from the last checkpoint on 3 ranks and finishes; that equals a fresh 3-rank run
  # resumed from the same checkpoint (the epochs after it: train and test loss, weights hash, and
  # top-1 where the run has one, compared exactly; hyperplane is a regression: top-1 null in both;
  # jobs_slurm_node_fail compares fmnist's top-1).
  #   elastic_local  the rank killed after epoch 1's checkpoint: resumed after epoch 1 (or 2)
  #   elastic_mid    CKPT_STEPS=2 (a checkpoint after every rank's step 2 of each epoch too): the
  #                  rank killed after the one 8 batches into epoch 2; the restart continues epoch 2
  #                  from there (its batches 9-16 re-sharded over 3 ranks)
  # (hyperplane, 64 features, 1024 samples: 4 steps per rank and epoch, and the script's default
  # imbalance, one random rank waiting 300 ms per step, keeps the rest of epoch 2 longer than the
  # 0.3 s the kill waits on any machine; the compute is negligible)
  a=(--hp-features 64 --hp-samples 1024 --epochs 3 --quiet)
  if [ "$1" = elastic_mid ]; then
    steps=2 at=ckpt-0001-00000008 want='epoch 1 \+ 8 batches'
  else
    steps="" at=ckpt-0001 want='epoch [12]'
  fi
  (OUT=$T/runs RANKS=4 RESTARTS=1 CKPT_STEPS=$steps MODE=sync jobs/local.sh jobs/hyperplane.sbatch "${a[@]}" 2>&1 | while IFS= read -r l; do echo "$(date +%T.%N | cut -c1-12) $l"; done >"$T/run.log"; r=${PIPESTATUS[0]}; echo "$(date +%T.%N | cut -c1-12) script exited $r" >>"$T/run.log"; echo "$r" >"$T/rc") &
  killed=""
  for _ in $(seq 1200); do  # up to 120 s: wait for the checkpoint $at, then kill one rank
    if compgen -G "$T/runs/hyperplane/local-*/ckpt-sync/$at.ckpt" >/dev/null; then
      echo "$(date +%T.%N | cut -c1-12) $at.ckpt written" >>"$T/kill.log"
      sleep 0.3
      compgen -G "$T/runs/hyperplane/local-*/ckpt-sync/ckpt-0002.ckpt" >/dev/null && fail "epoch 2 ended before the kill: nothing to test"
      killed=$(pgrep -f "eager-train .*$T/runs/hyperplane/" | tail -n 1)
      [ -n "$killed" ] && kill -KILL "$killed" && echo "$(date +%T.%N | cut -c1-12) killed rank pid $killed" >>"$T/kill.log"
      break
    fi
    [ -f "$T/rc" ] && break
    sleep 0.1
  done
  wait
  sort -s -k1,1 "$T/run.log" "$T/kill.log" 2>/dev/null
  [ -n "$killed" ] || fail "no rank to kill (no checkpoint $at?)"
  [ "$(cat "$T/rc")" = 0 ] || fail "the restarted job exited $(cat "$T/rc")"
  d=$(echo "$T"/runs/hyperplane/local-*)
  # (elastic_local: epoch 2 when the killed rank had made all its epoch-2 deposits: the others end
  # the epoch and checkpoint it; the kill waits only 0.3 s after epoch 1's checkpoint)
  grep -Eq "^restart\.sync\.1=exit [1-9][0-9]*, ranks 4 -> 3, resumed after $want, lost [0-9]* s\$" "$d/job.txt" \
    || fail "job.txt has no restart line 'ranks 4 -> 3, resumed after $want': $(grep restart "$d/job.txt")"
  e=$(sed -n 's/^restart\.sync\.1=.*resumed after epoch \([0-9]*\).*/\1/p' "$d/job.txt")
  src=$d/ckpt-sync/ckpt-000$e.ckpt
  [ "$1" = elastic_mid ] && src=$d/ckpt-sync/$at.ckpt
  "$B/bin/pcoll-validate" results/schema/run.schema.json "$d/sync.json" || fail "sync.json does not validate"
  [ "$(jq -r .environment.ranks "$d/sync.json")" = 3 ] || fail "the resumed run did not have 3 ranks"
  wb=0; [ "$1" = elastic_mid ] && wb=8  # where in the epoch it resumed: the checkpoint's batches
  [ "$(jq -c '[.restarts[] | .batches_done]' "$d/sync.json")" = "[$wb]" ] \
    || fail "sync.json: restarts[].batches_done $(jq -c '[.restarts[] | .batches_done]' "$d/sync.json"), want [$wb]"
  mkdir -p "$T/fresh" && cp "$src" "$T/fresh/latest.ckpt"
  OUT=$T/fresh RANKS=3 MODE=sync EXTRA="--ckpt-dir $T/fresh --resume${steps:+ --ckpt-every-steps $steps}" \
    jobs/local.sh jobs/hyperplane.sbatch "${a[@]}" >/dev/null 2>&1 || fail "the fresh 3-rank run from the checkpoint failed"
  f=$(echo "$T"/fresh/hyperplane/local-*/sync.json)
  q='[.epochs[] | {epoch, train_loss, train_top1, test_loss, test_top1, weights_hash}]'
  [ "$(jq '.epochs | length' "$d/sync.json")" = $((3 - e)) ] || fail "$d/sync.json: not the $((3 - e)) epoch(s) after epoch $e"
  [ "$(jq -c "$q" "$d/sync.json")" = "$(jq -c "$q" "$f")" ] \
    || fail "after the restart: $(jq -c "$q" "$d/sync.json"); fresh 3-rank run from the checkpoint: $(jq -c "$q" "$f")"
  echo "restart: $(grep '^restart' "$d/job.txt"); epochs after it equal a fresh 3-rank run from $(basename "$src"): $(jq -c "$q" "$f")"
  echo "PASS";;
sweep_dry)
  n() { jobs/sweep.sh "$@" --dry-run | grep -c '^sweep.sh: \['; }
  [ "$(n allreduce)" = 1 ] || fail "allreduce: not 1 job"
  [ "$(n hyperplane)" = 12 ] || fail "hyperplane: not 4 modes x 3 levels"
  for e in imagenet cifar10 ucf101 fmnist; do [ "$(n $e)" = 4 ] || fail "$e: not 4 modes"; done
  # (output captured first: grep -q closing the pipe early would fail the pipeline under pipefail)
  out=$(jobs/sweep.sh hyperplane --dry-run)
  grep -q 'MODE=adaptive,DELAY_MS=400 .*hyperplane.sbatch' <<<"$out" || fail "hyperplane levels"
  out=$(jobs/sweep.sh fmnist --local --dry-run -- --epochs 1)
  grep -q 'MODE=majority jobs/local.sh jobs/fmnist.sbatch --epochs 1' <<<"$out" || fail "--local"
  jobs/sweep.sh nosuch --dry-run 2>/dev/null && fail "unknown experiment accepted"
  echo "PASS";;
mpirun_gpus)
  # the mpirun fallback runs its daemons without the job's per-task GPU binding
  printf '#!/bin/sh\necho "args: $*"; env\n' >"$T/mpirun"; chmod +x "$T/mpirun"
  out=$(SLURM_GPUS_PER_TASK=1 SLURM_TRES_PER_TASK=gres/gpu:1 LAUNCHER=mpirun MPIRUN=$T/mpirun RANKS=2 \
        bash -c '. jobs/lib.sh; pcoll_launch x' 2>&1) || { echo "$out"; fail "pcoll_launch failed"; }
  grep -q '^args: -np 2 x' <<<"$out" || { echo "$out"; fail "pcoll_launch did not run MPIRUN"; }
  grep -q '^SLURM_GPUS_PER_TASK\|^SLURM_TRES_PER_TASK' <<<"$out" && fail "mpirun inherits the per-task GPU binding"
  echo "ok: mpirun's daemons get the node's GPUs" ;;
syntax)
  for f in jobs/*.sh jobs/*.sbatch tests/jobs/*.sh; do bash -n "$f" || fail "$f: syntax"; done
  chk() { grep -q "^#SBATCH $2\$" "jobs/$1.sbatch" || fail "jobs/$1.sbatch: no '#SBATCH $2'"; }
  chk allreduce --ntasks=32; chk hyperplane --ntasks=8; chk imagenet --ntasks=64; chk imagenet --gpus-per-task=1
  chk cifar10 --ntasks=8; chk cifar10 --gpus-per-task=1; chk ucf101 --ntasks=8; chk ucf101 --gpus-per-task=1
  chk fmnist --ntasks=4
  # the epochs fmnist.sbatch documents are the trainer's fmnist preset (trainer/config.c's table)
  want=$(sed -n 's/^ *{"fmnist", "[^"]*", "fmnist", "\([0-9]*\)".*/\1/p' trainer/config.c)
  [ -n "$want" ] || fail "trainer/config.c: no fmnist preset line found"
  grep -q "trainer's fmnist preset, $want epochs" jobs/fmnist.sbatch || fail "jobs/fmnist.sbatch does not document the trainer's $want fmnist epochs"
  grep -q 'random:k=2,d=320' jobs/imagenet.sbatch && grep -q 'inherent:unit=' jobs/ucf101.sbatch || fail "paper imbalance defaults"
  if command -v shellcheck >/dev/null; then shellcheck -S warning -x -e SC1090,SC1091 jobs/*.sh jobs/*.sbatch tests/jobs/*.sh || fail shellcheck; fi
  echo "PASS";;
*) echo "usage: $0 local_fmnist|local_allreduce|elastic_local|missing_data|sweep_dry|syntax" >&2; exit 2;;
esac
