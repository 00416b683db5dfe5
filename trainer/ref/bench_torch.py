#!/usr/bin/env python3
"""bench_torch.py: PyTorch CPU step time (forward + backward + SGD update) of the models of
nn_bench_cpu, same batch sizes and thread count.  Usage: bench_torch.py threads iters [model ...]
Prints "model batch median_ms min_ms cpu_ms" per model (median wall time of iters after 2
warm-ups, the fastest, the median process CPU time), as nn_bench_cpu.
--profile as the first argument: after each model's line, PyTorch's own operators by self CPU
time (torch.profiler over the timed steps), ms per step, to set beside nn_bench_cpu --profile."""
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
        "resnet50": (lambda: mr.ResNet(True, True, [3, 4, 6, 3], 64, False, 1000, 3), 8, (3, 224, 224), 1000),
        "lstm": (lambda: mr.LSTMNet(2048, 512, 0, 101), 32, (40, 2048), 101),
        "fmnist": (lambda: mr.ResNet(False, False, [1, 1, 1], 16, False, 10, 1), 64, (1, 28, 28), 10),
    }


def main():
    prof = len(sys.argv) > 1 and sys.argv[1] == "--profile"
    if prof:
        del sys.argv[1]
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    sel = sys.argv[3:]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    for name, (mk, N, shape, K) in models().items():
        if sel and name not in sel:
            continue
        m = mk()
        m.train()
        x = torch.randn(N, *shape)
        y = torch.randint(0, K, (N,))
        lengths = torch.full((N,), shape[0]) if name == "lstm" else None
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
        crit = nn.CrossEntropyLoss()
        ts, cs = [], []
        p = None
        for it in range(iters + 2):
            if prof and it == 2:
                p = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
                p.__enter__()
            t0, c0 = time.perf_counter(), time.process_time()
            opt.zero_grad()
            out = m(x, lengths) if lengths is not None else m(x)
            crit(out, y).backward()
            opt.step()
            if it >= 2:
                ts.append((time.perf_counter() - t0) * 1e3)
                cs.append((time.process_time() - c0) * 1e3)
        if p is not None:
            p.__exit__(None, None, None)
        ts.sort()
        cs.sort()
        print("%s %d %.1f %.1f %.1f" % (name, N, ts[len(ts) // 2], ts[0], cs[len(cs) // 2]), flush=True)
        if p is not None:
            ev = sorted(p.key_averages(), key=lambda e: -e.self_cpu_time_total)
            tot = sum(e.self_cpu_time_total for e in ev)
            print("torch profile %s: self CPU ms per step by operator (total %.1f)" % (name, tot / 1e3 / iters))
            for e in ev[:15]:
                print("  %-44s %9.2f %5.1f%%" % (e.key[:44], e.self_cpu_time_total / 1e3 / iters,
                                                100.0 * e.self_cpu_time_total / max(tot, 1)))


if __name__ == "__main__":
    main()
