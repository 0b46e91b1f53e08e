"""Parity reports: per-tensor differences, the first divergent layer, and a readable table.

Tolerance rule (``torch.testing``/``numpy.allclose``): ``|a - b| <= atol + rtol * |b|`` element by
element, ``b`` being the torch value (torch's semantics are dualdl's contract). ``max_rel`` is
``|a - b| / |b|`` with ``|b|`` floored at ``atol`` (so exact zeros do not turn rounding into inf);
``usage`` is ``max(|a - b| / (atol + rtol * |b|))``: the share of the tolerance used (pass <= 1).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

__all__ = ["Diff", "LayerDiff", "ParityReport", "ParityError", "compare_arrays"]


@dataclass
class Diff:
    """One compared tensor: ``b`` is torch's value, ``a`` MXNet's."""
    step: int
    phase: str                  # "forward", "backward" or "update"
    name: str                   # "output[0]", "loss", "grad fc.weight", "param fc.weight", ...
    shape: tuple
    max_abs: float
    max_rel: float
    usage: float                # max |a-b| / (atol + rtol |b|); passes when <= 1
    passed: bool
    note: str = ""
    ref_torch: Optional[float] = None     # max abs distance of torch fp32 to the float64 reference
    ref_mxnet: Optional[float] = None     # max abs distance of MXNet fp32 to the float64 reference


@dataclass
class LayerDiff:
    """One layer call seen on both backends (per-layer capture, execution order)."""
    name: str
    call: int
    torch_type: str
    mxnet_type: str
    input_max_abs: float
    output_max_abs: float
    output_max_rel: float
    usage: float
    passed: bool
    note: str = ""
    ref_torch: Optional[float] = None
    ref_mxnet: Optional[float] = None
    phase: str = "forward"      # "backward": the layer replayed alone with torch's output gradients

    @property
    def label(self) -> str:
        return self.name + (f" (call {self.call + 1})" if self.call else "")


class ParityError(AssertionError):
    """Two backends disagree beyond tolerance; ``report`` holds the measurements."""

    def __init__(self, report: "ParityReport"):
        super().__init__(str(report))
        self.report = report


def _floats(a: Any) -> np.ndarray:
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind in "fiub" else a


def compare_arrays(a: Any, b: Any, rtol: float, atol: float) -> Dict[str, Any]:
    """Compare ``a`` (MXNet) with ``b`` (torch): max abs, max rel, tolerance usage, pass, note.
    Shapes must match; NaN/inf must sit at the same places with the same values."""
    a, b = _floats(a), _floats(b)
    if a.shape != b.shape:
        return dict(max_abs=math.inf, max_rel=math.inf, usage=math.inf, passed=False,
                    note=f"shape {a.shape} (mxnet) vs {b.shape} (torch)")
    if a.size == 0:
        return dict(max_abs=0.0, max_rel=0.0, usage=0.0, passed=True, note="")
    fa, fb = np.isfinite(a), np.isfinite(b)
    note = ""
    nf = ~fa & ~fb
    bad_nonfinite = bool(np.any(fa != fb)) or not bool(
        np.all((a[nf] == b[nf]) | (np.isnan(a[nf]) & np.isnan(b[nf]))))
    if not np.all(fa & fb):
        n_a, n_b = int((~fa).sum()), int((~fb).sum())
        note = f"non-finite: {n_a} (mxnet), {n_b} (torch)"
    both = fa & fb
    d = np.abs(a[both] - b[both])
    ab = np.abs(b[both])
    max_abs = float(d.max()) if d.size else 0.0
    max_rel = float((d / np.maximum(ab, max(atol, 1e-12))).max()) if d.size else 0.0
    denom = atol + rtol * ab
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(d == 0, 0.0, d / np.where(denom > 0, denom, 1e-300))
    usage = float(ratio.max()) if d.size else 0.0
    passed = usage <= 1.0 and not bad_nonfinite
    if bad_nonfinite:
        usage = max_abs = math.inf
    return dict(max_abs=max_abs, max_rel=max_rel, usage=usage, passed=passed, note=note)


def max_abs(a: Any, b: Any) -> float:
    """Max abs difference (inf for a shape mismatch, NaN anywhere counts as inf)."""
    a, b = _floats(a), _floats(b)
    if a.shape != b.shape:
        return math.inf
    if a.size == 0:
        return 0.0
    d = np.abs(a - b)
    return math.inf if np.isnan(d).any() else float(d.max())


def _fmt(v: Optional[float]) -> str:
    if v is None:
        return "-"
    if math.isinf(v):
        return "inf"
    return f"{v:.2e}"


@dataclass
class ParityReport:
    """What :func:`dualdl.testing.check_parity` measured. ``passed`` is False when any tensor is
    outside tolerance; ``first_failure`` is the earliest such tensor; ``first_divergent_layer``
    the earliest layer (execution order) whose output differs when its inputs agree."""
    model: str
    rtol: float
    atol: float
    steps: int
    train: bool
    optimizer: str
    loss: str
    diffs: List[Diff] = field(default_factory=list)
    layers: List[LayerDiff] = field(default_factory=list)
    backward_layers: List[LayerDiff] = field(default_factory=list)
    first_divergent_layer: Optional[LayerDiff] = None
    float64_reference: bool = False
    notes: List[str] = field(default_factory=list)

    # ---- verdicts ------------------------------------------------------------------------------
    @property
    def passed(self) -> bool:
        return all(d.passed for d in self.diffs)

    @property
    def failures(self) -> List[Diff]:
        return [d for d in self.diffs if not d.passed]

    @property
    def first_failure(self) -> Optional[Diff]:
        f = self.failures
        return f[0] if f else None

    def max_abs(self, prefix: str = "") -> float:
        """Largest max-abs difference over tensors whose name starts with ``prefix``."""
        vals = [d.max_abs for d in self.diffs if d.name.startswith(prefix)]
        return max(vals) if vals else 0.0

    def max_rel(self, prefix: str = "") -> float:
        vals = [d.max_rel for d in self.diffs if d.name.startswith(prefix)]
        return max(vals) if vals else 0.0

    def diagnosis(self) -> str:
        """Which side is wrong, from the float64 reference (torch build in float64)."""
        if self.passed:
            return "parity holds within tolerance"
        if not self.float64_reference:
            return "run with float64_reference=True to tell fp32 rounding from a real difference"
        if self.first_divergent_layer is not None and self.first_divergent_layer.ref_torch is not None:
            d = self.first_divergent_layer
            return f"{d.label}: " + _diagnose(d.ref_torch, d.ref_mxnet)
        measured = [d for d in self.failures if d.ref_torch is not None and d.ref_mxnet is not None]
        if not measured:
            return "no float64 measurement for the failing tensors"
        # a real difference shows as one side far from float64 while the other is close; report the
        # first such tensor, else the first failure (rounding)
        one_sided = [d for d in measured if not _diagnose(d.ref_torch, d.ref_mxnet).startswith("both")]
        d = one_sided[0] if one_sided else measured[0]
        return f"step {d.step} {d.name}: " + _diagnose(d.ref_torch, d.ref_mxnet)

    # ---- rendering -----------------------------------------------------------------------------
    def summary(self) -> str:
        status = "PASS" if self.passed else "FAIL"
        parts = [f"dualdl parity {status}: {self.model} (torch vs mxnet), train={self.train}, "
                 f"steps={self.steps}, optimizer={self.optimizer}, loss={self.loss}, "
                 f"rtol={self.rtol:g}, atol={self.atol:g}"]
        for kind in ("output", "loss", "grad", "param", "buffer"):
            vals = [d for d in self.diffs if d.name.startswith(kind)]
            if vals:
                parts.append(f"  max abs {kind + ':':8s} {_fmt(max(v.max_abs for v in vals))}   "
                             f"max rel {_fmt(max(v.max_rel for v in vals))}")
        f = self.first_failure
        if f is not None:
            use = f" ({f.usage:.3g}x the tolerance)" if math.isfinite(f.usage) else ""
            parts.append(f"  first failure: step {f.step} {f.phase} {f.name}: max abs {_fmt(f.max_abs)}"
                         f"{use}{': ' + f.note if f.note else ''}")
        fl = self.first_divergent_layer
        if fl is not None and fl.phase == "forward":
            parts.append(f"  first divergent layer: {fl.label} [torch {fl.torch_type} / mxnet {fl.mxnet_type}]: "
                         f"inputs max abs {_fmt(fl.input_max_abs)}, output max abs "
                         f"{_fmt(fl.output_max_abs)}{' ' + fl.note if fl.note else ''}")
        elif fl is not None:
            parts.append(f"  first divergent layer: {fl.label} [torch {fl.torch_type} / mxnet {fl.mxnet_type}] "
                         f"in backward: every layer's forward agrees, but replayed alone with the same inputs "
                         f"and output gradients its gradients differ by {_fmt(fl.output_max_abs)}"
                         f"{' (' + fl.note + ')' if fl.note else ''}")
        elif not self.passed and self.layers:
            parts.append("  first divergent layer: none (every layer's forward and backward agree at the initial "
                         "weights; the difference arises in the loss, a later step or the optimizer)")
        if not self.passed or self.float64_reference:
            parts.append("  diagnosis: " + self.diagnosis())
        parts += ["  note: " + n for n in self.notes]
        return "\n".join(parts)

    def table(self, max_rows: int = 80) -> str:
        """Every compared tensor (failures first if there are more than ``max_rows``)."""
        ref = self.float64_reference
        head = f"{'step':>4s} {'phase':8s} {'tensor':40s} {'shape':18s} {'max abs':>9s} {'max rel':>9s} {'tol use':>8s}"
        if ref:
            head += f" {'torch-f64':>9s} {'mx-f64':>9s}"
        head += "  ok"
        rows = self.diffs
        omitted = 0
        if len(rows) > max_rows:
            keep = set(id(d) for d in self.failures[:max_rows // 2])
            keep |= set(id(d) for d in sorted(rows, key=lambda d: -d.usage)[:max_rows - len(keep)])
            omitted = len(rows) - len(keep)
            rows = [d for d in rows if id(d) in keep]
        lines = [head, "-" * len(head)]
        for d in rows:
            line = (f"{d.step:4d} {d.phase:8s} {d.name[:40]:40s} {str(d.shape)[:18]:18s} {_fmt(d.max_abs):>9s} "
                    f"{_fmt(d.max_rel):>9s} {d.usage:8.3g}")
            if ref:
                line += f" {_fmt(d.ref_torch):>9s} {_fmt(d.ref_mxnet):>9s}"
            line += "  " + ("ok" if d.passed else "FAIL") + (f"  {d.note}" if d.note else "")
            lines.append(line)
        if omitted:
            lines.append(f"... {omitted} passing rows with the smallest tolerance use left out")
        return "\n".join(lines)

    def layer_table(self, context: int = 6) -> str:
        """Layer outputs in execution order, up to a few layers past the first divergent one (or the
        backward replay, in backward order, when the divergence is in a backward pass)."""
        fl = self.first_divergent_layer
        layers = self.backward_layers if fl is not None and fl.phase == "backward" else self.layers
        if not layers:
            return ""
        idx = layers.index(fl) if fl in layers else len(layers) - 1
        lo, hi = max(0, idx - context), min(len(layers), idx + 3)
        ref = self.float64_reference
        head = f"{'layer':34s} {'torch / mxnet type':34s} {'in abs':>9s} {'out abs':>9s} {'tol use':>8s}"
        if ref:
            head += f" {'torch-f64':>9s} {'mx-f64':>9s}"
        title = ("per-layer backward replay (backward order; 'out' = input and parameter gradients):"
                 if layers is self.backward_layers else "per-layer outputs (execution order):")
        lines = [title, head]
        if lo:
            lines.append(f"... {lo} earlier layers agree")
        for l in layers[lo:hi]:
            types = l.torch_type if l.torch_type == l.mxnet_type else f"{l.torch_type} / {l.mxnet_type}"
            line = (f"{l.label[:34]:34s} {types[:34]:34s} {_fmt(l.input_max_abs):>9s} {_fmt(l.output_max_abs):>9s} "
                    f"{l.usage:8.3g}")
            if ref:
                line += f" {_fmt(l.ref_torch):>9s} {_fmt(l.ref_mxnet):>9s}"
            if l is self.first_divergent_layer:
                line += "  <- first divergent"
            lines.append(line)
        if hi < len(layers):
            lines.append(f"... {len(layers) - hi} later layers")
        return "\n".join(lines)

    def __str__(self) -> str:
        out = [self.summary(), "", self.table()]
        if self.layers and not self.passed:
            out += ["", self.layer_table()]
        return "\n".join(out)

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["passed"] = self.passed
        d["diagnosis"] = self.diagnosis()
        return d

    def to_json(self) -> str:
        def clean(o):
            if isinstance(o, float) and not math.isfinite(o):
                return str(o)
            if isinstance(o, dict):
                return {k: clean(v) for k, v in o.items()}
            if isinstance(o, (list, tuple)):
                return [clean(v) for v in o]
            return o
        return json.dumps(clean(self.to_dict()), indent=2)


def _diagnose(ref_torch: float, ref_mxnet: float) -> str:
    small = 1e-30
    if ref_mxnet > 10 * ref_torch + small:
        return (f"mxnet is {ref_mxnet:.2e} from the float64 reference, torch {ref_torch:.2e}: "
                f"a real difference on the mxnet side")
    if ref_torch > 10 * ref_mxnet + small:
        return (f"torch is {ref_torch:.2e} from the float64 reference, mxnet {ref_mxnet:.2e}: "
                f"the torch fp32 run differs from its own float64 run (a real difference on the torch side)")
    return (f"both backends are about as far from the float64 reference (torch {ref_torch:.2e}, mxnet "
            f"{ref_mxnet:.2e}) as from each other: fp32 rounding, not a mistake; loosen rtol/atol")
