"""``dualdl convert-project``: the conversion alone in lines per second (libcst's parse and
rewrite of a Gluon training script, imports loaded before the clock starts; PaConvert states
2,000 lines/s for PyTorch -> Paddle), and the proof's time: the Gluon script and its converted
twin each run unmodified for a few updates on synthetic MNIST files, every update compared."""
from __future__ import annotations

import os
import tempfile
import time
from typing import List

from .harness import Config, Row, case

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "scripts", "gluon_mnist_mlp.py")


@case("project", "convert")
def convert(cfg: Config) -> List[Row]:
    """Lines per second of the conversion alone (tests/scripts/gluon_mnist_mlp.py)."""
    import libcst  # noqa: F401
    from dualdl.port.project.convert import convert_source
    from dualdl.port.translate import oplib  # noqa: F401
    text = open(SCRIPT).read()
    res = convert_source(text)                      # warm: first use of the op registry
    rounds = 3 if cfg.quick else 20
    t0 = time.perf_counter()
    for _ in range(rounds):
        res = convert_source(text)
    dt = (time.perf_counter() - t0) / rounds
    return [Row("project", "convert-project: conversion alone", res.lines / dt, unit="lines/s",
                rounds=rounds, note=f"{res.lines} lines, {len(res.converted)} changed, "
                                    f"{len(res.todos)} TODO, {dt * 1e3:.1f} ms per file")]


@case("project", "proof")
def proof(cfg: Config) -> List[Row]:
    """The proof over the real run: both scripts for 3 updates, every update compared."""
    from dualdl.port.project import convert_project
    from dualdl.port.project.proof import prove_scripts, write_mnist
    work = tempfile.mkdtemp(prefix="bench_project_")
    out = os.path.join(work, "torch")
    convert_project(os.path.dirname(SCRIPT), out)
    write_mnist(os.path.join(work, "data"), train=300, test=50)
    t0 = time.perf_counter()
    p = prove_scripts(SCRIPT, os.path.join(out, os.path.basename(SCRIPT)), work, steps=3)
    total = time.perf_counter() - t0
    return [Row("project", "convert-project --prove: 3 updates of gluon_mnist_mlp.py", total,
                rounds=1, ok=p.passed,
                note=f"{'passed' if p.passed else 'FAILED'}; max abs grad "
                     f"{p.max_diff.get('grad', float('nan')):.2e}, weights "
                     f"{p.max_diff.get('param', float('nan')):.2e}; Gluon run "
                     f"{p.seconds['gluon run']:.1f} s, torch run {p.seconds['torch run']:.1f} s")]
