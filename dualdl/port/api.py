"""Port the weights of a native Gluon block onto a native PyTorch module of the same architecture
(or back), with proof: both models run on sample inputs and the output difference is reported."""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from .mapping import Mapping
from .pairing import Pair, pair_slots
from .rules import DEFAULT_RULES, Rule
from .sides import make_side
from .slots import RANDOMISED_ROLES, Slot

__all__ = ["PortReport", "port", "port_gluon_to_torch", "port_torch_to_gluon"]

_HIDDEN = ("something no parameter reveals differs: activation flavour (GELU erf vs tanh, "
           "RNN relu vs tanh), a norm eps (BERT LayerNorm uses 1e-12), stride/padding/pooling "
           "placement or ceil_mode, a layout (NTC vs TNC), an op order (pre- vs post-norm) - "
           "or two same-shaped tensors were paired in the wrong execution order (see report.pairs)")


@dataclass
class Check:
    name: str
    max_abs_diff: float
    max_rel_diff: float
    tolerance: float
    passed: bool
    detail: str = ""


@dataclass
class PortReport:
    """What paired, what did not, which rules acted, and how close the outputs are."""
    source_framework: str
    target_framework: str
    mapping: Mapping
    pairs: List[Pair]
    unpaired_source: List[Slot]
    unpaired_target: List[Slot]
    notes: List[str] = field(default_factory=list)
    checks: List[Check] = field(default_factory=list)
    loaded: bool = False
    message: str = ""
    conflicts: List[str] = field(default_factory=list)

    @property
    def unpaired(self) -> Dict[str, List[str]]:
        return {"source": [s.label for s in self.unpaired_source],
                "target": [s.label for s in self.unpaired_target]}

    @property
    def complete(self) -> bool:
        return not self.unpaired_source and not self.unpaired_target and not self.conflicts

    @property
    def verified(self) -> bool:
        return bool(self.checks)

    @property
    def ok(self) -> bool:
        """Every tensor paired, loaded, and (if verified) every check within tolerance."""
        return self.complete and self.loaded and all(c.passed for c in self.checks)

    @property
    def max_abs_diff(self) -> Optional[float]:
        return max((c.max_abs_diff for c in self.checks), default=None)

    @property
    def max_rel_diff(self) -> Optional[float]:
        return max((c.max_rel_diff for c in self.checks), default=None)

    def to_dict(self) -> Dict[str, Any]:
        def slot(s):
            return {"key": s.label, "layer": s.layer, "role": s.role, "shape": list(s.shape),
                    "layer_ran": s.ran}
        return {
            "source_framework": self.source_framework, "target_framework": self.target_framework,
            "ok": self.ok, "loaded": self.loaded, "complete": self.complete,
            "message": self.message, "conflicts": self.conflicts, "max_abs_diff": self.max_abs_diff,
            "max_rel_diff": self.max_rel_diff, "checks": [vars(c) for c in self.checks],
            "notes": self.notes,
            "pairs": [{"source": p.source.label, "target": p.target.label, "role": p.target.role,
                       "shape": list(p.target.shape), "how": p.how} for p in self.pairs],
            "unpaired": {"source": [slot(s) for s in self.unpaired_source],
                         "target": [slot(s) for s in self.unpaired_target]},
            "mapping": self.mapping.to_dict(),
        }

    def save(self, path) -> None:
        """Write the report (with its mapping, reusable by ``Mapping.load``) as JSON."""
        from ..formats import atomic_write
        data = json.dumps(self.to_dict(), indent=1, default=float).encode()
        atomic_write(path, lambda f: f.write(data))

    def summary(self) -> str:
        lines = [f"port {self.source_framework} -> {self.target_framework}: "
                 f"{'OK' if self.ok else 'NOT OK'} - {self.message}",
                 f"  paired {len(self.pairs)} tensors into {len(self.mapping.entries)} target tensors; "
                 f"unpaired: {len(self.unpaired_source)} source, {len(self.unpaired_target)} target"]
        for c in self.checks:
            lines.append(f"  check [{c.name}]: max abs diff {c.max_abs_diff:.3g}, max rel diff "
                         f"{c.max_rel_diff:.3g}, tolerance {c.tolerance:.3g}: "
                         f"{'passed' if c.passed else 'FAILED'}{' - ' + c.detail if c.detail else ''}")
        lines += [f"  CONFLICT: {c}" for c in self.conflicts]
        for s in self.unpaired_source:
            lines.append(f"  unpaired source {s.label} role={s.role} shape={s.shape}"
                         f"{'' if s.ran else ' (its layer never ran)'}")
        for s in self.unpaired_target:
            lines.append(f"  unpaired target {s.label} role={s.role} shape={s.shape}"
                         f"{'' if s.ran else ' (its layer never ran)'}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    __str__ = summary


def _as_inputs(x: Any) -> tuple:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list) and x and not np.isscalar(x[0]) and not isinstance(x[0], list):
        return tuple(x)
    return (x,)


def _compare(a: List[np.ndarray], b: List[np.ndarray], name: str, rtol: float, atol: float) -> Check:
    if len(a) != len(b):
        return Check(name, float("inf"), float("inf"), 0.0, False,
                     f"source gave {len(a)} output arrays, target {len(b)}; pass source_forward/"
                     f"target_forward adapters that return comparable outputs")
    mad, scale = 0.0, 0.0
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            return Check(name, float("inf"), float("inf"), 0.0, False,
                         f"output {i}: source shape {x.shape}, target shape {y.shape}")
        if x.size:
            d = np.abs(x.astype(np.float64) - y.astype(np.float64))
            mad = max(mad, float(np.nan_to_num(d, nan=np.inf).max()))
            scale = max(scale, float(np.abs(x).max()))
    tol = atol + rtol * scale
    rel = mad / scale if scale else mad
    return Check(name, mad, rel, tol, mad <= tol)


def _randomised(src_slots: List[Slot], state: Dict[str, np.ndarray], seed: int) -> Dict[str, np.ndarray]:
    """Norm scales/shifts, biases and running stats replaced by random values (tied keys get the
    same value), so that a swapped LayerNorm or bias cannot hide behind 1/0 initial values."""
    rng = np.random.default_rng(seed)
    by_ident: Dict[int, np.ndarray] = {}
    out = {}
    for s in src_slots:
        if s.role not in RANDOMISED_ROLES or s.constant is not None or s.key in out:
            continue
        if s.ident not in by_ident:
            shape, dt = state[s.key].shape, state[s.key].dtype
            if s.role in ("scale", "running_var"):
                v = rng.uniform(0.5, 1.5, shape)
            else:
                v = rng.uniform(-0.5, 0.5, shape)
            by_ident[s.ident] = v.astype(dt)
        out[s.key] = by_ident[s.ident]
    return out


def port(source: Any, target: Any, sample_inputs: Any, rules: Optional[Sequence[Rule]] = None, *,
         verify: bool = True, allow_partial: bool = False, default_rules: bool = True,
         target_inputs: Any = None, source_forward: Optional[Callable] = None,
         target_forward: Optional[Callable] = None, rtol: float = 1e-5, atol: float = 1e-7,
         seed: int = 0) -> PortReport:
    """Map ``source``'s tensors onto ``target`` (a Gluon block and a torch module, either way).

    ``sample_inputs``: one array or a tuple of positional inputs (numpy; converted per framework,
    integer inputs become int64 for torch); ``target_inputs`` if the target needs different ones.
    ``source_forward(model, *inputs)`` / ``target_forward`` adapt calls and outputs (layouts,
    states). Nothing is loaded into ``target`` unless every tensor paired (or ``allow_partial``)
    and, with ``verify``, the outputs agree within ``atol + rtol * max|output|``; a failed check
    restores the target's previous values.
    """
    src, dst = make_side(source), make_side(target)
    inputs = _as_inputs(sample_inputs)
    t_inputs = inputs if target_inputs is None else _as_inputs(target_inputs)
    all_rules = list(DEFAULT_RULES if default_rules else []) + list(rules or [])
    src_slots = src.trace(inputs, source_forward)
    dst_slots = dst.trace(t_inputs, target_forward)
    res = pair_slots(src_slots, dst_slots, all_rules)
    src_state = src.state()
    unpaired_src = list(res.unpaired_source)
    for s in res.dropped_source:  # a Gluon center=False beta is droppable only if it is 0
        if s.constant == 0.0 and np.any(src_state[s.key] != 0):
            unpaired_src.append(s)
    notes = src.notes + dst.notes + res.notes
    notes += [f"{'source' if side is src_slots else 'target'} layer {s.layer or '<root>'} never "
              f"ran on the sample input; its tensors were placed after their parent's"
              for side in (src_slots, dst_slots) for s in side if not s.ran and s.name == _first(side, s)]
    mapping = Mapping(res.entries, src.framework, dst.framework, list(res.notes))
    report = PortReport(src.framework, dst.framework, mapping, res.pairs, unpaired_src,
                        res.unpaired_target, notes)
    report.conflicts = _tie_conflicts(dst_slots, mapping, src_state)
    if report.conflicts:
        report.message = "nothing loaded: " + "; ".join(report.conflicts)
        return report
    if not report.complete and not allow_partial:
        report.message = (f"nothing loaded: {len(unpaired_src)} source and "
                          f"{len(res.unpaired_target)} target tensors did not pair "
                          f"(pass allow_partial=True to load the rest)")
        return report
    if not verify:
        dst.load(mapping.apply(src_state))
        report.loaded = True
        report.message = "loaded without verification"
        return report

    dst_before = dst.state()
    rand = _randomised(src_slots, src_state, seed)
    try:
        src.load(rand)
        full = dict(src_state, **rand)
        dst.load(mapping.apply(full))
        report.checks.append(_compare(src.run(inputs, source_forward),
                                      dst.run(t_inputs, target_forward),
                                      "randomised norms/biases", rtol, atol))
    finally:
        src.load({k: src_state[k] for k in rand})
    dst.load(mapping.apply(src_state))
    report.checks.append(_compare(src.run(inputs, source_forward), dst.run(t_inputs, target_forward),
                                  "actual weights", rtol, atol))
    if all(c.passed for c in report.checks):
        report.loaded = True
        report.message = (f"outputs agree: max abs diff {report.max_abs_diff:.3g} "
                          f"(max rel {report.max_rel_diff:.3g})")
        if not report.complete:
            report.message += " (partial port)"
        return report
    dst.load(dst_before)
    failed = [c for c in report.checks if not c.passed]
    if any(c.detail for c in failed):
        report.message = "outputs not comparable: " + failed[0].detail + "; target left unchanged"
    elif report.checks[-1].passed:
        report.message = (f"outputs differ only with randomised norm scales/shifts and biases "
                          f"(max abs diff {report.max_abs_diff:.3g}): a norm layer or bias is paired "
                          f"with the wrong tensor (two same-shaped layers run in a different order in the two "
                          f"models: see report.pairs), or a norm eps / op order differs; target left "
                          f"unchanged")
    else:
        report.message = (f"outputs differ by {report.max_abs_diff:.3g} (tolerance "
                          f"{failed[0].tolerance:.3g}) although the tensors paired: {_HIDDEN}; "
                          f"target left unchanged")
    warnings.warn("port verification failed: " + report.message, stacklevel=2)
    return report


def _tie_conflicts(dst_slots: List[Slot], mapping: Mapping, state: Dict[str, np.ndarray]) -> List[str]:
    """A tensor the target ties under two names must receive one value from the source."""
    groups: Dict[int, List[str]] = {}
    for s in dst_slots:
        if s.part is None and s.key not in groups.get(s.ident, []):
            groups.setdefault(s.ident, []).append(s.key)
    entries = {e.target: e for e in mapping.entries}
    out = []
    for keys in groups.values():
        keys = [k for k in keys if k in entries]
        if len(keys) < 2:
            continue
        vals = [entries[k].compute(state) for k in keys]
        for k, v in zip(keys[1:], vals[1:]):
            if v.shape != vals[0].shape or not np.array_equal(v, vals[0]):
                d = float(np.abs(v.astype(np.float64) - vals[0]).max()) if v.shape == vals[0].shape else float("inf")
                out.append(f"the target ties {keys[0]} and {k} (one tensor) but the source gives "
                           f"them different values (max diff {d:.3g}): the source does not tie them")
    return out


def _first(side: List[Slot], s: Slot) -> str:
    return next(o.name for o in side if o.layer == s.layer)


def port_gluon_to_torch(gluon_block: Any, torch_module: Any, sample_inputs: Any,
                        rules: Optional[Sequence[Rule]] = None, **kwargs) -> PortReport:
    """Port a Gluon block's weights onto a torch module of the same architecture (see :func:`port`)."""
    return port(gluon_block, torch_module, sample_inputs, rules, **kwargs)


def port_torch_to_gluon(torch_module: Any, gluon_block: Any, sample_inputs: Any,
                        rules: Optional[Sequence[Rule]] = None, **kwargs) -> PortReport:
    """Port a torch module's weights onto a Gluon block of the same architecture (see :func:`port`)."""
    return port(torch_module, gluon_block, sample_inputs, rules, **kwargs)
