"""``dualdl demo``: the README's main command."""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import time
from typing import Optional

from .recipe import SCHEDULES, Recipe

# the demo extra's modules -> the package that provides them
EXTRA = {"sklearn": "scikit-learn", "matplotlib": "matplotlib", "tqdm": "tqdm"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = Recipe()
    p.add_argument("--backends", default="torch,mxnet",
                   help="comma-separated backends to train (default: torch,mxnet)")
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--train-size", type=int, default=3000, help="training strings")
    p.add_argument("--test-size", type=int, default=500, help="held-out strings")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--lr", type=float, default=d.lr, help="Adam's learning rate (the peak with --schedule onecycle)")
    p.add_argument("--schedule", choices=SCHEDULES, default=d.schedule,
                   help="constant (default) or onecycle: linear warm-up then cosine decay to 0")
    p.add_argument("--warmup", type=float, default=d.warmup, help="fraction of the steps spent warming up")
    p.add_argument("--clip-grad-norm", type=float, default=d.clip_grad_norm)
    p.add_argument("--hidden", type=int, default=d.hidden, help="LSTM hidden size")
    p.add_argument("--devices", type=int, default=None,
                   help="devices per backend (default: every GPU, else 2 CPU devices)")
    p.add_argument("--seed", type=int, default=0, help="first seed (data split, initial weights, batch order)")
    p.add_argument("--seeds", type=int, default=1,
                   help="seeds per backend (seed, seed+1, ...): reports mean ± spread per backend")
    p.add_argument("--lockstep-steps", type=int, default=3,
                   help="first steps compared in lockstep (loss and per-parameter gradients); 0: skip")
    p.add_argument("--out", default="demo_output", help="folder for the plot and the report")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def missing_extra() -> list:
    """Packages of the demo extra that cannot be imported."""
    missing = []
    for mod, pkg in EXTRA.items():
        try:
            if importlib.util.find_spec(mod) is None:
                missing.append(pkg)
        except (ImportError, ValueError):        # a module blocked as sys.modules[mod] = None
            missing.append(pkg)
    return missing


def _bad_numbers(args: argparse.Namespace) -> Optional[str]:
    """What is wrong with the numbers and the output folder, before anything trains (one line)."""
    for flag, v in (("--epochs", args.epochs), ("--train-size", args.train_size), ("--test-size", args.test_size),
                    ("--batch-size", args.batch_size), ("--hidden", args.hidden), ("--seeds", args.seeds),
                    ("--devices", 1 if args.devices is None else args.devices)):
        if v < 1:
            return f"{flag} must be >= 1, got {v}"
    for flag, v in (("--seed", args.seed), ("--lockstep-steps", args.lockstep_steps)):
        if v < 0:
            return f"{flag} must be >= 0, got {v}"
    if not (math.isfinite(args.lr) and args.lr > 0):
        return f"--lr must be a positive finite number, got {args.lr}"
    if not (math.isfinite(args.clip_grad_norm) and args.clip_grad_norm > 0):
        return f"--clip-grad-norm must be a positive finite number, got {args.clip_grad_norm}"
    if not 0 <= args.warmup < 1:
        return f"--warmup must be a fraction in [0, 1), got {args.warmup}"
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        return f"--out {args.out} is not a folder; give a folder for the plot and the report"
    return None


def run(args: argparse.Namespace) -> int:
    missing = missing_extra()
    if missing:
        print(f"dualdl demo needs the demo extra ({', '.join(missing)} missing): pip install 'dualdl[demo]'",
              file=sys.stderr)
        return 2
    problem = _bad_numbers(args)
    if problem:
        print(f"dualdl demo: {problem}", file=sys.stderr)
        return 2
    # MXNet deadlocks when two CPU contexts run concurrently with OMP_NUM_THREADS>=2
    # (docs/training.md); one OpenMP thread per operator, one engine thread per context.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import dualdl as dl
    from .agreement import first_steps
    from .digits import make_splits
    from .report import table, write
    from .run import compare, default_devices, initial_weights, train_backend

    recipe = Recipe(args.epochs, args.batch_size, args.lr, args.hidden, args.schedule, args.warmup,
                    args.clip_grad_norm)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    for b in backends:
        try:
            dl.get_backend(b)               # clear error now if a backend is unknown or missing
        except (ValueError, ImportError) as e:
            print(f"dualdl demo: --backends {args.backends}: {' '.join(str(e).split())}", file=sys.stderr)
            return 2
    if len(backends) not in (1, 2) or len(set(backends)) != len(backends):
        print(f"dualdl demo: --backends takes one or two different backends (torch,mxnet), got {args.backends!r}",
              file=sys.stderr)
        return 2
    devices = {b: default_devices(b, args.devices) for b in backends}
    t0 = time.time()
    by_backend = {b: [] for b in backends}
    first, steps = None, None
    for seed in range(args.seed, args.seed + args.seeds):
        train, test = make_splits(args.train_size, args.test_size, seed=seed)
        init = initial_weights(seed, recipe.hidden)
        print(f"dualdl demo, seed {seed}: {len(train)} training / {len(test)} held-out strings of 3-5 handwritten "
              f"digits (scikit-learn digits; held-out strings use unseen scans); "
              f"{sum(v.size for v in init.values())} parameters; identical initial weights on "
              f"{', '.join(backends)}", flush=True)
        if first is None and sorted(backends) == ["mxnet", "torch"] and args.lockstep_steps > 0:
            steps = first_steps(init, train, recipe, devices, args.lockstep_steps)
        runs = []
        for b in backends:
            print(f"training on {b} ({len(devices[b])} devices)...", flush=True)
            bars = not (args.no_progress or getattr(args, "quiet", False))
            r = train_backend(b, init, train, test, recipe, seed, devices[b], progress=bars)
            print(f"  {b} seed {seed}: per digit {100 * r.digit_accuracy:.1f}%, whole string "
                  f"{100 * r.string_accuracy:.1f}%, {1000 * r.seconds_per_step:.0f} ms/step", flush=True)
            by_backend[b].append(r)
            runs.append(r)
        first = first or runs
    cmp = compare(first[0], first[1]) if len(first) == 2 else None
    body = table(first, by_backend, steps, cmp)
    print()
    print(body)
    settings = dict(recipe.settings(), train=args.train_size, test=args.test_size, seed=args.seed, seeds=args.seeds)
    paths = write(first, table(first, by_backend, steps, cmp, per_parameter=True), args.out, settings,
                  by_backend, steps, time.time() - t0)
    print(f"loss curves: {paths['plot']}")
    print(f"report:      {paths['report']}")
    print(f"numbers:     {paths['json']}")
    print(f"total time:  {time.time() - t0:.0f} s")
    return 0
