"""The demo's measurements as data: where the two runs part (loss gap per step, weight distance at
the kept steps) and ``results.json``, with the machine it ran on (docs/demo.md is generated from it)."""
from __future__ import annotations

import json
import os
import platform
import time
from typing import Dict, List, Optional

import numpy as np

from .agreement import StepAgreement
from .run import RunResult


def loss_gaps(a: RunResult, b: RunResult) -> List[float]:
    """``|loss_a - loss_b|`` per step (the two runs see the same batches in the same order)."""
    return [abs(x - y) for x, y in zip(a.step_losses, b.step_losses)]


def weight_distances(a: RunResult, b: RunResult) -> Dict[int, float]:
    """Step -> max abs difference over every weight of the two runs after that step."""
    out = {}
    for step in sorted(set(a.snapshots) & set(b.snapshots)):
        wa, wb = a.snapshots[step], b.snapshots[step]
        out[step] = max((float(np.abs(wa[k].astype(np.float64) - wb[k]).max()) for k in wa if k in wb and wa[k].size),
                        default=0.0)
    return out


def machine() -> Dict[str, str]:
    """Where the numbers came from: CPU model and count, Python and framework versions, UTC time."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    info = {"cpu": cpu, "cores": str(os.cpu_count()), "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    for name in ("torch", "mxnet"):
        try:
            info[name] = __import__(name).__version__
        except ImportError:
            pass
    return info


def _run(r: RunResult) -> dict:
    return {"backend": r.backend, "strategy": r.strategy, "devices": r.devices, "seed": r.seed,
            "epoch_losses": r.epoch_losses, "step_losses": r.step_losses,
            "epoch_accuracy": [list(a) for a in r.epoch_accuracy], "digit_accuracy": r.digit_accuracy,
            "string_accuracy": r.string_accuracy, "seconds_per_step": r.seconds_per_step}


def results(first: List[RunResult], by_backend: Dict[str, List[RunResult]], steps: List[StepAgreement],
            settings: dict, seconds: Optional[float] = None) -> dict:
    """Everything the demo measured, JSON-ready."""
    out = {"settings": settings, "machine": machine(), "seconds": seconds,
           "runs": {b: [_run(r) for r in rs] for b, rs in by_backend.items()},
           "lockstep": [{"step": s.step, "loss": list(s.loss), "grad_abs": s.grad_abs,
                         "grad_rel": s.worst()[2], "worst": s.worst()[0], "weights_abs": s.weights_abs}
                        for s in steps]}
    if len(first) == 2:
        out["parting"] = {"backends": [first[0].backend, first[1].backend],
                          "loss_gap": loss_gaps(first[0], first[1]),
                          "weight_distance": {str(k): v for k, v in weight_distances(first[0], first[1]).items()}}
    return out


def write_json(path: str, first: List[RunResult], by_backend: Dict[str, List[RunResult]],
               steps: List[StepAgreement], settings: dict, seconds: Optional[float] = None) -> str:
    with open(path, "w") as f:
        json.dump(results(first, by_backend, steps, settings, seconds), f, indent=1)
    return path
