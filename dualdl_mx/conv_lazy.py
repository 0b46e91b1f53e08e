"""Lazy convolutions on MXNet: ``LazyConv1d/2d/3d`` and ``LazyConvTranspose1d/2d/3d`` with torch's
signatures. Gluon's deferred initialisation infers ``in_channels`` at the first call (also from a
Symbol inside a hybridized parent): the weight is created with its in-channel axis unknown (0) and
the bias with its shape unknown, both drawn at the first call from U(+-1/sqrt(fan_in)) with the
fan_in of the inferred weight, as torch's ``reset_parameters`` after ``materialize``. The
parameters then have torch's names and shapes (``load_state_dict`` works), and the layer becomes
the Conv*/ConvTranspose* it stands for (torch's ``cls_to_become``)."""
from __future__ import annotations

import math
from typing import Any, Tuple, Union

import mxnet as mx
import numpy as np

from dualdl.nn import checks as C
from dualdl.nn.checks import IntOrTuple
from dualdl.nn.registry import defined_in
from . import conv
from .base import _FACTORY


class _FanInUniform(mx.init.Initializer):
    """U(+-1/sqrt(fan_in)), fan_in = weight.shape[1] * prod(kernel) read from the weight when the
    deferred parameters are created (the bias has no in-channel axis of its own)."""

    def __init__(self, weight: mx.gluon.Parameter) -> None:
        super().__init__()
        self._weight = weight

    def _init_weight(self, _: Any, arr: mx.nd.NDArray) -> None:
        fan_in = int(np.prod(self._weight.shape[1:]))
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        mx.nd.random.uniform(-bound, bound, out=arr)

    _init_bias = _init_default = _init_weight


class _Lazy:
    """Mixed before a Conv*/ConvTranspose* class: its ``__init__`` with ``in_channels`` = 0 and
    deferred parameters; ``in_channels`` reads the inferred weight (a first call inside a hybridized
    parent's graph, which sees no NDArray); the first NDArray call is checked (rank, empty,
    ``in_channels % groups``: torch's errors) and turns the layer into ``_becomes``."""
    _becomes: type
    _transposed = False

    def _dl_weights(self, channels: Tuple[int, int], bias: bool) -> None:
        dtype = getattr(_FACTORY, "dtype", None) or "float32"
        shape = (self.out_channels, 0) if not self._transposed else (0, self.out_channels // self.groups)

        def new(name, shape, init_of):
            p = self.params.get(name, shape=shape + (self.kernel_size if name == "weight" else ()),
                                dtype=np.dtype(dtype).name, grad_req="add", allow_deferred_init=True,
                                differentiable=True)
            p._dl_buffer = False
            p.initialize(init=init_of(p), ctx=self._dl_contexts())
            mx.gluon.HybridBlock.__setattr__(self, name, p)
            return p

        weight = new("weight", shape, _FanInUniform)
        self.bias = new("bias", (0,), lambda p: _FanInUniform(weight)) if bias else None

    @property
    def in_channels(self) -> int:
        weight = self.__dict__.get("weight")
        shape = weight.shape if weight is not None else ()
        if shape and all(shape):
            return shape[0] if self._transposed else shape[1] * self.groups
        return self.__dict__.get("in_channels", 0)

    @in_channels.setter
    def in_channels(self, value: int) -> None:
        self.__dict__["in_channels"] = value

    def _dl_check(self, shape: Tuple[int, ...]) -> None:
        """The first NDArray input (called before the layer runs it): torch's checks of a lazy
        layer's first input, ``in_channels`` from it, and the layer becomes ``_becomes`` (as torch's
        pre-hook does before its forward); Gluon infers the parameters' shapes in this call."""
        channels = C.check_lazy_conv_input(type(self).__name__, self._n, self.groups, shape)
        self.__dict__["in_channels"] = channels
        becomes = self._becomes
        object.__setattr__(self, "__class__", becomes)
        becomes._dl_check(self, shape)


class _LazyConv(_Lazy):
    def __init__(self, out_channels: int, kernel_size: IntOrTuple, stride: IntOrTuple = 1,
                 padding: Union[str, IntOrTuple] = 0, dilation: IntOrTuple = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(0, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode)


class _LazyConvTranspose(_Lazy):
    _transposed = True

    def __init__(self, out_channels: int, kernel_size: IntOrTuple, stride: IntOrTuple = 1,
                 padding: IntOrTuple = 0, output_padding: IntOrTuple = 0, groups: int = 1, bias: bool = True,
                 dilation: IntOrTuple = 1, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(0, out_channels, kernel_size, stride, padding, output_padding, groups, bias, dilation,
                         padding_mode)


class LazyConv1d(_LazyConv, conv.Conv1d):
    """``torch.nn.LazyConv1d``: a ``Conv1d`` after the first call."""
    _becomes = conv.Conv1d


class LazyConv2d(_LazyConv, conv.Conv2d):
    """``torch.nn.LazyConv2d``: a ``Conv2d`` after the first call."""
    _becomes = conv.Conv2d


class LazyConv3d(_LazyConv, conv.Conv3d):
    """``torch.nn.LazyConv3d``: a ``Conv3d`` after the first call."""
    _becomes = conv.Conv3d


class LazyConvTranspose1d(_LazyConvTranspose, conv.ConvTranspose1d):
    """``torch.nn.LazyConvTranspose1d``: a ``ConvTranspose1d`` after the first call."""
    _becomes = conv.ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, conv.ConvTranspose2d):
    """``torch.nn.LazyConvTranspose2d``: a ``ConvTranspose2d`` after the first call."""
    _becomes = conv.ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, conv.ConvTranspose3d):
    """``torch.nn.LazyConvTranspose3d``: a ``ConvTranspose3d`` after the first call. Its first call
    cannot be inside a hybridized parent's graph: ConvTranspose3d regroups its weight before the
    Convolution, and MXNet's shape inference cannot infer a weight through that."""
    _becomes = conv.ConvTranspose3d

    def _deconv(self, F, x, weight, bias, adj):
        if not self.in_channels:
            raise NotImplementedError(
                "LazyConvTranspose3d: in_channels cannot be inferred inside a hybridized parent's graph on the "
                "mxnet backend (the 3-d transposed convolution is a Convolution of the regrouped weight, "
                "through which MXNet infers no shape); call the model once before hybridize(), or give "
                "in_channels (ConvTranspose3d)")
        return super()._deconv(F, x, weight, bias, adj)


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
