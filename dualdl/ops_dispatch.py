"""Which adapter ``ops`` module a call of ``dualdl.ops`` goes to: the module of the tensor's
backend (``dualdl_torch.ops`` or ``dualdl_mx.ops``), cached per tensor type, so dispatch costs one
dict lookup per call. Shared by ``dualdl.ops`` and ``dualdl.ops_nn``.
"""
from __future__ import annotations

from typing import Any, Dict, Union

from .backend import backend_for

Tensor = Any            # a native tensor: torch.Tensor, mx.nd.NDArray or mx.sym.Symbol
Number = Union[int, float]

_IMPL: Dict[type, Any] = {}


def _ops(x: Any):
    """The adapter ops module for ``x``'s type (cached; this is on every forward pass)."""
    try:
        return _IMPL[type(x)]
    except KeyError:
        mod = backend_for(x).module("ops")
        _IMPL[type(x)] = mod
        return mod


def _ops2(*xs: Any):
    """The ops module of the first argument that is a tensor (others may be Python numbers)."""
    for x in xs:
        mod = _IMPL.get(type(x))
        if mod is not None:
            return mod
    for x in xs:
        if not isinstance(x, (int, float, bool)):
            return _ops(x)
    raise TypeError(f"expected at least one native tensor, got {', '.join(type(x).__name__ for x in xs)}")
