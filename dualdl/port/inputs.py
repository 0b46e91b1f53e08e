"""Sample inputs as users have them: positional, keyword, nested, integer.

``Inputs`` holds positional and keyword inputs (a dict means keywords: ``BertModel(input_ids=...,
attention_mask=...)``; a tuple means positions; lists inside stay lists, e.g. per-layer LSTM
begin states). Each framework gets what its ops want: torch integer inputs become int64
(embedding indices), Gluon integer inputs become float32 (``mx.nd.array``'s default dtype, which
gluonnlp's ``valid_length`` and ``Embedding`` expect); ``float64=True`` turns every floating
input into float64 for the float64 verification run. A framework error raised by a forward on
the sample inputs becomes a :class:`PortInputError` that says which model, which inputs and what
its forward takes.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

__all__ = ["Inputs", "PortInputError", "as_inputs", "padding_lengths"]

_EXACT_FLOAT32_INT = 2 ** 24


class PortInputError(ValueError):
    """The sample inputs do not fit a model's forward (raised instead of the framework's error)."""


@dataclass
class Inputs:
    args: Tuple[Any, ...] = ()
    kwargs: Dict[str, Any] = field(default_factory=dict)

    def convert(self, leaf: Callable[[np.ndarray], Any]) -> "Inputs":
        """The same structure with every array converted by ``leaf`` (None, framework tensors
        and scalars that are not arrays pass through)."""
        return Inputs(tuple(_walk(a, leaf) for a in self.args),
                      {k: _walk(v, leaf) for k, v in self.kwargs.items()})

    def describe(self) -> str:
        parts = [_desc(a) for a in self.args] + [f"{k}={_desc(v)}" for k, v in self.kwargs.items()]
        return "(" + ", ".join(parts) + ")"

    def named(self, model: Any) -> Dict[str, Any]:
        """Inputs by the name of the forward parameter that receives them (positional ones
        named from ``model.forward``'s signature; unknown names as ``arg{i}``)."""
        names = forward_parameters(model)
        out = {names[i] if i < len(names) else f"arg{i}": a for i, a in enumerate(self.args)}
        out.update(self.kwargs)
        return out


def as_inputs(x: Any) -> Inputs:
    """One array, a tuple of positional inputs, a dict of keyword inputs, an ``Inputs``, or a
    ``(tuple, dict)`` pair of both."""
    if isinstance(x, Inputs):
        return x
    if isinstance(x, dict):
        return Inputs((), dict(x))
    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], tuple) and isinstance(x[1], dict):
        return Inputs(x[0], dict(x[1]))
    if isinstance(x, tuple):
        return Inputs(x)
    if isinstance(x, list) and x and not np.isscalar(x[0]) and not isinstance(x[0], list):
        return Inputs(tuple(x))
    return Inputs((x,))


def _is_array_like(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic)) or (
        isinstance(x, list) and bool(x) and all(np.isscalar(v) for v in x))


def _walk(x: Any, leaf: Callable[[np.ndarray], Any]) -> Any:
    if x is None or isinstance(x, (str, bool)):
        return x
    if _is_array_like(x):
        return leaf(np.asarray(x))
    if isinstance(x, (list, tuple)):
        return type(x)(_walk(v, leaf) for v in x)
    if isinstance(x, dict):
        return {k: _walk(v, leaf) for k, v in x.items()}
    return x   # framework tensors, python scalars, other objects: as given


def _desc(x: Any) -> str:
    if x is None:
        return "None"
    if isinstance(x, (list, tuple)) and not _is_array_like(x):
        inner = ", ".join(_desc(v) for v in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner})"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}: {_desc(v)}" for k, v in x.items()) + "}"
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is None:
        a = np.asarray(x)
        shape, dtype = a.shape, a.dtype
    return f"{str(dtype).replace('torch.', '')}{list(shape)}"


def torch_leaf(float64: bool = False) -> Callable[[np.ndarray], np.ndarray]:
    def leaf(a: np.ndarray) -> np.ndarray:
        if a.dtype.kind in "iu":   # embedding indices must be int64
            return a.astype(np.int64)
        if a.dtype.kind == "f":
            return a.astype(np.float64 if float64 else a.dtype)
        return a
    return leaf


def gluon_leaf(float64: bool = False) -> Callable[[np.ndarray], np.ndarray]:
    def leaf(a: np.ndarray) -> np.ndarray:
        if a.dtype.kind in "iub":
            if a.size and a.dtype.kind != "b" and np.abs(a).max() >= _EXACT_FLOAT32_INT:
                raise PortInputError(f"an integer input holds values up to {np.abs(a).max()}, "
                                     f"which float32 (the dtype Gluon's ops take) cannot hold "
                                     f"exactly; pass it as float64 or smaller ids")
            return a.astype(np.float64 if float64 else np.float32)
        if a.dtype.kind == "f":
            return a.astype(np.float64 if float64 else a.dtype)
        return a
    return leaf


def forward_parameters(model: Any) -> List[str]:
    """Names of the parameters ``model``'s forward takes (``self`` and ``F`` excluded); gluonnlp
    blocks often declare them on ``__call__``, Gluon ones on ``hybrid_forward``."""
    for attr in ("forward", "__call__", "hybrid_forward"):
        fn = getattr(type(model), attr, None)
        if fn is None or getattr(fn, "__module__", "").startswith(("mxnet.gluon.block",
                                                                    "torch.nn.modules.module")):
            continue
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            continue
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                                     p.KEYWORD_ONLY)]
        names = [n for n in names if n not in ("self", "F")]
        if names:
            return names
    return []


def guarded(fn: Callable[[], Any], who: str, model: Any, inputs: Inputs) -> Any:
    """Run ``fn``; a framework error becomes a PortInputError naming the model and its inputs."""
    try:
        return fn()
    except PortInputError:
        raise
    except Exception as e:  # MXNetError, torch RuntimeError/TypeError/IndexError...
        first = str(e).strip().splitlines()
        first = next((ln for ln in reversed(first) if ln.strip()), "") if len(first) > 3 else " ".join(first)
        params = forward_parameters(model)
        raise PortInputError(
            f"the {who} ({type(model).__name__}) failed on the sample inputs "
            f"{inputs.describe()}: {type(e).__name__}: {first[:400]}. Its forward takes "
            f"({', '.join(params) or '?'}); pass a dict for keyword inputs, a tuple for "
            f"positional ones, target_inputs= when the target needs other inputs, or "
            f"source_forward/target_forward adapters") from e


def padding_lengths(named: Dict[str, Any]) -> Optional[np.ndarray]:
    """Valid length of each sequence when the inputs say it: an ``attention_mask``-like 0/1
    (batch, time) array or a ``valid_length``-like (batch,) array; None otherwise."""
    for name, v in named.items():
        low = name.lower()
        if v is None or not _is_array_like(v):
            continue
        a = np.asarray(v)
        if "mask" in low and a.ndim == 2 and np.isin(a, (0, 1)).all():
            lengths = a.sum(1).astype(np.int64)
            if all((a[i, :n] == 1).all() for i, n in enumerate(lengths)):  # left-aligned
                return lengths
        if ("length" in low or low in ("valid_len", "lengths", "seq_len")) and a.ndim == 1:
            return a.astype(np.int64)
    return None


#: forward parameters that carry a padding mask or lengths
MASK_PARAMETERS = ("attention_mask", "mask", "key_padding_mask", "src_key_padding_mask",
                   "valid_length", "valid_len", "lengths")


def unset_mask_parameters(model: Any, named: Dict[str, Any]) -> List[str]:
    """Mask/length parameters ``model``'s forward takes that the inputs leave unset."""
    return [p for p in forward_parameters(model) if p in MASK_PARAMETERS and named.get(p) is None]
