"""``dualdl.nn.init`` on MXNet NDArrays and Gluon Parameters: torch's initialisers, written in place.

Hides: Gluon initialises through ``Initializer`` objects at ``initialize()`` and its RNG cannot
reproduce torch's streams. Here the values are written into the existing arrays (every context of a
Parameter) outside autograd, as torch's ``no_grad`` writes, and the same object is returned. Random
values are torch's own: drawn on the host by ``torch.nn.init`` with torch's CPU generator (the global
one, seeded by ``dl.seed``, or ``generator=``) when torch is importable, so the numbers equal those
torch gives a CPU tensor from the same generator state. Without torch they come from MXNet's RNG
(``mx.random.seed``, which ``dl.seed`` also sets) with the same distribution and torch's algorithm.
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, Optional, Tuple

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon, nd

from dualdl.nn.init import Draw, _plan

__all__ = ["apply", "torch_draws"]

_TORCH: Dict[str, Any] = {}


def _torch() -> Optional[Any]:
    """``torch`` if importable (imported here on first use only), else ``None``."""
    if "mod" not in _TORCH:
        try:
            import torch
        except ImportError:
            torch = None
        _TORCH["mod"] = torch
    return _TORCH["mod"]


def torch_draws() -> bool:
    """Whether random initialisers draw torch's numbers (torch importable) or MXNet's RNG's."""
    return _torch() is not None


def _describe(name: str, tensor: Any) -> Tuple[Tuple[int, ...], str, mx.Context]:
    """Shape, dtype and (first) context of what ``name`` writes; refuses what holds no values."""
    if isinstance(tensor, gluon.Parameter):
        if tensor._data is None:
            if tensor._deferred_init:
                raise RuntimeError(
                    f"nn.init.{name}: Parameter '{tensor.name}' is not initialised yet (deferred "
                    f"initialisation, shape {tensor.shape}: Gluon creates it at the first forward pass); "
                    "run one forward pass first, or give the layer its input size")
            raise RuntimeError(f"nn.init.{name}: Parameter '{tensor.name}' is not initialised: "
                               "call .initialize() on it (or its block) first")
        return tuple(tensor.shape), np.dtype(tensor.dtype).name, tensor.list_ctx()[0]
    if isinstance(tensor, mx.sym.Symbol):
        raise TypeError(f"nn.init.{name} writes values in place; got an MXNet Symbol (a hybridized "
                        "graph's placeholder): initialise the Parameters, not the graph's inputs")
    if not isinstance(tensor, nd.NDArray) or getattr(tensor, "stype", "default") != "default":
        t = type(tensor)
        raise TypeError(f"nn.init.{name} fills a dense NDArray or a Gluon Parameter, "
                        f"got {t.__module__}.{t.__qualname__}")
    return tuple(tensor.shape), np.dtype(tensor.dtype).name, tensor.context


def apply(name: str, tensor: Any, kwargs: Dict[str, Any]) -> Any:
    """Run ``torch.nn.init.<name>``'s recipe on ``tensor`` and write the values in place."""
    shape, dtype, ctx = _describe(name, tensor)
    draw = _plan(name, shape, dtype, kwargs)
    if draw.kind is None or int(np.prod(shape)) == 0:
        return tensor
    if draw.kind == "fill":
        values = nd.full(shape, draw.args[0], ctx=ctx, dtype=dtype)
    elif draw.kind == "values":
        values = nd.array(draw.args[0], ctx=ctx, dtype=dtype)
    elif _torch() is not None:
        values = nd.array(_torch_values(name, shape, dtype, kwargs), ctx=ctx, dtype=dtype)
    else:
        if kwargs.get("generator") is not None:
            raise TypeError(f"nn.init.{name}: generator= takes a torch.Generator, and torch is not installed")
        values = _mxnet_values(draw, shape, dtype, ctx)
    with autograd.pause():
        if isinstance(tensor, gluon.Parameter):
            tensor.set_data(values)          # every context; resyncs a kvstore that holds it
        else:
            tensor[:] = values
    return tensor


def _torch_values(name: str, shape: Tuple[int, ...], dtype: str, kwargs: Dict[str, Any]) -> np.ndarray:
    """torch's own draws: ``torch.nn.init.<name>`` on a CPU tensor of the same shape and dtype (its
    warnings were already given by the recipe)."""
    torch = _torch()
    host = torch.empty(shape, dtype=getattr(torch, dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        getattr(torch.nn.init, name)(host, **kwargs)
    return host.numpy()


def _mxnet_values(draw: Draw, shape: Tuple[int, ...], dtype: str, ctx: mx.Context) -> nd.NDArray:
    """The same distributions from MXNet's RNG (no torch): torch's algorithms on MXNet's draws."""
    f = "float64" if dtype == "float64" else "float32"
    rnd = nd.random

    def uniform(lo: float, hi: float, s: Tuple[int, ...] = shape) -> nd.NDArray:
        return rnd.uniform(lo, hi, shape=s, dtype=f, ctx=ctx)

    def normal(mean: float, std: float, s: Tuple[int, ...] = shape) -> nd.NDArray:
        return rnd.normal(mean, std, shape=s, dtype=f, ctx=ctx)

    kind, args = draw
    if kind == "uniform":
        out = uniform(*args)
    elif kind == "normal":
        out = normal(*args)
    elif kind == "trunc_normal":
        out = _trunc_normal(uniform, normal, *args)
    elif kind == "orthogonal":
        rows, cols, gain = args
        flat = normal(0.0, 1.0, (rows, cols)).asnumpy()
        if rows < cols:
            flat = flat.T
        q, r = np.linalg.qr(flat)
        q *= np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        out = nd.array(q.reshape(shape), ctx=ctx, dtype=f) * gain
    else:                                                  # sparse
        num_zeros, std = args
        values = normal(0.0, std).asnumpy()
        rows, cols = shape
        # a uniformly random permutation of the rows for each column, as torch.randperm per column
        perm = np.argsort(uniform(0.0, 1.0).asnumpy(), axis=0, kind="stable")
        zero_rows = perm[:num_zeros]
        values[zero_rows, np.broadcast_to(np.arange(cols), zero_rows.shape)] = 0
        out = nd.array(values, ctx=ctx, dtype=f)
    return out.astype(dtype) if f != dtype else out


def _trunc_normal(uniform, normal, mean: float, std: float, a: float, b: float, lo: float, hi: float,
                  by_normal: bool) -> nd.NDArray:
    """torch 2.13's sampler: redraw normal samples outside [lo, hi]; or, when [a, b] holds little
    of the mass, accept uniform proposals on [a, b] with probability pdf / pdf(mode)."""
    if by_normal:
        result = normal(mean, std)
        while True:
            mask = (result < lo) + (result > hi)
            if not mask.sum().asscalar():
                return result
            result = nd.where(mask, normal(mean, std), result)
    mode = max(a, min(mean, b))
    log_peak = -0.5 * ((mode - mean) / std) ** 2

    def rejected(c: nd.NDArray) -> nd.NDArray:
        log_pdf = -0.5 * ((c - mean) / std) ** 2 - log_peak
        return nd.log(uniform(0.0, 1.0)) > log_pdf

    result = uniform(a, b)
    pending = rejected(result)
    while pending.sum().asscalar():
        candidates = uniform(a, b)
        result = nd.where(pending, candidates, result)
        pending = nd.where(pending, rejected(candidates), pending)
    return result
