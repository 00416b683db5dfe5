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
#   race_dry          jobs/ddp_race.sh --dry-run: each named schedule's spec for eager-train and DDP,
#                     NAME=SPEC, --epoch-mode, --interfere; bad names / values refused, named
#   sched_race_dry    jobs/sched_race.sh --dry-run: the issue-56 measurement's runs
#   torch_race_dry    jobs/torch_race.sh (ddp_race.sh --eager torch) --dry-run: issue 55's runs,
#                     fmnist_resnet.py and DDP with the same options and delays; a reduced setting;
#                     refusals; on made-up run files, the tables and the sync/DDP overhead figures
#   race_ddp_delays   eager-train --epoch-mode global and ddp_mirror.py --imbalance-index global draw
#                     the same delays of a schedule (per-rank injected totals; 77 without torch)
#   interfere         jobs/interfere.sh on stand-in ranks: the hog runs in its span only, pinned to
#                     the rank's cores (or cores=), gone when the job ends, dies, or the script is
#                     killed (TERM, KILL); bad specs refused naming the field
#   experiments_dry   experiments/<claim>.sh: --dry-run, unknown options, the claims' commands, --table
#   interfere_local   INTERFERE / local.sh --interfere on a real 2-rank run: the hog finds rank 1
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
B=${B:-build}; export B
T=$(mktemp -d /tmp/pcoll-jobs.XXXXXX); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
unset RANKS MODE POLICY IMBALANCE DATA EPOCHS OUT EXTRA PCOLL_ROOT PCOLL_JOB_ID LAUNCHER SLURM_JOB_ID INTERFERE
# hogs P: the pcoll-hog processes started by the interfere.sh of pid P (they watch it)
hogs() { pgrep -f "pcoll-hog (cpu|mem) --mb [0-9]+ --watch $1\$"; }
# cpus PID: the CPUs PID may run on
cpus() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status"; }

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
  for f in jobs/*.sh jobs/*.sbatch tests/jobs/*.sh experiments/*.sh; do bash -n "$f" || fail "$f: syntax"; done
  chk() { grep -q "^#SBATCH $2\$" "jobs/$1.sbatch" || fail "jobs/$1.sbatch: no '#SBATCH $2'"; }
  chk allreduce --ntasks=32; chk hyperplane --ntasks=8; chk imagenet --ntasks=64; chk imagenet --gpus-per-task=1
  chk cifar10 --ntasks=8; chk cifar10 --gpus-per-task=1; chk ucf101 --ntasks=8; chk ucf101 --gpus-per-task=1
  chk fmnist --ntasks=4
  # the epochs fmnist.sbatch documents are the trainer's fmnist preset (trainer/config.c's table)
  want=$(sed -n 's/^ *{"fmnist", "[^"]*", "fmnist", "\([0-9]*\)".*/\1/p' trainer/config.c)
  [ -n "$want" ] || fail "trainer/config.c: no fmnist preset line found"
  grep -q "trainer's fmnist preset, $want epochs" jobs/fmnist.sbatch || fail "jobs/fmnist.sbatch does not document the trainer's $want fmnist epochs"
  grep -q 'random:k=2,d=320' jobs/imagenet.sbatch && grep -q 'inherent:unit=' jobs/ucf101.sbatch || fail "paper imbalance defaults"
  if command -v shellcheck >/dev/null; then # two at a time, 5 scripts each
    printf '%s\n' jobs/*.sh jobs/*.sbatch tests/jobs/*.sh experiments/*.sh |
      xargs -P 2 -n 5 shellcheck -S warning -x -e SC1090,SC1091 || fail shellcheck
  fi
  echo "PASS";;
experiments_dry)
  # experiments/<claim>.sh: each --dry-run prints its commands and exits 0, an unknown option is
  # refused with one line (exit 2); regimes and ddp print exactly the commands of the claims
  # (docs/EXPERIMENTS.md); regimes.sh --table prints the regime table of a small crafted folder
  for e in regimes ddp torch allreduce hyperplane staleness cpu_step schedules; do
    out=$(bash experiments/$e.sh --dry-run 2>&1) || fail "$e --dry-run: exit $?: $out"
    [ -n "$out" ] || fail "$e --dry-run printed nothing"
    err=$(bash experiments/$e.sh --no-such-option 2>&1); st=$?
    [ $st = 2 ] && [ "$err" = "experiments/$e.sh: unknown option --no-such-option (see --help)" ] ||
      fail "$e: unknown option: exit $st, '$err'"
    out=$(bash experiments/$e.sh --help)
    grep -q "bash experiments/$e.sh" <<<"$out" || fail "$e --help does not show its usage"
  done
  want() { # SCRIPT ARGS... -- LINE: the script's --dry-run prints LINE exactly
    local a=() l
    while [ "$1" != -- ]; do a+=("$1"); shift; done
    l=$2
    out=$(bash "${a[@]}" --dry-run) # not piped into grep -q: under pipefail its early exit fails the writer
    grep -qxF -- "$l" <<<"$out" || { echo "$out"; fail "${a[*]} --dry-run: no line '$l'"; }
  }
  want experiments/regimes.sh --ranks 4 -- 'bash jobs/ddp_race.sh --epochs 3 --limit-train 8000 --curve-test 2000 --epoch-mode global --both-opts "--milestones 2" --no-ddp --seeds "1 2 3" --ranks 4 --modes "sync solo majority adaptive" --imbalances "none linear lognormal slow random1" --out results/runs/regimes-p4'
  want experiments/regimes.sh --ranks 8 -- 'bash jobs/ddp_race.sh --epochs 3 --limit-train 8000 --curve-test 2000 --epoch-mode global --both-opts "--milestones 2" --no-ddp --seeds "1 2 3" --ranks 8 --modes "sync solo majority adaptive" --imbalances "none linear lognormal slow random1" --out results/runs/regimes-p8'
  want experiments/regimes.sh -- "$B/bin/pcoll-compare --versus adaptive results/runs/regimes-p4/p4"
  want experiments/ddp.sh --ranks 4 -- 'bash jobs/ddp_race.sh --epochs 2 --limit-train 12000 --curve-test 2000 --epoch-mode global --both-opts "--milestones 1" --seeds "1 2 3" --ranks 4 --modes "sync majority adaptive" --imbalances "none random1 random2 lognormal" --out results/runs/ddp-p4'
  want experiments/schedules.sh -- 'bash jobs/ddp_race.sh --epochs 3 --limit-train 8000 --curve-test 2000 --epoch-mode global --both-opts "--milestones 2" --seeds "1 2 3" --ranks 4 --modes "sync solo majority adaptive" --imbalances "strag_mid slow_half ln_wave" --out results/runs/schedules-p4'
  want experiments/schedules.sh --budget issue -- 'bash jobs/sched_race.sh --ranks 4 --seeds "1 2 3" --modes "sync solo majority adaptive adaptive+change=steps" --out results/runs/sched-race'
  want experiments/schedules.sh --budget issue -- "$B/bin/pcoll-compare --versus adaptive results/runs/sched-race/p4"
  want experiments/torch.sh -- 'bash jobs/torch_race.sh --ranks 4 --epochs 2 --limit-train 8192 --both-opts "--milestones 1" --out results/runs/torch-race-p4'
  want experiments/torch.sh --ranks 8 -- 'bash jobs/torch_race.sh --ranks 8 --epochs 2 --limit-train 8192 --both-opts "--milestones 1" --out results/runs/torch-race-p8'
  want experiments/torch.sh --ranks 8 -- 'cat results/runs/torch-race-p8/compare-p8.md results/runs/torch-race-p8/compare-p8-held.md results/runs/torch-race-p8/overhead-p8.txt'
  # the commands the drivers would run are accepted by them (their own --dry-run)
  bash jobs/ddp_race.sh --dry-run --epochs 3 --limit-train 8000 --curve-test 2000 --epoch-mode global --both-opts "--milestones 2" \
    --no-ddp --seeds "1 2 3" --ranks 4 --modes "sync solo majority adaptive" --imbalances "none linear lognormal slow random1" \
    --out "$T/r" >"$T/race.txt" 2>&1 || { fail "ddp_race.sh refuses regimes' options"; cat "$T/race.txt"; }
  [ "$(grep -c 'eager-train' "$T/race.txt")" = 61 ] || fail "regimes: $(grep -c eager-train "$T/race.txt") eager-train runs, want 1 + 5 x 3 x 4"
  # --table on a crafted folder: two seeds of sync, solo, adaptive under one imbalance
  if [ -x "$B/bin/pcoll-compare" ] && command -v jq >/dev/null; then
    R=tests/results/runs
    mkdir -p "$T/reg/p4/linear"
    for s in 1 2; do
      for m in sync solo adaptive; do
        jq --argjson s $s '.config.seed = $s | .epochs[-1].test_top1 += ($s / 100) | .summary.final_test_top1 = .epochs[-1].test_top1' \
          $R/fmnist_$m.json >"$T/reg/p4/linear/$m-s$s.json"
      done
    done
    out=$(bash experiments/regimes.sh --table --out "$T/reg" 2>&1) || fail "regimes.sh --table: exit $?: $out"
    grep -q '^### fmnist: .*: adaptive against the best static mode$' <<<"$out" || fail "regimes.sh --table: no regime table: $out"
    grep -q '^| linear:unit=20 | adaptive/streak | .* vs ' <<<"$out" || fail "regimes.sh --table: no adaptive row: $out"
    [ -s "$T/reg/table.md" ] || fail "regimes.sh --table: no DIR/table.md"
    [ ! -e "$T/reg/meta.txt" ] || fail "regimes.sh --table wrote meta.txt (it runs nothing)"
    err=$(bash experiments/regimes.sh --table --out "$T/none" 2>&1) && fail "regimes.sh --table on no runs: exit 0"
    [ "$err" = "experiments/regimes.sh: no runs in $T/none/p4" ] || fail "regimes.sh --table on no runs: '$err'"
    # schedules.sh --table: the switch log places each switch in global epochs and names its kind
    mkdir -p "$T/sch/p4/strag_mid"
    for m in sync solo; do cp "$T/reg/p4/linear/$m-s1.json" "$T/sch/p4/strag_mid/$m-s1.json"; done
    jq '.config.imbalance = "none@0ep/random:k=1,d=9@1ep/none@2ep" | .epochs |= map(.rounds = 10)
      | .controller.switches = [
          {epoch: 0, round: 2, from: "sync", to: "majority", reason: "probe: sync score 1+-1 (1/s, lag 0.00): sync -> majority"},
          {epoch: 0, round: 4, from: "majority", to: "sync", reason: "sync 2+-1, majority 1+-1: majority -> sync (unresolved: contest due later)"},
          {epoch: 1, round: 5, from: "sync", to: "majority", reason: "rate changed twice: sync score 1+-0.1, pooled before 2+-0.1; probe: sync -> majority"},
          {epoch: 2, round: 1, from: "solo", to: "sync", reason: "probe due: solo score 3+-0.1, pooled before 3+-0.1; probe: solo -> sync"}]' \
      "$T/reg/p4/linear/adaptive-s1.json" >"$T/sch/p4/strag_mid/adaptive-s1.json"
    out=$(bash experiments/schedules.sh --table --out "$T/sch" 2>&1)
    grep -qxF '| strag_mid | adaptive,window=32 | 1 | 0, 1, 2 | 0.2 sync -> majority (probing); 0.4 majority -> sync (chosen); 1.5 sync -> majority (detected); 2.1 solo -> sync (probe due) |' <<<"$out" ||
      fail "schedules.sh --table: no switch log line: $out"
    grep -q '^### fmnist: .*: adaptive against the best static mode$' <<<"$out" || fail "schedules.sh --table: no regime table: $out"
    # --budget issue keeps both rank counts in one folder: its table is DIR/table-pP.md; --table runs nothing
    out=$(bash experiments/schedules.sh --budget issue --table --out "$T/sch" 2>&1) # exit 1: no DDP race tables here
    [ -s "$T/sch/table.md" ] && [ -s "$T/sch/table-p4.md" ] && [ ! -e "$T/sch/meta.txt" ] ||
      fail "schedules.sh --table, --budget issue --table: want DIR/table.md, DIR/table-p4.md and no meta.txt (it runs nothing): $out"
  else
    echo "(no $B/bin/pcoll-compare or jq: --table not checked)"
  fi
  echo "PASS";;
race_dry)
  r() { bash jobs/ddp_race.sh --dry-run --ranks 4 --seeds 1 --modes sync "$@" 2>&1; }
  out=$(r --epochs 6 --epoch-mode global --imbalances "strag_mid slow_half ln_wave x_1=none@0/linear:unit=5@3")
  echo "$out"
  want() {  # want NAME SPEC: the eager-train run and the DDP run of NAME get SPEC, global epochs
    grep -q -- "eager-train .*--epoch-mode global --mode sync --seed 1 --imbalance $2 .*/p4/$1/sync-s1.json\$" <<<"$out" ||
      fail "$1: no eager-train run with --epoch-mode global --imbalance $2"
    grep -q -- "ddp_mirror.py .*--imbalance $2 --imbalance-index global .*/p4/$1/ddp-s1.json\$" <<<"$out" ||
      fail "$1: no DDP run with --imbalance $2 --imbalance-index global"
  }
  want strag_mid 'none@0ep/random:k=1,d=2xSTEP_MS@2ep/none@4ep'
  want slow_half 'none@0ep/slow:rank=3,factor=3@3ep'
  want ln_wave 'lognormal:mean=1xSTEP_MS,std=0.3xSTEP_MS@0ep/lognormal:mean=1xSTEP_MS,std=0.6xSTEP_MS@2ep/lognormal:mean=1xSTEP_MS,std=0.3xSTEP_MS@4ep'
  want x_1 'none@0/linear:unit=5@3'
  # delays in ms, busy=1 in every phase, phase starts at fractions of --epochs, 8 ranks
  out=$(r --epochs 2 --ranks 8 --imbalances "strag_mid slow_half ln_wave" --delay-x 150ms --ln-x 90ms --busy --no-ddp)
  for w in 'none@0ep/random:k=1,d=150,busy=1@0.666667ep/none@1.33333ep' 'none@0ep/slow:rank=7,factor=3,busy=1@1ep' \
    'lognormal:mean=90,std=27,busy=1@0ep/lognormal:mean=90,std=54,busy=1@0.666667ep/lognormal:mean=90,std=27,busy=1@1.33333ep'; do
    grep -q -- "--imbalance $w " <<<"$out" || fail "--epochs 2 --ranks 8 --delay-x 150ms --ln-x 90ms --busy: no --imbalance $w"
  done
  # MODE/FLAG=VALUE: eager-train's --FLAG VALUE, after the policy options, its own file
  out=$(r --epochs 2 --imbalances none --modes "solo/final-sync=2 adaptive+change=steps/final-sync=1/tau=3" --no-ddp)
  grep -q -- "--mode solo --final-sync 2 --seed 1 .*/p4/none/solo_final-sync_2-s1.json\$" <<<"$out" ||
    fail "solo/final-sync=2: no run with --mode solo --final-sync 2 into solo_final-sync_2-s1.json"
  grep -q -- "--mode adaptive --policy-opts change=steps --final-sync 1 --tau 3 --seed 1 .*/adaptive_change_steps_final-sync_1_tau_3-s1.json\$" <<<"$out" ||
    fail "adaptive+change=steps/final-sync=1/tau=3: not --policy-opts change=steps --final-sync 1 --tau 3"
  out=$(r --epochs 2 --imbalances none --interfere 'cpu:ranks=3,start=1,end=2' --no-ddp)
  grep -q '^bash jobs/interfere.sh --ranks 4 cpu:ranks=3,start=1,end=2 -- .*eager-train .*/none/sync-s1.json$' <<<"$out" || fail "--interfere: the race run is not under interfere.sh"
  # refused, naming what: an unknown name, a schedule without --epochs, a bad NAME=, --epoch-mode, --targets, --interfere
  bad() {  # bad WANT ARGS...: ddp_race.sh ARGS exits 2 with one line containing WANT
    local o rc
    o=$(r "${@:2}"); rc=$?
    [ $rc = 2 ] && grep -qF -- "$1" <<<"$o" || fail "ddp_race.sh ${*:2}: exit $rc, '$o' (want exit 2 naming '$1')"
    echo "refused: ${*:2}: $o"
  }
  bad "'strag_middle' is not" --epochs 6 --imbalances strag_middle
  bad "the schedule 'ln_wave'" --imbalances ln_wave
  bad "'a/b=none'" --epochs 6 --imbalances a/b=none
  bad "--epoch-mode takes shard or global, not 'globl'" --epoch-mode globl
  bad "--targets: '4:1.5'" --targets "0.8 4:1.5"
  bad "rank 4 is not below the job's 4 ranks" --interfere cpu:ranks=4,start=0
  bad "'final-sync' is not FLAG=VALUE" --modes "solo/final-sync"
  bad "/FLAG=VALUE is eager-train's" --eager torch --modes "solo/final-sync=2"
  echo "PASS";;
sched_race_dry)
  out=$(bash jobs/sched_race.sh --dry-run 2>&1) || { rc=$?; echo "$out"; fail "sched_race.sh --dry-run exit $rc"; }
  for P in 4 8; do
    for sch in strag_mid slow_half ln_wave; do
      for s in 1 2 3; do
        for m in sync solo majority adaptive; do
          grep -q -- "-np $P .*--limit-train 30000 .*--milestones 4 --epochs 6 .*--epoch-mode global --mode $m .*results/runs/sched-race/p$P/$sch/$m-s$s.json\$" <<<"$out" ||
            fail "no $m run of P=$P $sch seed $s with 6 global epochs of 30000 samples"
        done
        grep -q -- "ddp_mirror.py --ranks $P .*--imbalance-index global .*p$P/$sch/ddp-s$s.json\$" <<<"$out" || fail "no DDP run of P=$P $sch seed $s"
      done
    done
  done
  [ "$(grep -c 'eager-train' <<<"$out")" = $((2 * (1 + 3 * 3 * 4))) ] || fail "not 2 x (1 calibration + 3 schedules x 3 seeds x 4 modes) eager-train runs"
  # --stationary adds the five regimes; --small is one P, one seed
  [ "$(bash jobs/sched_race.sh --dry-run --stationary | grep -c eager-train)" = $((2 * (1 + 8 * 3 * 4))) ] || fail "--stationary: not 8 imbalances x 3 seeds x 4 modes per P (and the calibration)"
  out=$(bash jobs/sched_race.sh --dry-run --small)
  [ "$(grep -c 'eager-train' <<<"$out")" = $((1 + 3 * 4)) ] && ! grep -q -- '-np 8' <<<"$out" || fail "--small: not 4 ranks, 1 seed"
  echo "PASS";;
torch_race_dry)
  out=$(bash jobs/torch_race.sh --dry-run 2>&1) || { rc=$?; echo "$out"; fail "torch_race.sh --dry-run exit $rc"; }
  # every eager_sgd run has a DDP run of the same P, imbalance and seed with the same options but
  # --mode (the launcher and the library before the script; DDP's --ranks P before its options)
  lib="env EAGER_SGD_LIB=$PWD/$B/libeager.so $B/venv/bin/python3 examples/fmnist_resnet.py"
  n=0
  while read -r line; do
    [[ $line =~ ^(.*)\ -np\ ([0-9]+)\ "$lib"\ (.*)\ --mode\ ([a-z]+)\ (.*/p[48]/([a-z0-9]+)/)torch-[a-z]+-s([0-9])\.json$ ]] ||
      fail "not an eager_sgd run under the launcher with the library: $line"
    P=${BASH_REMATCH[2]} opts="${BASH_REMATCH[3]} ${BASH_REMATCH[5]}ddp-s${BASH_REMATCH[7]}.json"
    grep -qxF -- "$B/venv/bin/python3 trainer/ref/ddp_mirror.py --ranks $P $opts" <<<"$out" ||
      fail "no DDP run with the options of: $line (want: ddp_mirror.py --ranks $P $opts)"
    n=$((n + 1))
  done < <(grep fmnist_resnet.py <<<"$out")
  # 2 P x (a calibration + 4 imbalances x 3 seeds x 3 modes); 2 x 4 x 3 DDP runs
  [ $n = $((2 * (1 + 4 * 3 * 3))) ] && [ "$(grep -c ddp_mirror.py <<<"$out")" = 24 ] || fail "$n eager_sgd runs (want 74) and $(grep -c ddp_mirror.py <<<"$out") DDP runs (want 24)"
  for P in 4 8; do
    for s in 1 2 3; do
      for m in sync adaptive majority; do
        for w in none:none random1:random:k=1,d=2xSTEP_MS random2:random:k=2,d=2xSTEP_MS \
          lognormal:lognormal:mean=1xSTEP_MS,std=0.6xSTEP_MS; do
          grep -q -- "-np $P $lib --experiment fmnist --limit-train 0 --limit-test 0 --curve-every 93 --curve-test 2000 --mode $m --seed $s --imbalance ${w#*:} --threads [0-9]* --quiet --out results/runs/torch-race/p$P/${w%%:*}/torch-$m-s$s.json\$" <<<"$out" ||
            fail "no $m run of P=$P ${w%%:*} seed $s with the preset's epochs and samples"
        done
      done
    done
  done
  grep -q "step time .* kept in results/runs/torch-race/p8/step_ms.torch" <<<"$out" || fail "the torch step time is not kept in p8/step_ms.torch"
  # a reduced setting: the options after torch_race.sh's defaults win
  out=$(bash jobs/torch_race.sh --dry-run --ranks 4 --seeds 2 --imbalances "none random1" --epochs 2 --limit-train 8192 --both-opts "--milestones 1")
  [ "$(grep -c -- '-np 4 .*fmnist_resnet.py --experiment fmnist --limit-train 8192 --limit-test 0 --milestones 1 --epochs 2 .*--seed 2 ' <<<"$out")" = 7 ] &&
    [ "$(grep -c -- 'ddp_mirror.py --ranks 4 --experiment fmnist --limit-train 8192 --limit-test 0 --milestones 1 --epochs 2 .*--seed 2 ' <<<"$out")" = 2 ] &&
    ! grep -q -- '-np 8\|--ranks 8\|seed [13] ' <<<"$out" || { echo "$out"; fail "reduced setting: not 7 eager_sgd and 2 DDP runs of P=4, seed 2, 2 epochs of 8192"; }
  bad() {  # bad WANT ARGS...: ddp_race.sh ARGS exits 2 with one line containing WANT
    local o rc
    o=$(bash jobs/ddp_race.sh --dry-run "${@:2}" 2>&1); rc=$?
    [ $rc = 2 ] && [ "$(wc -l <<<"$o")" = 1 ] && grep -qF -- "$1" <<<"$o" || fail "ddp_race.sh ${*:2}: exit $rc, '$o' (want exit 2, one line naming '$1')"
    echo "refused: ${*:2}: $o"
  }
  bad "--eager takes train (eager-train) or torch" --eager tf
  bad "--eager torch: --train-opts" --eager torch --train-opts "--late go"
  bad "--eager torch: examples/fmnist_resnet.py draws its delays by shard steps" --eager torch --epoch-mode global
  # the tables and the overhead on made-up runs (every run present: nothing is launched; DDP_PY is
  # only asked to import torch): seed 1 sync 110 ms a step, DDP 100, seed 2 both 120 (epoch_s over
  # steps / ranks: 2 epochs of 0.55 s and 20 steps over 4 ranks = 110 ms): ratios 1.1 and 1.0, paired
  # by seed (the ratio of the means would be 115 / 110 = 1.045)
  if [ -f "$B/libeager.so" ]; then
    d=$T/tr/p4
    mk() {  # mk FILE SCHEMA MODE SEED EPOCH_S TOP1
      mkdir -p "$(dirname "$1")"
      jq -n --arg sc "$2" --arg m "$3" --argjson s "$4" --argjson es "$5" --argjson t "$6" '{schema: $sc, program: (if $m == "ddp" then "pytorch-ddp" else null end),
        experiment: "fmnist", config: {experiment: "fmnist", mode: $m, seed: $s, ranks: 4, imbalance: "none", epochs: 2, batch: 64},
        environment: {ranks: 4}, epochs: [range(2) | {epoch: ., wall_s: ((. + 1) * $es), epoch_s: $es, steps: 20, test_top1: $t}],
        ranks: [range(4) | {rank: ., steps: 10, compute_s: 0.5}], summary: {wall_s: (2 * $es), final_test_top1: $t}} | del(.program | nulls)' >"$1"
    }
    for s in 1 2; do
      mk "$d/none/torch-sync-s$s.json" eager-sgd-run/1 sync $s "$(awk -v s=$s 'BEGIN { print 0.5 + 0.05 * s }')" 0.8
      mk "$d/none/ddp-s$s.json" ddp-run/1 ddp $s "$(awk -v s=$s 'BEGIN { print 0.4 + 0.1 * s }')" 0.8
    done
    echo "50 none/torch-sync-s1.json" >"$d/step_ms.torch"
    out=$(DDP_PY=true bash jobs/ddp_race.sh --eager torch --ranks 4 --seeds "1 2" --imbalances none --modes sync --epochs 2 --out "$T/tr" 2>&1) ||
      { rc=$?; echo "$out"; fail "ddp_race.sh --eager torch on made-up runs: exit $rc"; }
    echo "$out"
    grep -q "have $d/none/torch-sync-s2.json" <<<"$out" && ! grep -q 'fmnist_resnet.py' <<<"$out" || fail "a run was launched though every file was there"
    for f in compare-p4.md compare-p4-held.md overhead-p4.txt; do [ -s "$T/tr/$f" ] || fail "no $f"; done
    grep -q '^  seed 1: DDP 100.00, eager_sgd sync (PyTorch) 110.00, ratio 1.1000$' "$T/tr/overhead-p4.txt" &&
      grep -q '^  seed 2: DDP 120.00, eager_sgd sync (PyTorch) 120.00, ratio 1.0000$' "$T/tr/overhead-p4.txt" &&
      grep -q '^  mean over 2 seed(s): DDP 110.00 (sd 14.1), eager_sgd sync (PyTorch) 115.00 (sd 7.07), ratio 1.0500 (sd 0.0707): +5.0%$' "$T/tr/overhead-p4.txt" ||
      fail "overhead-p4.txt: not 110 and 120 ms against 100 and 120, ratio 1.05 (sd 0.0707) paired by seed"
  else echo "no $B/libeager.so: the made-up runs' tables not checked"; fi
  echo "PASS";;
race_ddp_delays)
  DDP_PY=${DDP_PY:-$B/venv/bin/python3}
  "$DDP_PY" -c 'import torch' 2>/dev/null || { echo "SKIP: $DDP_PY has no torch (make ddp-venv)"; exit 77; }
  . jobs/mpi.sh && pcoll_mpi_use "$B" || exit 2
  # a schedule in epochs over 2 global epochs, delays slept (D = 100 ms): the per-rank injected
  # totals of eager-train's sync run and DDP's agree within D / 2 when DDP draws at eager-train's
  # index (a draw elsewhere moves D between the ranks; a sleep's overshoot is well under a ms).
  # (Under the shard index the totals differ by more: 2026-12-06, eager-train [0.40, 1.29] s,
  # DDP global [0.42, 1.28], shard [0.95, 0.83]: epoch 1's draws land elsewhere.)
  imb='none@0ep/random:k=1,d=100@0.5ep/linear:unit=4@1.5ep'
  a=(--experiment hyperplane --hp-features 64 --hp-samples 2048 --epochs 2 --seed 3 --imbalance "$imb" --threads 1 --quiet)
  $MPIRUN -np 2 "$B/bin/eager-train" "${a[@]}" --mode sync --epoch-mode global --out "$T/e.json" || fail "eager-train failed"
  "$DDP_PY" trainer/ref/ddp_mirror.py --ranks 2 "${a[@]}" --imbalance-index global --out "$T/d.json" || fail "ddp_mirror.py failed"
  e=$(jq -c '[.ranks[].inject_s]' "$T/e.json") g=$(jq -c '[.ranks[].inject_s]' "$T/d.json")
  echo "injected s per rank: eager-train $e, DDP with the global index $g"
  jq -n --argjson a "$e" --argjson b "$g" '[range(0; 2) as $i | ($a[$i] - $b[$i]) | fabs] | max < 0.050' | grep -q true ||
    fail "DDP with --imbalance-index global injects $g, eager-train --epoch-mode global $e (not within 50 ms a rank)"
  echo "PASS";;
interfere)
  I=jobs/interfere.sh
  c=$(( $(nproc) - 1 ))  # the stand-in rank's CPU: the last one (not the whole machine)
  # a stand-in rank 1 (Open MPI's variable) bound to CPU c, 4 s; a cpu hog beside it from 1 to 2.5 s
  bash $I 'cpu:ranks=1,start=1,end=2.5' -- env OMPI_COMM_WORLD_RANK=1 taskset -c $c sleep 4 2>"$T/i.log" &
  ip=$!
  t0=$(date +%s.%N) first="" last="" pin=""
  while kill -0 $ip 2>/dev/null; do
    h=$(hogs $ip)
    if [ -n "$h" ]; then
      t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
      [ -n "$first" ] || first=$t
      last=$t
      pin=$(cpus "$h" 2>/dev/null || echo "$pin")
    fi
    sleep 0.05
  done
  wait $ip; rc=$?
  cat "$T/i.log"
  echo "hog seen from $first s to $last s on cpus $pin; interfere.sh exit $rc"
  [ $rc = 0 ] || fail "interfere.sh exited $rc, not the command's 0"
  [ -n "$first" ] || fail "no hog seen in the span 1-2.5 s"
  awk -v f="$first" -v l="$last" 'BEGIN { exit !(f >= 0.9 && f <= 1.6 && l >= 2.0 && l <= 2.9) }' ||
    fail "the hog ran from $first s to $last s, not in its span 1-2.5 s"
  [ "$pin" = "$c" ] || fail "the hog ran on cpus '$pin', not the rank's $c"
  # cores= pins there, with no rank; procs=2: two hogs; no end: until the command ends (1.5 s)
  bash $I 'mem:cores=0,start=0.2,procs=2,mb=8' -- sleep 1.5 2>"$T/i.log" &
  ip=$!
  sleep 0.8
  h=$(hogs $ip)
  [ "$(wc -w <<<"$h")" = 2 ] || fail "cores=0,procs=2: $(wc -w <<<"$h") hogs, not 2"
  for p in $h; do [ "$(cpus "$p")" = 0 ] || fail "cores=0: hog $p on cpus $(cpus "$p")"; done
  wait $ip
  sleep 0.1
  [ -z "$(hogs $ip)" ] || fail "hogs $(hogs $ip) outlived the command's end"
  # the job dies (its rank killed): interfere.sh ends with its status, the hog with it
  bash $I 'cpu:ranks=0,start=0' -- env PMI_RANK=0 sleep 30 2>"$T/i.log" &
  ip=$!
  for _ in $(seq 50); do [ -n "$(hogs $ip)" ] && break; sleep 0.1; done
  [ -n "$(hogs $ip)" ] || fail "PMI_RANK=0: no hog beside rank 0 within 5 s"
  pkill -KILL -P $ip -x sleep
  wait $ip; rc=$?
  sleep 0.1
  [ $rc = 137 ] || fail "the killed job's interfere.sh exited $rc, not 137"
  [ -z "$(hogs $ip)" ] || fail "the hog outlived the killed job"
  # interfere.sh killed: TERM ends the command and the hog at once; KILL: the hog sees it gone
  for sig in TERM KILL; do
    bash $I 'cpu:ranks=2,start=0' -- env PMIX_RANK=2 sleep 30 2>"$T/i.log" &
    ip=$!
    for _ in $(seq 50); do [ -n "$(hogs $ip)" ] && break; sleep 0.1; done
    h=$(hogs $ip)
    [ -n "$h" ] || fail "PMIX_RANK=2: no hog within 5 s"
    kill -$sig $ip
    wait $ip 2>/dev/null
    sleep 0.3
    [ -n "$(hogs $ip)" ] && fail "SIG$sig to interfere.sh: hog $h still running 0.3 s later"  # (a zombie has no command line)
    [ $sig = TERM ] && pgrep -P $ip >/dev/null && fail "SIGTERM to interfere.sh: the command still runs"
    pkill -KILL -f "^sleep 30\$" -P "$ip" 2>/dev/null
    echo "SIG$sig to interfere.sh: hog $h gone"
  done
  # bad specs: exit 2, one line naming the field
  for b in 'gpu:ranks=1,start=0|kind must be cpu or mem' 'cpu|no fields' 'cpu:ranks=1|needs start=' \
    'cpu:start=1|needs ranks= or cores=' 'cpu:ranks=1,cores=0,start=0|ranks= and cores= together' \
    'cpu:ranks=a,start=0|ranks= takes' 'cpu:ranks=1,start=-1|start= takes' 'cpu:ranks=1,start=5,end=2|end=2 is not after start=5' \
    'cpu:ranks=1,start=0,procs=0|procs= takes' 'mem:ranks=1,start=0,mb=x|mb= takes' 'cpu:ranks=1,start=0,when=3|unknown field' \
    'cpu:ranks=9,start=0|rank 9 is not below' 'cpu:cores=0,1,start=0|field' 'cpu:ranks=0,start=0;mem|no fields after mem'; do
    o=$(bash $I --ranks 4 --check "${b%%|*}" 2>&1); rc=$?
    [ $rc = 2 ] && [ "$(wc -l <<<"$o")" = 1 ] && grep -qF -- "${b#*|}" <<<"$o" || fail "spec '${b%%|*}': exit $rc, '$o' (want exit 2, one line with '${b#*|}')"
    echo "refused: $o"
  done
  echo "PASS";;
interfere_local)
  # a real run: RANKS=2 hyperplane job with a CPU hog beside rank 1 for 0-60 s (the run ends first):
  # the hog found rank 1 (an eager-train process) through the MPI's rank variable, and is gone after
  out=$(OUT=$T/runs RANKS=2 MODE=sync jobs/local.sh --interfere 'cpu:ranks=1,start=0,end=60' jobs/hyperplane.sbatch \
        --hp-features 64 --hp-samples 1024 --epochs 2 --quiet 2>&1) || { rc=$?; echo "$out"; fail "local.sh --interfere exit $rc"; }
  echo "$out"
  grep -q '^interfere: [0-9.]* s: cpu hog [0-9]* on cpus [0-9,-]* beside rank 1 (pid [0-9]*, eager-train)$' <<<"$out" || fail "no hog beside rank 1 (an eager-train)"
  grep -q '^interfere=cpu:ranks=1,start=0,end=60$' "$T"/runs/hyperplane/local-*/job.txt || fail "job.txt has no interfere= line"
  h=$(sed -n 's/^interfere: [0-9.]* s: cpu hog \([0-9]*\) .*/\1/p' <<<"$out")
  [ -s "/proc/$h/cmdline" ] && fail "hog $h outlived the job"  # (a zombie has no command line)
  # INTERFERE refused before anything runs
  out=$(OUT=$T/bad RANKS=2 INTERFERE='cpu:ranks=2,start=0' jobs/local.sh jobs/hyperplane.sbatch 2>&1); rc=$?
  [ $rc = 2 ] && grep -q "rank 2 is not below the job's 2 ranks" <<<"$out" && [ ! -e "$T/bad" ] || fail "a bad INTERFERE: exit $rc, '$out'"
  echo "PASS";;
*) echo "usage: $0 local_fmnist|local_allreduce|elastic_local|missing_data|sweep_dry|syntax|experiments_dry|race_dry|sched_race_dry|torch_race_dry|race_ddp_delays|interfere|interfere_local" >&2; exit 2;;
esac
