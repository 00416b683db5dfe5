#!/usr/bin/env python3
"""bench_torch_gpu.py: PyTorch GPU step time (zero_grad + forward + backward + SGD update) of the
models of nn_bench_gpu, same batch sizes, in fp32 and TF32 (cuDNN and matmul TF32 both switched
like NN_CUDA_TF32_ALL).  torch.backends.cudnn.benchmark = True (algorithm search, as ours).
Usage: bench_torch_gpu.py iters [model ...]   Prints "model batch precision median_ms min_ms"."""
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
    for name, (mk, N, shape, K) in models().items():
        if sel and name not in sel:
            continue
        for prec in ("fp32", "tf32"):
            tf = prec == "tf32"
            torch.backends.cudnn.allow_tf32 = tf
            torch.backends.cuda.matmul.allow_tf32 = tf
            m = mk().to(dev)
            m.train()
            x = torch.randn(N, *shape, device=dev)
            y = torch.randint(0, K, (N,), device=dev)
            lengths = torch.full((N,), shape[0]) if name == "lstm" else None
            opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
            crit = nn.CrossEntropyLoss()
            ts = []
            for it in range(iters + 3):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
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
            print("%s %d %s %.2f %.2f" % (name, N, prec, ts[len(ts) // 2], ts[0]), flush=True)
            del m, opt, x, y
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
