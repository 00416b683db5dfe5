#!/usr/bin/env python3
"""Writes the hand-made sample run files of tests/results/ (numbers chosen so the expected
speedups and times to target are exact). Not run by the tests; rerun after editing and commit
the JSON files. Usage: python3 tests/results/make_samples.py"""
import copy, json, os

HERE = os.path.dirname(os.path.abspath(__file__))


def run(experiment, mode, walls, top1, loss, *, ranks=4, epochs=4, batch=64, imbalance="linear:unit=20",
        seed=1, lr=0.1, waits=None, policy="none", regression=False, target=0.80, stale=(0.0, 0, 0, 1.0)):
    mstal, maxstal, streak, fresh = stale
    cfg = {"experiment": experiment, "model": "hyperplane" if regression else "lenet",
           "data": "hyperplane" if regression else experiment, "data-path": "/usr/share/datasets/x",
           "epochs": epochs, "batch": batch, "lr": lr, "momentum": 0.9, "mode": mode,
           "policy-opts": "window=32" if mode == "adaptive" else "", "tau": 0, "div": "p", "seed": seed,
           "imbalance": imbalance, "ranks": ranks, "eval-every": 1, "out": "runs/%s-%s.json" % (experiment, mode),
           "target-top1": None if regression else target, "quiet": False}
    eps, prev = [], 0.0
    for e, w in enumerate(walls):
        t1 = None if regression else top1[e]
        eps.append({"epoch": e, "wall_s": w, "epoch_s": round(w - prev, 6), "lr": lr, "train_loss": loss[e],
                    "train_top1": None if regression else round(t1 - 0.01, 4), "test_loss": round(loss[e] * 1.1, 6),
                    "test_top1": t1, "test_top5": None if regression else 0.99, "steps": 400, "samples": 25600,
                    "rounds": 100, "fresh_fraction": fresh, "mean_staleness": mstal, "max_staleness": maxstal,
                    "max_streak": streak, "weights_hash": "%016x" % (0x9e3779b97f4a7c15 * (e + 1) % (1 << 64))})
        prev = w
    waits = waits or [0.1 * (r + 1) for r in range(ranks)]
    ranks_l = [{"rank": r, "host": "node0", "steps": 1600, "compute_s": 1.0 + r, "inject_s": 0.02 * r * 100 / 100,
                "wait_s": waits[r], "apply_s": 0.05, "max_streak": streak} for r in range(ranks)]
    tt = None
    if not regression:
        for e in eps:
            if e["test_top1"] >= target:
                tt = e["wall_s"]; break
    switches = []
    if mode == "adaptive":
        switches = [{"epoch": 1, "round": 40, "effective": 42, "from": "majority", "to": "solo",
                     "reason": "streak window=32 below threshold"}]
    return {
        "schema": "eager-sgd-run/1", "experiment": experiment, "config": cfg,
        "environment": {"ranks": ranks, "hosts": ["node0"] * ranks, "mpi": "Open MPI v4.1.4", "cuda": None,
                        "cudnn": None, "nccl": None, "slurm_job_id": None, "slurm_nodelist": None,
                        "date": "2024-05-01T12:00:00Z",
                        "command": "mpirun -np %d eager-train --experiment %s --mode %s" % (ranks, experiment, mode)},
        "epochs": eps,
        "rounds": {"aggregation": 50, "records": [
            {"epoch": e, "from": f, "to": f + 49, "mode": "majority" if mode == "adaptive" else mode.split(":")[0],
             "mean_fresh": fresh * ranks, "min_fresh": 1, "mean_latency_ms": 0.8, "max_streak": streak,
             "max_staleness": maxstal, "mean_staleness": mstal} for e in range(len(walls)) for f in (0, 50)]},
        "ranks": ranks_l,
        "controller": {"policy": policy, "decision_hash": "00ff00ff", "switches": switches},
        "papi": {"available": False, "reason": "no hardware counters (virtual machine)", "per_rank": []},
        "summary": {"wall_s": walls[-1], "epochs": len(walls), "final_test_top1": None if regression else top1[-1],
                    "final_test_top5": None if regression else 0.99, "final_train_loss": loss[-1],
                    "target_top1": None if regression else target, "time_to_target_s": tt,
                    "fresh_fraction": fresh, "mean_staleness": mstal, "max_staleness": maxstal,
                    "max_streak": streak, "bn_stats": "none", "straggler": ranks - 1, "exit": "ok"},
    }


def write(name, obj):
    os.makedirs(os.path.dirname(os.path.join(HERE, name)), exist_ok=True)
    with open(os.path.join(HERE, name), "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


L = [0.9, 0.6, 0.45, 0.4]
# one setting (fmnist, lenet, 4 ranks, 4 epochs, batch 64, linear imbalance), four modes
write("runs/fmnist_sync.json", run("fmnist", "sync", [10, 20, 30, 40], [0.70, 0.78, 0.81, 0.85], L,
                                   waits=[3.0, 2.0, 1.0, 0.0]))
write("runs/fmnist_solo.json", run("fmnist", "solo", [5, 10, 15, 20], [0.68, 0.77, 0.80, 0.83], L,
                                   waits=[0.1, 0.1, 0.2, 0.0], stale=(0.75, 3, 3, 0.5)))
write("runs/fmnist_majority.json", run("fmnist", "majority", [6, 12, 18, 24], [0.69, 0.79, 0.82, 0.84], L,
                                       waits=[0.5, 0.4, 0.3, 0.0], stale=(0.25, 1, 1, 0.75)))
write("runs/fmnist_adaptive.json", run("fmnist", "adaptive", [5.5, 11, 16.5, 22], [0.71, 0.80, 0.83, 0.86], L,
                                       policy="streak", waits=[0.3, 0.2, 0.1, 0.0], stale=(0.5, 2, 2, 0.625)))
# a repeat of solo (other seed): solo becomes n=2, wall 21.0 +- 1.4
write("repeat/fmnist_solo_seed2.json", run("fmnist", "solo", [5.5, 11, 16.5, 22], [0.69, 0.78, 0.81, 0.85], L,
                                           seed=2, waits=[0.3, 0.1, 0.2, 0.0], stale=(0.25, 1, 5, 0.5)))
# mismatched settings: another batch size (separate table) and another lr (same table, separate row)
write("mismatch/fmnist_sync_b128.json", run("fmnist", "sync", [8, 16, 24, 32], [0.70, 0.79, 0.82, 0.84], L,
                                            batch=128))
write("mismatch/fmnist_solo_lr05.json", run("fmnist", "solo", [5, 10, 15, 20], [0.60, 0.70, 0.75, 0.79], L,
                                            lr=0.05, stale=(0.75, 3, 3, 0.5)))
# regression (hyperplane): test_top1 null, losses only
write("runs/hyperplane_sync.json", run("hyperplane", "sync", [2, 4, 6], None, [0.5, 0.1, 0.025], ranks=2,
                                       epochs=3, batch=32, imbalance="none", regression=True))
write("runs/hyperplane_solo.json", run("hyperplane", "solo", [1, 2, 3], None, [0.5, 0.12, 0.03], ranks=2,
                                       epochs=3, batch=32, imbalance="none", regression=True,
                                       stale=(0.5, 2, 2, 0.75)))



def ddp_run(walls, top1, loss, *, imbalance="linear:unit=20", seed=1, ranks=4, target=0.80):
    """A PyTorch DDP run as trainer/ref/ddp_mirror.py writes it (ddp-run/1): the keys it shares
    with eager-train's config, epochs and summary."""
    cfg = {"experiment": "fmnist", "model": "lenet", "data": "fmnist", "mode": "ddp", "ranks": ranks,
           "epochs": len(walls), "batch": 64, "lr": 0.1, "momentum": 0.9, "seed": seed, "imbalance": imbalance,
           "data-path": "/usr/share/datasets/x", "out": "ddp.json", "target-top1": target}
    eps, prev = [], 0.0
    for e, w in enumerate(walls):
        eps.append({"epoch": e + 1, "wall_s": w, "epoch_s": round(w - prev, 6), "lr": 0.1, "train_loss": loss[e],
                    "train_top1": round(top1[e] - 0.01, 4), "test_loss": round(loss[e] * 1.1, 6),
                    "test_top1": top1[e], "steps": 400, "samples": 25600})
        prev = w
    tt = next((e["wall_s"] for e in eps if e["test_top1"] >= target), None)
    return {"schema": "ddp-run/1", "program": "pytorch-ddp", "experiment": "fmnist", "config": cfg,
            "ddp": {"backend": "gloo", "torch": "2.15.0", "init": "c", "broadcast_buffers": False,
                    "injection": "comm hook, last bucket"},
            "environment": {"ranks": ranks, "date": "2024-05-01T12:00:00Z", "command": "ddp_mirror.py",
                            "host": "node0"},
            "epochs": eps, "ranks": [{"rank": r, "compute_s": 1.0, "inject_s": 0.0} for r in range(ranks)],
            "summary": {"wall_s": walls[-1], "epochs": len(walls), "final_test_top1": top1[-1],
                        "final_train_loss": loss[-1], "target_top1": target, "time_to_target_s": tt,
                        "ntrain": 60000, "ntest": 10000}}


# PyTorch DDP on the fmnist setting: 36 s (sync: 40 s, so time vs DDP 1.11; solo 20 s: 0.56), the
# target at 27 s (sync 30 s: 1.11); and a balanced DDP run, the only row of its imbalance
write("ddp/fmnist_ddp.json", ddp_run([9, 18, 27, 36], [0.70, 0.78, 0.81, 0.85], L))
write("ddp/fmnist_ddp_none.json", ddp_run([8, 16, 24, 32], [0.70, 0.78, 0.81, 0.85], L, imbalance="none"))

# invalid files
base = run("fmnist", "sync", [10, 20, 30, 40], [0.70, 0.78, 0.81, 0.85], L)
b = copy.deepcopy(base); del b["summary"]["wall_s"]; write("invalid/missing_field.json", b)
b = copy.deepcopy(base); b["epochs"][3]["test_top1"] = "0.85"; write("invalid/wrong_type.json", b)
b = copy.deepcopy(base); b["extra_key"] = 1; b["config"]["mode"] = "eager"; write("invalid/extra_and_mode.json", b)
b = copy.deepcopy(base); b["epochs"][1]["test_top1"] = 85.0; write("invalid/percent_not_fraction.json", b)

# not a run file (skipped by compare with a note)
write("runs/notes.json", {"comment": "not a run file"})

# allreduce benchmark file (format of build/bench/collectives.json), Fig. 9
res = []
for skew, mul in (("none", 1.0), ("linear", 1.0)):
    for m, base_us, wait in (("mpi_allreduce", 50, "blocking"), ("sync", 60, "consumed"), ("solo", 20, "newer"),
                             ("majority", 35, "newer"), ("quorum", 45, "newer")):
        for nb in (8, 4096, 1048576):
            skewed = skew == "linear" and m in ("mpi_allreduce", "sync")
            mean = base_us * (1 + nb / 65536.0) + (3500.0 if skewed else 0.0) * mul
            res.append({"mode": m, "skew": skew, "bytes": nb, "count": nb // 4, "mean_latency_us": mean,
                        "min_latency_us": mean * 0.5, "max_latency_us": mean * 2, "fresh_fraction": 1.0,
                        "wait": wait, "wrong": 0})
write("bench/collectives.json", {"ranks": 8, "unit_ms": 1.0, "iterations": 64, "warmup": 4,
                                 "mpi": "Open MPI v4.1.4", "results": res})
