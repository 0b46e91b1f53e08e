"""``dualdl demo``: the README's main command."""
from __future__ import annotations

import argparse
import os
import time


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backends", default="torch,mxnet",
                   help="comma-separated backends to train (default: torch,mxnet)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--train-size", type=int, default=3000, help="training strings")
    p.add_argument("--test-size", type=int, default=500, help="held-out strings")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--hidden", type=int, default=64, help="LSTM hidden size")
    p.add_argument("--devices", type=int, default=None,
                   help="devices per backend (default: every GPU, else 2 CPU devices)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="demo_output", help="folder for the plot and the report")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def run(args: argparse.Namespace) -> int:
    # MXNet deadlocks when two CPU contexts run concurrently with OMP_NUM_THREADS>=2
    # (docs/training.md); one OpenMP thread per operator, one engine thread per context.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import dualdl as dl
    from .digits import make_splits
    from .report import table, write
    from .run import compare, default_devices, initial_weights, one_step_difference, train_backend

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    for b in backends:
        dl.get_backend(b)                   # clear error now if a backend is missing
    t0 = time.time()
    train, test = make_splits(args.train_size, args.test_size, seed=args.seed)
    init = initial_weights(args.seed, args.hidden)
    print(f"dualdl demo: {len(train)} training / {len(test)} held-out strings of 3-5 handwritten digits "
          f"(scikit-learn digits; held-out strings use unseen scans); {sum(v.size for v in init.values())} "
          f"parameters; identical initial weights on {', '.join(backends)}", flush=True)
    results = []
    for b in backends:
        devs = default_devices(b, args.devices)
        print(f"training on {b} ({len(devs)} devices)...", flush=True)
        results.append(train_backend(b, init, train, test, args.epochs, args.batch_size, args.lr,
                                     args.hidden, args.seed, devs, progress=not args.no_progress))
    diff = compare(results[0], results[1]) if len(results) == 2 else None
    if diff is not None:
        n = min(args.batch_size, len(train))
        diff.lockstep = one_step_difference(results[0].weights, train.images[:n], train.labels[:n], args.hidden,
                                            0.01, {b: default_devices(b, args.devices) for b in backends})
    print()
    print(table(results, diff))
    paths = write(results, diff, args.out, {"epochs": args.epochs, "train": args.train_size,
                                              "test": args.test_size, "batch": args.batch_size,
                                              "lr": args.lr, "seed": args.seed})
    print(f"loss curves: {paths['plot']}")
    print(f"report:      {paths['report']}")
    print(f"total time:  {time.time() - t0:.0f} s")
    return 0
