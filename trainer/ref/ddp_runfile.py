"""ddp_runfile.py: what the DDP mirror (trainer/ref/ddp_mirror.py) writes: its run file (ddp-run/1,
results/schema/ddp.schema.json, read by pcoll-compare) and with --mirror-ref the mirror reference
that trainer/ref/ddp_check.sh checks eager-train against.

  trainer_config(args, threads)  the run's settings under eager-train's option names (a dict)
  mirror_args(args)              eager-train's flags for the same run (a list of strings)
  write_outputs(args, torch_version, threads, ntrain, ntest, epochs, curve, allt, wall, reached,
                init_hash, nparams, cls)
                                 writes args.out (and args.mirror_ref), from rank 0's records:
                                 epochs[] and curve[] as the worker made them, allt every rank's
                                 [compute_s, inject_s] tensor; prints one line unless --quiet
args is ddp_mirror.parse's namespace."""
import datetime
import json
import os
import sys

from ddp_imbalance import delay_table
from ddp_preset import PRESETS, model_desc


def trainer_config(args, threads):
    """The run's settings under eager-train's option names (what pcoll-compare compares)."""
    c = {"experiment": args.experiment, "model": model_desc(args),
         "data": PRESETS[args.experiment]["data"], "mode": "ddp", "ranks": args.ranks, "threads": threads}
    for k in ("epochs", "batch", "lr", "base-batch", "momentum", "wd", "wd-bn", "nesterov", "warmup",
              "warmup-start-lr", "milestones", "gamma", "seed", "imbalance", "limit-train", "limit-test",
              "max-steps", "target-top1", "data-path", "out", "curve-every", "curve-test") + (
                  ("hp-features", "hp-samples") if args.experiment == "hyperplane" else ()):
        c[k] = getattr(args, k.replace("-", "_"))
    for k in ("wd-bn", "nesterov"):
        c[k] = bool(c[k])
    return c


def write_outputs(args, torch_version, threads, ntrain, ntest, epochs, curve, allt, wall, reached, init_hash, nparams,
                  cls):
    hooked = args.imb.kind != "none"
    res = {"schema": "ddp-run/1", "program": "pytorch-ddp", "experiment": args.experiment,
           "config": trainer_config(args, threads),
           "ddp": {"backend": "gloo", "torch": torch_version, "init": args.init,
                   "broadcast_buffers": bool(args.broadcast_buffers), "injection": "comm hook, last bucket",
                   "imbalance_index": args.imbalance_index},  # (not in config: DDP rows of either join one table)
           "environment": {"ranks": args.ranks, "date": datetime.datetime.now().astimezone().isoformat(),
                           "command": " ".join([sys.executable] + sys.argv), "host": os.uname().nodename},
           "epochs": epochs,
           "ranks": [{"rank": p, "compute_s": a[0].item() if hooked else None, "inject_s": a[1].item() if hooked else None}
                     for p, a in enumerate(allt)],  # measured in the injection hook (none without imbalance)
           "summary": {"wall_s": wall, "epochs": args.epochs, "final_test_top1": epochs[-1]["test_top1"],
                       "final_train_loss": epochs[-1]["train_loss"], "target_top1": args.target_top1 if cls else None,
                       "time_to_target_s": reached, "ntrain": ntrain, "ntest": ntest}}
    if args.curve_every:
        res["curve"] = curve
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    if args.mirror_ref:
        ref = {"format": "ddp-mirror-ref/1", "program": "pytorch-ddp", "torch": torch_version,
               "date": res["environment"]["date"], "command": res["environment"]["command"],
               "ranks": args.ranks, "model": res["config"]["model"], "seed": args.seed,
               "nparams": nparams, "init_hash": init_hash,
               "eager_train_args": mirror_args(args), "delays": delay_table(args.seed),
               "epochs": [{k: e[k] for k in ("epoch", "lr", "train_loss", "train_top1", "test_loss", "test_top1")}
                          for e in epochs]}
        if args.curve_every:
            ref["curve"] = [{k: c[k] for k in ("epoch", "batches", "samples", "test_top1", "test_loss")} for c in curve]
        with open(args.mirror_ref, "w") as f:
            json.dump(ref, f, indent=1)
            f.write("\n")
    if not args.quiet:
        print("ddp_mirror: %d epochs in %.1f s, final test loss %.4g, wrote %s%s" % (
            args.epochs, wall, epochs[-1]["test_loss"], args.out,
            " and " + args.mirror_ref if args.mirror_ref else ""), flush=True)


def mirror_args(args):
    """eager-train's flags for the same run (mpirun -np RANKS eager-train ARGS)."""
    a = ["--experiment", args.experiment, "--seed", str(args.seed), "--threads", str(args.threads)]
    for k in ("epochs", "batch", "lr", "wd", "milestones", "gamma", "momentum", "limit-train", "limit-test",
              "max-steps", "imbalance") + (("hp-features", "hp-samples") if args.experiment == "hyperplane" else ()) + (
                  ("curve-every", "curve-test") if args.curve_every else ()):
        a += ["--" + k, str(getattr(args, k.replace("-", "_")))]
    if args.imbalance_index == "global":
        a += ["--epoch-mode", "global"]
    return a

