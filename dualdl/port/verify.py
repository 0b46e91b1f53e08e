"""Port verification by evidence: rounding or a real mistake?

One threshold cannot separate float32 rounding (1e-5 relative through ResNet-50) from a real
difference (a LayerNorm eps of 1e-5 instead of 1e-12 moves BERT's output by 5e-6). So each check
runs the models in float64 where their ops allow it and decides on that run:

* **float64 on both sides** (torch always; Gluon unless an op is float32-only, e.g. gluonnlp's
  contrib attention on CPU): rounding is ~1e-15, so anything above ``rtol64`` is a difference.
* **float64 on one side**: that side's float64 output is the reference; the other side's float32
  error against it must stay within ``rounding_factor`` x the reference side's own float32
  rounding (measured on this input), and within ``rtol_floor`` when that rounding is tiny.
* **neither**: ``atol + rtol * max|output|`` on float32, as before.

The figures a check reports (``max_abs_diff``, ``tolerance``) are those of the comparison that
decided it; the float32 difference is reported beside them. Positions the inputs mark as padding
are compared apart: a difference only there is a masking/padding difference, not a failure.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from .inputs import Inputs, PortInputError
from .sides import Float64Unavailable, Side

__all__ = ["Check", "Verifier", "RTOL64", "ROUNDING_FACTOR", "RTOL_FLOOR", "rounding_tolerance"]

#: float64 runs see only the float32 rounding of tensors the mapping computes (a folded conv bias
#: ``running_mean - bias`` is stored in float32): 3e-9 relative at the output of VGG-11-bn
RTOL64 = 1e-7
ROUNDING_FACTOR = 8.0    # one side's fp32 error vs the other's measured fp32 rounding
RTOL_FLOOR = 1e-6        # ... never demanded tighter than this relative to the output scale


def rounding_tolerance(rounding: float, scale: float, atol: float = 0.0,
                       factor: float = ROUNDING_FACTOR) -> float:
    """How far a float32 result may sit from the float64 reference of the other framework:
    ``factor`` x that framework's own float32 rounding (its float32 vs float64 result on the same
    input), never demanded tighter than ``RTOL_FLOOR`` of the output's scale."""
    return atol + max(factor * rounding, RTOL_FLOOR * scale)


@dataclass
class Check:
    name: str
    max_abs_diff: float
    max_rel_diff: float
    tolerance: float
    passed: bool
    detail: str = ""
    evidence: str = "float32"
    float32_max_abs_diff: Optional[float] = None
    float32_max_rel_diff: Optional[float] = None
    rounding: Dict[str, float] = field(default_factory=dict)   # side -> fp32 vs fp64 max abs
    padded_max_abs_diff: Optional[float] = None
    sensitive: bool = False     # the reference's own float32 is far from its float64 (a selection)


@dataclass
class _Diff:
    abs: float
    rel: float
    scale: float
    padded: Optional[float] = None
    detail: str = ""


def _valid_mask(shape: Tuple[int, ...], lengths: Optional[np.ndarray]) -> Optional[np.ndarray]:
    """Boolean mask of non-padded positions for a (N, T, ...) or (T, N, ...) output."""
    if lengths is None or len(shape) < 2:
        return None
    n, tmax = len(lengths), int(lengths.max()) if len(lengths) else 0
    if shape[0] == n and shape[1] >= tmax:      # (N, T, ...)
        m = np.arange(shape[1])[None, :] < lengths[:, None]
    elif shape[1] == n and shape[0] >= tmax:    # (T, N, ...)
        m = (np.arange(shape[0])[None, :] < lengths[:, None]).T
    else:
        return None
    return m.reshape(m.shape + (1,) * (len(shape) - 2))


def compare(a: List[np.ndarray], b: List[np.ndarray],
            lengths: Optional[np.ndarray] = None) -> _Diff:
    if len(a) != len(b):
        return _Diff(np.inf, np.inf, 0.0, detail=f"source gave {len(a)} output arrays, target "
                     f"{len(b)}; pass source_forward/target_forward adapters that return "
                     f"comparable outputs")
    mad, scale, padded = 0.0, 0.0, None
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            return _Diff(np.inf, np.inf, 0.0, detail=f"output {i}: source shape {x.shape}, "
                         f"target shape {y.shape}")
        if not x.size:
            continue
        d = np.nan_to_num(np.abs(x.astype(np.float64) - y.astype(np.float64)), nan=np.inf)
        m = _valid_mask(x.shape, lengths)
        if m is not None and not m.all():
            full = np.broadcast_to(m, x.shape)
            padded = max(padded or 0.0, float(d[~full].max()))
            d = d[full]
            scale = max(scale, float(np.abs(x[full]).max()) if full.any() else 0.0)
        else:
            scale = max(scale, float(np.abs(x).max()))
        if d.size:
            mad = max(mad, float(d.max()))
    return _Diff(mad, mad / scale if scale else mad, scale, padded)


def check_outputs(a: List[np.ndarray], b: List[np.ndarray], name: str, rtol: float,
                  atol: float) -> Check:
    """One float32-rule check: ``max|a - b| <= atol + rtol * max|a|`` over all outputs."""
    d = compare(a, b)
    tol = atol + rtol * d.scale
    return Check(name, d.abs, d.rel, tol, d.abs <= tol, d.detail)


class Verifier:
    """Runs both sides on their inputs (float32, and float64 where possible) and decides."""

    def __init__(self, src: Side, dst: Side, s_in: Inputs, t_in: Inputs,
                 s_fwd: Optional[Callable], t_fwd: Optional[Callable], *, rtol: float,
                 atol: float, float64: bool = True, lengths: Optional[np.ndarray] = None,
                 rtol64: float = RTOL64, rounding_factor: float = ROUNDING_FACTOR):
        self.src, self.dst, self.s_in, self.t_in = src, dst, s_in, t_in
        self.s_fwd, self.t_fwd = s_fwd, t_fwd
        self.rtol, self.atol, self.rtol64, self.factor = rtol, atol, rtol64, rounding_factor
        self.lengths = lengths
        # side -> reason float64 cannot be used ("" = not tried yet / usable)
        self.no64: Dict[str, str] = {} if float64 else {"source": "off", "target": "off"}

    def check_all(self, setups: List[Tuple[str, Callable[[], None]]]) -> List[Check]:
        """One check per ``(name, load_values)``; the float32 runs first, then one float64
        conversion per side serving every setup. The last setup's values stay loaded."""
        f32 = []
        for _, apply in setups:
            apply()
            f32.append((self.src.run(self.s_in, self.s_fwd), self.dst.run(self.t_in, self.t_fwd)))
        f64: Dict[str, List[List[np.ndarray]]] = {}
        for who, side, inputs, fwd in (("source", self.src, self.s_in, self.s_fwd),
                                       ("target", self.dst, self.t_in, self.t_fwd)):
            if who in self.no64:
                continue
            outs = []
            try:
                with side.float64():
                    for _, apply in setups:
                        apply()
                        outs.append(side.run(inputs, fwd, float64=True))
                f64[who] = outs
            except (Float64Unavailable, PortInputError) as e:
                lines = [ln.strip() for ln in str(e.__cause__ or e).splitlines() if ln.strip()
                         and not ln.strip().startswith(("File ", "[bt]", "Traceback", "Stack"))]
                self.no64[who] = (lines[-1] if lines else type(e).__name__)[:160]
                if outs:
                    setups[-1][1]()
        return [self._decide(name, s32, t32, f64.get("source", [None] * len(setups))[k],
                             f64.get("target", [None] * len(setups))[k])
                for k, ((name, _), (s32, t32)) in enumerate(zip(setups, f32))]

    def _decide(self, name, s32, t32, s64, t64) -> Check:
        d32 = compare(s32, t32, self.lengths)
        if d32.detail:
            return Check(name, np.inf, np.inf, 0.0, False, d32.detail)
        rounding = {}
        if s64 is not None:
            rounding["source"] = compare(s32, s64, self.lengths).abs
        if t64 is not None:
            rounding["target"] = compare(t32, t64, self.lengths).abs
        if s64 is not None and t64 is not None:
            d = compare(s64, t64, self.lengths)
            tol = 1e-12 + self.rtol64 * d.scale
            evidence = "float64 on both sides"
        elif s64 is not None or t64 is not None:
            ref_side, ref, other = (("source", s64, t32) if s64 is not None else ("target", t64, s32))
            d = compare(ref, other, self.lengths) if ref_side == "source" else compare(other, ref, self.lengths)
            tol = rounding_tolerance(rounding[ref_side], d.scale, self.atol, self.factor)
            evidence = (f"{'target' if ref_side == 'source' else 'source'} float32 against "
                        f"{ref_side} float64 (float64 unavailable on the "
                        f"{'target' if ref_side == 'source' else 'source'}: "
                        f"{self.no64.get('target' if ref_side == 'source' else 'source', '?')})")
        else:
            d = d32
            tol = self.atol + self.rtol * d.scale
            evidence = "float32 only (float64 unavailable: " + "; ".join(
                f"{k}: {v}" for k, v in self.no64.items()) + ")"
        padded = d.padded if d.padded is not None and d.padded > tol else None
        return Check(name, d.abs, d.rel, tol, d.abs <= tol, evidence=evidence,
                     float32_max_abs_diff=d32.abs, float32_max_rel_diff=d32.rel,
                     rounding=rounding, padded_max_abs_diff=padded)


def first_divergent_layer(src: Side, dst: Side, s_in: Inputs, t_in: Inputs, s_fwd, t_fwd,
                          layer_pairs: List[Tuple[str, str]], rel_threshold: float
                          ) -> Optional[Tuple[str, str, float, Optional[float]]]:
    """(source layer, target layer, its output's rel diff, the previous paired layer's) of the
    first paired layer, in execution order, whose output differs by more than ``rel_threshold``."""
    try:
        a = src.capture(s_in, s_fwd, [s for s, _ in layer_pairs])
        b = dst.capture(t_in, t_fwd, [t for _, t in layer_pairs])
    except PortInputError:
        return None
    prev = None
    for s, t in layer_pairs:
        x, y = a.get(s), b.get(t)
        if x is None or y is None:
            continue
        if x.shape != y.shape and x.ndim >= 2 and x.shape[:2] == y.shape[:2][::-1] \
                and x.shape[2:] == y.shape[2:]:
            y = np.swapaxes(y, 0, 1)   # TNC vs NTC
        if x.shape != y.shape or not x.size:
            continue
        scale = float(np.abs(x).max()) or 1.0
        rel = float(np.abs(x - y).max()) / scale
        if rel > rel_threshold:
            return s, t, rel, prev
        prev = rel
    return None
