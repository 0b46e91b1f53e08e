"""What ``dl.Trainer``'s non-finite gradient check costs per step (``python -m benchmarks.grad_guard``).

Two Trainers over copies of the same model are timed interleaved (``harness.time_interleaved``):
``guarded`` is today's ``train_step``; ``unguarded`` is the same call with the check replaced by a
constant (its Trainer's adapter ``grads_finite`` returns True), i.e. the step before the check
existed. Prints, per model and backend, the medians and minima of both and their ratios.
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

import dualdl as dl  # noqa: E402

from . import models  # noqa: E402
from .harness import time_interleaved  # noqa: E402


class _NoCheck:
    """Stands in for the adapter's optim module in the unguarded Trainer: no gradient is checked;
    everything else (``prepared_step`` ...) is the adapter's own."""

    def __init__(self, impl) -> None:
        self._impl = impl

    def __getattr__(self, name: str):
        return getattr(self._impl, name)

    @staticmethod
    def grads_finite(params, cache=None) -> bool:
        return True


def steps(kind: str, backend: str) -> Dict[str, Callable[[], None]]:
    s = models.sizes(False)[kind]
    x_np, y_np = models.batch(kind, s)
    fns = {}
    with dl.use(backend):
        for label in ("guarded", "unguarded"):
            dl.seed(0)
            net = models.dl_model(kind, s)
            tr = dl.Trainer(net, dl.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9), models.dl_loss(kind))
            x, y = dl.from_numpy(x_np), dl.from_numpy(y_np)
            if backend == "mxnet":
                from mxnet import nd

                def step(tr=tr, x=x, y=y):
                    tr.train_step(x, y)
                    nd.waitall()
            else:
                def step(tr=tr, x=x, y=y):
                    tr.train_step(x, y)
            if label == "unguarded":
                tr._optim_impl = _NoCheck(tr._optim_impl)
            fns[label] = step
    return fns


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
