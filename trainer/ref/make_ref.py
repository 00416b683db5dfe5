#!/usr/bin/env python3
"""make_ref.py: PyTorch (CPU) reference states for the C nn library's tests (tests/nn/test_nn_ref.c).

Usage:  python3 trainer/ref/make_ref.py [outdir=trainer/ref]
Writes one <model>.nntf file per model.  The reference is computed in float64 from float32
parameters and inputs (so the stored values are the float32-rounded exact answer, and the C fp32
code is measured against the truth, not against another fp32 rounding).

File format "NNTF0001" (little-endian), the same one trainer/nn/tfile.c reads and writes:
    8 bytes magic "NNTF0001", u32 count, then count records:
    u32 name_len, name (UTF-8, no NUL), u32 ndim, u32 dims[ndim], float32 data[prod(dims)]
Records written here:
    desc=<C model description>   (empty tensor; the string is in the name)
    x                  input, row-major (N,C,H,W) / (N,T,D) / (N,F)
    labels | targets   int labels as float (N) | regression targets (N,K)
    lengths            sequence lengths as float (N) (LSTM only)
    param.<name>       initial parameters, in named_parameters() order (the C order)
    out, loss          model output (N,K) and loss of the first forward (train mode)
    grad.<name>        d loss / d param of that forward, same order
    hyper              [lr, momentum, weight_decay, nesterov, steps]
    step_losses        loss before each of `steps` SGD steps (forward, backward, step, on the
                       same batch, after the first forward above); weight decay only on conv/
                       linear/lstm weights (not BN, not biases)
    final.<name>       parameters after the steps (small models only)
    buf.<bn>.running_mean / running_var   BN buffers after all forwards (1 + steps)
    eval_out           output in eval mode after the steps (BN running statistics)
    torch32_err        the same pipeline in float32 PyTorch against float64, norm-wise relative
                       error of [out, worst grad, step_losses, worst final param, worst BN buffer,
                       eval_out]: the C test's tolerance is max(base, 3 x this), i.e. "as close
                       to the exact answer as PyTorch's own fp32" (matters for ResNet-50 only)
"""
import copy
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------- models (mirror trainer/nn/zoo.c)
class Basic(nn.Module):
    def __init__(self, cin, planes, stride, shortcut_a):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.mode, self.stride, self.cin, self.cout = None, stride, cin, planes
        if stride != 1 or cin != planes:
            if shortcut_a:
                self.mode = "A"
            else:
                self.mode = "B"
                self.downsample = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False),
                                                nn.BatchNorm2d(planes))

    def shortcut(self, x):
        if self.mode == "A":
            lo = (self.cout - self.cin) // 2
            return F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, lo, self.cout - self.cin - lo))
        if self.mode == "B":
            return self.downsample(x)
        return x

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class Bottleneck(nn.Module):
    def __init__(self, cin, planes, stride, shortcut_a):
        super().__init__()
        cout = planes * 4
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    """Spec-driven, like zoo.c: stem, stages (blocks, width*2^i), GAP, fc."""

    def __init__(self, imagenet_stem, bottleneck, blocks, width, shortcut_a, classes, cin):
        super().__init__()
        self.imagenet_stem = imagenet_stem
        k = 7 if imagenet_stem else 3
        self.conv1 = nn.Conv2d(cin, width, k, 2 if imagenet_stem else 1, k // 2, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        block = Bottleneck if bottleneck else Basic
        c = width
        for st, nb in enumerate(blocks):
            planes = width << st
            layers = []
            for bi in range(nb):
                s = 2 if (bi == 0 and st > 0) else 1
                layers.append(block(c, planes, s, shortcut_a))
                c = planes * 4 if bottleneck else planes
            setattr(self, "layer%d" % (st + 1), nn.Sequential(*layers))
        self.nstages = len(blocks)
        self.fc = nn.Linear(c, classes)
        for mod in self.modules():
            if isinstance(mod, nn.Conv2d):
                nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        if self.imagenet_stem:
            x = F.max_pool2d(x, 3, 2, 1)
        for st in range(self.nstages):
            x = getattr(self, "layer%d" % (st + 1))(x)
        return self.fc(x.mean(dim=(2, 3)))


class LSTMNet(nn.Module):
    def __init__(self, D, H, dense, classes):
        super().__init__()
        self.lstm = nn.LSTM(D, H, batch_first=True)
        self.dense = nn.Linear(H, dense) if dense else None
        self.fc = nn.Linear(dense or H, classes)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu().long(), batch_first=True, enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        h = h[-1]
        if self.dense is not None:
            h = F.relu(self.dense(h))
        return self.fc(h)


class Hyperplane(nn.Module):
    def __init__(self, F_, out):
        super().__init__()
        self.fc = nn.Linear(F_, out)

    def forward(self, x):
        return self.fc(x)


# ---------------------------------------------------------------- file writer
def write_nntf(path, recs):
    with open(path, "wb") as f:
        f.write(b"NNTF0001")
        f.write(struct.pack("<I", len(recs)))
        for name, arr in recs:
            a = np.ascontiguousarray(np.asarray(arr, dtype=np.float32))
            nb = name.encode()
            f.write(struct.pack("<I", len(nb)))
            f.write(nb)
            f.write(struct.pack("<I", a.ndim))
            for d in a.shape:
                f.write(struct.pack("<I", d))
            f.write(a.tobytes())


def t2n(t):
    return t.detach().to(torch.float64).cpu().clone().numpy()


def pipeline(model, x, y, task, lengths, steps, lr, mom, wd, nesterov):
    """forward/backward + `steps` SGD steps + eval; returns a dict of float64 numpy results."""
    crit = nn.CrossEntropyLoss() if task == "classify" else nn.MSELoss()
    fwd = (lambda: model(x, lengths)) if lengths is not None else (lambda: model(x))
    r = {}
    model.train()
    out = fwd()
    loss = crit(out, y)
    model.zero_grad()
    loss.backward()
    r["out"], r["loss"] = t2n(out), np.array([loss.item()])
    r["grads"] = [(n, t2n(p.grad)) for n, p in model.named_parameters()]
    isdecay = lambda n, p: (n.endswith("weight") and p.dim() > 1) or "weight_" in n
    decay = [p for n, p in model.named_parameters() if isdecay(n, p)]
    nodecay = [p for n, p in model.named_parameters() if not isdecay(n, p)]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": wd}, {"params": nodecay, "weight_decay": 0.0}],
                          lr=lr, momentum=mom, nesterov=nesterov)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        l = crit(fwd(), y)
        l.backward()
        opt.step()
        losses.append(l.item())
    r["step_losses"] = np.array(losses)
    r["final"] = [(n, t2n(p)) for n, p in model.named_parameters()]
    r["bufs"] = [(n, t2n(b)) for n, b in model.named_buffers() if n.endswith("running_mean") or n.endswith("running_var")]
    model.eval()
    with torch.no_grad():
        r["eval_out"] = t2n(fwd())
    return r


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-6))


def make(path, desc, model, x, y, task, lengths=None, steps=5, lr=0.05, mom=0.9, wd=1e-4, nesterov=False,
         store_final=True):
    # make every parameter exactly float32-representable; the reference runs in float64
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.float())
    m32 = copy.deepcopy(model).float()
    model = model.double()
    x = x.float()
    yy = y if task == "classify" else y.float()
    recs = [("desc=" + desc, np.zeros((0,), np.float32)), ("x", t2n(x))]
    recs.append(("labels", y.numpy().astype(np.float32)) if task == "classify" else ("targets", t2n(yy)))
    if lengths is not None:
        recs.append(("lengths", lengths.numpy().astype(np.float32)))
    for n, p in model.named_parameters():
        recs.append(("param." + n, t2n(p)))
    r = pipeline(model, x.double(), yy if task == "classify" else yy.double(), task, lengths, steps, lr, mom, wd,
                 nesterov)
    # the same in float32 PyTorch: its error against float64 scales the C tolerances
    q = pipeline(m32, x, yy, task, lengths, steps, lr, mom, wd, nesterov)
    t32 = [rel(q["out"], r["out"]),
           max(rel(a[1], b[1]) for a, b in zip(q["grads"], r["grads"])),
           rel(q["step_losses"], r["step_losses"]),
           max(rel(a[1], b[1]) for a, b in zip(q["final"], r["final"])),
           max([rel(a[1], b[1]) for a, b in zip(q["bufs"], r["bufs"])] or [0.0]),
           rel(q["eval_out"], r["eval_out"])]
    recs += [("out", r["out"]), ("loss", r["loss"])]
    recs += [("grad." + n, g) for n, g in r["grads"]]
    recs.append(("hyper", np.array([lr, mom, wd, 1.0 if nesterov else 0.0, steps])))
    recs.append(("step_losses", r["step_losses"]))
    if store_final:
        recs += [("final." + n, p) for n, p in r["final"]]
    recs += [("buf." + n, b) for n, b in r["bufs"]]
    recs.append(("eval_out", r["eval_out"]))
    recs.append(("torch32_err", np.array(t32)))
    write_nntf(path, recs)
    size = os.path.getsize(path)
    print("%-20s %-48s params %7d loss %.5f %7.1f kB; torch fp32 err: out %.1e grad %.1e steps %.1e final %.1e "
          "bn %.1e eval %.1e" % ((os.path.basename(path), desc, sum(p.numel() for p in model.parameters()),
                                  r["loss"][0], size / 1e3) + tuple(t32)))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    torch.manual_seed(1234)
    g = torch.Generator().manual_seed(42)

    # hyperplane regression: y = a.x + noise
    Fh, N = 8192, 16
    a = torch.randn(Fh, generator=g) / Fh ** 0.5
    x = torch.randn(N, Fh, generator=g)
    y = (x @ a + 0.01 * torch.randn(N, generator=g)).unsqueeze(1)
    make(os.path.join(out, "hyperplane.nntf"), "hyperplane features=8192", Hyperplane(Fh, 1), x, y,
         "regress", lr=0.01)

    # ResNet-8 for CIFAR (n=1), reduced width 8, option A shortcuts
    x = torch.randn(4, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (4,), generator=g)
    make(os.path.join(out, "resnet_cifar.nntf"), "resnet-cifar n=1 width=8 shortcut=A classes=10",
         ResNet(False, False, [1, 1, 1], 8, True, 10, 3), x, y, "classify")

    # ResNet-50 (bottleneck, ImageNet stem) at 64x64, width 8 (1/8 of the channels), 10 classes, batch 4
    # (at batch 2 the last stage normalises 8 values per channel and PyTorch's own fp32 gradients
    # are off by up to 5e-2 against float64: too ill-conditioned to be a useful reference)
    x = torch.randn(4, 3, 64, 64, generator=g)
    y = torch.randint(0, 10, (4,), generator=g)
    make(os.path.join(out, "resnet50.nntf"), "resnet50 width=8 classes=10 in=3x64x64",
         ResNet(True, True, [3, 4, 6, 3], 8, False, 10, 3), x, y, "classify", lr=0.005,
         store_final=False)

    # LSTM classifier, variable lengths (padded with zeros), one dense layer
    D, H, T, N = 16, 12, 7, 4
    lengths = torch.tensor([7, 3, 5, 1])
    x = torch.randn(N, T, D, generator=g)
    for n in range(N):
        x[n, lengths[n]:] = 0
    y = torch.randint(0, 5, (N,), generator=g)
    make(os.path.join(out, "lstm.nntf"), "lstm in=16 hidden=12 steps=7 dense=10 classes=5",
         LSTMNet(D, H, 10, 5), x, y, "classify", lengths=lengths, nesterov=True)

    # small ResNet for Fashion-MNIST (option B shortcuts)
    x = torch.randn(8, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (8,), generator=g)
    make(os.path.join(out, "resnet_fmnist.nntf"), "resnet-fmnist",
         ResNet(False, False, [1, 1, 1], 16, False, 10, 1), x, y, "classify")


if __name__ == "__main__":
    main()
