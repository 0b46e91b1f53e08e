"""The parity table's row type and the check generated from one row (issue 14's spec-driven test, the
way einops checks each backend against numpy and Keras has ``run_layer_test``).

A :class:`Spec` names an entry (``dl.nn.<name>`` layer, ``dl.ops.<name>`` op or ``dl.losses.<name>``
loss), its constructor/call arguments and its inputs (shape, dtype kind, value kind). :func:`run_spec`
builds the reference (PyTorch's own ``torch.nn.<name>`` / ``torch.nn.functional.<name>``, found by
name through the reference backend's ``testing`` adapter) and the candidates (the dualdl entry on
each backend, MXNet also hybridized) from the same random weights, and compares forward outputs,
input and parameter gradients, the weights after one SGD step (train mode) and outputs and gradients
in eval mode, in float32 and float64. Adding a layer to dualdl is adding its row.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import nn
from .parity import randomize_state
from .runners import Runner, adapter

__all__ = ["In", "Intermittent", "Spec", "layer", "op", "loss", "idx", "pos", "unit", "mask", "run_spec", "RowResult",
           "CANDIDATES", "CHECKS", "TOLERANCE"]

# which checks a row runs (all by default): train = forward + gradients in train mode,
# step = weights and buffers after one SGD step, eval = forward + gradients in eval mode,
# float64 = the same in float64, hybridize = the MXNet candidate also hybridized
CHECKS = frozenset({"train", "step", "eval", "float64", "hybridize"})
# candidate name -> (backend, hybridized)
CANDIDATES: Dict[str, Tuple[str, bool]] = {"torch": ("torch", False), "mxnet": ("mxnet", False),
                                           "mxnet:hybridized": ("mxnet", True)}
# |candidate - reference| <= TOLERANCE[dtype] * max(1, max |reference|), per compared tensor
TOLERANCE = {"float32": 1e-5, "float64": 1e-12}
REFERENCE = "torch"
FLOAT_KINDS = ("float", "positive", "unit", "ties")      # input kinds that can take a gradient
LR = 0.1


@dataclass(frozen=True)
class In:
    """One input: its shape and value kind: ``float`` (standard normal), ``positive`` (0.1 .. 2),
    ``unit`` (0 .. 1, probabilities), ``ties`` (whole numbers -2 .. 2 as floats, many equal),
    ``nonfinite`` (standard normal with NaN, inf and -inf planted), ``int`` (indices in [0, high))
    or ``bool`` (a random mask). ``grad``: ask for its gradient."""
    shape: Tuple[int, ...]
    kind: str = "float"
    high: int = 0
    grad: bool = True

    def draw(self, rng: np.random.Generator, dtype: np.dtype) -> np.ndarray:
        if self.kind == "float":
            return rng.standard_normal(self.shape).astype(dtype)
        if self.kind == "positive":
            return rng.uniform(0.1, 2.0, self.shape).astype(dtype)
        if self.kind == "unit":
            return rng.uniform(0.0, 1.0, self.shape).astype(dtype)
        if self.kind == "ties":
            return rng.integers(-2, 3, self.shape).astype(dtype)
        if self.kind == "nonfinite":
            a = rng.standard_normal(self.shape).astype(dtype)
            flat = a.reshape(-1)
            flat[rng.permutation(flat.size)[:3]] = [np.nan, np.inf, -np.inf][:min(3, flat.size)]
            return a
        if self.kind == "int":
            return rng.integers(0, self.high, self.shape).astype(np.int64)
        if self.kind == "bool":
            return rng.random(self.shape) < 0.5
        raise ValueError(f"unknown input kind {self.kind!r}; expected float, positive, unit, ties, nonfinite, "
                         f"int or bool")


def pos(*shape: int) -> In:
    return In(tuple(shape), "positive")


def unit(*shape: int) -> In:
    return In(tuple(shape), "unit")


def idx(shape: Tuple[int, ...], high: int) -> In:
    return In(tuple(shape), "int", high)


def mask(*shape: int) -> In:
    return In(tuple(shape), "bool")


InputSpec = Union[Tuple[int, ...], In, Sequence[Union[Tuple[int, ...], In]]]


class Intermittent(str):
    """A ``known`` reason for a divergence that depends on memory the framework leaves
    uninitialized (e.g. MKLDNN's max-pool backward reading a workspace eval mode never wrote):
    it is reported where it occurs, and its absence is not a failure."""


@dataclass
class Spec:
    """One row. ``args`` may be a callable ``args(nn) -> tuple`` (given ``torch.nn`` for the
    reference and ``dualdl.nn`` for the candidates) when arguments are modules. ``call(f, *xs)``
    says how an op/loss is applied (default ``f(*xs, *args, **kwargs)``); ``ref`` replaces the
    reference found by name; ``tol``/``tol64`` override the tolerance and need a ``reason``.
    ``known``: ``{"<dtype> <candidate> <mode>": reason}`` for documented divergences (reported,
    not failed; a known divergence that disappears fails, so the entry is removed, unless its
    reason is an :class:`Intermittent`). ``raises``: the
    candidates must refuse these inputs with a ValueError matching this pattern (dualdl's clear
    error where MXNet cannot run), the reference is not run."""
    name: str
    kind: str
    inputs: Tuple[In, ...]
    args: Any = ()
    kwargs: Dict[str, Any] = field(default_factory=dict)
    id: str = ""
    checks: frozenset = CHECKS
    call: Optional[Callable[..., Any]] = None
    ref: Any = None
    tol: Optional[float] = None
    tol64: Optional[float] = None
    reason: str = ""
    known: Dict[str, str] = field(default_factory=dict)
    raises: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("layer", "op", "loss"):
            raise ValueError(f"{self.name}: kind must be layer, op or loss, got {self.kind!r}")
        if (self.tol is not None or self.tol64 is not None) and not self.reason:
            raise ValueError(f"{self.label}: a tolerance override needs a reason")
        unknown = set(self.checks) - CHECKS
        if unknown:
            raise ValueError(f"{self.label}: unknown checks {sorted(unknown)}; expected some of {sorted(CHECKS)}")

    @property
    def label(self) -> str:
        return f"{self.name} {self.id}".strip()

    def tolerance(self, dtype: str) -> float:
        own = self.tol if dtype == "float32" else self.tol64
        return TOLERANCE[dtype] if own is None else own


def _inputs(x: InputSpec) -> Tuple[In, ...]:
    if isinstance(x, In):
        return (x,)
    if isinstance(x, tuple) and all(isinstance(d, int) for d in x):
        return (In(x),)
    return tuple(i if isinstance(i, In) else In(tuple(i)) for i in x)


_ROW_KEYS = ("id", "checks", "call", "ref", "tol", "tol64", "reason", "known", "raises")
# checks by kind when a row names none: ops and losses have no parameters and no modes; losses
# refuse Symbols (a clear error, tested in test_losses.py)
DEFAULT_CHECKS = {"layer": CHECKS, "op": frozenset({"train", "float64", "hybridize"}),
                  "loss": frozenset({"train", "float64"})}


def _row(kind: str, name: str, inputs: InputSpec, args: Any, kwargs: Dict[str, Any]) -> Spec:
    row = {k: kwargs.pop(k) for k in _ROW_KEYS if k in kwargs}
    row["checks"] = frozenset(row.get("checks", DEFAULT_CHECKS[kind]))
    if len(args) == 1 and callable(args[0]):
        args = args[0]
    return Spec(name, kind, _inputs(inputs), args, kwargs, **row)


def layer(name: str, inputs: InputSpec, *args: Any, **kwargs: Any) -> Spec:
    """A layer row: ``layer("Conv2d", (2, 4, 7, 7), 4, 6, 3, stride=2, id="s2")``; keywords other
    than id/checks/call/ref/tol/tol64/reason go to the constructor."""
    return _row("layer", name, inputs, args, kwargs)


def op(name: str, inputs: InputSpec, *args: Any, **kwargs: Any) -> Spec:
    """An op row: ``op("softmax", (2, 3, 4), dim=-1)`` compares ``dl.ops.softmax(x, dim=-1)`` with
    ``torch.nn.functional.softmax(x, dim=-1)``."""
    return _row("op", name, inputs, args, kwargs)


def loss(name: str, inputs: InputSpec, *args: Any, **kwargs: Any) -> Spec:
    """A loss row: ``loss("MSELoss", [(4, 3), (4, 3)], reduction="sum")``; the input gets a
    gradient, the targets (further inputs) none."""
    row = _row("loss", name, inputs, args, kwargs)
    row.inputs = row.inputs[:1] + tuple(replace(i, grad=False) for i in row.inputs[1:])
    return row


# ---- building -------------------------------------------------------------------------------
class _Apply(nn.Module):
    """An op or loss call as a parameterless module, so that ops run where models do (and
    hybridize on MXNet)."""

    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self.fn = fn

    def forward(self, *xs: Any) -> Any:
        return self.fn(*xs)


def _applier(spec: Spec, f: Callable[..., Any]) -> Callable[..., Any]:
    if spec.call is not None:
        return lambda *xs: spec.call(f, *xs)
    return lambda *xs: f(*xs, *spec.args, **spec.kwargs)


def _build_reference(spec: Spec) -> Any:
    impl = adapter(REFERENCE)
    native = spec.ref if spec.ref is not None else impl.native_entry(spec.kind, spec.name.removeprefix("F."))
    if spec.kind == "op":
        return impl.FunctionModule(_applier(spec, native))
    args = spec.args(impl.native_namespace()) if callable(spec.args) else spec.args
    obj = native(*args, **spec.kwargs)
    return impl.FunctionModule(obj) if spec.kind == "loss" else obj


def _build_candidate(spec: Spec, backend: str) -> Any:
    from .. import losses, ops
    from ..backend import _using
    with _using(backend):
        if spec.kind == "layer":
            args = spec.args(nn) if callable(spec.args) else spec.args
            return getattr(nn, spec.name)(*args, **spec.kwargs)
        if spec.kind == "op":
            # "F.<name>": dualdl.nn.functional's function (torch.nn.functional's signature), else dualdl.ops's
            fn = getattr(nn.functional, spec.name[2:]) if spec.name.startswith("F.") else getattr(ops, spec.name)
            return _Apply(_applier(spec, fn))
        obj = getattr(losses, spec.name)(*(spec.args if not callable(spec.args) else spec.args(nn)),
                                         **spec.kwargs)
        return _Apply(obj)


# ---- running --------------------------------------------------------------------------------
@dataclass
class RowResult:
    """Max abs / rel differences to the reference per candidate; ``failures`` lists what is out of
    tolerance (empty when the row passes)."""
    label: str
    dtype: str
    max_abs: Dict[str, float] = field(default_factory=dict)
    max_rel: Dict[str, float] = field(default_factory=dict)
    failures: List[str] = field(default_factory=list)
    known: List[str] = field(default_factory=list)       # divergences the row documents


def _has_params(model: Any) -> bool:
    return any(True for _ in model.named_parameters())


def _sgd(model: Any) -> Any:
    from .. import optim
    return optim.SGD(list(model.parameters()), lr=LR) if _has_params(model) else None


def run_spec(spec: Spec, dtype: str = "float32", seed: int = 0,
             candidates: Sequence[str] = tuple(CANDIDATES)) -> RowResult:
    """Run one row in ``dtype`` against the reference; never raises on a mismatch (see failures)."""
    from ..backend import _using
    from ..state import load_state_dict
    dt = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    tol = spec.tolerance(dtype)
    res = RowResult(spec.label, dtype)
    if spec.raises:
        return _expect_refusal(spec, dt, rng, candidates, res)
    ref_model = _build_reference(spec)
    init = randomize_state(ref_model, rng) if _has_params(ref_model) or spec.kind == "layer" else {}
    init = {k: v.astype(dt) if v.dtype.kind == "f" else v for k, v in init.items()}

    def prepare(backend: str, model: Any) -> Any:
        model = adapter(backend).cast_model(model, dt)
        if init:
            load_state_dict(model, init)
        return model

    ref_model = prepare(REFERENCE, ref_model)
    xs = [i.draw(rng, dt) for i in spec.inputs]
    want = [i.grad and i.kind in FLOAT_KINDS for i in spec.inputs]
    modes = [m for m in ("train", "eval") if m in spec.checks]
    ref_runner = Runner(REFERENCE, ref_model, dt)
    gouts: Dict[str, List[Optional[np.ndarray]]] = {}
    ref_runner.set_mode(False)            # output shapes only: eval mode changes no buffer
    probe = ref_runner.infer(xs)
    for mode in modes:
        gouts[mode] = [rng.standard_normal(o.shape).astype(dt) if o.dtype.kind == "f" else None
                       for o in probe.outputs]
    ref_runs = _steps(ref_runner, spec, xs, want, modes, gouts)
    for cand in candidates:
        backend, hyb = CANDIDATES[cand]
        if hyb and "hybridize" not in spec.checks:
            continue
        try:
            with _using(backend):          # active while it runs: creation ops (eye) create on it
                model = prepare(backend, _build_candidate(spec, backend))
                if hyb:
                    model.hybridize()
                runs = _steps(Runner(backend, model, dt), spec, xs, want, modes, gouts)
        except Exception as e:      # a candidate that cannot run is a measured failure, not a crash
            res.failures.append(f"{cand} {modes[0]}: raised {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            continue
        for mode, (got, ref) in zip(modes, zip(runs, ref_runs)):
            _compare(res, cand, mode, got, ref, tol)
    _sort_known(spec, res)
    return res


def _sort_known(spec: Spec, res: RowResult) -> None:
    """Move the failures a row documents as known into ``res.known``; a documented divergence that
    no longer shows up is a failure (the row's ``known`` entry is stale)."""
    for key, reason in spec.known.items():
        if not key.startswith(res.dtype + " "):
            continue
        hit = [f for f in res.failures if f"{res.dtype} {f}".startswith(key)]
        if not hit and not isinstance(reason, Intermittent):
            res.failures.append(f"known divergence {key!r} ({reason}) no longer occurs: remove it from the row")
        res.known += [f"{f} [{reason}]" for f in hit]
        res.failures = [f for f in res.failures if f not in hit]


def _expect_refusal(spec: Spec, dt: np.dtype, rng: np.random.Generator, candidates: Sequence[str],
                    res: RowResult) -> RowResult:
    import re
    xs = [i.draw(rng, dt) for i in spec.inputs]
    for cand in candidates:
        backend, hyb = CANDIDATES[cand]
        if hyb and "hybridize" not in spec.checks:
            continue
        try:
            model = _build_candidate(spec, backend)
            if hyb:
                model.hybridize()
            Runner(backend, adapter(backend).cast_model(model, dt), dt).infer(xs)
        except ValueError as e:
            if re.search(spec.raises, str(e)):
                res.max_abs[cand] = res.max_rel[cand] = 0.0
                continue
            res.failures.append(f"{cand} refusal: ValueError without {spec.raises!r}: {e}")
        except Exception as e:
            res.failures.append(f"{cand} refusal: {type(e).__name__} instead of dualdl's ValueError: "
                                f"{str(e).splitlines()[0][:200]}")
        else:
            res.failures.append(f"{cand} refusal: accepted the input, expected ValueError {spec.raises!r}")
    _sort_known(spec, res)
    return res


def _steps(runner: Runner, spec: Spec, xs, want, modes, gouts) -> List[Any]:
    out = []
    for mode in modes:
        runner.set_mode(mode == "train")
        opt = _sgd(runner.model) if mode == "train" and "step" in spec.checks else None
        out.append(runner.step(xs, grad_outputs=gouts[mode], grad_inputs=want, optimizer=opt))
    return out


def _compare(res: RowResult, cand: str, mode: str, got: Any, ref: Any, tol: float) -> None:
    pairs: List[Tuple[str, Optional[np.ndarray], Optional[np.ndarray]]] = []
    if len(got.outputs) != len(ref.outputs):
        res.failures.append(f"{cand} {mode}: {len(got.outputs)} outputs, reference {len(ref.outputs)}")
    pairs += [(f"output[{i}]", a, b) for i, (a, b) in enumerate(zip(got.outputs, ref.outputs))]
    pairs += [(f"grad input[{i}]", a, b) for i, (a, b) in enumerate(zip(got.input_grads, ref.input_grads))]
    pairs += [(f"grad {k}", got.grads.get(k), g) for k, g in ref.grads.items()]
    pairs += [(f"after step {k}", got.weights.get(k), w) for k, w in ref.weights.items()]
    for what, a, b in pairs:
        if a is None and b is None:
            continue
        if a is None or b is None:
            if not (np.all((a if b is None else b) == 0)):
                res.failures.append(f"{cand} {mode} {what}: {'no value' if a is None else 'unexpected value'} "
                                    f"on the candidate")
            continue
        b_ = np.asarray(b)
        a_ = np.asarray(a).reshape(b_.shape) if np.size(a) == b_.size else np.asarray(a)
        if a_.shape != b_.shape:
            res.failures.append(f"{cand} {mode} {what}: shape {a_.shape}, reference {b_.shape}")
            continue
        if a_.dtype != b_.dtype:
            res.failures.append(f"{cand} {mode} {what}: dtype {a_.dtype}, reference {b_.dtype}")
            continue
        if b_.dtype.kind not in "fc":
            if not np.array_equal(a_, b_):
                res.failures.append(f"{cand} {mode} {what}: values differ (exact dtype {b_.dtype})")
            res.max_abs.setdefault(cand, 0.0)
            res.max_rel.setdefault(cand, 0.0)
            continue
        fin = np.isfinite(b_)
        if not np.array_equal(fin, np.isfinite(a_)) or not np.array_equal(a_[~fin], b_[~fin]):
            res.failures.append(f"{cand} {mode} {what}: non-finite values differ")
            continue
        if not b_.size or not fin.any():
            continue
        d = np.abs(a_[fin].astype(np.float64) - b_[fin])
        scale = max(1.0, float(np.abs(b_[fin]).max()))
        mabs = float(d.max())
        mrel = mabs / float(np.abs(b_[fin]).max()) if mabs else 0.0     # relative to the largest value
        res.max_abs[cand] = max(res.max_abs.get(cand, 0.0), mabs)
        res.max_rel[cand] = max(res.max_rel.get(cand, 0.0), mrel)
        if mabs > tol * scale:
            res.failures.append(f"{cand} {mode} {what}: max abs {mabs:.2e} > {tol:.0e} x {scale:.3g}")
