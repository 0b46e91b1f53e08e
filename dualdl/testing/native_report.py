"""The report of :func:`dualdl.testing.check_native_training` and how a row is judged.

Rows (:class:`~dualdl.testing.report.Diff`) per step, in the order things happen: ``"float64"``
rows compare the two float64 twins (the implementations without float32 rounding: the loss, every
gradient, every weight and buffer after the step), ``"forward"`` / ``"backward"`` / ``"update"``
rows the float32 runs. A float32 row's tolerance grows by what the triangle inequality allows:
``|gluon32 - torch32| <= |gluon32 - gluon64| + |gluon64 - torch64| + |torch64 - torch32|``, each
term measured on this step (``ref_mxnet``, the float64 row, ``ref_torch``), so float32 rounding
alone never fails a row and a real difference fails the float64 row first.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

import numpy as np

from .report import Diff, compare_arrays

__all__ = ["NativeTrainingReport", "Divergence", "add_row"]


@dataclass
class Divergence:
    """Where the two runs first part, and what that points at."""
    step: int
    phase: str          # "schedule", "forward", "backward", "update" or "float64"
    tensor: str         # "loss", "grad <torch key>", "param <key>", "buffer <key>", "learning rate"
    cause: str          # "schedule", "batchnorm variance", "batchnorm momentum", "optimizer",
    #                     "weight decay", "float32 rounding", "amplified rounding", "model"
    #                     or "unknown"
    detail: str = ""

    def __str__(self) -> str:
        return (f"step {self.step}, {self.phase}, {self.tensor}: likely cause {self.cause}"
                f"{' - ' + self.detail if self.detail else ''}")


@dataclass
class NativeTrainingReport:
    steps: int
    diffs: List[Diff] = field(default_factory=list)
    findings: List[str] = field(default_factory=list)   # what the divergence points at
    not_compared: List[str] = field(default_factory=list)
    #: per step: (Gluon's learning rate, torch's base learning rate) used by that step
    learning_rates: List[Tuple[float, float]] = field(default_factory=list)
    divergence: Optional[Divergence] = None
    notes: List[str] = field(default_factory=list)
    evidence: str = "float32 only"
    steps_run: int = 0
    accumulate: int = 1        # micro-batches per update: steps count micro-batches
    #: per step: (Gluon's loss, torch's loss) as the update sees them (sum / step size, loss /
    #: step(batch_size=)): the batch mean unless the script accumulates
    losses: List[Tuple[float, float]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.divergence is None and all(d.passed for d in self.diffs) and not self.findings

    @property
    def first_failure(self) -> Optional[Diff]:
        return next((d for d in self.diffs if not d.passed), None)

    def summary(self) -> str:
        f = self.first_failure
        lines = [f"native training parity over {self.steps_run} of {self.steps} steps by "
                 f"{self.evidence}: {'PASSED' if self.passed else 'FAILED'} "
                 f"({len(self.diffs)} tensors compared)"]
        if self.divergence is not None:
            lines.append(f"  first divergence: {self.divergence}")
        if f is not None:
            lines.append(f"  first failing row: step {f.step} {f.phase} {f.name} shape {f.shape}: "
                         f"max abs {f.max_abs:.3g}, max rel {f.max_rel:.3g}, "
                         f"{f.usage:.3g}x tolerance{' (' + f.note + ')' if f.note else ''}")
        worst = {}
        for d in self.diffs:
            if d.phase not in worst or d.usage > worst[d.phase].usage:
                worst[d.phase] = d
        for ph, d in worst.items():
            lines.append(f"  worst {ph}: {d.name} (step {d.step}) max abs {d.max_abs:.3g}, max rel "
                         f"{d.max_rel:.3g}, {d.usage:.2g}x tolerance")
        lines += [f"  finding: {x}" for x in self.findings]
        lines += [f"  note: {x}" for x in self.notes]
        if self.not_compared:
            lines.append(f"  not compared (non-linear mapping): {', '.join(self.not_compared[:5])}")
        return "\n".join(lines)

    __str__ = summary

    def max_abs(self, phase: str, prefix: str = "") -> float:
        """Largest difference over the rows of ``phase`` whose name starts with ``prefix``."""
        return max((d.max_abs for d in self.diffs if d.phase == phase and d.name.startswith(prefix)),
                   default=0.0)


def add_row(report: NativeTrainingReport, step: int, phase: str, name: str, a: Any, b: Any,
            rtol: float, atol: float, note: str = "", refs: Optional[Tuple[float, ...]] = None
            ) -> Diff:
    """Tolerance ``atol + rtol * max|b|`` per tensor (gradients through a train-mode BatchNorm
    cancel to near 0 in places, where a per-element relative test would flag float32 rounding),
    grown by ``sum(refs)``: the measured distances of the triangle bound (module docstring)."""
    b = np.asarray(b)
    scale = float(np.abs(b).max()) if b.size and np.isfinite(b).all() else 0.0
    slack = float(sum(refs)) if refs else 0.0
    c = compare_arrays(a, b, 0.0, atol + rtol * scale + slack)
    d = Diff(step, phase, name, tuple(np.shape(b)), c["max_abs"], c["max_rel"], c["usage"],
             c["passed"], note or c["note"], ref_torch=refs[0] if refs else None,
             ref_mxnet=refs[1] if refs and len(refs) > 1 else None)
    report.diffs.append(d)
    return d
