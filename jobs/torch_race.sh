#!/bin/bash
# torch_race.sh: issue 55's race with PyTorch's kernels on both sides: the fmnist preset's ResNet in
# PyTorch, plain DDP (gloo, trainer/ref/ddp_mirror.py) against eager_sgd (examples/fmnist_resnet.py
# over $B/libeager.so) in modes sync, adaptive and majority, on identical initial weights, data order
# and injected delays; jobs/ddp_race.sh --eager torch with the issue's settings:
#   --ranks "4 8" --seeds "1 2 3" (interleaved: per imbalance, each seed's runs of every mode and DDP
#   in turn) --imbalances "none random1 random2 lognormal" (the paper's random straggler, k = 1 and
#   2, 2 step times; log-normal delays of mean 1 step time and --ln-std-x 0.6: the step time itself,
#   compute + delay, has the paper's std/mean 0.3) --modes "sync adaptive majority", the preset's
#   epochs and samples, into results/runs/torch-race.
#
#   bash jobs/torch_race.sh [ddp_race.sh options]
# Options after these defaults override them (ddp_race.sh takes the last of each), e.g. a reduced
# setting: --ranks 4 --epochs 2 --limit-train 8192 --both-opts "--milestones 1"; --dry-run prints
# the commands. See jobs/ddp_race.sh --help for every option.
# Out, per P: DIR/compare-pP.md (time to DDP's mean final top-1, first crossing; the final top-1 on
# the whole test set, "top-1" column), DIR/compare-pP-held.md (the same, held), DIR/overhead-pP.txt
# (eager_sgd sync's per-step time against DDP's without imbalance, paired by seed).
exec bash "$(dirname "$0")/ddp_race.sh" --eager torch --ranks "4 8" --seeds "1 2 3" \
  --imbalances "none random1 random2 lognormal" --ln-std-x 0.6 --modes "sync adaptive majority" \
  --out results/runs/torch-race "$@"
