"""Train-step time of each write-once twin against its native torch original (issue 43's bar:
<= 1.05 on torch), float32, one optimizer step of the original's optimizer per call, timed
interleaved (median of ``--repeats`` rounds of ``--steps`` steps). MXNet rows are the twin on MXNet
(eager, hybridized) against the same torch original, for information: the originals are torch
files, so MXNet has no native original to compare with.

``OMP_NUM_THREADS=1 .venv/bin/python tests/realmodels/train_step_ratio.py [--cases a,b] [--steps 5]``
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable, Dict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dualdl as dl  # noqa: E402
from realmodels import harness  # noqa: E402
from realmodels.cases import CASES  # noqa: E402


def stepper(name: str, candidate: str) -> Callable[[], None]:
    """One training step of case ``name`` on ``candidate`` (the harness's loop, without reading back)."""
    case = CASES[name]
    net, F, opt, backend = harness.prepare(case, candidate, "float32", fixed_noise=False)
    xs = harness._native_inputs(case.inputs(np.random.RandomState(1)), backend, "float32")

    def step():
        with dl.use(backend):
            opt.zero_grad()
            with dl.record(backend=backend):
                loss = case.loss(F, case.call(net, xs), xs)
            dl.backward(loss)
            opt.step()
            if backend == "mxnet":
                import mxnet as mx
                mx.nd.waitall()
    return step


def measure(name: str, candidates, steps: int, repeats: int) -> Dict[str, float]:
    fns = {c: stepper(name, c) for c in candidates}
    for fn in fns.values():
        fn()                                   # warm-up (and the hybridized graph built)
    times: Dict[str, list] = {c: [] for c in fns}
    for _ in range(repeats):
        for c, fn in fns.items():              # interleaved: drift hits every side alike
            t = time.perf_counter()
            for _ in range(steps):
                fn()
            times[c].append((time.perf_counter() - t) / steps)
    return {c: statistics.median(v) for c, v in times.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--mxnet", action="store_true", help="also time the twin on MXNet")
    a = p.parse_args()
    print("| case | torch original ms | twin on torch ms | ratio |" + (" MXNet eager ms | hybridized ms |" if a.mxnet else ""))
    print("|---|---:|---:|---:|" + ("---:|---:|" if a.mxnet else ""))
    for name in a.cases.split(","):
        cands = ["original", "torch"]
        if a.mxnet:
            cands += ["mxnet"] + (["mxnet-hybridized"] if CASES[name].hybridizable else [])
        try:
            t = measure(name, cands, a.steps, a.repeats)
        except Exception as e:                 # a case MXNet cannot build yet: say so, go on
            print(f"| {name} | {type(e).__name__}: {str(e).splitlines()[0][:80]} |")
            continue
        row = f"| {name} | {1e3 * t['original']:.2f} | {1e3 * t['torch']:.2f} | {t['torch'] / t['original']:.3f} |"
        if a.mxnet:
            row += f" {1e3 * t['mxnet']:.2f} | " + (f"{1e3 * t['mxnet-hybridized']:.2f} |" if "mxnet-hybridized" in t else "- |")
        print(row, flush=True)


if __name__ == "__main__":
    main()
