"""ddp_preset.py: the eager-train presets the DDP mirror runs (trainer/ref/ddp_mirror.py): their
settings, model, initial weights and lr schedule, as trainer/config.c, trainer/nn/zoo.c, init.c and
optim.c make them.

  PRESETS                  experiment name -> the preset's defaults, under eager-train's option names
  model_desc(args)         the preset's model description (eager-train's --model syntax)
  build_model(desc)        the torch module of that description (trainer/ref/make_ref.py's mirror);
                           SystemExit with one line for a model that is not mirrored
  c_init(model, seed)      eager-train's initial weights, bit for bit, in place
  fnv1a64(model)           the parameters' FNV-1a 64 hash, 16 hex digits (ddp_init_hash.c's)
  lr_at(args, ranks, e)    the lr at epoch e (a float: epoch + step / steps)
args is ddp_mirror.parse's namespace. torch and numpy are imported only inside the functions."""
import math
import os
import sys

from ddp_gen import GAMMA, M64, np_mix64

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
    s0 = (seed * GAMMA + 0x632BE59BD9B4E019) & M64
    with np.errstate(over="ignore"):  # draw k (from 0) is mix64(s0 + k GAMMA), as nn_rng_u64's stream
        z = np_mix64(np.arange(need, dtype=np.uint64) * np.uint64(GAMMA) + np.uint64(s0))
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
