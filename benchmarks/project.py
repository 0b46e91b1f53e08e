"""``dualdl convert-project``: the conversion alone in lines per CPU second (libcst's parse and
rewrite, imports loaded before the clock starts; ``time.process_time``, the box is shared;
PaConvert states 2,000 lines/s for PyTorch -> Paddle), and the proof's time: the Gluon script and its converted
twin each run unmodified for a few updates on synthetic MNIST files, every update compared."""
from __future__ import annotations

import os
import tempfile
import time
from typing import List

from .harness import Config, Row, case

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "scripts", "gluon_mnist_mlp.py")


def _rate(texts: List[str], rounds: int) -> "tuple[float, int, int]":
    """Best lines per CPU second (time.process_time: the box is shared) over ``rounds``."""
    from dualdl.port.project.convert import convert_source
    for t in texts:
        convert_source(t)                           # warm: first use of the op registry
    best, lines, changed = 0.0, 0, 0
    for _ in range(rounds):
        t0 = time.process_time()
        res = [convert_source(t) for t in texts]
        dt = time.process_time() - t0
        lines, changed = sum(r.lines for r in res), sum(len(r.converted) for r in res)
        best = max(best, lines / dt if dt else float("inf"))
    return best, lines, changed


def _goal(rate: float) -> str:
    return f"goal >= 2,000 (PaConvert's rate): {'met' if rate >= 2000 else 'MISSED'}"


@case("project", "convert")
def convert(cfg: Config) -> List[Row]:
    """Lines per CPU second of the conversion alone: this repo's Gluon scripts (tests/scripts,
    its word LM package and d2l loops included), the same as one file of 20 copies, and the
    installed gluoncv model zoo + gluonnlp model packages (140 files of real third-party code)."""
    import glob
    import libcst  # noqa: F401
    from dualdl.port.translate import oplib  # noqa: F401
    scripts = [open(f).read() for f in sorted(glob.glob(os.path.join(ROOT, "tests", "scripts",
                                                                    "**", "*.py"), recursive=True))]
    rounds = 2 if cfg.quick else 5
    rows = []
    for name, texts in (("tests/scripts/*.py", scripts), ("20 copies in one file",
                                                          ["\n".join(scripts * 20)])):
        rate, lines, changed = _rate(texts, rounds)
        rows.append(Row("project", f"convert-project: conversion alone, {name}", rate,
                        unit="lines/s", rounds=rounds,
                        note=f"{lines} lines, {changed} changed; CPU time; {_goal(rate)}"))
    site = os.path.dirname(os.path.dirname(libcst.__file__))
    files = sorted(glob.glob(os.path.join(site, "gluoncv", "model_zoo", "**", "*.py"),
                             recursive=True) +
                   glob.glob(os.path.join(site, "gluonnlp", "model", "**", "*.py"), recursive=True))
    if files:
        rate, lines, changed = _rate([open(f).read() for f in files], 1 if cfg.quick else 2)
        rows.append(Row("project", "convert-project: conversion alone, gluoncv model_zoo + "
                                   "gluonnlp model", rate, unit="lines/s",
                        rounds=1 if cfg.quick else 2,
                        note=f"{len(files)} files, {lines} lines, {changed} changed; CPU time; "
                             f"{_goal(rate)}"))
    return rows


@case("project", "proof")
def proof(cfg: Config) -> List[Row]:
    """The proof over the real run: both scripts for 3 updates, every update compared."""
    from dualdl.port.project import convert_project
    from dualdl.port.project.proof import prove_scripts
    from dualdl.port.project.proof_data import write_mnist
    work = tempfile.mkdtemp(prefix="bench_project_")
    out = os.path.join(work, "torch")
    convert_project(os.path.dirname(SCRIPT), out)
    write_mnist(os.path.join(work, "data"), train=300, test=50)
    t0 = time.perf_counter()
    p = prove_scripts(SCRIPT, os.path.join(out, os.path.basename(SCRIPT)), work, steps=3)
    total = time.perf_counter() - t0
    return [Row("project", "convert-project --prove: 3 updates of gluon_mnist_mlp.py", total,
                rounds=1,
                note=f"{'passed' if p.passed else 'FAILED'}; max abs grad "
                     f"{p.max_diff.get('grad', float('nan')):.2e}, weights "
                     f"{p.max_diff.get('param', float('nan')):.2e}; Gluon run "
                     f"{p.seconds['gluon run']:.1f} s, torch run {p.seconds['torch run']:.1f} s")]
