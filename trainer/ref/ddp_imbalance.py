"""ddp_imbalance.py: collectives/sim/imbalance.c's delay models and schedules, mirrored for the DDP
mirror (trainer/ref/ddp_mirror.py, examples/fmnist_resnet.py).

Takes eager-train's --imbalance spec (MODEL:K=V,... or phases MODEL@START/..., START a step or an
epoch with ep); a bad spec raises ValueError with one line naming it.
  Imbalance(spec)              the schedule (one phase without '@' or '/'); .kind is "none" when no
                               phase delays, "schedule" with several phases, else the model's kind
  .resolve(stride, epoch_steps) epochs to steps, once, as imb_sched_resolve (ValueError if refused)
  .delay_ms(seed, step, rank, P, compute_ms, cost)
                               the delay in ms, a pure function of its arguments, equal to C's
  .wait(ms, step)              sleeps ms, or with busy=1 computes for ms of this thread's CPU time
  delay_table(seed)            every model's and schedule's delays over 32 steps x 4 ranks, for the
                               mirror reference (trainer/ref/ddp_imb_delays.c prints eager-train's)
No torch or numpy."""
import math
import time

from ddp_gen import M64, mix64


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
