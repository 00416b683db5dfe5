#!/usr/bin/env python3
"""fmnist_resnet.py: the fmnist preset's ResNet in PyTorch, trained with eager_sgd (libpcoll + the
adaptive controller) instead of DDP: the same model, initial weights, data order, SGD, lr schedule
and injected delays as trainer/ref/ddp_mirror.py, which this script imports (nothing copied), so
that a race against DDP differs only in the gradient exchange.

  mpirun -np 4 python3 examples/fmnist_resnet.py --mode adaptive --tau 2 --seed 1 \\
      --imbalance random:k=1,d=100 --epochs 2 --out results/runs/torch/adaptive.json
  (the DDP side: python3 trainer/ref/ddp_mirror.py --ranks 4 --seed 1 --imbalance ... --epochs 2)

Options: --mode (sync | solo | majority | quorum:Q | adaptive[,controller options]), --tau (2), and
every option of ddp_mirror.py (--seed, --imbalance, --epochs, --batch, --lr, --limit-train,
--limit-test, --data-path, --threads, --init, --out, ...; its --ranks is the MPI world size here).
Needs PYTHONPATH=python (or `pip install ./python`) and the built library (make build-all)."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "python"), os.path.join(HERE, "..", "trainer", "ref")]
import argparse  # noqa: E402

import ddp_mirror  # noqa: E402  (the preset's model, generators, data, lr schedule, delays)
import eager_sgd  # noqa: E402


def main():
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--mode", default="adaptive")
    pre.add_argument("--tau", type=int, default=2)
    own, rest = pre.parse_known_args()
    if "-h" in rest or "--help" in rest:
        print(__doc__)
        ddp_mirror.parse(["--help"])
    rank, P = eager_sgd.init()
    args = ddp_mirror.parse(rest + ["--ranks", str(P)])
    if not any(a == "--out" or a.startswith("--out=") for a in rest):  # not ddp_mirror's ddp-run.json
        args.out = "torch-%s.json" % own.mode.split(",")[0].replace(":", "")
    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = ddp_mirror.build_model(ddp_mirror.model_desc(args))
    if args.init == "c":
        ddp_mirror.c_init(model, args.seed)
    train, test = ddp_mirror.open_data(args, "train"), ddp_mirror.open_data(args, "test")
    decay = [p for n, p in model.named_parameters() if args.wd_bn or (n.endswith("weight") and p.dim() > 1)]
    rest_p = [p for n, p in model.named_parameters() if not (args.wd_bn or (n.endswith("weight") and p.dim() > 1))]
    sgd = torch.optim.SGD([{"params": decay, "weight_decay": args.wd}, {"params": rest_p, "weight_decay": 0.0}],
                          lr=args.lr, momentum=args.momentum)
    cfg = ddp_mirror.trainer_config(args, args.threads)  # eager-train's option names, as the DDP run's
    opt = eager_sgd.DistributedOptimizer(sgd, model, mode=own.mode, tau=own.tau, seed=args.seed,
                                         experiment=args.experiment, model_name=ddp_mirror.model_desc(args),
                                         data_name=args.experiment, batch=args.batch, epochs=args.epochs,
                                         imbalance=args.imbalance, config=cfg, curve_every=args.curve_every)
    lim = train.n // P * P
    steps = (lim // P) // args.batch
    if args.max_steps and steps > args.max_steps:
        steps = args.max_steps
    args.imb.resolve(steps, steps)
    loss_of = torch.nn.functional.cross_entropy if train.classify else torch.nn.functional.mse_loss
    perms = [torch.tensor(ddp_mirror.data_permutation(train.n, args.seed, e)[:lim]) for e in range(args.epochs)]

    def evaluate(n=None):
        """The first n test samples (all: None), sharded over the ranks as ddp_mirror.py does."""
        model.eval()
        s = torch.zeros(3, dtype=torch.float64)
        with torch.no_grad():
            idx = torch.arange(rank, min(n or test.n, test.n), P)
            for k in range(0, len(idx), args.batch):
                x, y = test.batch(idx[k:k + args.batch])
                out = model(x)
                s[0] += loss_of(out, y).item() * len(y)
                s[1] += (out.argmax(1) == y).sum().item() if train.classify else 0
                s[2] += len(y)
        model.train()
        eager_sgd.allreduce_sum(s)
        return s[0].item() / s[2].item(), (s[1].item() / s[2].item() if train.classify else None)

    if rank == 0:
        print("fmnist_resnet: %s, %d ranks, mode %s tau %d, %d steps/rank/epoch, imbalance %s"
              % (args.experiment, P, own.mode, own.tau, steps, args.imbalance), flush=True)
    for e in range(args.epochs):
        lr = ddp_mirror.lr_at(args, P, e)
        for g in sgd.param_groups:
            g["lr"] = lr
        loss_sum, correct = 0.0, 0
        for s in range(steps):
            t0 = time.perf_counter()
            idx = perms[e][(s * args.batch) * P + rank:((s + 1) * args.batch) * P:P]
            x, y = train.batch(idx)
            opt.zero_grad()
            out = model(x)
            loss = loss_of(out, y)
            loss.backward()
            loss_sum += loss.item()
            correct += (out.argmax(1) == y).sum().item() if train.classify else 0
            d = args.imb.delay_ms(args.seed, e * steps + s, rank, P, (time.perf_counter() - t0) * 1e3, float(len(y)))
            args.imb.wait(d, e * steps + s)
            opt.step()
        rec = opt.end_epoch(evaluate=evaluate, train_loss=loss_sum / steps, samples=steps * args.batch, lr=lr,
                            curve_evaluate=lambda: evaluate(args.curve_test))
        top1 = rec["test_top1"]
        if rank == 0:
            print("epoch %d: %.1f s, %d rounds, fresh %.3f, train loss %.4f, test top-1 %s, weights %s"
                  % (e + 1, rec["wall_s"], rec["rounds"], rec["fresh_fraction"], rec["train_loss"],
                     "%.4f" % top1 if top1 is not None else "-", rec["weights_hash"]), flush=True)
    opt.close(args.out)
    if rank == 0:
        print("fmnist_resnet: wrote %s" % args.out)


if __name__ == "__main__":
    main()
