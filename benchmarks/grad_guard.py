"""What ``dl.Trainer``'s non-finite gradient check costs per step (``python -m benchmarks.grad_guard``).

Two Trainers over copies of the same model are timed interleaved (``harness.time_interleaved``):
``guarded`` is today's ``train_step``; ``unguarded`` is the same call with the check replaced by a
plain step (:class:`benchmarks.guarantees.NoCheck`: no gradient or loss tested, the step always
applied), i.e. the step before the check existed. Prints, per model and backend, the medians and
minima of both and their ratios.
Options: ``--repeats N`` (default 31), ``--kinds mlp,lenet``, ``--backends torch,mxnet``,
``--clock cpu|wall`` (default cpu: process CPU time, steadier on a shared machine).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MXNET_CPU_WORKER_NTHREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
from typing import Callable, Dict  # noqa: E402

from . import models  # noqa: E402
from .guarantees import trainer_step  # noqa: E402
from .harness import time_interleaved  # noqa: E402


def steps(kind: str, backend: str) -> Dict[str, Callable[[], None]]:
    s = models.sizes(False)[kind]
    return {"guarded": trainer_step(backend, kind, s), "unguarded": trainer_step(backend, kind, s, check=False)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=31)
    ap.add_argument("--kinds", default="mlp,lenet")
    ap.add_argument("--backends", default="torch,mxnet")
    ap.add_argument("--clock", default="cpu", choices=("cpu", "wall"))
    a = ap.parse_args()
    print(f"{'case':<16} {'guarded med':>12} {'unguarded med':>14} {'ratio med':>10} "
          f"{'guarded min':>12} {'unguarded min':>14} {'ratio min':>10}")
    for kind in a.kinds.split(","):
        for be in a.backends.split(","):
            t = time_interleaved(steps(kind, be), repeats=a.repeats, warmup=5, min_sample_s=0.05, clock=a.clock)
            g, u = t["guarded"], t["unguarded"]
            gm, um = statistics.median(g), statistics.median(u)
            print(f"{kind + ' / ' + be:<16} {gm * 1e6:>10.1f}us {um * 1e6:>12.1f}us {gm / um:>10.3f} "
                  f"{min(g) * 1e6:>10.1f}us {min(u) * 1e6:>12.1f}us {min(g) / min(u):>10.3f}", flush=True)


if __name__ == "__main__":
    main()
