"""``Linear``, ``Bilinear``, ``Identity`` and ``Flatten`` on MXNet with PyTorch's semantics."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import mxnet as mx

from dualdl.nn.checks import check_bilinear_input, check_linear_input, explain
from dualdl.nn.registry import defined_in
from .base import Layer, _positional, is_ndarray
from .norm_stats import _CheckedCall


class Linear(_CheckedCall):
    """``y = x W^T + b`` on the last axis (``FullyConnected(flatten=False)``), any leading axes
    (none included). Gluon's ``Dense`` flattens all non-batch axes by default; dualdl never does.
    A wrong input is explained when MXNet's call fails eagerly, and checked at the call when
    hybridized (the cached graph's shape inference would raise MXNet's own error)."""

    def _dl_check_call(self, x, *args) -> None:
        if self._active:
            check_linear_input(self.in_features, self.out_features, x.shape)

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        self.weight = self._dl_new_param("weight", (self.out_features, self.in_features),
                                         init=self._uniform(bound))
        self.bias = (self._dl_new_param("bias", (self.out_features,), init=self._uniform(bound))
                     if bias else None)

    def hybrid_forward(self, F, x, weight, bias=None):
        try:
            return F.FullyConnected(x, weight, bias, num_hidden=self.out_features,
                                    no_bias=bias is None, flatten=False)
        except mx.base.MXNetError:      # NDArrays: shape inference raises at the call (synchronously)
            err = is_ndarray(x) and explain(check_linear_input, self.in_features, self.out_features, x.shape)
            if err:
                raise err from None
            raise

    def _dl_empty_who(self) -> str:
        return f"Linear(in_features={self.in_features}, out_features={self.out_features})"

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(_CheckedCall):
    """``torch.nn.Bilinear``: ``y_o = x1^T A_o x2 + b_o`` on the last axes of two inputs with the
    same leading axes (none: unbatched), weight (out, in1, in2) and bias (out,) ~
    U(+-1/sqrt(in1_features)) as torch (Gluon has no bilinear layer). Computed as one GEMM of
    x1 with the weight viewed (in1, out * in2), then a batched product with x2."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.in1_features, self.in2_features = int(in1_features), int(in2_features)
        self.out_features = int(out_features)
        bound = 1.0 / math.sqrt(self.in1_features) if self.in1_features > 0 else 0.0
        self.weight = self._dl_new_param("weight", (self.out_features, self.in1_features, self.in2_features),
                                         init=self._uniform(bound))
        self.bias = (self._dl_new_param("bias", (self.out_features,), init=self._uniform(bound))
                     if bias else None)

    def _dl_check_call(self, input1, input2=None, *args) -> None:
        if not is_ndarray(input2):
            raise TypeError(f"Bilinear.forward() takes two arrays input1 and input2, got {type(input2).__name__} "
                            f"for input2")
        check_bilinear_input(self.in1_features, self.in2_features, self.out_features, input1.shape, input2.shape)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Unbatched inputs (both 1-d, as torch takes them) run as a batch of one."""
        if kwargs:
            args = _positional(self, args, kwargs)
        if len(args) == 2 and all(is_ndarray(a) and a.ndim == 1 for a in args):
            self._dl_check_call(*args)
            return super().__call__(args[0].expand_dims(0), args[1].expand_dims(0)).squeeze(axis=0)
        return super().__call__(*args)

    def hybrid_forward(self, F, input1, input2, weight, bias=None):
        i1, i2, o = self.in1_features, self.in2_features, self.out_features
        x1 = F.reshape(input1, shape=(-1, i1))                                       # (B, in1)
        x2 = F.reshape(input2, shape=(-1, i2, 1))                                    # (B, in2, 1)
        w = F.reshape(F.transpose(weight, axes=(1, 0, 2)), shape=(i1, o * i2))     # (in1, out*in2)
        t = F.reshape(F.dot(x1, w), shape=(-1, o, i2))                              # (B, out, in2)
        y = F.reshape(F.batch_dot(t, x2), shape=(-1, o))                            # (B, out)
        if bias is not None:
            y = F.broadcast_add(y, F.reshape(bias, shape=(1, -1)))
        return F.reshape_like(y, input1, lhs_begin=0, lhs_end=1, rhs_begin=0, rhs_end=-1)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class Flatten(Layer):
    """``torch.nn.Flatten(start_dim=1, end_dim=-1)`` (Gluon's Flatten always keeps axis 0 only).
    Hybridized, ``end_dim`` must be -1 or non-negative (a Symbol's rank is unknown)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def hybrid_forward(self, F, x):
        s, e = self.start_dim, self.end_dim
        if is_ndarray(x):
            nd_ = max(x.ndim, 1)
            s_, e_ = s + nd_ if s < 0 else s, e + nd_ if e < 0 else e
            if not (0 <= s_ < nd_ and 0 <= e_ < nd_) or s_ > e_:
                raise ValueError(f"Flatten(start_dim={s}, end_dim={e}): invalid for input of shape "
                                 f"{tuple(x.shape)}")
            shp = tuple(x.shape)
            if not x.ndim:
                return x.reshape((1,))
            return x.reshape(shp[:s_] + (int(np.prod(shp[s_:e_ + 1])),) + shp[e_ + 1:])
        if s < 0 or (e < 0 and e != -1):
            raise NotImplementedError(f"Flatten(start_dim={s}, end_dim={e}): negative dims other than "
                                      f"end_dim=-1 need the input rank, unknown under hybridize()")
        if e == -1:
            return F.flatten(x) if s == 1 else F.reshape(x, shape=(0,) * s + (-1,))
        for _ in range(e - s):
            x = F.reshape(x, shape=(0,) * s + (-3, -2))
        return x if e > s else F.identity(x)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Identity(Layer):
    """``torch.nn.Identity``: returns its input (constructor arguments are ignored)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def hybrid_forward(self, F, x):
        return x if is_ndarray(x) else F.identity(x)


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
