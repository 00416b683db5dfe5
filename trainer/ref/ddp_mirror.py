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
"""
import argparse
import datetime
import gzip
import json
import math
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore", message=".*broadcast_buffers.*")
M64 = (1 << 64) - 1

# the presets eager-train --experiment sets (trainer/config.c apply_experiment) that are mirrored
PRESETS = {
    "fmnist": {"model": "resnet-fmnist", "data": "fmnist", "epochs": 5, "batch": 64, "lr": 0.1,
               "base-batch": 0, "wd": 5e-4, "warmup": 0.0, "milestones": "4", "target-top1": 0.90,
               "data-path": "/usr/share/datasets/fashion-mnist"},
    "hyperplane": {"model": "hyperplane features=%d", "data": "hyperplane", "epochs": 5, "batch": 64,
                   "lr": 0.25, "base-batch": 0, "wd": 0.0, "warmup": 0.0, "milestones": "",
                   "target-top1": 0.0, "data-path": ""},
}


def model_desc(args):
    d = PRESETS[args.experiment]["model"]
    return d % args.hp_features if "%d" in d else d


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


# ------------------------------------------------------------------ eager-train's generators
def mix64(z):
    """splitmix64's finaliser (common/hash.h hash_splitmix64)."""
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def data_permutation(n, seed, epoch):
    """trainer/data/common.c data_permutation: Fisher-Yates keyed by (seed, SHUFFLE, epoch)."""
    s = mix64(mix64(mix64(mix64(seed) ^ 0x5348) ^ epoch) ^ 0)
    perm = list(range(n))
    g = 0x9E3779B97F4A7C15
    for i in range(n - 1, 0, -1):
        s = (s + g) & M64
        j = (mix64(s) * (i + 1)) >> 64
        perm[i], perm[j] = perm[j], perm[i]
    return perm


class ImbModel:
    """collectives/sim/imbalance.c: one model's delay of (seed, step, rank) in ms, a pure function; same parser rules."""
    KINDS = {"none": (), "linear": ("unit",), "random": ("k", "d"), "lognormal": ("mean", "std"),
             "slow": ("rank", "factor"), "inherent": ("unit",)}

    def __init__(self, spec):
        self.spec = spec
        kind, _, rest = spec.partition(":")
        if kind not in self.KINDS:
            raise ValueError("--imbalance '%s': unknown model (none, linear:unit=MS, random:k=K,d=MS, "
                             "lognormal:mean=MS,std=MS, slow:rank=R,factor=F, inherent:unit=MS)" % spec)
        kv = {}
        for item in filter(None, rest.split(",")):
            k, eq, v = item.partition("=")
            try:
                kv[k] = float(v)
            except ValueError:
                raise ValueError("--imbalance '%s': %s needs a number" % (spec, k))
        need_lo = {"unit": 0, "d": 0, "mean": 1e-9, "std": 0, "factor": 1, "k": 1, "rank": 0}
        for k in self.KINDS[kind]:
            if k not in kv or kv[k] < need_lo[k] or (k in ("k", "rank") and kv[k] != math.floor(kv[k])):
                raise ValueError("--imbalance '%s': needs %s=<number >= %g>" % (spec, k, need_lo[k]))
        if kv.get("busy", 0) not in (0, 1):
            raise ValueError("--imbalance '%s': busy= takes 0 (sleep the delay) or 1 (compute it)" % spec)
        self.kind, self.kv, self.busy = kind, kv, kv.get("busy", 0) == 1

    @staticmethod
    def _u01(seed, a, b, c):
        h = mix64((seed ^ mix64((a ^ mix64((b ^ mix64((c + 0x1234567) & M64)) & M64)) & M64)) & M64)
        return ((h >> 11) + 0.5) * 2.0 ** -53

    def delay_ms(self, seed, step, rank, P, compute_ms, cost):
        kv = self.kv
        if self.kind == "linear":
            return rank * kv["unit"]
        if self.kind == "random":
            for j in range(int(kv["k"])):
                if mix64(seed ^ mix64((step * 64 + j + 0xABCDEF) & M64)) % P == rank:
                    return kv["d"]
            return 0.0
        if self.kind == "lognormal":
            s2 = math.log(1.0 + (kv["std"] * kv["std"]) / (kv["mean"] * kv["mean"]))
            mu = math.log(kv["mean"]) - s2 / 2
            u1, u2 = self._u01(seed, step, rank, 1), self._u01(seed, step, rank, 2)
            z = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
            return math.exp(mu + math.sqrt(s2) * z)
        if self.kind == "slow":
            return (kv["factor"] - 1) * compute_ms if rank == int(kv["rank"]) else 0.0
        if self.kind == "inherent":
            return kv["unit"] * cost
        return 0.0

    def wait(self, ms):
        """Sleeps ms, or with busy=1 computes until this thread used ms of CPU time (imb_busy_ms)."""
        if ms <= 0:
            return
        if not self.busy:
            time.sleep(ms / 1e3)
            return
        t0, acc = time.thread_time(), 1.0
        while (time.thread_time() - t0) * 1e3 < ms:
            for _ in range(64):
                acc = acc * 0.999999 + 1e-6


class Imbalance:
    """collectives/sim/imbalance.c's schedule (imb_sched_*): phases MODEL@START separated by '/', START a
    step or an epoch (1.5ep), all of one kind, the first 0, increasing; a spec without '@' or '/' is
    one model for the whole run. Epochs are resolved to steps once (resolve), as eager-train does."""

    def __init__(self, spec):
        self.spec = spec
        if "@" not in spec and "/" not in spec:
            self.phases, self.at, self.start, self.epochs = [ImbModel(spec)], [0.0], [0], False
        else:
            self.phases, self.at, self.start = [], [], []
            for i, part in enumerate(spec.split("/")):
                if len(self.phases) == 16:
                    raise ValueError("--imbalance '%s': more than 16 phases" % spec)
                model, at, start = part.rpartition("@")
                if not at:
                    raise ValueError("--imbalance '%s': phase %d '%s' has no @START (MODEL@STEP or MODEL@EPOCHep)"
                                     % (spec, i + 1, part))
                try:
                    m = ImbModel(model)
                except ValueError as e:
                    raise ValueError("--imbalance '%s': phase %d: %s" % (spec, i + 1, str(e)[len("--imbalance "):]))
                ep = start.endswith("ep")
                num = start[:-2] if ep else start
                try:
                    v = float(num)
                    ok = num[:1].isdigit() and math.isfinite(v) and v >= 0 and (ep or v == math.floor(v))
                except ValueError:
                    ok = False
                if not ok:
                    raise ValueError("--imbalance '%s': phase %d '%s': the start must be a step (an integer >= 0) "
                                     "or an epoch (a number >= 0 with ep, e.g. 1.5ep)" % (spec, i + 1, part))
                if i == 0:
                    self.epochs = ep
                if ep != self.epochs:
                    raise ValueError("--imbalance '%s': phase %d '%s': the boundaries must be all steps or all "
                                     "epochs (ep)" % (spec, i + 1, part))
                if i == 0 and v != 0:
                    raise ValueError("--imbalance '%s': phase 1 '%s' must start at 0" % (spec, part))
                if i > 0 and v <= self.at[-1]:
                    raise ValueError("--imbalance '%s': phase %d '%s' starts at %g, not after phase %d's start %g "
                                     "(boundaries overlap or decrease)" % (spec, i + 1, part, v, i, self.at[-1]))
                self.phases.append(m)
                self.at.append(v)
                self.start.append(0 if i == 0 else (None if ep else int(v)))
        # "none" only where no phase delays (the hook is left out then, as before)
        self.kind = ("none" if all(m.kind == "none" for m in self.phases) else
                     "schedule" if len(self.phases) > 1 else self.phases[0].kind)

    def resolve(self, stride, epoch_steps):
        """imb_sched_resolve: epoch E + f starts at step E x stride + ceil(f x epoch_steps)."""
        if not self.epochs:
            return
        if stride <= 0 or not 0 < epoch_steps <= stride:
            raise ValueError("--imbalance: boundaries in epochs need the steps per epoch")
        for i, x in enumerate(self.at):
            e = math.floor(x)
            self.start[i] = e * stride + math.ceil((x - e) * epoch_steps)
            if i > 0 and self.start[i] <= self.start[i - 1]:
                raise ValueError("--imbalance: phases %d and %d (epochs %g and %g) start on the same step %d"
                                 % (i, i + 1, self.at[i - 1], x, self.start[i]))

    def at_step(self, step):
        """imb_sched_at: the model of step's phase."""
        i = len(self.phases) - 1
        while i > 0 and (self.start[i] is None or step < self.start[i]):
            i -= 1
        return self.phases[i]

    def delay_ms(self, seed, step, rank, P, compute_ms, cost):
        return self.at_step(step).delay_ms(seed, step, rank, P, compute_ms, cost)

    def wait(self, ms, step):
        """Step's phase waits ms (slept, or computed with busy=1)."""
        self.at_step(step).wait(ms)


# ------------------------------------------------------------------ model (trainer/nn/zoo.c)
def build_model(desc):
    """The preset's model as trainer/ref/make_ref.py mirrors trainer/nn/zoo.c (the C nn library's
    reference tests check that mirror layer by layer)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_ref
    if desc.startswith("hyperplane features="):  # one fully connected layer, F -> 1, MSE loss
        return make_ref.Hyperplane(int(desc.split("=")[1]), 1)
    if desc == "resnet-fmnist":  # stem 3x3, stages of 1 basic block, widths 16/32/64, shortcut B
        return make_ref.ResNet(False, False, [1, 1, 1], 16, False, 10, 1)
    raise SystemExit("ddp_mirror: model '%s' is not mirrored (resnet-fmnist, hyperplane features=F are)" % desc)


def c_init(model, seed):
    """trainer/nn/init.c: one splitmix64 stream from nn_rng_seed(seed) over the layers in build
    order (= named_parameters order): conv N(0, 2/fan_out) by Box-Muller (two draws per value),
    linear weight then bias U(-b, b) with b = 1/sqrt(fan_in) in float32, BN weight 1, bias 0."""
    import numpy as np
    import torch
    mods = [m for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear, torch.nn.BatchNorm2d))]
    need = sum(2 * m.weight.numel() if isinstance(m, torch.nn.Conv2d) else
               m.weight.numel() + m.bias.numel() if isinstance(m, torch.nn.Linear) else 0 for m in mods)
    s0 = (seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & M64
    with np.errstate(over="ignore"):
        z = np.arange(1, need + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(s0)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    k = 0
    with torch.no_grad():
        for m in mods:
            if isinstance(m, torch.nn.Conv2d):
                n = m.weight.numel()
                a, b = z[k:k + 2 * n:2], z[k + 1:k + 2 * n:2]
                k += 2 * n
                u1 = ((a >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53
                u2 = (b >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
                nrm = (np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)).astype(np.float32)
                fan_out = m.weight.shape[0] * m.weight.shape[2] * m.weight.shape[3]
                sd = np.float32(np.sqrt(np.float32(2.0) / np.float32(fan_out)))
                m.weight.copy_(torch.from_numpy((sd * nrm).reshape(m.weight.shape)))
            elif isinstance(m, torch.nn.Linear):
                bb = float(np.float32(1.0) / np.sqrt(np.float32(m.weight.shape[1])))
                for t in (m.weight, m.bias):
                    n = t.numel()
                    u = (z[k:k + n] >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
                    k += n
                    t.copy_(torch.from_numpy((-bb + (2 * bb) * u).astype(np.float32).reshape(t.shape)))
            else:
                m.weight.fill_(1.0)
                m.bias.fill_(0.0)
    assert k == need


def fnv1a64(model):
    """FNV-1a 64 over the float32 bytes of every parameter in order (trainer/ref/ddp_init_hash.c)."""
    import numpy as np
    h = 0xCBF29CE484222325
    for _, p in model.named_parameters():
        for byte in p.detach().numpy().astype(np.float32).tobytes():
            h = ((h ^ byte) * 0x100000001B3) & M64
    return "%016x" % h


# ------------------------------------------------------------------ data (trainer/data)
def load_idx(path):
    import numpy as np
    p = path + ".gz" if os.path.exists(path + ".gz") else path
    with (gzip.open(p, "rb") if p.endswith(".gz") else open(p, "rb")) as f:
        b = f.read()
    if b[:3] != b"\0\0\x08":
        raise SystemExit("ddp_mirror: %s is not an IDX file of bytes" % p)
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def load_fmnist(path, split, limit):
    pre = "train" if split == "train" else "t10k"
    x = load_idx(os.path.join(path, pre + "-images-idx3-ubyte"))
    y = load_idx(os.path.join(path, pre + "-labels-idx1-ubyte"))
    if limit and limit < len(y):
        x, y = x[:limit], y[:limit]
    return x, y


def prep_fmnist(xu8):
    """trainer/data/fmnist.c: (p/255 - 0.2860)/0.3530 in float32, NCHW with C=1."""
    return ((xu8.float() / 255.0 - 0.2860) / 0.3530).unsqueeze(1)


class FashionMNIST:
    classify = True

    def __init__(self, args, split):
        import numpy as np
        import torch
        x, y = load_fmnist(args.data_path, split, args.limit_train if split == "train" else args.limit_test)
        self.x, self.y, self.n = torch.from_numpy(np.array(x)), torch.from_numpy(y.astype(np.int64)), len(y)

    def batch(self, idx):
        return prep_fmnist(self.x[idx]), self.y[idx]


def np_mix64(z):
    import numpy as np
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class Hyperplane:
    """trainer/data/hyperplane.c: y = a.x + 0.1 e, generated per sample from its own stream
    rng_key(seed, HP_X, split, i) (F/2 draws, two 32-bit uniforms each, then one normal)."""
    classify = False

    def __init__(self, args, split):
        import numpy as np
        F = args.hp_features
        n = args.hp_samples if split == "train" else args.hp_samples // 8
        lim = args.limit_train if split == "train" else args.limit_test
        self.n = min(n, lim) if lim > 0 else n
        self.F, self.split, self.seed = F, 0 if split == "train" else 1, args.seed
        ka = np_mix64(np.uint64(mix64(mix64(args.seed) ^ 0x4841)) ^ np.arange(F, dtype=np.uint64))
        ua = (np_mix64(np_mix64(ka) + np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
        self.a = (2.0 * ua - 1.0).astype(np.float32)
        self.noise = float(np.float32(0.1))

    def batch(self, idx):
        import numpy as np
        import torch
        i = np.asarray(idx, dtype=np.uint64)
        s0 = np_mix64(np_mix64(np.uint64(mix64(mix64(self.seed) ^ 0x4858)) ^ np.uint64(self.split)) ^ i)
        half = (self.F + 1) // 2
        with np.errstate(over="ignore"):
            st = s0[:, None] + np.arange(1, half + 1, dtype=np.uint64)[None, :] * np.uint64(0x9E3779B97F4A7C15)
        u = np_mix64(st)
        sc = math.sqrt(3.0 / self.F) / 2147483648.0
        lo = ((u & np.uint64(0xFFFFFFFF)).astype(np.float64) - 2147483647.5) * sc
        hi = ((u >> np.uint64(32)).astype(np.float64) - 2147483647.5) * sc
        x = np.empty((len(i), 2 * half), dtype=np.float32)
        x[:, 0::2], x[:, 1::2] = lo, hi
        x = x[:, :self.F]
        y = np.cumsum(self.a.astype(np.float64)[None, :] * x.astype(np.float64), axis=1)[:, -1]  # in order, as C
        t = np.empty((len(i), 1), dtype=np.float32)
        with np.errstate(over="ignore"):
            d1, d2 = np_mix64(st[:, -1] + np.uint64(0x9E3779B97F4A7C15)), np_mix64(st[:, -1] + np.uint64(2 * 0x9E3779B97F4A7C15 % (1 << 64)))
        for r in range(len(i)):  # rng_normal with libm's log and cos, as C
            u1 = max(float(int(d1[r]) >> 11) * 2.0 ** -53, 1e-300)
            u2 = float(int(d2[r]) >> 11) * 2.0 ** -53
            t[r, 0] = y[r] + self.noise * (math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2))
        return torch.from_numpy(x.copy()), torch.from_numpy(t)


def open_data(args, split):
    return FashionMNIST(args, split) if PRESETS[args.experiment]["data"] == "fmnist" else Hyperplane(args, split)


def lr_at(args, ranks, e):
    """trainer/nn/optim.c nn_lr_at: warm-up, linear scaling, milestones."""
    peak = args.lr
    if args.base_batch > 0:
        peak *= args.batch * ranks / args.base_batch
    if args.warmup > 0 and e < args.warmup:
        a = args.warmup_start_lr if args.warmup_start_lr >= 0 else args.lr
        return a + (peak - a) * (e / args.warmup)
    lr = peak
    for m in [float(v) for v in args.milestones.split(",") if v.strip()]:
        if e >= m:
            lr *= args.gamma
    return lr


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
    # every rank reaches the teardown together: a rank that tore gloo down while rank 0 was still
    # writing aborted another ("terminate called without an active exception", 1 of ~100 runs)
    dist.barrier()
    dist.destroy_process_group()


def trainer_config(args, threads):
    """The run's settings under eager-train's option names (what pcoll-compare compares)."""
    c = {"experiment": args.experiment, "model": model_desc(args),
         "data": PRESETS[args.experiment]["data"], "mode": "ddp", "ranks": args.ranks, "threads": threads}
    for k in ("epochs", "batch", "lr", "base-batch", "momentum", "wd", "wd-bn", "nesterov", "warmup",
              "warmup-start-lr", "milestones", "gamma", "seed", "imbalance", "limit-train", "limit-test",
              "max-steps", "target-top1", "data-path", "out", "curve-every", "curve-test") + (
                  ("hp-features", "hp-samples") if args.experiment == "hyperplane" else ()):
        c[k] = getattr(args, k.replace("-", "_"))
    for k in ("wd-bn", "nesterov"):
        c[k] = bool(c[k])
    return c


def write_outputs(args, torch_version, threads, ntrain, ntest, epochs, curve, allt, wall, reached, init_hash, nparams,
                  cls):
    hooked = args.imb.kind != "none"
    res = {"schema": "ddp-run/1", "program": "pytorch-ddp", "experiment": args.experiment,
           "config": trainer_config(args, threads),
           "ddp": {"backend": "gloo", "torch": torch_version, "init": args.init,
                   "broadcast_buffers": bool(args.broadcast_buffers), "injection": "comm hook, last bucket",
                   "imbalance_index": args.imbalance_index},  # (not in config: DDP rows of either join one table)
           "environment": {"ranks": args.ranks, "date": datetime.datetime.now().astimezone().isoformat(),
                           "command": " ".join([sys.executable] + sys.argv), "host": os.uname().nodename},
           "epochs": epochs,
           "ranks": [{"rank": p, "compute_s": a[0].item() if hooked else None, "inject_s": a[1].item() if hooked else None}
                     for p, a in enumerate(allt)],  # measured in the injection hook (none without imbalance)
           "summary": {"wall_s": wall, "epochs": args.epochs, "final_test_top1": epochs[-1]["test_top1"],
                       "final_train_loss": epochs[-1]["train_loss"], "target_top1": args.target_top1 if cls else None,
                       "time_to_target_s": reached, "ntrain": ntrain, "ntest": ntest}}
    if args.curve_every:
        res["curve"] = curve
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    if args.mirror_ref:
        ref = {"format": "ddp-mirror-ref/1", "program": "pytorch-ddp", "torch": torch_version,
               "date": res["environment"]["date"], "command": res["environment"]["command"],
               "ranks": args.ranks, "model": res["config"]["model"], "seed": args.seed,
               "nparams": nparams, "init_hash": init_hash,
               "eager_train_args": mirror_args(args), "delays": delay_table(args.seed),
               "epochs": [{k: e[k] for k in ("epoch", "lr", "train_loss", "train_top1", "test_loss", "test_top1")}
                          for e in epochs]}
        if args.curve_every:
            ref["curve"] = [{k: c[k] for k in ("epoch", "batches", "samples", "test_top1", "test_loss")} for c in curve]
        with open(args.mirror_ref, "w") as f:
            json.dump(ref, f, indent=1)
            f.write("\n")
    if not args.quiet:
        print("ddp_mirror: %d epochs in %.1f s, final test loss %.4g, wrote %s%s" % (
            args.epochs, wall, epochs[-1]["test_loss"], args.out,
            " and " + args.mirror_ref if args.mirror_ref else ""), flush=True)


# one spec per imbalance model (and busy=1), for the reference's delay table
DELAY_SPECS = ["none", "linear:unit=20", "random:k=2,d=320", "random:k=1,d=50,busy=1", "lognormal:mean=475,std=144",
               "slow:rank=1,factor=3", "inherent:unit=0.5"]
# schedules (phases in steps; in epochs of SCHED_EPOCH_STEPS steps), for the same table
SCHED_SPECS = ["none@0/random:k=1,d=50@5/lognormal:mean=475,std=144,busy=1@12/slow:rank=2,factor=3@20",
               "linear:unit=20@0ep/random:k=2,d=320@1.5ep/none@2.25ep/inherent:unit=0.5@3ep"]
SCHED_EPOCH_STEPS = 8


def imb_resolved(spec, steps_per_epoch):
    imb = Imbalance(spec)
    imb.resolve(steps_per_epoch, steps_per_epoch)
    return imb


def delay_table(seed, ranks=4, steps=32, compute_ms=10.0, cost=64.0):
    """Every model's delay for steps x ranks, and the schedules', as trainer/ref/ddp_imb_delays.c prints
    eager-train's (steps_per_epoch: its STEPS_PER_EPOCH, where the schedule's phases are in epochs)."""
    def entry(spec, spe):
        imb = imb_resolved(spec, spe) if spe else Imbalance(spec)
        e = {"spec": spec, "seed": seed, "ranks": ranks, "steps": steps, "compute_ms": compute_ms, "cost": cost}
        if spe:
            e["steps_per_epoch"] = spe
        e["ms"] = [[imb.delay_ms(seed, st, r, ranks, compute_ms, cost) for r in range(ranks)] for st in range(steps)]
        return e
    return [entry(s, 0) for s in DELAY_SPECS] + [entry(s, SCHED_EPOCH_STEPS if Imbalance(s).epochs else 0)
                                                 for s in SCHED_SPECS]


def mirror_args(args):
    """eager-train's flags for the same run (mpirun -np RANKS eager-train ARGS)."""
    a = ["--experiment", args.experiment, "--seed", str(args.seed), "--threads", str(args.threads)]
    for k in ("epochs", "batch", "lr", "wd", "milestones", "gamma", "momentum", "limit-train", "limit-test",
              "max-steps", "imbalance") + (("hp-features", "hp-samples") if args.experiment == "hyperplane" else ()) + (
                  ("curve-every", "curve-test") if args.curve_every else ()):
        a += ["--" + k, str(getattr(args, k.replace("-", "_")))]
    if args.imbalance_index == "global":
        a += ["--epoch-mode", "global"]
    return a


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
