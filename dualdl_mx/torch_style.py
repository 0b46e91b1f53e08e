"""What torch model code does inside a forward that MXNet tensors do differently, for the forward
of a write-once ``dualdl.nn.Module`` on MXNet (:func:`run_forward` runs it).

- **In-place arithmetic on activations** (torchvision's ``out += identity``): an NDArray already in
  the graph being recorded raises "Assigning to NDArrays that are already in a computational
  graph", a Symbol ``NotImplementedForSymbol``. Inside a dualdl forward ``+=``, ``-=``, ``*=``,
  ``/=`` then compute out of place and rebind the name (torch's numbers and gradients; a second
  name bound to the same tensor keeps the old value, where torch's would see the update).
  Outside a dualdl forward (Gluon's own code), or eagerly without recording, MXNet's in-place
  operators run unchanged.
- **Broadcasting operators on Symbols**: ``a * b`` of NDArrays broadcasts, of Symbols it is
  elementwise and raises on shapes (2, 4) and (2, 1) once hybridized. Inside a dualdl forward a
  Symbol's ``+ - * / **`` and ``< <= > >=`` with another Symbol broadcast, as torch's and NDArray's do.
- **torch tensor methods** (``x.view``, ``x.size()``, ``.masked_fill``, ``.argmax(dim=)``, ``a @ b``
  ...): NDArray and Symbol keep their own methods (Gluon's code relies on them; ``NDArray.size`` is
  the element count, ``transpose``/``split`` mean something else), so MXNet raises its own error;
  :func:`explain_torch_method` turns it into one line naming the ``dualdl.ops`` spelling.
"""
from __future__ import annotations

import linecache
import re
import threading
import traceback
from typing import Any, Optional

import mxnet as mx
import numpy as np
from mxnet import autograd, nd

from dualdl.backend import _active
from . import torch_methods  # noqa: F401  (the torch methods NDArray and Symbol lack, added)

__all__ = ["tracing", "symbol_dtype", "run_forward", "explain_torch_method", "TORCH_METHODS"]

class _Forwards(threading.local):
    """The write-once forwards running in this thread: one flag each, True while a graph is traced."""
    def __init__(self) -> None:
        self.symbolic: list = []


_RUNNING = _Forwards()


_SYMBOL_DTYPES: dict = {}    # id(input Symbol) -> (Symbol, dtype of its array), while a graph is traced


def symbol_dtype(sym: Any) -> Optional[np.dtype]:
    """The dtype of the array behind an input Symbol of the write-once graph being traced (a
    Symbol has none: a bool mask and a float one look alike), else None."""
    entry = _SYMBOL_DTYPES.get(id(sym))
    return entry[1] if entry is not None and entry[0] is sym else None


def tracing() -> bool:
    """True while a hybridized write-once forward is traced: a tensor made from nothing in it
    (``dl.zeros``, ``dl.arange``, noise) must be a Symbol node, not an NDArray."""
    flags = _RUNNING.symbolic
    return bool(flags) and flags[-1]


def _out_of_place(op: str, name: str, cls: type):
    native = getattr(cls, name)
    symbolic = cls is mx.sym.Symbol

    def inplace(self, other):
        if _RUNNING.symbolic and (symbolic or autograd.is_recording()):
            return getattr(self, op)(other)
        return native(self, other)
    inplace.__doc__ = native.__doc__
    inplace._dl_native = native
    return inplace


for _cls in (nd.NDArray, mx.sym.Symbol):
    for _op, _name in (("__add__", "__iadd__"), ("__sub__", "__isub__"), ("__mul__", "__imul__"),
                       ("__truediv__", "__itruediv__")):
        if not hasattr(getattr(_cls, _name), "_dl_native"):
            setattr(_cls, _name, _out_of_place(_op, _name, _cls))

def _broadcasting(name: str, op: str):
    native = getattr(mx.sym.Symbol, name)
    fn = getattr(mx.sym, op)

    def binary(self, other):
        if _RUNNING.symbolic and isinstance(other, mx.sym.Symbol):
            return fn(self, other)
        return native(self, other)
    binary.__doc__ = native.__doc__
    binary._dl_native = native
    return binary


for _name, _op in (("__add__", "broadcast_add"), ("__sub__", "broadcast_sub"), ("__mul__", "broadcast_mul"),
                   ("__truediv__", "broadcast_div"), ("__pow__", "broadcast_power"), ("__gt__", "broadcast_greater"),
                   ("__ge__", "broadcast_greater_equal"), ("__lt__", "broadcast_lesser"),
                   ("__le__", "broadcast_lesser_equal")):
    if not hasattr(getattr(mx.sym.Symbol, _name), "_dl_native"):
        setattr(mx.sym.Symbol, _name, _broadcasting(_name, _op))

def _torch_transpose(cls: type):
    """``x.transpose(dim0, dim1)`` in a dualdl forward swaps two axes, as torch's: MXNet's
    ``transpose(*axes)`` reads them as a whole permutation (``transpose(0, 1)`` of a matrix is then
    the identity, of a 3-D array an error). Elsewhere, or with other arguments, MXNet's."""
    native = cls.transpose

    def transpose(self, *axes, **kwargs):
        if _RUNNING.symbolic and len(axes) == 2 and not kwargs and all(isinstance(a, int) for a in axes):
            from dualdl import ops
            return ops.transpose(self, axes[0], axes[1])
        return native(self, *axes, **kwargs)
    transpose.__doc__ = native.__doc__
    transpose._dl_native = native
    return transpose


for _cls in (nd.NDArray, mx.sym.Symbol):
    if not hasattr(_cls.transpose, "_dl_native"):
        _cls.transpose = _torch_transpose(_cls)

# torch Tensor method -> the dualdl spelling (docs/writing-once.md lists the same table)
TORCH_METHODS = {
    "size": "x.shape (NDArray.size is the element count)", "reshape": "ops.reshape(x, shape) or x.view(shape)",
    "split": "ops.split(x, split_size, dim)", "argmax": "ops.argmax(x, dim=, keepdim=)",
    "argmin": "ops.argmin(x, dim=, keepdim=)", "sum": "ops.sum(x, dim=, keepdim=)",
    "mean": "ops.mean(x, dim=, keepdim=)", "max": "ops.max(x, dim=, keepdim=)", "min": "ops.min(x, dim=, keepdim=)",
    "softmax": "ops.softmax(x, dim)", "log_softmax": "ops.log_softmax(x, dim)", "squeeze": "ops.squeeze(x, dim)",
    "flatten": "ops.flatten(x, start_dim)", "repeat": "ops.repeat(x, *repeats)", "cumsum": "ops.cumsum(x, dim)",
    "bmm": "ops.bmm(a, b)", "to": "dl.to_device(x, device)", "device": "dl.device_of(x)",
    "masked_fill_": "x = x.masked_fill(mask, value)", "t": "ops.transpose(x, 0, 1)",
    "view_as": "x.view(sizes) (a Symbol has no shape)", "new_zeros": "dl.zeros(shape, dtype=..., device=...)",
    "new_ones": "dl.ones(shape, dtype=..., device=...)", "numel": "dl.numel(x)", "dim": "len(x.shape)",
    "item": "dl.item(x)",
}

_NO_ATTR = re.compile(r"'(NDArray|Symbol|_Symbol)' object has no attribute '(\w+)'")
_DIM_ARG = re.compile(r"Cannot find argument '(dim|keepdim)'")
_METHOD_CALL = re.compile(r"\.(\w+)\(")


def _user_line(tb: Any) -> Optional[str]:
    """The source line of the innermost frame outside mxnet/dualdl_mx (the model's own line)."""
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        mod = frame.f_globals.get("__name__", "")
        if not (mod.startswith("mxnet") or mod.startswith("dualdl_mx") or mod.startswith("dualdl.")):
            line = linecache.getline(frame.f_code.co_filename, lineno).strip() or line
    return line


def _hint(method: str, line: Optional[str]) -> str:
    where = f" (in `{line}`)" if line else ""
    return (f"x.{method}(...) is a torch Tensor method that MXNet's NDArray/Symbol does not have with "
            f"torch's meaning{where}: write {TORCH_METHODS[method]} (dualdl spelling, both backends; "
            f"docs/writing-once.md)")


def explain_torch_method(err: BaseException) -> Optional[BaseException]:
    """One-line error for a torch tensor method reached on an MXNet tensor in a dualdl forward, or
    None when ``err`` is something else (then MXNet's own error stands)."""
    msg = str(err)
    line = _user_line(err.__traceback__)
    if isinstance(err, AttributeError):
        m = _NO_ATTR.search(msg)
        if m and m.group(2) == "shape" and "Symbol" in m.group(1):
            return AttributeError("x.shape: under hybridize() an MXNet Symbol has no shape"
                                  + (f" (in `{line}`)" if line else "") + "; this forward reads sizes from its "
                                  "tensors: call the model without hybridize(), or write the sizes from the "
                                  "model's arguments and shape-free dualdl.ops (ops.flatten, ops.reshape with -1)")
        if m and m.group(2) in TORCH_METHODS:
            return AttributeError(_hint(m.group(2), line))
        return None
    calls = [c for c in _METHOD_CALL.findall(line or "") if c in TORCH_METHODS]
    if isinstance(err, TypeError):
        if "unsupported operand type(s) for @" in msg:
            return TypeError("a @ b is torch's matrix product, MXNet's NDArray/Symbol has no @"
                             + (f" (in `{line}`)" if line else "") + ": write ops.matmul(a, b)")
        if re.search(r"'(int|tuple)' object is not callable", msg) and ("size" in calls or "dim" in calls):
            return TypeError(_hint("size" if "size" in calls else "dim", line))
        return None
    if isinstance(err, mx.base.MXNetError) and _DIM_ARG.search(msg):
        method = next((c for c in calls if c in TORCH_METHODS), None)
        if method is not None:
            return TypeError(_hint(method, line) + "; MXNet's methods take axis=, not dim=")
    return None


def run_forward(fn: Any, symbolic: bool, *args: Any) -> Any:
    """``fn(*args)`` marked as a running forward (``symbolic``: its arguments are Symbols), with
    MXNet the active backend (``dl.zeros``, ``dl.arange`` in a forward make MXNet tensors), a
    torch-method error explained (one line).
    Inline rather than two context managers: 0.9 us a call instead of 4.6."""
    flags = _RUNNING.symbolic
    flags.append(symbolic)
    token = _active.set("mxnet")
    try:
        return fn(*args)
    except (AttributeError, TypeError, mx.base.MXNetError) as err:
        better = explain_torch_method(err)
        if better is None:
            raise
        raise better from None
    finally:
        _active.reset(token)
        flags.pop()
