#!/usr/bin/env python3
"""cifar10_resnet32.py: CIFAR-10 ResNet-32 (the cifar10 preset's 'resnet-cifar n=5 shortcut=A', as
trainer/ref/make_ref.py mirrors it) with eager_sgd: an ordinary PyTorch training script plus the
package's lines (the optimizer wrapper, end_epoch, close).

  mpirun -np 4 python3 examples/cifar10_resnet32.py --data-path /data/cifar-10-batches-bin \\
      --mode adaptive --tau 2 --epochs 190 --out results/runs/torch/cifar10-adaptive.json
  mpirun -np 4 python3 examples/cifar10_resnet32.py --synthetic 2048 --epochs 1   (no data: random images)

The data: the binary version (data_batch_1..5.bin, test_batch.bin; jobs/README.md says how to get
it). Each rank trains its 1/P shard of a per-epoch permutation (seeded by --seed), with random
crops (4-pixel padding) and flips, normalised as trainer/data/cifar10.c; lr 0.1 x (batch x P) / 128
divided by 10 at epochs 95 and 143 (--milestones), momentum 0.9, weight decay 1e-4 on weights."""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "python"), os.path.join(HERE, "..", "trainer", "ref")]
import eager_sgd  # noqa: E402

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


def load(path, synthetic, train, torch):
    if synthetic:
        g = torch.Generator().manual_seed(1 if train else 2)
        n = synthetic if train else max(synthetic // 4, 1)
        return torch.randint(0, 256, (n, 3, 32, 32), generator=g, dtype=torch.uint8), torch.randint(0, 10, (n,), generator=g)
    import numpy as np
    files = ["data_batch_%d.bin" % i for i in range(1, 6)] if train else ["test_batch.bin"]
    raw = np.concatenate([np.fromfile(os.path.join(path, f), dtype=np.uint8).reshape(-1, 3073) for f in files])
    return torch.from_numpy(raw[:, 1:].reshape(-1, 3, 32, 32).copy()), torch.from_numpy(raw[:, 0].astype(np.int64))


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--data-path", default="/usr/share/datasets/cifar-10-batches-bin")
    a.add_argument("--synthetic", type=int, default=0, help="N random training images instead of the data")
    a.add_argument("--mode", default="adaptive", help=eager_sgd.MODES)
    a.add_argument("--tau", type=int, default=2)
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--epochs", type=int, default=190)
    a.add_argument("--batch", type=int, default=128, help="per rank")
    a.add_argument("--lr", type=float, default=0.1, help="for a global batch of 128 (scaled linearly)")
    a.add_argument("--milestones", default="95,143")
    a.add_argument("--threads", type=int, default=0, help="intra-op threads per rank (0: torch's default)")
    a.add_argument("--out", default="cifar10-run.json")
    args = a.parse_args()
    rank, P = eager_sgd.init()
    import torch
    import make_ref
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = make_ref.ResNet(False, False, [5, 5, 5], 16, True, 10, 3)  # ResNet-32, shortcut A
    xs, ys = load(args.data_path, args.synthetic, True, torch)
    xt, yt = load(args.data_path, args.synthetic, False, torch)
    mean, std = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    decay = [p for n, p in model.named_parameters() if n.endswith("weight") and p.dim() > 1]
    other = [p for n, p in model.named_parameters() if not (n.endswith("weight") and p.dim() > 1)]
    base_lr = args.lr * args.batch * P / 128
    sgd = torch.optim.SGD([{"params": decay, "weight_decay": 1e-4}, {"params": other, "weight_decay": 0.0}],
                          lr=base_lr, momentum=0.9)
    opt = eager_sgd.DistributedOptimizer(sgd, model, mode=args.mode, tau=args.tau, seed=args.seed,
                                         experiment="cifar10", model_name="resnet-cifar n=5 shortcut=A classes=10",
                                         data_name="cifar10", batch=args.batch, epochs=args.epochs)
    miles = [int(m) for m in args.milestones.split(",") if m]
    steps = len(ys) // P // args.batch
    for e in range(args.epochs):
        for g in sgd.param_groups:
            g["lr"] = base_lr * 0.1 ** sum(e >= m for m in miles)
        gen = torch.Generator().manual_seed(args.seed * 1000003 + e)
        perm = torch.randperm(len(ys), generator=gen)[rank::P]
        aug = torch.Generator().manual_seed(args.seed * 7919 + e * 131 + rank)
        model.train()
        loss_sum = 0.0
        for s in range(steps):
            idx = perm[s * args.batch:(s + 1) * args.batch]
            x = torch.nn.functional.pad(xs[idx].float() / 255, (4, 4, 4, 4))
            i, j = torch.randint(0, 9, (2,), generator=aug).tolist()
            x = x[:, :, i:i + 32, j:j + 32]
            if torch.rand(1, generator=aug).item() < 0.5:
                x = x.flip(3)
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model((x - mean) / std), ys[idx])
            loss.backward()
            opt.step()
            loss_sum += loss.item()

        def evaluate():  # after the join (end_epoch calls it): its allreduce cannot meet a round
            model.eval()
            tot = torch.zeros(3, dtype=torch.float64)
            with torch.no_grad():
                for k in range(rank * 500, len(yt), P * 500):
                    out = model((xt[k:k + 500].float() / 255 - mean) / std)
                    tot[0] += (out.argmax(1) == yt[k:k + 500]).sum().item()
                    tot[1] += len(yt[k:k + 500])
                    tot[2] += torch.nn.functional.cross_entropy(out, yt[k:k + 500], reduction="sum").item()
            eager_sgd.allreduce_sum(tot)
            return tot[2].item() / tot[1].item(), tot[0].item() / tot[1].item()

        rec = opt.end_epoch(evaluate=evaluate, train_loss=loss_sum / max(steps, 1), samples=steps * args.batch)
        if rank == 0:
            print("epoch %d: %.1f s, %d rounds, fresh %.3f, loss %.4f, test top-1 %.4f"
                  % (e + 1, rec["wall_s"], rec["rounds"], rec["fresh_fraction"], rec["train_loss"], rec["test_top1"]),
                  flush=True)
    opt.close(args.out)


if __name__ == "__main__":
    main()
