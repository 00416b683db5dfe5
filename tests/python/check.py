"""check.py CASE [ARGS]: the PyTorch package's checks, run under mpirun (tests/python.tests).

  ddp DIR        mode="sync" against plain DDP (gloo, rendezvous file in DIR) in the same
                 processes, step by step: the applied gradients and the weights agree to float
                 tolerance (the same model, data and SGD on both sides)
  partial M/M.. DIR  runs with a random straggler per step: replicas bitwise equal at each epoch end
                 (end_epoch's hash check), every gradient conserved (sum applied = sum deposited,
                 counted and summed by the C library), no streak above tau, epoch_s without the
                 previous epoch's evaluation, the run's wall_s with the last; writes DIR/py_run_MODE.json
                 (a CPU run: libeager.so loaded, never libeager_cuda.so; the run file's data_path host)
  refuse         bad tau, models that differ, quorum > P, Adam, parameters on two devices (rank 2's, one
                 on "meta": no GPU needed), a bad mode: refused on every rank
  gpu_sync KIND DIR   mode="sync" on 2 ranks, KIND cpu (writes each epoch's weights to DIR), shared (both
                 ranks on cuda:0: libpcoll's staged path) or own (rank r on cuda:r: NCCL): the GPU runs'
                 weights equal the cpu run's after every epoch to float tolerance; the run file's
                 data_path and gpus (tests/python/gpu.sh)
  gpu_partial KIND M/M.. DIR  partial1's checks with the model on the GPU (KIND shared | own)
  gpu_refuse_kind, gpu_refuse_split   rank 1 on the CPU, rank 0 on the GPU; a model split over CPU and
                 GPU; a CUDA model after libeager.so was loaded: refused on every rank with one line
  resume_save DIR, resume_load DIR, resume_elastic DIR   the controller's state through
                 state_dict/torch.save/load_state_dict (tests/python/run.sh resume says what each checks)
  kill           rank 1 kills itself mid-training (the job must end non-zero in bounded time)
  hang           rank 1 stops itself (SIGSTOP): libpcoll's liveness names it, the package aborts
Tiny model and data; one intra-op thread per rank."""
import os
import re
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


def partial(modes, outdir, kind="cpu"):
    for mode in modes.split("/"):
        partial1(mode, os.path.join(outdir, "py_run_%s%s.json" % ("" if kind == "cpu" else kind + "_",
                                                                   mode.replace(":", "_"))), kind)


def device_of(kind, rank):
    """cpu; shared: every rank on cuda:0 (libpcoll's staged path); own: rank r on cuda:r (NCCL)."""
    if kind == "cpu":
        return torch.device("cpu")
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 as on the CPU (the sync comparison)
    d = torch.device("cuda", 0 if kind == "shared" else rank)
    torch.cuda.set_device(d)
    return d


def check_env(rec, kind, size):
    """The run file's environment: the CPU as eager-train names it (common/cpu.h: the model name
    from /proc/cpuinfo, then "; "), data_path, and every rank's GPU (shared: the same one)."""
    env = rec["environment"]
    # the value as cpu_describe reads it: after ':' and one space, up to the newline
    model = next((re.sub(r"^ ", "", ln.split(":", 1)[1].rstrip("\n")) for ln in open("/proc/cpuinfo")
                  if ln.startswith("model name")), None)
    if model and not (env.get("cpu") or "").startswith(model + "; "):
        fail("the run file's cpu is %r, not this machine's model %r then '; '" % (env.get("cpu"), model))
    want = {"cpu": "host", "shared": "staged", "own": "nccl"}[kind]
    if env.get("data_path") != want:
        fail("the run file's data_path is %s, not %s (%s)" % (env.get("data_path"), want, kind))
    g = env.get("gpus")
    if kind == "cpu":
        if g is not None or env.get("cuda") is not None:
            fail("a CPU run records gpus %s, cuda %s" % (g, env.get("cuda")))
        maps = open("/proc/self/maps").read()
        if eager_sgd._lib.loaded() != "host" or "libeager_cuda" in maps:
            fail("a CPU run loaded %s (libeager_cuda.so mapped: %s)"
                 % (eager_sgd._lib.loaded(), "libeager_cuda" in maps))
        return
    if not g or len(g) != size or any(not x["bus_id"] or not x["name"] for x in g):
        fail("the run file's gpus %s: not one GPU per rank with its name and bus id" % g)
    buses = {x["bus_id"] for x in g}
    if len(buses) != (1 if kind == "shared" else size):
        fail("the run file's gpus %s: %d distinct bus ids for %s" % (g, len(buses), kind))


def partial1(mode, out, kind="cpu"):
    rank, size = eager_sgd.init(cuda=kind != "cpu")
    dev = device_of(kind, rank)
    m = model_of().to(dev)
    opt = eager_sgd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4),
                                         m, mode=mode, tau=TAU, seed=3, experiment="pytest", model_name="mlp",
                                         data_name="random", batch=8, epochs=EPOCHS,
                                         imbalance="random:k=1,d=30", curve_every=10)
    for e in range(EPOCHS):
        for s in range(STEPS):
            x, y = (t.to(dev) for t in batch(rank, e, s))
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
    check_env(rec, kind, size)
    if rank == 0:
        print("partial %s%s: %d rounds, fresh fraction %.3f, %d gradients conserved (sums %.6g = %.6g), max streak %d"
              % ("" if kind == "cpu" else kind + " ", mode, c["rounds"], rec["summary"]["fresh_fraction"], c["grads"],
                 v[1], c["applied_sum"],
                 c["max_streak"]))


def refuse():
    """A bad tau, a model that differs on rank 2, a quorum above P and Adam are refused on every rank
    (caught here, each line printed), then a bad mode uncaught: the job exits non-zero with its line."""
    rank, size = eager_sgd.init()
    for what, mode, tau in (("tau", "solo", -1), ("model", "majority", TAU), ("quorum", "quorum:5", TAU),
                            ("adam", "sync", TAU), ("devices", "sync", TAU)):
        m = model_of(extra=(what == "model" and rank == 2))
        if what == "devices" and rank == 2:  # one parameter elsewhere (meta: a device without a GPU)
            m[2].bias = torch.nn.Parameter(m[2].bias.detach().to("meta"))
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


# Adaptive policies whose rounds do not depend on wall time (as tests/trainer/resume_adaptive.sh): a
# window no run here fills and the step-time screen off, so a controller started in sync stays in sync
# (every round deterministic: weights and decisions comparable bitwise) and one started in solo stays in
# solo (its first probe never completes). A controller continuing the solo state with start=sync keeps
# solo; one that started afresh would run sync.
RESUME = {"sync": "adaptive,start=sync,window=65536,screen=off", "solo": "adaptive,start=solo,window=65536,screen=off"}


def train(mode, epochs, first=0, load=None, after_load=None, save=None, mid=None):
    """Trains epochs first.. with partial1's data and one straggler per step; load: a checkpoint dict
    ({"model", "opt"}) loaded before; save(m, opt) after the first epoch; mid(opt) after the first step
    of the first epoch. Returns the run record."""
    rank, size = eager_sgd.init()
    m = model_of()
    opt = eager_sgd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4),
                                         m, mode=mode, tau=TAU, seed=3)
    if load is not None:
        m.load_state_dict(load["model"])
        opt.load_state_dict(load["opt"])
        if after_load:
            after_load(opt)
    for e in range(first, first + epochs):
        for s in range(STEPS):
            x, y = batch(rank, e, s)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(x), y).backward()
            if (7 * s + 3 * e) % size == rank:
                time.sleep(0.03)
            opt.step()
            if mid and e == first and s == 0:
                mid(opt)
        opt.end_epoch()
        if save and e == first:
            save(m, opt)
    rec = opt.close()
    train.run = opt.state_dict()["eager_sgd"]["run"]  # the run's totals after it (state_dict after close)
    return rec


def last_modes(rec):
    """The modes of the last epoch's rounds (the run file's aggregated records)."""
    last = rec["epochs"][-1]["epoch"] - 1  # epochs[] from 1, rounds' epochs from 0 (as eager-train's)
    return sorted({r["mode"] for r in rec["rounds"]["records"] if r["epoch"] == last})


def resume_save(d):
    """Two uninterrupted epochs per policy of RESUME, rank 0 saving {model, opt} state_dicts after the
    first (torch.save); what epoch 2 did goes to DIR/resume_full.json."""
    import json
    rank, size = eager_sgd.init()
    m = model_of()
    o = eager_sgd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), m, mode="majority")
    c = o.state_dict().get("eager_sgd")
    if c is None or c["state"] is not None or c["run"]["epochs"] != 0:
        fail("a static mode's state_dict before its first epoch: %s" % c)
    o.close()
    o = eager_sgd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), m, mode=RESUME["sync"])
    if o.state_dict()["eager_sgd"]["state"] is not None:
        fail("an adaptive controller before its first epoch carries a state")
    o.close()
    full = {}
    for tag, mode in sorted(RESUME.items()) + [("majority", "majority")]:
        def save(m, opt, tag=tag):
            sd = opt.state_dict()
            c = sd["eager_sgd"]
            if ((c["state"] is None) != (tag == "majority") or c["rounds"] < STEPS * (tag != "majority") or
                    c["ranks"] != size or c["mode"] != mode or c["run"]["epochs"] != 1 or c["run"]["rounds"] < 1):
                fail("state_dict after epoch 1: %s" % {k: v for k, v in c.items() if k != "state"})
            if rank == 0:
                torch.save({"model": m.state_dict(), "opt": sd}, os.path.join(d, "ck_%s.pt" % tag))
        rec = train(mode, 2, save=save)
        full[tag] = {"decision_hash": rec["controller"]["decision_hash"], "epochs": rec["epochs"],
                     "summary": rec["summary"], "weights_hash": rec["epochs"][-1]["weights_hash"],
                     "modes": last_modes(rec)}
    if full["solo"]["modes"] != ["solo"] or full["sync"]["modes"] != ["sync"]:
        fail("the uninterrupted runs' epoch 2 ran %s (start=sync) and %s (start=solo): the policies are not the "
             "deterministic ones this test needs" % (full["sync"]["modes"], full["solo"]["modes"]))
    if rank == 0:
        with open(os.path.join(d, "resume_full.json"), "w") as f:
            json.dump(full, f)
        print("resume_save: epoch 2 uninterrupted: %s" % full)


TOTALS = ("epochs", "fresh_fraction", "mean_staleness", "max_staleness", "max_streak")


def continued(tag, rec, full, P, P0=None):
    """rec, resumed after epoch 1 of full (the uninterrupted run, on P0 ranks) on P ranks, continues its
    run file as eager-train's --resume: epochs numbered on, the summary's totals those of both parts, the
    run's rounds and fresh gradients (grads in this P's units) their sums, a restart recorded."""
    P0 = P0 or P
    first, eps = full["epochs"][0], rec["epochs"]
    if [e["epoch"] for e in eps] != [2]:
        fail("%s: the resumed run's epochs are numbered %s, not [2]" % (tag, [e["epoch"] for e in eps]))
    g1 = round(first["fresh_fraction"] * first["rounds"] * P0)  # its fresh gradients (= its staleness count)
    g1p = round(g1 * P / P0)  # in this P's units, as load_state_dict counts them
    e, g2 = eps[0], round(eps[0]["fresh_fraction"] * eps[0]["rounds"] * P)
    both = {"epochs": 2, "fresh_fraction": (g1p + g2) / ((first["rounds"] + e["rounds"]) * P),
            "mean_staleness": (first["mean_staleness"] * g1 + e["mean_staleness"] * g2) / (g1 + g2) if g1 + g2 else 0.0,
            "max_staleness": max(first["max_staleness"], e["max_staleness"]),
            "max_streak": max(first["max_streak"], e["max_streak"])}
    got = {k: rec["summary"][k] for k in TOTALS}
    if any(abs(got[k] - both[k]) > 1e-9 * max(1.0, abs(both[k])) for k in TOTALS):
        fail("%s: the resumed run's summary %s, both parts' %s" % (tag, got, both))
    run, want = train.run, (first["rounds"] + e["rounds"], g1p + g2)
    if (run["rounds"], run["grads"]) != want:
        fail("%s: the run's rounds and fresh gradients after the resume %s, both parts' %s" % (
            tag, (run["rounds"], run["grads"]), want))
    if not rec["summary"]["wall_s"] >= first["wall_s"] + e["epoch_s"]:  # wall time continues the saved run's
        fail("%s: the resumed run's wall_s %g is short of epoch 1's %g + epoch 2's epoch_s %g" % (
            tag, rec["summary"]["wall_s"], first["wall_s"], e["epoch_s"]))
    r = rec.get("restarts") or [{}]
    if len(r) != 1 or (r[0].get("epoch"), r[0].get("ranks_before"), r[0].get("ranks_after")) != (1, P0, P):
        fail("%s: the resumed run's restarts %s" % (tag, rec.get("restarts")))
    return got


def refused(what, opt, sd):
    try:
        opt.load_state_dict(sd)
    except eager_sgd.EagerSGDError as e:
        print("refused %s: %s" % (what, e.line), flush=True)
        return
    fail("load_state_dict of %s was not refused" % what)


def resume_load(d):
    """New processes: epoch 2 trained from the checkpoints of resume_save (see tests/python/run.sh)."""
    import copy
    import json
    rank, size = eager_sgd.init()
    with open(os.path.join(d, "resume_full.json")) as f:
        full = json.load(f)
    ck = {t: torch.load(os.path.join(d, "ck_%s.pt" % t)) for t in list(RESUME) + ["majority"]}

    def same_bytes(opt):  # the loaded state is the saved one, byte for byte
        got = opt.state_dict()["eager_sgd"]["state"]
        if got is None or not torch.equal(got, ck["sync"]["opt"]["eager_sgd"]["state"]):
            fail("the state after load_state_dict differs from the saved bytes")
    rec = train(RESUME["sync"], 1, first=1, load=ck["sync"], after_load=same_bytes)
    got = {"decision_hash": rec["controller"]["decision_hash"], "weights_hash": rec["epochs"][-1]["weights_hash"]}
    want = {k: full["sync"][k] for k in got}
    if got != want:
        fail("resumed at epoch 2 (start=sync): %s, the uninterrupted run %s" % (got, want))
    # its rounds are deterministic: the summary's totals are the uninterrupted run's
    tot = continued("sync", rec, full["sync"], size)
    if tot != {k: full["sync"]["summary"][k] for k in TOTALS}:
        fail("resumed at epoch 2 (start=sync): the summary's totals %s, the uninterrupted run's %s" % (
            tot, {k: full["sync"]["summary"][k] for k in TOTALS}))
    # a static mode's run continues likewise (its rounds depend on timing: the totals are both parts')
    rec = train("majority", 1, first=1, load=ck["majority"])
    continued("majority", rec, full["majority"], size)
    if rank == 0:
        with open(os.path.join(d, "resumed_majority.json"), "w") as f:
            json.dump(rec, f)
    mid_lines = []

    def mid(opt):  # an epoch is open: both calls refused
        for call in (opt.state_dict, lambda: opt.load_state_dict(ck["solo"]["opt"])):
            try:
                call()
                fail("a call in an open epoch was not refused")
            except eager_sgd.EagerSGDError as e:
                mid_lines.append(e.line)
    # the solo state continued by an optimizer whose own start= is sync: epoch 2 keeps solo
    rec = train(RESUME["sync"], 1, first=1, load=ck["solo"], mid=mid)
    continued("solo", rec, full["solo"], size)
    modes = last_modes(rec)
    if modes != full["solo"]["modes"]:
        fail("the solo state resumed with start=sync ran epoch 2 in %s, the uninterrupted run in %s: the "
             "controller did not continue" % (modes, full["solo"]["modes"]))
    for line in mid_lines:
        print("refused mid-epoch: %s" % line, flush=True)
    # a state_dict from before the controller's key: the SGD state loads, the controller starts afresh (sync)
    old = copy.copy(ck["solo"])
    old["opt"] = {k: v for k, v in ck["solo"]["opt"].items() if k != "eager_sgd"}
    modes = last_modes(train(RESUME["sync"], 1, first=1, load=old))
    if modes != ["sync"]:
        fail("an old-style state_dict: epoch 2 ran %s, not a fresh start=sync controller's sync" % modes)
    # a key of format 1 (the controller's state, no run): the controller continues, the run file starts afresh
    v1 = copy.copy(ck["solo"])
    key = {k: v for k, v in ck["solo"]["opt"]["eager_sgd"].items() if k != "run"}
    v1["opt"] = dict(ck["solo"]["opt"], eager_sgd=key)
    v1["opt"]["eager_sgd"]["format"] = "eager-sgd-controller/1"
    rec = train(RESUME["sync"], 1, first=1, load=v1)
    if last_modes(rec) != ["solo"] or [e["epoch"] for e in rec["epochs"]] != [1] or "restarts" in rec:
        fail("a format-1 key: epoch 2 ran %s, its epochs numbered %s, restarts %s (want solo, [1], none)" % (
            last_modes(rec), [e["epoch"] for e in rec["epochs"]], rec.get("restarts")))
    m = model_of()
    opt = eager_sgd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4),
                                         m, mode=RESUME["sync"], tau=TAU, seed=3)
    bad = copy.deepcopy(ck["solo"]["opt"])
    bad["eager_sgd"]["state"][len(bad["eager_sgd"]["state"]) // 2] ^= 0x10
    refused("corrupt", opt, bad)
    bad = copy.deepcopy(ck["solo"]["opt"])
    bad["eager_sgd"]["format"] = "eager-sgd-controller/9"
    refused("version", opt, bad)
    bad = copy.deepcopy(ck["solo"]["opt"])
    bad["eager_sgd"]["run"]["epochs"] = -1
    refused("run", opt, bad)
    refused("ranks", opt, ck["sync" if rank == 2 else "solo"]["opt"])
    opt.close()
    m = model_of()
    opt = eager_sgd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4),
                                         m, mode="majority", tau=TAU, seed=3)
    refused("policy", opt, ck["solo"]["opt"])
    opt.close()
    if rank == 0:
        print("resume_load: epoch 2 resumed = uninterrupted %s, its summary's totals too; majority and the solo "
              "state resumed: epochs numbered on, totals both parts'; the solo state kept solo under start=sync; "
              "an old-style dict ran a fresh controller, a format-1 key a fresh run file" % got)


def resume_elastic(d):
    """The 4-rank solo state on this run's ranks: converted (ctl_state_resize), its level kept."""
    import json
    ck = torch.load(os.path.join(d, "ck_solo.pt"))
    with open(os.path.join(d, "resume_full.json")) as f:
        full = json.load(f)
    rec = train(RESUME["sync"], 1, first=1, load=ck)
    continued("solo on %d ranks" % eager_sgd.init()[1], rec, full["solo"], eager_sgd.init()[1], P0=4)
    modes = last_modes(rec)
    if modes != ["solo"]:
        fail("the 4-rank solo state on %d ranks ran epoch 2 in %s, not its level solo" % (eager_sgd.init()[1], modes))
    if eager_sgd.init()[0] == 0:
        print("resume_elastic: the 4-rank solo state continued on %d ranks in solo" % eager_sgd.init()[1])


def gpu_sync(kind, d):
    """mode="sync" on the CPU (kind cpu: each epoch's weights to DIR/sync_cpu_RANK.pt) or on the GPU
    (shared, own): then the same weights as the cpu run's after every epoch, to float tolerance."""
    rank, size = eager_sgd.init(cuda=kind != "cpu")
    dev = device_of(kind, rank)
    m = model_of().to(dev)
    opt = eager_sgd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4),
                                         m, mode="sync", tau=TAU)
    per_epoch = []
    for e in range(EPOCHS):
        for s in range(STEPS):
            x, y = (t.to(dev) for t in batch(rank, e, s))
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
        opt.end_epoch()
        per_epoch.append([p.detach().to("cpu").clone() for p in m.parameters()])
    rec = opt.close(os.path.join(d, "gpu_sync_%s.json" % kind))
    if rec["summary"]["fresh_fraction"] != 1.0:
        fail("sync rounds with fresh fraction %g" % rec["summary"]["fresh_fraction"])
    check_env(rec, kind, size)
    ref = os.path.join(d, "sync_cpu_%d.pt" % rank)
    if kind == "cpu":
        torch.save(per_epoch, ref)
        return
    worst = 0.0
    for e, (got, want) in enumerate(zip(per_epoch, torch.load(ref))):
        for a, b in zip(got, want):
            worst = max(worst, float((a - b).abs().max()) / max(1.0, float(b.abs().max())))
        if worst > 1e-4:
            fail("%s: the weights after epoch %d differ from the CPU run's by %g (relative to the largest)"
                 % (kind, e + 1, worst))
    if rank == 0:
        print("gpu_sync %s: %d steps on %s, data path %s: weights = the CPU run's within %.2g after every epoch"
              % (kind, EPOCHS * STEPS, rec["environment"]["gpus"][0]["name"], rec["environment"]["data_path"], worst))


def gpu_refuse(case):
    """kind: rank 0's model on the GPU, rank 1's on the CPU (each loads its library), then both on the GPU
    (rank 1 holds libeager.so); split: rank 1's model split over the CPU and the GPU. Each refused on every
    rank, its line printed."""
    rank = rank_env()
    for what in (("kind", "loaded") if case == "kind" else ("split",)):
        m = model_of()
        if what != "kind" or rank == 0:
            m.to("cuda:0")
        if what == "split" and rank == 1:
            m[0].to("cpu")
        try:
            eager_sgd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), m, mode="sync", tau=TAU)
        except eager_sgd.EagerSGDError as e:
            print("refused %s: %s" % (what, e.line), flush=True)
            continue
        fail("%s was not refused" % what)


def rank_env():
    """This rank before MPI is up (the launcher's variables): the cases choose a device, so a library, by it."""
    for k in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"):
        if k in os.environ:
            return int(os.environ[k])
    return 0


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
     "resume_save": lambda: resume_save(sys.argv[2]), "resume_load": lambda: resume_load(sys.argv[2]),
     "resume_elastic": lambda: resume_elastic(sys.argv[2]), "refuse": refuse,
     "gpu_sync": lambda: gpu_sync(sys.argv[2], sys.argv[3]),
     "gpu_partial": lambda: partial(sys.argv[3], sys.argv[4], sys.argv[2]),
     "gpu_refuse_kind": lambda: gpu_refuse("kind"), "gpu_refuse_split": lambda: gpu_refuse("split"),
     "kill": kill, "hang": lambda: kill(signal.SIGSTOP)}[case]()
