"""Runs a real model file's unmodified torch original and its write-once twin (tests/realmodels/)
from the same weights and compares them: outputs, input and parameter gradients, one step of the
original's optimizer and a few training steps, on torch, MXNet eager and MXNet hybridized.

Float32 verdicts are judged by measured rounding: each side's float32 result is compared with its
own float64 result, and a difference between the two float32 runs within a few times the larger
of those distances is rounding (a deep BatchNorm net at batch 2 is ill-conditioned: both
frameworks' float32 depart from float64 by as much as they depart from each other).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

import dualdl as dl

HERE = os.path.dirname(os.path.abspath(__file__))
CANDIDATES = ("torch", "mxnet", "mxnet-hybridized")


def load(kind: str, name: str):
    """``tests/realmodels/<kind>/<name>.py`` as a module (kind: originals or twins)."""
    path = os.path.join(HERE, kind, name + ".py")
    spec = importlib.util.spec_from_file_location(f"realmodels_{kind}_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[spec.name] = mod         # the last one loaded (a case's loss may call the file's own)
    return mod


class FixedNoise:
    """Stands in for a model file's ``torch`` (original) or ``dl`` (twin) namespace: ``randn_like``
    returns the next of one numpy sequence of standard normal draws, the same on both frameworks
    (each framework's own generator draws other numbers); every other name is the namespace's."""

    def __init__(self, namespace: Any, backend: str, seed: int = 7) -> None:
        self._ns, self._backend, self._rng = namespace, backend, np.random.RandomState(seed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ns, name)

    def randn_like(self, t: Any) -> Any:
        like = dl.to_numpy(t)
        return dl.from_numpy(self._rng.randn(*like.shape).astype(like.dtype), backend=self._backend)


@dataclass
class Case:
    """One model of a file: ``build(module)`` makes it (the original's or the twin's classes, the
    same call), ``inputs(rng)`` its numpy inputs (floats in float64, cast per run), ``loss(F, out,
    inputs)`` the training loss written with ``F`` (torch.nn.functional or dualdl.nn.functional:
    the same names), ``optimizer`` the original script's (name, keywords) in torch.optim."""
    file: str
    build: Callable[[Any], Any]
    inputs: Callable[[np.random.RandomState], Tuple[np.ndarray, ...]]
    loss: Callable[[Any, Any, tuple], Any]
    optimizer: Tuple[str, Dict[str, Any]]
    hybridizable: bool = True
    noise: bool = False          # the forward draws noise (randn_like): fixed draws, see FixedNoise
    steps: int = 3
    clip: Optional[float] = None
    call: Callable[[Any, tuple], Any] = field(default=lambda net, xs: net(xs[0]))


def _flat(out: Any) -> List[Any]:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [] if out is None else [out]


def _zero_dropout(net: Any) -> None:
    """Dropout off on every Dropout child (``p``) and attention (a float ``dropout``): the two
    frameworks draw different masks (and one torch model built after another draws from another
    point of the stream)."""
    for m in net.modules():
        if "Dropout" in type(m).__name__ and hasattr(m, "p"):
            m.p = 0.0
        if isinstance(getattr(m, "dropout", None), float):
            object.__setattr__(m, "dropout", 0.0)


def _native_inputs(xs: tuple, backend: str, dtype: str) -> list:
    out = []
    for x in xs:
        if isinstance(x, tuple):
            out.append(tuple(_native_inputs(x, backend, dtype)))
            continue
        a = x.astype(dtype) if x.dtype.kind == "f" else x
        out.append(dl.from_numpy(a, backend=backend))
    return out


def _attach(xs: list, backend: str) -> list:
    """The float inputs whose gradients are compared, marked for gradients."""
    marked = []
    for x in xs:
        if isinstance(x, tuple) or np.dtype(dl.to_numpy(x).dtype).kind != "f":
            continue
        if backend == "torch":
            x.requires_grad_(True)
        else:
            x.attach_grad()
        marked.append(x)
    return marked


def _grad(t: Any, backend: str) -> Optional[np.ndarray]:
    g = t.grad if backend == "torch" else (t.grad() if callable(t.grad) else t.grad)
    return None if g is None else dl.to_numpy(g)


def _state(net: Any) -> Dict[str, np.ndarray]:
    return {k: dl.to_numpy(v).astype("float64") for k, v in dl.state_dict(net).items()}


def prepare(case: Case, candidate: str, dtype: str, seed: int = 0, fixed_noise: bool = True):
    """``(net, F, optimizer, backend)`` for ``candidate`` ("original": the torch original; "torch",
    "mxnet", "mxnet-hybridized": the twin), built from the original's weights at ``seed`` in
    ``dtype``, dropout off, in train mode. A case with ``noise`` draws from :class:`FixedNoise`
    (``fixed_noise``) or the framework's generator (seeded by the caller)."""
    import torch
    backend = "torch" if candidate in ("original", "torch") else "mxnet"
    torch.manual_seed(seed)
    reference = case.build(load("originals", case.file))        # the weights every run starts from
    mod = sys.modules[f"realmodels_originals_{case.file}"] if candidate == "original" else load("twins", case.file)
    if case.noise and fixed_noise:
        name = "torch" if candidate == "original" else "dl"
        setattr(mod, name, FixedNoise(getattr(mod, name), backend))
    state = {k: v.detach().numpy().copy() for k, v in reference.state_dict().items()}
    with dl.use(backend):
        net = reference if candidate == "original" else case.build(mod)
        net = net.double() if dtype == "float64" else net.float()
        dl.load_state_dict(net, state)
        _zero_dropout(net)
        net.train()
        if candidate == "mxnet-hybridized":
            net.hybridize()
    F = torch.nn.functional if candidate == "original" else dl.nn.functional
    optim = torch.optim if candidate == "original" else dl.optim
    return net, F, getattr(optim, case.optimizer[0])(net.parameters(), **case.optimizer[1]), backend


def run(case: Case, candidate: str, dtype: str, seed: int = 0, fixed_noise: bool = True) -> Dict[str, Any]:
    """Everything compared, as float64 numpy arrays: ``out``, ``xgrad``, ``grad`` (by name),
    ``step`` (state after one step) and ``train`` (state and losses after ``case.steps`` steps);
    see :func:`prepare` for ``candidate``; noise is seeded with ``dl.seed(seed)``."""
    import torch
    net, F, opt, backend = prepare(case, candidate, dtype, seed, fixed_noise)
    with dl.use(backend):
        rng = np.random.RandomState(seed + 1)
        dl.seed(seed)
        result: Dict[str, Any] = {"losses": []}
        for step in range(1 + case.steps):
            xs = _native_inputs(case.inputs(rng), backend, dtype)
            marked = _attach(xs, backend) if step == 0 else []
            opt.zero_grad()
            with dl.record(backend=backend):
                out = case.call(net, xs)
                loss = case.loss(F, out, xs)
            dl.backward(loss)
            result["losses"].append(float(dl.item(loss)))
            if step == 0:
                result["out"] = [dl.to_numpy(o).astype("float64") for o in _flat(out)]
                result["xgrad"] = [_grad(x, backend) for x in marked]
                result["grad"] = {k: _grad(p, backend) for k, p in net.named_parameters()}
            if case.clip is not None:
                (torch.nn.utils.clip_grad_norm_ if candidate == "original" else dl.optim.clip_grad_norm_)(
                    list(net.parameters()), case.clip)
            opt.step()
            if step == 0:
                result["step"] = _state(net)
        result["train"] = _state(net)
    return result


def _leaves(r: Dict[str, Any]) -> Dict[str, np.ndarray]:
    """Every compared array of a run, by a stable name."""
    out = {f"out{i}": a for i, a in enumerate(r["out"])}
    out.update({f"xgrad{i}": a for i, a in enumerate(r["xgrad"]) if a is not None})
    out.update({f"grad:{k}": a for k, a in r["grad"].items() if a is not None})
    out.update({f"step:{k}": a for k, a in r["step"].items()})
    out.update({f"train:{k}": a for k, a in r["train"].items()})
    out["losses"] = np.array(r["losses"])
    return out


def _dist(a: np.ndarray, b: np.ndarray, floor: float) -> float:
    """Largest difference relative to the scale of ``b`` (at least ``floor``; 0 when empty)."""
    if a.size == 0:
        return 0.0
    return float(np.abs(a - b).max() / max(np.abs(b).max(), floor, 1e-300))


def compare(ref: Dict[str, Any], cand: Dict[str, Any]) -> Dict[str, float]:
    """Relative distance of every compared array of ``cand`` from ``ref`` (same names). The scale
    of an array is at least 1e-6 of the largest of its kind (a gradient that is zero in exact
    arithmetic, a BatchNorm bias followed by another BatchNorm's, holds rounding noise only)."""
    a, b = _leaves(ref), _leaves(cand)
    missing = sorted(set(a) ^ set(b))
    if missing:
        raise AssertionError(f"the twin's and the original's results differ in what they hold: {missing[:6]}")
    kind = lambda k: k.split(":")[0].rstrip("0123456789")
    top: Dict[str, float] = {}
    for k, v in a.items():
        top[kind(k)] = max(top.get(kind(k), 0.0), float(np.abs(v).max()) if v.size else 0.0)
    return {k: _dist(b[k], a[k], 1e-6 * top[kind(k)]) for k in a}


def verdict(orig32, orig64, cand32, cand64) -> Tuple[bool, str]:
    """float64: every array within 1e-8 (relative) of the original's; float32: the twin's distance from the
    original within 4x the larger of each side's float32-from-float64 distance (plus 1e-6)."""
    d64 = compare(orig64, cand64)
    d32 = compare(orig32, cand32)
    own_o, own_c = compare(orig64, orig32), compare(cand64, cand32)
    worst64 = max(d64, key=d64.get)
    bad32 = [k for k in d32 if d32[k] > 4 * max(own_o[k], own_c[k]) + 1e-6]
    ok = d64[worst64] <= 1e-8 and not bad32
    worst32 = max(d32, key=d32.get)
    why = (f"float64 max {d64[worst64]:.1e} ({worst64}); float32 max {d32[worst32]:.1e} ({worst32}; own "
           f"rounding {own_o[worst32]:.1e}/{own_c[worst32]:.1e})" + (f"; float32 beyond rounding: {bad32[:3]}"
                                                                     if bad32 else ""))
    return ok, why
