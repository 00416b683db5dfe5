"""eager_sgd: eager-SGD (libpcoll's partial allreduce and the adaptive controller) for PyTorch.

    import eager_sgd
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    opt = eager_sgd.DistributedOptimizer(opt, model, mode="adaptive", tau=2)
    for epoch in range(E):
        for x, y in my_shard:                        # this rank's part of the data
            opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
        opt.end_epoch(test_top1=evaluate(model))     # join, replicas hashed and compared
    opt.close("run.json")                            # the project's run file (eager-sgd-run/1)

Launch with mpirun or srun, one process per rank; do not wrap the model in DDP (the optimizer is
the gradient exchange). Why an optimizer wrapper and not a DDP communication hook, and what the
step does: docs/DESIGN.md#13-the-pytorch-package. Everything the collective and the controller do
is libpcoll's and the controller's C code (libeager.so, python/csrc/eager_py.c); this file moves
tensors and writes the run file.
"""
import contextlib
import ctypes
import datetime
import json
import os
import socket
import sys
import time

from . import _lib
from ._checkpoint import Checkpoint
from ._common import EagerSGDError, _agree, _fatal, allreduce_sum, hash_bytes, init

__all__ = ["init", "DistributedOptimizer", "EagerSGDError", "MODES", "allreduce_sum", "hash_bytes"]
MODES = "sync | solo | majority | quorum:Q | adaptive"


class DistributedOptimizer(Checkpoint):
    """Wraps a torch.optim.SGD (momentum, weight decay; dampening 0, no Nesterov) so that step()
    is eager-train's step: the gradients of all parameters in one flat float32 buffer deposited
    into libpcoll's round, then every completed round applied in round order, each as the SGD step
    of its share s = |F_r| / P of a whole step (eager-train's default --momentum-per sample
    --wd-per sample --div p: momentum mu^s, lr x s, the round's sum / P scaled by
    (1 - mu^s) / ((1 - mu) s); nn_sgd_share). A late gradient is never lost: it goes into a later
    round. The learning rate is the group's lr when the round is applied (schedulers work as usual).

    mode: sync | solo | majority | quorum:Q | adaptive, optionally followed by the controller's
    options as eager-train's --policy-opts (e.g. "adaptive,window=64"); tau: the staleness bound
    (eager-train --tau, default 2); seed: the majority draw's seed (the same on every rank);
    t_abort: seconds without a completed round before the job is aborted as stalled; broadcast:
    start from rank 0's parameters and buffers. Collective: every rank constructs it with the same
    arguments; a bad mode, a model or arguments that differ across ranks, raise EagerSGDError on
    every rank with one line. CUDA models (every parameter on one GPU, every rank's model on a GPU:
    anything else is refused on every rank with one line): libeager_cuda.so, the flat buffer on that
    GPU and libpcoll's device data path (NCCL, or staged through pinned host memory where ranks share
    a GPU; the run file's environment.data_path); which GPU is the user's (the model's device).
    Unverified on a GPU until `make gpu-check` runs tests/python/gpu.sh (docs/DESIGN.md#13).

    curve_every N: the accuracy curve (the run file's curve[], as eager-train --curve-every): a
    snapshot of the parameters and buffers whenever the gradients applied over all ranks pass a
    multiple of N (after a round: every replica holds the same weights there), each evaluated at
    the epoch's end with end_epoch's evaluate (BN statistics averaged over the ranks first), outside
    the run's clock; the experiment's metadata (experiment, model_name, data_name, batch, epochs,
    imbalance, config: eager-train's option names) goes into the run file."""

    def __init__(self, optimizer, model, mode="adaptive", tau=2, seed=1, t_abort=60.0, broadcast=True,
                 experiment="pytorch", model_name=None, data_name="user", batch=1, epochs=0, imbalance="none",
                 config=None, curve_every=0):
        import torch
        self.torch = torch
        devs = sorted({str(p.device) for p in model.parameters() if p.requires_grad})
        cuda = bool(devs) and all(d.startswith("cuda") for d in devs)
        # the first optimizer of a process with its model on a GPU loads libeager_cuda.so
        self.rank, self.size = init(cuda=cuda and _lib.loaded() is None)
        self.lib = lib = _lib.load(_lib.loaded() == "cuda")
        self.opt, self.model = optimizer, model
        ok, why = True, ""
        if not isinstance(optimizer, torch.optim.SGD):
            ok, why = False, "the optimizer is %s: eager_sgd wraps torch.optim.SGD" % type(optimizer).__name__
        else:
            for g in optimizer.param_groups:
                if g.get("dampening", 0) != 0 or g.get("nesterov", False):
                    ok, why = False, "SGD with dampening or nesterov: eager-train's step has neither"
        _agree(ok, why)
        self.params = [p for p in model.parameters() if p.requires_grad]
        owned = {id(p) for g in optimizer.param_groups for p in g["params"]}
        bad = [n for n, p in model.named_parameters() if p.requires_grad and id(p) not in owned]
        _agree(not bad, "parameter %s of the model is not in the optimizer" % (bad[0] if bad else ""))
        dt = [p.dtype for p in self.params if p.dtype != torch.float32]
        _agree(not dt, "parameters of dtype %s: libpcoll reduces float32" % (dt[0] if dt else ""))
        self._agree_device(devs, cuda)
        desc = ";".join("%s:%s" % (n, tuple(p.shape)) for n, p in model.named_parameters() if p.requires_grad)
        out = _lib.buf()
        if lib.eg_same(lib.eg_hash(lib.eg_hash_init(), desc.encode(), len(desc.encode())),
                       b"the model (its parameters' names and shapes)", out, len(out)):
            raise EagerSGDError(out.value.decode())
        self.n = sum(p.numel() for p in self.params)
        self.device = self.params[0].device if self.params else torch.device("cpu")
        self.cuda = cuda
        # the gradients' flat buffer where the model is: libpcoll copies a deposit from it (device
        # to device with PCOLL_MEM_DEVICE), so a CUDA model's gradients never cross to the host
        self.flat = torch.zeros(self.n, dtype=torch.float32, device=self.device)
        self.views, off = [], 0
        for p in self.params:
            self.views.append(self.flat[off:off + p.numel()].view(p.shape))
            off += p.numel()
        if broadcast:
            self._bcast(list(model.parameters()) + [b for b in model.buffers()])
        g = ctypes.c_void_p()
        self.mode = mode
        if lib.eg_new(mode.encode(), int(tau), int(seed), self.n, 1 if cuda else 0, float(t_abort), out, len(out),
                      ctypes.byref(g)):
            raise EagerSGDError(out.value.decode())
        self.g, self.tau, self.seed = g, tau, seed
        self.epoch, self.open, self.t_last = 0, False, time.time()  # t_last: where this rank's next step began
        self.t_start = time.time()
        self._t_epoch = self.t_start  # where the current epoch began (after the previous one's evaluation)
        self.date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.epochs, self.curve = [], []
        self.rank_t = {"compute_s": 0.0, "wait_s": 0.0, "apply_s": 0.0, "steps": 0}
        self._steps0 = 0  # this rank's steps before the current epoch (epochs[].steps is the epoch's)
        self.meta = {"experiment": experiment, "model": model_name or type(model).__name__, "data": data_name,
                     "batch": int(batch), "epochs": int(epochs), "imbalance": imbalance, "config": dict(config or {})}
        self.test_aid = os.environ.get("EAGER_SGD_TEST_BREAK", "")
        self.curve_every, self._grads, self._snaps = int(curve_every), 0, []
        # the saved run's totals and last epoch, continued after load_state_dict (_continue_run)
        self._tot0 = {k: 0 for k in self.TOTALS}
        self._last0 = {"final_test_top1": None, "final_train_loss": 0.0, "time_to_target_s": None}
        self.restarts = []  # the run file's restarts[], as eager-train's --resume keeps them
        self.data_path = None  # libpcoll's (eg_data_path), read at the first eg_begin

    def _agree_device(self, devs, cuda):
        """Every parameter on one CPU or CUDA device, and every rank's model on the same kind: else
        one line on every rank (EagerSGDError)."""
        why = ""
        if len(devs) > 1:
            why = ("parameters on %s: eager_sgd takes a model whose parameters are all on one device"
                   % " and ".join(devs))
        elif devs and not (cuda or devs[0] == "cpu"):
            why = "parameters on %s: eager_sgd takes CPU or CUDA tensors" % devs[0]
        elif cuda and _lib.loaded() != "cuda":
            why = ("the model is on %s and libeager.so is loaded already (eager_sgd.init() or a CPU model's optimizer "
                   "came first): call eager_sgd.init(cuda=True) before anything else of eager_sgd" % devs[0])
        _agree(not why, why)
        on = (ctypes.c_double * self.size)()
        on[self.rank] = 1.0 if cuda else 0.0
        if self.lib.eg_allreduce_sum(on, self.size, 1):
            _fatal("rank %d: MPI_Allreduce of the model's device kind failed" % self.rank)
        gpu = [p for p in range(self.size) if on[p]]
        if gpu and len(gpu) < self.size:
            raise EagerSGDError("the model is on a GPU on ranks %s and on the CPU on ranks %s: every rank's model on "
                                "the same kind of device" % (" ".join(map(str, gpu)),
                                                             " ".join(str(p) for p in range(self.size) if not on[p])))

    def _on_device(self):
        """The model's GPU current while libpcoll is called (pcoll_create takes the current device,
        pcoll_next wants it current); nothing for a CPU model."""
        return self.torch.cuda.device(self.device) if self.cuda else contextlib.nullcontext()

    # ------------------------------------------------------------------ collectives on tensors
    def _bcast(self, tensors):
        for t in tensors:
            c = t.detach().to("cpu").contiguous()
            if self.lib.eg_bcast(ctypes.c_void_p(c.data_ptr()), c.numel() * c.element_size(), 0):
                _fatal("rank %d: MPI_Bcast of the initial weights failed" % self.rank)
            with self.torch.no_grad():
                t.copy_(c)

    def _tensors(self):
        """What a replica is: the parameters and the floating buffers (BN statistics), in order."""
        return list(self.model.parameters()) + [b for b in self.model.buffers() if b.is_floating_point()]

    def _rank_max(self, x):
        v = (ctypes.c_double * self.size)()
        v[self.rank] = x
        self.lib.eg_allreduce_sum(v, self.size, 1)
        return max(v)

    def _curve(self, evaluate):
        """The epoch's snapshots evaluated (collective: every rank holds the same ones); returns the
        seconds it took (the slowest rank's), which the run's clock leaves out."""
        t0 = time.time()
        here = [t.detach().clone() for t in self._tensors()]
        for epoch, batches, wall, state in self._snaps:
            with self.torch.no_grad():
                for t, v in zip(self._tensors(), state):
                    t.copy_(v)
            self._average_buffers()
            loss, top1 = evaluate()
            self.curve.append({"epoch": epoch, "batches": batches, "samples": batches * self.meta["batch"],
                               "wall_s": self._rank_max(wall), "test_top1": top1, "test_loss": float(loss)})
        with self.torch.no_grad():
            for t, v in zip(self._tensors(), here):
                t.copy_(v)
        self._snaps = []
        return self._rank_max(time.time() - t0)

    def _average_buffers(self):
        """BN running statistics averaged over the ranks at each epoch end, as eager-train does."""
        for b in self.model.buffers():
            if not b.is_floating_point():
                continue
            c = b.detach().to("cpu", self.torch.float64).contiguous()
            self.lib.eg_allreduce_sum(ctypes.c_void_p(c.data_ptr()), c.numel(), 1)
            with self.torch.no_grad():
                b.copy_((c / self.size).to(b.dtype))

    # ------------------------------------------------------------------ the step
    def zero_grad(self, set_to_none=True):
        self.opt.zero_grad(set_to_none=set_to_none)

    @property
    def param_groups(self):
        return self.opt.param_groups

    def step(self, closure=None):
        """Deposits this rank's gradients and applies every round completed meanwhile (a rank
        applies the same rounds in the same order as every other)."""
        loss = closure() if closure is not None else None
        with self._on_device():
            self._step()
        return loss

    def _begin(self, since_s):
        if self.lib.eg_begin(self.g, self.epoch, since_s):
            raise EagerSGDError(self.lib.eg_error(self.g).decode())
        self.data_path = self.lib.eg_data_path(self.g).decode()

    def _step(self):
        t0 = time.time()
        if not self.open:
            self._begin(t0 - self.t_last)
            self.open = True
        with self.torch.no_grad():
            for p, v in zip(self.params, self.views):
                if p.grad is None:
                    v.zero_()
                else:
                    v.copy_(p.grad)
        dep_sum = float(self.flat.sum(dtype=self.torch.float64))
        if self.cuda:
            # libpcoll copies the deposit on its own stream, which does not wait for torch's: the
            # flat buffer (backward, then the copies above, all on torch's current stream) complete
            self.torch.cuda.current_stream(self.device).synchronize()
        step_s = t0 - self.t_last
        t1 = time.time()
        if self.lib.eg_step(self.g, ctypes.c_void_p(self.flat.data_ptr()), step_s, dep_sum):
            _fatal(self.lib.eg_error(self.g).decode())
        t2 = time.time()
        self._apply()
        t3 = time.time()
        self.rank_t["compute_s"] += step_s
        self.rank_t["wait_s"] += t2 - t1
        self.rank_t["apply_s"] += t3 - t2
        self.rank_t["steps"] += 1
        self.t_last = time.time()

    def _apply(self):
        import numpy as np
        torch, lib = self.torch, self.lib
        res = ctypes.POINTER(ctypes.c_float)()
        share, total, sh = ctypes.c_double(), ctypes.c_double(), (ctypes.c_double * 4)()
        while True:
            k = lib.eg_next(self.g, ctypes.byref(res), ctypes.byref(share), ctypes.byref(total))
            if k < 0:
                _fatal(lib.eg_error(self.g).decode())
            if k == 0:
                return
            if self.test_aid == "skip-round:%d" % self.rank:  # test aid: this rank drops a round
                self.test_aid = ""
                continue
            if self.cuda:  # the result on the GPU, wrapped without a copy (valid until the next eg_next)
                r = torch.as_tensor(_DeviceFloats(ctypes.cast(res, ctypes.c_void_p).value, self.n))
                sv = float(r.sum(dtype=torch.float64)) * self.size  # eg_next sums host results only
                lib.eg_add_applied(self.g, sv)
            else:
                r = torch.from_numpy(np.ctypeslib.as_array(res, (self.n,)))
            saved = []
            for grp in self.opt.param_groups:
                lib.eg_share(grp["lr"], grp.get("momentum", 0), grp.get("weight_decay", 0), share.value, sh)
                saved.append((grp["lr"], grp.get("momentum", 0), grp.get("weight_decay", 0)))
                grp["lr"], grp["momentum"], grp["weight_decay"] = sh[0], sh[1], sh[2]
                grp["_eager_gs"] = sh[3]
            gs = {id(p): grp["_eager_gs"] for grp in self.opt.param_groups for p in grp["params"]}
            with torch.no_grad():
                off = 0
                for p in self.params:
                    v = r[off:off + p.numel()].view(p.shape)
                    off += p.numel()
                    f = gs[id(p)]
                    src = v if f == 1.0 else v * f
                    if p.grad is None:
                        p.grad = src.to(p.device, copy=True)
                    else:
                        p.grad.copy_(src)
            if self.cuda:
                # the copies that read the round's result done before the next eg_next hands its
                # buffer to a later round (pcoll_next's contract); the SGD step reads p.grad only
                torch.cuda.current_stream(self.device).synchronize()
            self.opt.step()
            for grp, (lr, mu, wd) in zip(self.opt.param_groups, saved):
                grp["lr"], grp["momentum"], grp["weight_decay"] = lr, mu, wd
                del grp["_eager_gs"]
            before, self._grads = self._grads, self._grads + int(round(share.value * self.size))
            if self.curve_every and self._grads // self.curve_every > before // self.curve_every:
                self._snaps.append((self.epoch + 1, self._grads, time.time() - self.t_start,
                                    [t.detach().clone() for t in self._tensors()]))

    # ------------------------------------------------------------------ epochs and records
    def counts(self):
        """The C library's counters (python/csrc/eager_py.c eg_count_names), this rank's."""
        if self.g is None:
            return dict(self._final)
        names = self.lib.eg_count_names().decode().split(",")
        v = (ctypes.c_double * len(names))()
        self.lib.eg_counts(self.g, v, len(names))
        return dict(zip(names, list(v)))

    def end_epoch(self, evaluate=None, test_top1=None, test_loss=None, train_loss=None, train_top1=None, samples=0,
                  lr=None, curve_evaluate=None):
        """Collective: this rank joins (no more deposits this epoch), every remaining round is
        applied, the controller ends its epoch, BN statistics are averaged, and the replicas'
        weights are hashed and compared (a mismatch raises EagerSGDError on every rank naming the
        ranks that differ from rank 0); then evaluate() is called if given, returning (test_loss,
        test_top1); curve_evaluate (default: evaluate) evaluates the curve's snapshots (curve_every),
        its test_loss a number. Returns the epoch's record (a dict). Until a rank has called end_epoch, the
        others' rounds may wait for it: a collective of the script's own (an evaluation's
        allreduce, a barrier) belongs in evaluate or after end_epoch, never before it."""
        with self._on_device():
            self._end_rounds()
        return self._end_epoch(evaluate, test_top1, test_loss, train_loss, train_top1, samples, lr, curve_evaluate)

    def _end_rounds(self):
        """The epoch's end in libpcoll and the controller: join, the remaining rounds applied, finish."""
        lib = self.lib
        if not self.open:
            self._begin(0.0)
        if lib.eg_join(self.g):
            _fatal(lib.eg_error(self.g).decode())
        while True:
            k = lib.eg_drain(self.g)
            if k < 0:
                _fatal(lib.eg_error(self.g).decode())
            if k == 0:
                break
            self._apply()
        if lib.eg_finish(self.g):
            raise EagerSGDError(lib.eg_error(self.g).decode())
        self.open = False

    def _end_epoch(self, evaluate, test_top1, test_loss, train_loss, train_top1, samples, lr, curve_evaluate):
        lib = self.lib
        self._average_buffers()
        if self.test_aid == "perturb:%d" % self.rank:  # test aid: this rank's replica differs
            with self.torch.no_grad():
                self.params[0].view(-1)[0] += 1.0
        h = hash_bytes(self._tensors())
        out = _lib.buf()
        if lib.eg_same(h, ("the replicas' weights hash after epoch %d" % (self.epoch + 1)).encode(), out, len(out)):
            raise EagerSGDError(out.value.decode())
        t_end = time.time()  # the epoch's training and BN average (its evaluation left out, as eager-train)
        ce = curve_evaluate or evaluate
        spent = self._curve(ce) if self._snaps and ce is not None else 0.0
        if evaluate is not None:
            test_loss, test_top1 = evaluate()
        c = self.counts()
        tot = (ctypes.c_double * 2)(float(train_loss or 0.0), float(samples))
        lib.eg_allreduce_sum(tot, 2, 1)
        steps = (ctypes.c_double * 1)(float(self.rank_t["steps"] - self._steps0))
        lib.eg_allreduce_sum(steps, 1, 1)
        rounds = int(c["epoch_rounds"])
        rec = {"epoch": self.epoch + 1, "wall_s": t_end - self.t_start,  # from 1, as eager-train's
               "epoch_s": t_end - self._t_epoch,
               "lr": float(lr if lr is not None else self.opt.param_groups[0]["lr"]),
               "train_loss": tot[0] / self.size, "train_top1": train_top1, "test_loss": test_loss,
               "test_top1": test_top1, "test_top5": None, "steps": int(steps[0]), "samples": int(tot[1]),
               "rounds": rounds,
               "fresh_fraction": c["epoch_grads"] / (rounds * self.size) if rounds else 0.0,
               "mean_staleness": c["epoch_stale_sum"] / c["epoch_stale_n"] if c["epoch_stale_n"] else 0.0,
               "max_staleness": int(c["epoch_max_stale"]), "max_streak": int(c["epoch_max_streak"]),
               "weights_hash": "%016x" % h}
        self.epochs.append(rec)
        self.epoch += 1
        self.t_start += spent  # the curve's evaluations are outside every later wall time
        self.t_last = time.time()  # the next epoch's first step begins after the evaluation
        self._t_epoch = self.t_last  # epoch_s: the epoch's training and BN average only, as eager-train's and DDP's
        self._steps0 = self.rank_t["steps"]
        return {k: v for k, v in rec.items() if not k.startswith("_")}

    def report(self, test_top1, test_loss, batches, samples):
        """A point of the accuracy curve (the run file's curve[]): the script evaluated the model
        after `batches` gradients applied over all ranks (`samples` samples)."""
        self.curve.append({"epoch": self.epoch + 1, "batches": int(batches), "samples": int(samples),
                           "wall_s": time.time() - self.t_start, "test_top1": test_top1,
                           "test_loss": float(test_loss)})

    def run_record(self):
        """The run file (results/schema/run.schema.json, eager-sgd-run/1) as a dict; collective
        (gathers every rank's times)."""
        lib, c = self.lib, self.counts()
        P = self.size
        mine = (ctypes.c_double * (4 * P))()
        for i, k in enumerate(("compute_s", "wait_s", "apply_s", "steps")):
            mine[4 * self.rank + i] = float(self.rank_t[k])
        lib.eg_allreduce_sum(mine, 4 * P, 1)
        streak = (ctypes.c_double * P)()
        streak[self.rank] = c["max_streak"]
        lib.eg_allreduce_sum(streak, P, 1)
        recs = []
        v, m = (ctypes.c_double * 9)(), _lib.buf(32)
        for i in range(lib.eg_nrecords(self.g)):
            lib.eg_record(self.g, i, v, m, len(m))
            recs.append({"epoch": int(v[0]), "from": int(v[1]), "to": int(v[2]), "mode": m.value.decode(),
                         "mean_fresh": v[3], "min_fresh": int(v[4]), "mean_latency_ms": v[5],
                         "max_streak": int(v[6]), "max_staleness": int(v[7]), "mean_staleness": v[8]})
        sws = []
        sv, fr, to, why = (ctypes.c_double * 3)(), _lib.buf(32), _lib.buf(32), _lib.buf(256)
        for i in range(lib.eg_nswitches(self.g)):
            lib.eg_switch(self.g, i, sv, fr, to, len(fr), why, len(why))
            sws.append({"epoch": int(sv[0]), "round": int(sv[1]), "effective": int(sv[2]), "from": fr.value.decode(),
                        "to": to.value.decode(), "reason": why.value.decode()})
        eps = [{k: v for k, v in e.items() if not k.startswith("_")} for e in self.epochs]
        base = self.mode.split(",")[0]
        cfg = dict(self.meta["config"])
        cfg.update({"model": self.meta["model"], "data": self.meta["data"], "epochs": self.meta["epochs"],
                    "batch": self.meta["batch"], "mode": base, "imbalance": self.meta["imbalance"], "ranks": P,
                    "seed": int(self.seed), "div": "p", "tau": int(self.tau), "program": "eager_sgd-pytorch",
                    "policy_opts": ",".join(self.mode.split(",")[1:])})
        ranks = [{"rank": p, "host": socket.gethostname() if p == self.rank else "", "steps": int(mine[4 * p + 3]),
                  "compute_s": mine[4 * p], "inject_s": 0.0, "wait_s": mine[4 * p + 1], "apply_s": mine[4 * p + 2],
                  "max_streak": int(streak[p])} for p in range(P)]
        strag = max(range(P), key=lambda p: mine[4 * p])
        last = eps[-1] if eps else None
        tot = self._totals()  # the whole run's (a resumed run's included: load_state_dict)
        n_st = tot["stale_n"]
        target = cfg.get("target-top1") or None  # a script's config may name one (eager-train's key)
        ver, cpu = _lib.buf(256), lib.eg_cpu(_lib.buf(400), 400)  # cpu: bytes, or None
        rec = {
            "schema": "eager-sgd-run/1", "experiment": self.meta["experiment"], "config": cfg,
            "environment": {"ranks": P, "hosts": [socket.gethostname()], "mpi": lib.eg_mpi_version(ver, 256).decode(),
                            "cpu": cpu.decode() if cpu else None,
                            "cuda": self.torch.version.cuda if self.cuda else None, "cudnn": None,
                            "nccl": self._nccl_version(), "gpus": self._gpus(), "data_path": self.data_path,
                            "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
                            "slurm_nodelist": os.environ.get("SLURM_JOB_NODELIST"), "date": self.date,
                            "command": " ".join([sys.executable] + sys.argv)},
            "epochs": eps, "rounds": {"aggregation": 64, "records": recs}, "ranks": ranks,
            # the policy as given (eager-train's --mode[,--policy-opts]): pcoll-compare names the row by it
            "controller": {"policy": self.mode if base == "adaptive" else "none",
                           "decision_hash": "%016x" % lib.eg_decision_hash(self.g), "switches": sws},
            "papi": {"available": False, "reason": "not measured by the PyTorch package", "per_rank": []},
            "curve": self.curve,
            # the run's wall time to here, the last evaluation included (as eager-train's and DDP's)
            "summary": {"wall_s": time.time() - self.t_start if self.epoch else 0.0, "epochs": self.epoch,
                        "final_test_top1": last["test_top1"] if last else self._last0["final_test_top1"],
                        "final_test_top5": None,
                        "final_train_loss": last["train_loss"] if last else self._last0["final_train_loss"],
                        "target_top1": target, "time_to_target_s": self._time_to_target(target),
                        "fresh_fraction": tot["grads"] / (tot["rounds"] * P) if tot["rounds"] else 0.0,
                        "mean_staleness": tot["stale_sum"] / n_st if n_st else 0.0,
                        "max_staleness": tot["max_stale"], "max_streak": max(int(max(streak)), tot["max_streak"]),
                        "bn_stats": "allreduce-at-epoch-end", "straggler": strag, "exit": "ok"},
        }
        if self.restarts:  # a resumed run (load_state_dict), as eager-train's --resume writes them
            rec["restarts"] = [dict(r) for r in self.restarts]
        return rec

    def _gpus(self):
        """environment.gpus: every rank's GPU (host, device index, name, PCI bus id, UUID), gathered
        (collective); None for a CPU model (every rank agreed on the kind)."""
        if not self.cuda:
            return None
        pr = self.torch.cuda.get_device_properties(self.device)
        uuid = str(getattr(pr, "uuid", "") or "")
        mine = {"host": socket.gethostname(), "device": self.device.index if self.device.index is not None else
                self.torch.cuda.current_device(), "name": pr.name,
                "bus_id": "%04X:%02X:%02X.0" % (getattr(pr, "pci_domain_id", 0), getattr(pr, "pci_bus_id", 0),
                                                getattr(pr, "pci_device_id", 0)),
                "uuid": ("GPU-" + uuid if uuid and not uuid.startswith("GPU-") else uuid) or None}
        out = []
        for p in range(self.size):
            b = _lib.buf(1024)
            if p == self.rank:
                b.value = json.dumps(mine).encode()[:1023]
            if self.lib.eg_bcast(b, len(b), p):
                _fatal("rank %d: MPI_Bcast of the ranks' GPUs failed" % self.rank)
            out.append(json.loads(b.value.decode()))
        return out

    def _nccl_version(self):
        """environment.nccl: the NCCL libeager_cuda.so calls (the process's libnccl.so.2) when the
        data path is NCCL's; else None."""
        if self.data_path != "nccl":
            return None
        try:
            v = ctypes.c_int()
            ctypes.CDLL("libnccl.so.2").ncclGetVersion(ctypes.byref(v))
            return "%d.%d.%d" % (v.value // 10000, v.value // 100 % 100, v.value % 100)
        except (OSError, AttributeError):
            return None

    def close(self, out=None):
        """Collective: ends an open epoch, writes the run file on rank 0 (out: a path; None: none),
        frees the handle. Returns the run record."""
        if self.open:
            self.end_epoch()
        rec = self.run_record()
        if out and self.rank == 0:
            d = os.path.dirname(out)
            if d:
                os.makedirs(d, exist_ok=True)
            with open(out, "w") as f:
                json.dump(rec, f, indent=1)
        self._final = self.counts()
        self._ctl_final = self._controller_state()  # state_dict() after close
        with self._on_device():
            self.lib.eg_free(self.g)
        self.g = None
        return rec


class _DeviceFloats:
    """n float32 at a device address (a round's result from eg_next) as __cuda_array_interface__
    (version 3), so that torch.as_tensor wraps it without a copy; stream None: the data is complete
    (libpcoll's engine waited for its stream before handing the round out). The memory is
    libpcoll's results ring: the tensor is valid until the next eg_next (_apply synchronises
    torch's stream before that call, and keeps no reference past the round)."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (ptr, False), "version": 3,
                                         "strides": None, "stream": None}
