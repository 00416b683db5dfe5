#!/usr/bin/env python3
"""bench_torch_gpu.py: PyTorch GPU step time (zero_grad + forward + backward + SGD update) of the
models of nn_bench_gpu, same batch sizes, in fp32 and TF32 (cuDNN and matmul TF32 both switched
like NN_CUDA_TF32_ALL).  torch.backends.cudnn.benchmark = True (algorithm search, as ours).
Input placements, as nn_bench_gpu's, the copy inside the timed step: pageable = the batch starts in
ordinary host memory, .to(device); pinned = in page-locked memory, .to(device, non_blocking=True)
(what DataLoader(pin_memory=True) gives a training loop); device = the batch stays on the GPU.
Usage: bench_torch_gpu.py iters [model ...]   NN_BENCH_SKIP as nn_bench_gpu's ("resnet50/fp32").
Prints "# cudnn VERSION torch VERSION" first, then one line per row as it is measured:
"model batch precision input median_ms min_ms" (a later failure keeps the rows printed)."""
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_ref as mr  # noqa: E402


def models():
    return {
        "resnet32": (lambda: mr.ResNet(False, False, [5, 5, 5], 16, True, 10, 3), 128, (3, 32, 32), 10),
        "resnet50": (lambda: mr.ResNet(True, True, [3, 4, 6, 3], 64, False, 1000, 3), 64, (3, 224, 224), 1000),
        "lstm": (lambda: mr.LSTMNet(2048, 2048, 512, 101), 32, (40, 2048), 101),
    }


def main():
    if not torch.cuda.is_available():
        print("bench_torch_gpu: torch.cuda.is_available() is False", file=sys.stderr)
        sys.exit(1)
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    sel = sys.argv[2:]
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    skip = os.environ.get("NN_BENCH_SKIP", "").split()
    print("# cudnn %s torch %s" % (torch.backends.cudnn.version(), torch.__version__), flush=True)
    for name, (mk, N, shape, K) in models().items():
        if sel and name not in sel:
            continue
        for prec in ("fp32", "tf32"):
            if "%s/%s" % (name, prec) in skip:
                continue
            tf = prec == "tf32"
            torch.backends.cudnn.allow_tf32 = tf
            torch.backends.cuda.matmul.allow_tf32 = tf
            m = mk().to(dev)
            m.train()
            xp, yp = torch.randn(N, *shape), torch.randint(0, K, (N,))
            xh, yh = xp.pin_memory(), yp.pin_memory()
            lengths = torch.full((N,), shape[0]) if name == "lstm" else None
            opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
            crit = nn.CrossEntropyLoss()
            for place in ("pageable", "pinned", "device"):
                x, y = (xh.to(dev), yh.to(dev)) if place == "device" else (None, None)
                ts = []
                for it in range(iters + 3):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    if place == "pageable":
                        x, y = xp.to(dev), yp.to(dev)
                    elif place == "pinned":
                        x, y = xh.to(dev, non_blocking=True), yh.to(dev, non_blocking=True)
                    opt.zero_grad(set_to_none=False)
                    out = m(x, lengths) if lengths is not None else m(x)
                    loss = crit(out, y)
                    loss.backward()
                    opt.step()
                    loss.item()  # the loss reaches the host, as in ours
                    torch.cuda.synchronize()
                    if it >= 3:
                        ts.append((time.perf_counter() - t0) * 1e3)
                ts.sort()
                print("%s %d %s %s %.2f %.2f" % (name, N, prec, place, ts[len(ts) // 2], ts[0]), flush=True)
            del m, opt, x, y, xh, yh, xp, yp
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
