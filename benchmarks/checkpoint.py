"""Checkpoints of a ~100M-parameter model: ``dl.save``/``dl.load`` (safetensors) vs
``torch.save``/``torch.load`` and Gluon ``save_parameters``/``load_parameters`` on the same model:
time (ratio) and peak RSS growth (target <= 1.5x the model's size), each operation in a fresh
interpreter, interleaved over repeats."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List

from .harness import Config, Row, case, ratio_row

MEMORY_TARGET = 1.5
TIME_TARGET = 1.5
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(args: dict, timeout: float = 600.0) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
               MALLOC_MMAP_THRESHOLD_="1048576", MALLOC_TRIM_THRESHOLD_="1048576")
    r = subprocess.run([sys.executable, "-m", "benchmarks._ckpt_worker", json.dumps(args)], capture_output=True,
                       text=True, timeout=timeout, env=env, cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"checkpoint worker {args['backend']} failed: {r.stderr.strip()[-1500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


NATIVE = {"torch": {"save": "torch.save", "load": "torch.load+load_state_dict"},
          "mxnet": {"save": "save_parameters", "load": "load_parameters"}}


@case("checkpoint", "save_load")
def save_load(cfg: Config) -> List[Row]:
    """Save/load time and peak memory of a ~100M-parameter model, dualdl vs native, both backends.

    One fresh interpreter per backend and repeat runs the four operations (saves, then the loads
    of what they wrote), the order of dualdl and native alternating between repeats."""
    layers, width = (2, 64) if cfg.quick else (24, 2048)
    repeats = 2 if cfg.quick else 3
    tmp = tempfile.mkdtemp(prefix="dualdl-bench-ckpt-", dir=cfg.workdir or None)
    rows: List[Row] = []
    try:
        for be in ("torch", "mxnet"):
            res: Dict[str, List[dict]] = {}
            model_bytes = 0
            for r in range(repeats):
                saves, loads = ["dl.save", "native.save"], ["dl.load", "native.load"]
                k = r % 3                                  # rotate who goes first
                order = saves[k:] + saves[:k] + loads[k:] + loads[:k]
                out = _run({"backend": be, "dir": tmp, "layers": layers, "width": width, "ops": order})
                model_bytes = out.pop("model_bytes")
                for k, v in out.items():
                    res.setdefault(k, []).append(v)
            for kind in ("save", "load"):
                a, b = f"dl.{kind}", f"native.{kind}"
                times = {k: [d["t"] for d in res[k]] for k in (a, b)}
                peak = {k: max(d["peak_growth"] for d in res[k]) / model_bytes for k in (a, b)}
                native = NATIVE[be][kind]
                rows.append(ratio_row("checkpoint", f"dl.{kind} / {be} (vs {native})", times, a, b,
                                      target=TIME_TARGET,
                                      note=f"{model_bytes / 4e6:.1f} M params ({model_bytes / 1e6:.0f} MB)",
                                      backend=be, model_bytes=model_bytes))
                rows.append(Row(group="checkpoint", name=f"dl.{kind} / {be}: peak RSS growth", value=peak[a],
                                unit="x model", baseline=native, baseline_value=peak[b],
                                target=MEMORY_TARGET, ok=peak[a] <= MEMORY_TARGET, rounds=repeats,
                                note=f"max over repeats of (peak RSS during the call - RSS before) / "
                                     f"{model_bytes / 1e6:.0f} MB",
                                extra={"backend": be, "model_bytes": model_bytes,
                                       "exact_peak": all(d.get("exact_peak") for v in res.values() for d in v)}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows
