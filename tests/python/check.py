"""check.py CASE [ARGS]: the PyTorch package's checks, run under mpirun (tests/python.tests).

  ddp DIR        mode="sync" against plain DDP (gloo, rendezvous file in DIR) in the same
                 processes, step by step: the applied gradients and the weights agree to float
                 tolerance (the same model, data and SGD on both sides)
  partial M/M.. DIR  runs with a random straggler per step: replicas bitwise equal at each epoch end
                 (end_epoch's hash check), every gradient conserved (sum applied = sum deposited,
                 counted and summed by the C library), no streak above tau, epoch_s without the
                 previous epoch's evaluation, the run's wall_s with the last; writes DIR/py_run_MODE.json
  refuse         bad tau, models that differ, quorum > P, Adam, a bad mode: refused on every rank
  kill           rank 1 kills itself mid-training (the job must end non-zero in bounded time)
  hang           rank 1 stops itself (SIGSTOP): libpcoll's liveness names it, the package aborts
Tiny model and data; one intra-op thread per rank."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import torch  # noqa: E402

import eager_sgd  # noqa: E402

torch.set_num_threads(1)
STEPS, EPOCHS, TAU = 12, 2, 2


def model_of(extra=False):
    torch.manual_seed(7)
    layers = [torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)]
    if extra:
        layers += [torch.nn.Linear(4, 4)]
    return torch.nn.Sequential(*layers)


def batch(rank, epoch, step):
    g = torch.Generator().manual_seed(1000 * epoch + 31 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)


def fail(msg):
    sys.stderr.write("check.py: rank %s: %s\n" % (eager_sgd.init()[0], msg))
    sys.exit(1)


def ddp(rundir):
    import torch.distributed as dist
    rank, size = eager_sgd.init()
    dist.init_process_group("gloo", init_method="file://" + os.path.join(os.path.abspath(rundir), "rendezvous"), rank=rank,
                            world_size=size)
    a, b = model_of(), model_of()
    d = torch.nn.parallel.DistributedDataParallel(a)
    oa = torch.optim.SGD(a.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    ob = eager_sgd.DistributedOptimizer(torch.optim.SGD(b.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4), b,
                                        mode="sync", tau=TAU)
    worst_g = worst_w = 0.0
    for e in range(EPOCHS):
        for s in range(STEPS):
            x, y = batch(rank, e, s)
            oa.zero_grad()
            torch.nn.functional.cross_entropy(d(x), y).backward()
            oa.step()
            ob.zero_grad()
            torch.nn.functional.cross_entropy(b(x), y).backward()
            ob.step()
            for pa, pb in zip(a.parameters(), b.parameters()):
                worst_g = max(worst_g, float((pa.grad - pb.grad).abs().max()))
                worst_w = max(worst_w, float((pa - pb).detach().abs().max()))
            if worst_g > 1e-6 or worst_w > 1e-5:
                fail("epoch %d step %d: eager_sgd sync differs from DDP: gradient by %g, weights by %g"
                     % (e, s, worst_g, worst_w))
        ob.end_epoch()
    rec = ob.close()
    if rec["summary"]["fresh_fraction"] != 1.0:
        fail("sync rounds with fresh fraction %g" % rec["summary"]["fresh_fraction"])
    dist.destroy_process_group()
    if rank == 0:
        print("ddp: %d steps, eager_sgd sync = DDP: gradients within %.2g, weights within %.2g"
              % (EPOCHS * STEPS, worst_g, worst_w))


def partial(modes, outdir):
    for mode in modes.split("/"):
        partial1(mode, os.path.join(outdir, "py_run_%s.json" % mode.replace(":", "_")))


def partial1(mode, out):
    rank, size = eager_sgd.init()
    m = model_of()
    opt = eager_sgd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4),
                                         m, mode=mode, tau=TAU, seed=3, experiment="pytest", model_name="mlp",
                                         data_name="random", batch=8, epochs=EPOCHS,
                                         imbalance="random:k=1,d=30", curve_every=10)
    for e in range(EPOCHS):
        for s in range(STEPS):
            x, y = batch(rank, e, s)
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            if (7 * s + 3 * e) % size == rank:  # one straggler per step, as imbalance random:k=1
                time.sleep(0.03)
            opt.step()
        # an evaluation takes 0.2 s: epoch 2's epoch_s must leave epoch 1's out (its wall_s keeps it),
        # the run's wall time must hold the last one (as eager-train's and DDP's)
        opt.end_epoch(evaluate=lambda: (time.sleep(0.2), (1.0, 0.5))[1],
                      curve_evaluate=lambda: (1.0, 0.5), train_loss=loss.item(), samples=8 * STEPS)
    rec = opt.close(out)
    ep = rec["epochs"]
    if ep[1]["epoch_s"] > ep[1]["wall_s"] - ep[0]["wall_s"] - 0.1:
        fail("epoch 2's epoch_s %.3f s holds epoch 1's 0.2 s evaluation (wall_s %.3f -> %.3f)"
             % (ep[1]["epoch_s"], ep[0]["wall_s"], ep[1]["wall_s"]))
    if [e["steps"] for e in ep] != [STEPS * size] * EPOCHS:  # the epoch's steps, all ranks (as DDP's)
        fail("epochs[].steps %s, not %d per epoch" % ([e["steps"] for e in ep], STEPS * size))
    if mode.startswith("adaptive") and rec["controller"]["policy"] != mode:  # as eager-train's: the row's name
        fail("controller.policy '%s', not the mode as given '%s'" % (rec["controller"]["policy"], mode))
    if rec["summary"]["wall_s"] < ep[-1]["wall_s"] + 0.15:
        fail("the run's wall_s %.3f s lacks the last epoch's 0.2 s evaluation (its wall_s %.3f)"
             % (rec["summary"]["wall_s"], ep[-1]["wall_s"]))
    c = opt.counts()
    got = [p["batches"] for p in rec["curve"]]  # a snapshot after the round that passes k x 10 (rounds <= P)
    if len(got) != c["grads"] // 10 or any(not 10 * k <= b < 10 * k + size for k, b in enumerate(got, 1)):
        fail("curve points at %s gradients applied, one just past every 10 wanted" % got)
    lib = eager_sgd._lib.load()
    import ctypes
    v = (ctypes.c_double * 3)(c["deposits"], c["deposited_sum"], c["grads"])
    lib.eg_allreduce_sum(v, 3, 1)
    if v[0] != c["grads"]:
        fail("conservation: %d gradients deposited over the ranks, %d applied" % (v[0], c["grads"]))
    if abs(v[1] - c["applied_sum"]) > 1e-4 * max(1.0, abs(v[1])):
        fail("conservation: the deposited gradients sum to %.9g over the ranks, the applied rounds to %.9g"
             % (v[1], c["applied_sum"]))
    if v[2] != size * c["grads"]:
        fail("the ranks applied different numbers of gradients")
    if c["max_streak"] > TAU or c["tau_violations"]:
        fail("a streak of %d beyond tau %d (%d violations)" % (c["max_streak"], TAU, c["tau_violations"]))
    if rank == 0:
        print("partial %s: %d rounds, fresh fraction %.3f, %d gradients conserved (sums %.6g = %.6g), max streak %d"
              % (mode, c["rounds"], rec["summary"]["fresh_fraction"], c["grads"], v[1], c["applied_sum"],
                 c["max_streak"]))


def refuse():
    """A bad tau, a model that differs on rank 2, a quorum above P and Adam are refused on every rank
    (caught here, each line printed), then a bad mode uncaught: the job exits non-zero with its line."""
    rank, size = eager_sgd.init()
    for what, mode, tau in (("tau", "solo", -1), ("model", "majority", TAU), ("quorum", "quorum:5", TAU),
                            ("adam", "sync", TAU)):
        m = model_of(extra=(what == "model" and rank == 2))
        o = torch.optim.Adam(m.parameters()) if what == "adam" else torch.optim.SGD(m.parameters(), lr=0.1)
        try:
            eager_sgd.DistributedOptimizer(o, m, mode=mode, tau=tau)
        except eager_sgd.EagerSGDError as e:
            print("refused %s: %s" % (what, e.line), flush=True)
            continue
        fail("%s was not refused" % what)
    m = model_of()
    eager_sgd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), m, mode="bogus", tau=TAU)
    fail("mode bogus was not refused")


def kill(sig=signal.SIGKILL):
    rank, size = eager_sgd.init()
    m = model_of()
    opt = eager_sgd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), m, mode="majority", tau=TAU,
                                         t_abort=20)
    for s in range(1000):
        if s == 5 and rank == 1:
            os.kill(os.getpid(), sig)
        x, y = batch(rank, 0, s)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
    fail("trained on after rank 1 died")


if __name__ == "__main__":
    case = sys.argv[1]
    {"ddp": lambda: ddp(sys.argv[2]), "partial": lambda: partial(sys.argv[2], sys.argv[3]),
     "refuse": refuse, "kill": kill, "hang": lambda: kill(signal.SIGSTOP)}[case]()
