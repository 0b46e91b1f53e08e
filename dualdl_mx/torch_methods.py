"""torch tensor methods that MXNet's ``NDArray`` and ``Symbol`` lack, added with torch's meaning
(through ``dualdl.ops``), so ``x.view(-1, 784)``, ``x.masked_fill(m, v)``, ``a @ b`` in a model
file run on MXNet too, eager and hybridized.

Only names neither class has are added: Gluon's code relies on NDArray's and Symbol's own
methods, and where torch's method of the same name means something else (``size`` is an int,
``transpose(*axes)``, ``split(num_outputs)``, ``argmax(axis=)``, ``flatten()`` to 2-D, ``repeat``)
MXNet's stays and dualdl_mx/torch_style.py answers the torch spelling with the ``dualdl.ops`` one.
A method that needs a shape (``view_as``, ``new_zeros``, ``numel``, ``item``) is NDArray's only: a
Symbol has no shape.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

import mxnet as mx
from mxnet import nd


def _ops():
    from dualdl import ops
    return ops


def _sizes(args: tuple) -> tuple:
    """``view(2, 3)`` and ``view((2, 3))`` alike."""
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)


def _new(value: float):
    def new(self, *size: Any, dtype: Any = None, device: Any = None) -> nd.NDArray:
        import dualdl as dl
        return dl.full(_sizes(size), value, dtype=self.dtype if dtype is None else dtype,
                       device=dl.device_of(self) if device is None else device, backend="mxnet")
    return new


def _item(self) -> Any:
    import dualdl as dl
    return dl.item(self)


BOTH: Dict[str, Callable[..., Any]] = {
    "view": lambda self, *shape: _ops().reshape(self, _sizes(shape)),
    "contiguous": lambda self, *args, **kwargs: self,
    "masked_fill": lambda self, mask, value: _ops().masked_fill(self, mask, value),
    "pow": lambda self, exponent: _ops().pow(self, exponent),
    "permute": lambda self, *dims: _ops().permute(self, _sizes(dims)),
    "unsqueeze": lambda self, dim: _ops().unsqueeze(self, dim),
    "chunk": lambda self, chunks, dim=0: _ops().chunk(self, chunks, dim),
    "expand": lambda self, *sizes: _ops().expand(self, *sizes),
    "clamp": lambda self, min=None, max=None: _ops().clamp(self, min, max),
    "tril": lambda self, diagonal=0: _ops().tril(self, diagonal),
    "triu": lambda self, diagonal=0: _ops().triu(self, diagonal),
    "eq": lambda self, other: self == other,
    "ne": lambda self, other: self != other,
    "__matmul__": lambda self, other: _ops().matmul(self, other),
    "__rmatmul__": lambda self, other: _ops().matmul(other, self),
}
"""Added to NDArray and Symbol (``eq``/``ne`` give MXNet's 0/1 in the input's dtype, torch's bool)."""

NDARRAY_ONLY: Dict[str, Callable[..., Any]] = {
    "view_as": lambda self, other: _ops().reshape(self, tuple(other.shape)),
    "new_zeros": _new(0), "new_ones": _new(1),
    "numel": lambda self: int(self.size), "dim": lambda self: int(self.ndim), "item": _item,
}
"""Added to NDArray only: they read a shape (a Symbol answers with torch_style's hint)."""


def install() -> None:
    for cls, table in ((nd.NDArray, BOTH), (mx.sym.Symbol, BOTH), (nd.NDArray, NDARRAY_ONLY)):
        for name, fn in table.items():
            if not any(name in c.__dict__ for c in cls.__mro__):     # cls is its own __mro__[0]
                fn.__name__ = name
                fn._dl_torch_method = True
                setattr(cls, name, fn)


install()
