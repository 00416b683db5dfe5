#!/usr/bin/env python3
"""ddp_mirror.py: PyTorch DistributedDataParallel (gloo, CPU) run of an eager-train preset, mirrored
exactly, so that eager-train's modes race the tool its users run today on the same job.

What is mirrored (sources: trainer/config.c presets, trainer/nn/zoo.c, init.c, optim.c,
trainer/data/common.c, iter.c, collectives/sim/imbalance.c, trainer/main.c):
  presets    fmnist (resnet-fmnist: conv3x3(1->16)+BN+ReLU, 3 stages x 1 BasicBlock, 16/32/64
             channels, stride 2 at stages 2-3, 1x1 conv+BN shortcut where the shape changes, global
             average pool, Linear(64->10); BN momentum 0.1, eps 1e-5; Fashion-MNIST IDX files) and
             hyperplane (Linear(F->1), MSE; the synthetic data of trainer/data/hyperplane.c, every
             sample from its own splitmix64 stream, bit for bit)
  weights    --init c (default): eager-train's own generator (splitmix64 seeded by --seed; conv
             N(0, 2/fan_out) by Box-Muller, linear U(+-1/sqrt(fan_in)), BN 1/0), bit for bit
  data order per epoch data_permutation(N, seed, epoch); rank r takes positions r, r+P, ... of the
             first floor(N/P)*P, full batches only (eager-train --epoch-mode shard)
  optimiser  SGD, PyTorch momentum, weight decay on conv/linear weights only (--wd-bn: all),
             lr(epoch + step/steps) with the preset's milestones / gamma / warm-up / linear
             scaling (--base-batch), set every step as eager-train sets it every round
  BN stats   each rank keeps its own running statistics (broadcast_buffers off); they are
             averaged across ranks at every epoch end, before the evaluation, as eager-train does
  eval       the test set sharded over the ranks (positions i % P == r), batch --batch
  threads    --threads per rank (0: cores / ranks, at least 1), as eager-train --threads
  imbalance  every trainer model (--imbalance, same syntax and the same delays for the same
             seed, step and rank: linear, random, lognormal, slow, inherent, with busy=1 the
             delay is computed on the rank's thread instead of slept; the step indexed as
             eager-train --epoch-mode shard indexes it, or with --imbalance-index global as
             --epoch-mode global does), injected where eager-train
             injects it: after the backward pass, before the gradient exchange, in a DDP
             communication hook on the step's last bucket
  curve      --curve-every N: a snapshot (parameters, this rank's BN running statistics, epoch,
             batches B, samples, wall time) whenever floor(B / N) grows after a step's update, B the
             batches applied by all ranks together (P per DDP step); at every epoch end, before
             the epoch's own evaluation, each snapshot is evaluated on the first --curve-test test
             samples (BN statistics averaged across ranks, wall time the latest rank's, the subset
             sharded over the ranks as the evaluation is), then the model is restored; the time
             this takes is left out of every wall time (the same amount on every rank)
Timing as eager-train: epochs[].wall_s from the end of set-up to the end of the epoch's training
and BN average (evaluation of earlier epochs included, curve evaluations excluded), summary.wall_s
to the end.

Output (--out): "schema": "ddp-run/1", "program": "pytorch-ddp"; config keys named as
eager-train's (mode "ddp"), epochs[] with wall_s, epoch_s, lr, train_loss, train_top1, test_loss,
test_top1, curve[] (with --curve-every) with epoch, batches, samples, wall_s, test_top1, test_loss,
and summary: the subset pcoll-compare reads (results/schema/ddp.schema.json).
--mirror-ref FILE also writes the mirror reference that trainer/ref/ddp_check.sh checks
eager-train against without Python: the initial weights' FNV-1a hash and every epoch's losses.

Usage: python3 trainer/ref/ddp_mirror.py --ranks 4 --epochs 2 --imbalance random:k=1,d=100 --out run.json
       (--experiment hyperplane --hp-features F --hp-samples N for the regression preset)

Files (beside this one, imported from this folder): ddp_preset.py the presets, model, initial
weights and lr schedule; ddp_data.py the data sets and data order; ddp_imbalance.py the delay
models and schedules; ddp_gen.py splitmix64; ddp_runfile.py the run file and mirror reference.
This file: the command line (parse), one rank's run (worker) and main.
"""
import argparse
import os
import sys
import time
import warnings

from ddp_data import data_permutation, open_data
from ddp_imbalance import Imbalance
from ddp_preset import PRESETS, build_model, c_init, fnv1a64, lr_at, model_desc
from ddp_runfile import trainer_config, write_outputs

# the names examples/fmnist_resnet.py takes from this module (the parts' among them)
__all__ = ["parse", "PRESETS", "Imbalance", "model_desc", "build_model", "c_init", "open_data", "data_permutation",
           "lr_at", "trainer_config"]
warnings.filterwarnings("ignore", message=".*broadcast_buffers.*")


def parse(argv=None):
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--experiment", default="fmnist", choices=sorted(PRESETS))
    a.add_argument("--ranks", type=int, default=4, help="processes (eager-train: mpirun -np)")
    a.add_argument("--threads", type=int, default=0, help="intra-op threads per rank (0: cores / ranks)")
    for k in ("epochs", "batch", "base-batch"):
        a.add_argument("--" + k, type=int, default=None, help="* preset default")
    for k in ("lr", "wd", "warmup", "target-top1"):
        a.add_argument("--" + k, type=float, default=None, help="* preset default")
    a.add_argument("--milestones", default=None, help="* preset default")
    a.add_argument("--data-path", default=None, help="* preset default")
    a.add_argument("--momentum", type=float, default=0.9)
    a.add_argument("--gamma", type=float, default=0.1)
    a.add_argument("--warmup-start-lr", type=float, default=-1.0)
    a.add_argument("--wd-bn", type=int, default=0)
    a.add_argument("--nesterov", type=int, default=0)
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--imbalance", default="none", help="eager-train's --imbalance syntax (collectives/sim/imbalance.c)")
    a.add_argument("--imbalance-index", choices=["shard", "global"], default="shard",
                   help="which eager-train --epoch-mode's step index the delays are drawn at: shard (epoch E's "
                        "step s at E x steps + s) or global (E x nbatches + s, nbatches = floor(N / batch), a "
                        "schedule's epochs resolved at nbatches / P steps a rank), so that eager-train's sync "
                        "run with that --epoch-mode draws the same delays; DDP's own steps are the shard's either way")
    a.add_argument("--limit-train", type=int, default=0)
    a.add_argument("--limit-test", type=int, default=0)
    a.add_argument("--hp-features", type=int, default=8192, help="hyperplane features")
    a.add_argument("--hp-samples", type=int, default=16384, help="hyperplane training samples (test: 1/8)")
    a.add_argument("--max-steps", type=int, default=0)
    a.add_argument("--curve-every", type=int, default=0,
                   help="accuracy curve: a snapshot every N batches applied by all ranks together (0: off)")
    a.add_argument("--curve-test", type=int, default=2000, help="the curve's test subset: the first M samples")
    a.add_argument("--out", default="ddp-run.json")
    a.add_argument("--mirror-ref", default="", help="also write the mirror reference (initial hash, losses) here")
    a.add_argument("--init", choices=["c", "torch"], default="c", help="c: eager-train's generator; torch: torch's")
    a.add_argument("--broadcast-buffers", type=int, default=0, help="DDP's BN buffer broadcast (eager-train: 0)")
    a.add_argument("--port", type=int, default=0, help="rendezvous port (0: a free one)")
    a.add_argument("--quiet", action="store_true")
    args = a.parse_args(argv)
    for k, v in PRESETS[args.experiment].items():
        if k not in ("model", "data") and getattr(args, k.replace("-", "_")) is None:
            setattr(args, k.replace("-", "_"), v)
    if args.ranks < 1 or args.batch < 1 or args.epochs < 1:
        a.error("--ranks, --batch and --epochs must be >= 1")
    if args.curve_every < 0 or args.curve_test < 1:
        a.error("--curve-every must be >= 0 and --curve-test >= 1")
    if args.threads == 0:
        args.threads = max(1, (os.cpu_count() or 1) // args.ranks)
    try:
        args.imb = Imbalance(args.imbalance)
    except ValueError as e:
        a.error(str(e))
    return args


# ------------------------------------------------------------------ one rank
def worker(rank, args):
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    try:  # the process's name ddp-rank-R: how jobs/interfere.sh finds the rank (Linux PR_SET_NAME)
        import ctypes
        ctypes.CDLL(None).prctl(15, ("ddp-rank-%d" % rank).encode(), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    P = args.ranks
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % args.port, rank=rank, world_size=P)
    train, test = open_data(args, "train"), open_data(args, "test")
    cls = train.classify

    def loss_of(out, y, reduction="mean"):
        return F.cross_entropy(out, y, reduction=reduction) if cls else F.mse_loss(out, y, reduction=reduction)

    torch.manual_seed(args.seed)
    model = build_model(model_desc(args))
    if args.init == "c":
        c_init(model, args.seed)
    init_hash = fnv1a64(model) if rank == 0 and args.mirror_ref else None
    nparams = sum(p.numel() for p in model.parameters())
    ddp = torch.nn.parallel.DistributedDataParallel(model, broadcast_buffers=bool(args.broadcast_buffers))
    step = {"index": 0, "t0": 0.0, "cost": 0.0, "inject": 0.0, "compute": 0.0}
    if args.imb.kind != "none":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        def delayed_allreduce(state, bucket):
            if bucket.is_last():  # the whole backward is done: eager-train's point of injection
                t = time.perf_counter()
                step["compute"] += t - step["t0"]
                d = args.imb.delay_ms(args.seed, step["index"], rank, P, (t - step["t0"]) * 1e3, step["cost"])
                args.imb.wait(d, step["index"])
                step["inject"] += time.perf_counter() - t
            return default_hooks.allreduce_hook(state, bucket)
        ddp.register_comm_hook(None, delayed_allreduce)
    decay = [p for n, p in model.named_parameters() if args.wd_bn or (n.endswith("weight") and p.dim() > 1)]
    rest = [p for n, p in model.named_parameters() if not (args.wd_bn or (n.endswith("weight") and p.dim() > 1))]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": args.wd}, {"params": rest, "weight_decay": 0.0}],
                          lr=args.lr, momentum=args.momentum, dampening=0, nesterov=bool(args.nesterov))
    bn_bufs = [b for n, b in model.named_buffers() if n.endswith("running_mean") or n.endswith("running_var")]
    N = train.n
    lim = N // P * P
    steps = (lim // P) // args.batch
    if args.max_steps and steps > args.max_steps:
        steps = args.max_steps
    if steps < 1:
        raise SystemExit("ddp_mirror: no full batch per rank: lower --batch or use more data")
    # the delays' step index (step["index"]): epoch E's step s at E x stride + s, stride eager-train's
    # for --imbalance-index: shard steps per rank, global batches per epoch (trainer/epoch.c step())
    stride, epoch_steps = steps, steps
    if args.imbalance_index == "global":
        stride = N // args.batch
        if args.max_steps and stride > args.max_steps * P:
            stride = args.max_steps * P
        epoch_steps = stride / P
    try:  # the schedule's epochs to steps, once: epoch E's first step is E x stride
        args.imb.resolve(stride, epoch_steps)
    except ValueError as e:
        raise SystemExit("ddp_mirror: %s" % e)
    if rank == 0 and not args.quiet:
        print("ddp_mirror: %s, %d ranks (gloo), %d threads each, %d parameters, %d training samples, %d test, "
              "%d steps/rank/epoch, imbalance %s" % (args.experiment, P, torch.get_num_threads(), nparams, N,
                                                     test.n, steps, args.imbalance), flush=True)

    def bn_average():  # eager-train's sync_replicas: the ranks' BN running statistics averaged
        with torch.no_grad():
            for b in bn_bufs:
                dist.all_reduce(b)
                b.div_(P)

    def eval_sums(n):
        """This rank's share of the first n test samples (positions i % P == rank, batch --batch):
        loss sum, correct, samples."""
        model.eval()
        idx = torch.arange(rank, n, P)
        s = torch.zeros(3, dtype=torch.float64)
        with torch.no_grad():
            for k in range(0, len(idx), args.batch):
                x, y = test.batch(idx[k:k + args.batch])
                out = model(x)
                s[0] += loss_of(out, y).item() * len(y)  # eager-train: the batch's mean loss x its size
                s[1] += (out.argmax(1) == y).sum().item() if cls else 0
                s[2] += len(y)
        model.train()
        return s

    def evaluate():
        s = eval_sums(test.n)
        dist.all_reduce(s)
        return s[0].item() / s[2].item(), s[1].item() / s[2].item() if cls else None

    params = list(model.parameters())

    def snapshot(epoch, batches, wall):
        """The curve's snapshot after a step's update: parameters and this rank's BN statistics."""
        with torch.no_grad():
            return {"epoch": epoch, "batches": batches, "wall": wall, "params": [p.detach().clone() for p in params],
                    "bn": torch.cat([b.reshape(-1) for b in bn_bufs]) if bn_bufs else torch.zeros(0)}

    def load_state(ps, bn):
        with torch.no_grad():
            for p, v in zip(params, ps):
                p.copy_(v)
            off = 0
            for b in bn_bufs:
                b.copy_(bn[off:off + b.numel()].view_as(b))
                off += b.numel()

    def curve_eval(snaps):
        """Evaluates the snapshots on the first --curve-test test samples, each with its BN statistics
        averaged across ranks and the latest rank's wall time, then restores the model; returns the
        curve records and the seconds this took (the slowest rank's, so every rank agrees; counted
        from the barrier, so that waiting for the last rank stays in the run's time)."""
        dist.barrier()
        t0 = time.perf_counter()
        here = snapshot(0, 0, 0.0)
        bn = torch.stack([sn["bn"] for sn in snaps])
        dist.all_reduce(bn)
        bn.div_(P)
        walls = torch.tensor([sn["wall"] for sn in snaps], dtype=torch.float64)
        dist.all_reduce(walls, op=dist.ReduceOp.MAX)
        sums = torch.zeros(len(snaps), 3, dtype=torch.float64)
        for k, sn in enumerate(snaps):
            load_state(sn["params"], bn[k])
            sums[k] = eval_sums(args.curve_test)
        dist.all_reduce(sums)
        load_state(here["params"], here["bn"])
        recs = [{"epoch": sn["epoch"], "batches": sn["batches"], "samples": sn["batches"] * args.batch,
                 "wall_s": walls[k].item(), "test_top1": sums[k, 1].item() / sums[k, 2].item() if cls else None,
                 "test_loss": sums[k, 0].item() / sums[k, 2].item()} for k, sn in enumerate(snaps)]
        spent = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(spent, op=dist.ReduceOp.MAX)
        return recs, spent.item()

    # the epochs' permutations (pure Python) are set-up, outside the timed loop
    perms = [torch.tensor(data_permutation(N, args.seed, e)[:lim], dtype=torch.int64) for e in range(args.epochs)]
    dist.barrier()
    t_start = time.perf_counter()
    epochs, reached, curve, snaps, batches = [], None, [], [], 0
    for epoch in range(args.epochs):
        te0 = time.perf_counter()
        shard = perms[epoch][rank:lim:P]
        loss_sum, correct, seen = 0.0, 0, 0
        for s in range(steps):
            step["t0"], step["index"] = time.perf_counter(), epoch * stride + s
            x, y = train.batch(shard[s * args.batch:(s + 1) * args.batch])
            step["cost"] = float(len(y))
            lr = lr_at(args, P, epoch + s / steps)
            for gp in opt.param_groups:
                gp["lr"] = lr
            opt.zero_grad(set_to_none=True)
            out = ddp(x)
            loss = loss_of(out, y)
            loss.backward()  # the hook injects the delay, then the gradients are averaged
            opt.step()
            batches += P  # one batch per rank applied
            if args.curve_every and batches // args.curve_every > (batches - P) // args.curve_every:
                snaps.append(snapshot(epoch + 1, batches, time.perf_counter() - t_start))
            loss_sum += loss.item()
            correct += (out.argmax(1) == y).sum().item() if cls else 0
            seen += len(y)
        if snaps:  # the curve's evaluations are left out of the run's wall time
            recs, spent = curve_eval(snaps)
            curve += recs
            snaps = []
            t_start += spent
            te0 += spent
        bn_average()
        ep_s = time.perf_counter() - te0
        wall_ep = time.perf_counter() - t_start
        tl, t1 = evaluate()
        st = torch.tensor([loss_sum, float(steps), float(correct), float(seen)], dtype=torch.float64)
        dist.all_reduce(st)
        rec = {"epoch": epoch + 1, "wall_s": wall_ep, "epoch_s": ep_s, "lr": lr_at(args, P, epoch),
               "train_loss": st[0].item() / st[1].item(), "train_top1": st[2].item() / st[3].item() if cls else None,
               "test_loss": tl, "test_top1": t1, "steps": steps * P, "samples": int(st[3].item())}
        epochs.append(rec)
        if reached is None and cls and args.target_top1 > 0 and t1 >= args.target_top1:
            reached = wall_ep
        if rank == 0 and not args.quiet:
            print("epoch %3d/%d  %7.1f s  loss %.4f  test loss %.4f  test top-1 %s  lr %.4g" % (
                epoch + 1, args.epochs, wall_ep, rec["train_loss"], tl, "%.2f%%" % (100 * t1) if cls else "-",
                rec["lr"]), flush=True)
    wall = time.perf_counter() - t_start
    tt = torch.tensor([step["compute"], step["inject"]], dtype=torch.float64)
    allt = [torch.zeros(2, dtype=torch.float64) for _ in range(P)]
    dist.all_gather(allt, tt)
    if rank == 0:
        write_outputs(args, torch.__version__, torch.get_num_threads(), N, test.n, epochs, curve, allt, wall,
                      reached, init_hash, nparams, cls)
    # every rank reaches the end together (rank 0 has written its files), then leaves without
    # tearing gloo down: its threads' destructors at interpreter exit aborted a rank ("terminate
    # called without an active exception", about 1 run in 100, also after destroy_process_group
    # behind a barrier), a non-zero exit for a run whose files were complete
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    args = parse()
    if args.curve_every:  # as eager-train: a subset larger than the test set is refused, not shrunk
        ntest = open_data(args, "test").n
        if args.curve_test > ntest:
            raise SystemExit("ddp_mirror: --curve-test %d is larger than the test set (%d samples%s)" % (
                args.curve_test, ntest, " with --limit-test" if args.limit_test else ""))
    if args.port == 0:
        args.port = free_port()
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(k, str(args.threads))
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch.multiprocessing as mp
    mp.start_processes(worker, args=(args,), nprocs=args.ranks, join=True, start_method="spawn")


if __name__ == "__main__":
    main()
