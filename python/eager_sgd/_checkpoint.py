"""The optimizer's checkpoints: state_dict / load_state_dict carry what eager-train's checkpoint
carries besides the model (the adaptive controller's state, the run's records), as its --resume
continues them (docs/DESIGN.md#13-the-pytorch-package). A mixin of DistributedOptimizer: it reads
the optimizer's fields (lib, g, opt, mode, rank, size, epoch, open, epochs, restarts, meta, the
clocks and the saved run's totals)."""
import ctypes
import sys
import time

from . import _lib
from ._common import EagerSGDError, _agree


class Checkpoint:
    STATE_KEY, STATE_FORMAT, STATE_FORMAT_V1 = "eager_sgd", "eager-sgd-controller/2", "eager-sgd-controller/1"
    # the run's totals a checkpoint carries (eager-train's ckpt_totals_t): rounds, fresh gradients,
    # staleness count and sum over the fresh ones, the largest staleness and streak
    TOTALS = ("rounds", "grads", "stale_n", "stale_sum", "max_stale", "max_streak")

    def state_dict(self):
        """The wrapped SGD's state_dict (momentum buffers, param_groups) and, under the key
        "eager_sgd", what eager-train's checkpoint carries besides the model: {"format":
        "eager-sgd-controller/2", "mode": the mode as given, "ranks": P, "rounds": rounds the
        controller's state has observed, "decision_hash": the run's so far (hex), "state": an
        adaptive controller's carried state (its pools, level, probe schedule: ctl_state_save's
        bytes) as a CPU uint8 tensor, None for a static mode or before the first end_epoch (a
        controller loading it starts afresh), "run": the run file's continuation: {"epochs":
        epochs completed, "wall_s": the run's wall time so far, "rounds", "grads", "stale_n",
        "stale_sum", "max_stale", "max_streak": the run's totals, "final_test_top1",
        "final_train_loss", "time_to_target_s": its last epoch's figures, "saved_at": time.time()
        when saved, "restarts": the run file's restarts[] so far}}. Local: every rank holds the same
        state, so rank 0 alone may save it (torch.save; torch.load's weights_only reads it). Between
        epochs (after end_epoch, or close): while an epoch is open it raises EagerSGDError on the
        rank that calls it."""
        if self.open:
            raise EagerSGDError("rank %d: state_dict() in epoch %d after a step(): the controller's state is "
                                "saved between epochs (after end_epoch)" % (self.rank, self.epoch + 1))
        sd = self.opt.state_dict()
        ctl = self._ctl_final if self.g is None else self._controller_state()
        if ctl is not None:
            sd[self.STATE_KEY] = dict(ctl)
        return sd

    def _controller_state(self):
        lib, n = self.lib, ctypes.c_size_t()
        if lib.eg_state_save(self.g, None, 0, ctypes.byref(n)):
            raise EagerSGDError("rank %d: %s" % (self.rank, lib.eg_error(self.g).decode()))
        t = None
        if n.value:
            t = self.torch.zeros(n.value, dtype=self.torch.uint8)
            if lib.eg_state_save(self.g, ctypes.c_void_p(t.data_ptr()), n.value, ctypes.byref(n)):
                raise EagerSGDError("rank %d: %s" % (self.rank, lib.eg_error(self.g).decode()))
        return {"format": self.STATE_FORMAT, "mode": self.mode, "ranks": self.size,
                "rounds": int(lib.eg_state_rounds(self.g)), "decision_hash": "%016x" % lib.eg_decision_hash(self.g),
                "state": t, "run": self._run_state()}

    def _totals(self):
        """The run's totals: this process's counters and, after load_state_dict, the saved run's."""
        c, t = self.counts(), self._tot0
        out = {k: t[k] + c[k] for k in ("rounds", "grads", "stale_n", "stale_sum")}
        out.update({k: max(t[k], c[k]) for k in ("max_stale", "max_streak")})
        return {k: v if k == "stale_sum" else int(v) for k, v in out.items()}

    def _time_to_target(self, target):
        """The saved run's time to target, else the first of this process's epochs to reach it."""
        if self._last0["time_to_target_s"] is not None:
            return self._last0["time_to_target_s"]
        return next((e["wall_s"] for e in self.epochs if target is not None and e["test_top1"] is not None and
                     e["test_top1"] >= target), None)

    def _run_state(self):
        """state_dict's "run": what the run file needs to continue (load_state_dict, _continue_run)."""
        last = self.epochs[-1] if self.epochs else None
        run = self._totals()
        run.update({"epochs": self.epoch, "wall_s": time.time() - self.t_start,
                    "final_test_top1": last["test_top1"] if last else self._last0["final_test_top1"],
                    "final_train_loss": last["train_loss"] if last else self._last0["final_train_loss"],
                    "time_to_target_s": self._time_to_target(self.meta["config"].get("target-top1") or None),
                    "saved_at": time.time(), "restarts": [dict(r) for r in self.restarts]})
        return run

    def _continue_run(self, run, saved_P, continued):
        """The saved run's epochs, wall time and totals become this run's, as eager-train's --resume
        (trainer/setup.c resume_totals): its next epoch is numbered on, its summary covers the whole
        run, and restarts[] gains this resume. On another rank count the fresh gradients count in
        this P's units (grads x P / saved P), so the fresh fraction stays the mean over every round."""
        now = time.time()
        self._tot0 = {k: run[k] for k in self.TOTALS}
        if saved_P != self.size:
            self._tot0["grads"] = int(round(run["grads"] * self.size / saved_P))
        self._last0 = {k: run[k] for k in self._last0}
        self.epoch, self._grads = run["epochs"], run["grads"]
        self.t_start, self.t_last = now - run["wall_s"], now
        self._t_epoch = now
        self.restarts = (list(run["restarts"]) + [{
            "epoch": run["epochs"], "ranks_before": saved_P, "ranks_after": self.size,
            "wall_lost_s": max(0.0, now - run["saved_at"]), "controller_continued": continued,
            "batches_done": 0, "samples_done": 0}])[-64:]

    def load_state_dict(self, state_dict):
        """Collective: every rank calls it with the same dict (each loads the checkpoint), between
        epochs. Restores the wrapped SGD's state and, from the "eager_sgd" key (state_dict()), what
        eager-train's --resume continues: an adaptive controller's carried state through
        ctl_state_load (the next epoch's controller continues where the saved one stopped), the run
        file's decision hash, and the run (its "run" entry): the next epoch is numbered on from the
        saved ones, wall times continue the saved run's, the summary's totals (fresh fraction,
        staleness, streak, epochs, final figures, time to target) cover the whole run, and the run
        file's restarts[] gains this resume (its epochs[] and rounds hold this process's, as a
        resumed eager-train's). Saved on another number of ranks, the state is converted
        (ctl_state_resize: its level kept, what it measured per rank restarted, every level probed
        again) and rank 0 prints one line saying so. A static mode's key carries no controller
        state: an adaptive optimizer loading it starts its controller afresh. A key of format
        "eager-sgd-controller/1" (adaptive only, no "run") continues the controller and decision
        hash, the run file starting afresh (rank 0 says so in one line). A dict without the key
        restores the SGD state only. Refused with EagerSGDError on every rank, one line naming what
        is wrong, nothing loaded: a key that does not load (corrupt or truncated bytes, another
        format or version, a field missing or of the wrong type, a state of another shape: window,
        cost_n), an adaptive state loaded by an optimizer whose mode is not adaptive, a dict that
        differs across ranks (hashed: the controller's part, the run's counts and the SGD state; the
        line names the ranks that differ from rank 0), or an epoch open."""
        lib, key = self.lib, self.STATE_KEY
        c = state_dict.get(key) if isinstance(state_dict, dict) else None
        raw, st, resized = b"", None, ctypes.c_int(0)
        ok, why = True, ""
        if self.open:
            ok, why = False, "load_state_dict() in epoch %d after a step(): a state is loaded between epochs" % (self.epoch + 1)
        elif self.g is None:
            ok, why = False, "load_state_dict() after close()"
        elif c is not None:
            ok, why, raw = self._check_controller(c)
        if ok and raw:
            err = _lib.buf()
            st = lib.eg_state_read(self.g, raw, len(raw), int(c["ranks"]), err, len(err), ctypes.byref(resized))
            if not st:
                ok, why = False, "state_dict['%s']['state']: %s" % (key, err.value.decode())
        try:
            _agree(ok, why)
            h = lib.eg_hash(lib.eg_hash_init(), raw, len(raw))
            if c is not None:  # the run's clock fields left out: a rank's own state_dict may hold its own clock
                run = c.get("run") or {}
                meta = repr([c.get(k) for k in ("format", "mode", "ranks", "rounds", "decision_hash")] +
                            [run.get(k) for k in ("epochs",) + self.TOTALS]).encode()
                h = lib.eg_hash(h, meta, len(meta))
            h = self._hash_sgd_state(state_dict, h)
            out = _lib.buf()
            if lib.eg_same(h, ("the state_dict loaded (its '%s' key and SGD state)" % key).encode(), out, len(out)):
                raise EagerSGDError(out.value.decode())
            self.opt.load_state_dict({k: v for k, v in state_dict.items() if k != key})
        except BaseException:
            lib.eg_state_free(st)
            raise
        if c is not None:
            lib.eg_state_adopt(self.g, st, int(c["decision_hash"], 16))
            if c.get("run") is not None:
                self._continue_run(c["run"], c["ranks"], st is not None)
            elif self.rank == 0:
                sys.stderr.write("eager_sgd: the state_dict's '%s' key is %s: it has no run totals, so the run "
                                 "file's epochs and summary start afresh\n" % (key, self.STATE_FORMAT_V1))
            if resized.value and self.rank == 0:
                sys.stderr.write("eager_sgd: the state_dict's controller state (%d ranks) continues on %d ranks: its "
                                 "level kept, what it measured per rank restarted, every level probed again\n"
                                 % (c["ranks"], self.size))

    def _check_controller(self, c):
        """(ok, why, the state's bytes) of a state_dict's "eager_sgd" value, checked field by field."""
        torch, key = self.torch, self.STATE_KEY
        if not isinstance(c, dict):
            return False, "state_dict['%s']: a dict, not %s" % (key, type(c).__name__), b""
        if c.get("format") not in (self.STATE_FORMAT, self.STATE_FORMAT_V1):
            return False, "state_dict['%s']['format']: %r, this package reads %r and %r" % (
                key, c.get("format"), self.STATE_FORMAT, self.STATE_FORMAT_V1), b""
        v2 = c["format"] == self.STATE_FORMAT  # format 1: no "run"
        for f in ("mode", "ranks", "rounds", "decision_hash", "state") + (("run",) if v2 else ()):
            if f not in c:
                return False, "state_dict['%s']: no field '%s'" % (key, f), b""
        why = self._check_run(c["run"]) if v2 else ""
        if why:
            return False, "state_dict['%s']['run']%s" % (key, why), b""
        if not isinstance(c["ranks"], int) or c["ranks"] < 1:
            return False, "state_dict['%s']['ranks']: %r, not a rank count >= 1" % (key, c["ranks"]), b""
        dh = c["decision_hash"]
        if not isinstance(dh, str) or len(dh) != 16 or any(ch not in "0123456789abcdef" for ch in dh):
            return False, "state_dict['%s']['decision_hash']: %r, not 16 hex digits" % (key, dh), b""
        if str(c["mode"]).split(",")[0] == "adaptive" and self.mode.split(",")[0] != "adaptive":
            return False, ("state_dict['%s']: an adaptive controller's state (mode '%s'), and this optimizer's mode "
                           "is '%s'" % (key, c["mode"], self.mode)), b""
        t = c["state"]
        if t is None:
            return True, "", b""
        if not isinstance(t, torch.Tensor) or t.dtype != torch.uint8 or t.dim() != 1:
            return False, "state_dict['%s']['state']: a 1-D uint8 tensor or None, not %s" % (
                key, "a %s tensor of %d dims" % (t.dtype, t.dim()) if isinstance(t, torch.Tensor) else type(t).__name__), b""
        return True, "", t.detach().to("cpu").contiguous().numpy().tobytes()

    def _check_run(self, run):
        """'' if state_dict's "run" entry is one _continue_run can use, else the field and why."""
        if not isinstance(run, dict):
            return ": a dict, not %s" % type(run).__name__
        counts = ("epochs", "rounds", "grads", "stale_n", "max_stale", "max_streak")
        for f in counts + ("stale_sum", "wall_s", "saved_at", "final_train_loss", "final_test_top1", "time_to_target_s",
                           "restarts"):
            v = run.get(f, KeyError)
            if v is KeyError:
                return ": no field '%s'" % f
            number = isinstance(v, (int, float)) and not isinstance(v, bool)
            if f in counts and not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
                return "['%s']: %r, not a count >= 0" % (f, v)
            if f in ("stale_sum", "wall_s", "saved_at", "final_train_loss") and not (number and v == v and
                                                                                  (f == "final_train_loss" or v >= 0)):
                return "['%s']: %r, not a number%s" % (f, v, "" if f == "final_train_loss" else " >= 0")
            if f in ("final_test_top1", "time_to_target_s") and v is not None and not (number and v >= 0):
                return "['%s']: %r, not a number >= 0 or None" % (f, v)
        keys = {"epoch", "ranks_before", "ranks_after", "wall_lost_s", "controller_continued", "batches_done",
                "samples_done"}
        if not isinstance(run["restarts"], list) or any(not isinstance(r, dict) or set(r) != keys
                                                        for r in run["restarts"]):
            return "['restarts']: a list of the run file's restarts[] records"
        return ""

    def _hash_sgd_state(self, sd, h):
        """h extended by the SGD part of a state_dict: its param_groups and every state tensor, in order."""
        lib = self.lib
        groups = repr(sd.get("param_groups")).encode()
        h = lib.eg_hash(h, groups, len(groups))
        state = sd.get("state") or {}
        for i in sorted(state, key=repr):
            for k in sorted(state[i]):
                v = state[i][k]
                if isinstance(v, self.torch.Tensor):
                    c = v.detach().to("cpu").contiguous()
                    h = lib.eg_hash(h, ctypes.c_void_p(c.data_ptr()), c.numel() * c.element_size())
                else:
                    b = repr((i, k, v)).encode()
                    h = lib.eg_hash(h, b, len(b))
        return h
