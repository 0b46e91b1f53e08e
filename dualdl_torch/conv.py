"""Convolutions on torch: ``torch.nn.Conv1d/2d/3d`` and ``ConvTranspose1d/2d`` with batched input
only (torch also takes unbatched, MXNet does not), empty inputs refused (MXNet cannot run them), and,
when torch's own call fails, the neutral check's message (the one MXNet raises) instead of torch's."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
from torch import nn

from dualdl.nn import checks as C
from dualdl.nn.registry import defined_in
from .base import Layer


def run_checked(call, x: torch.Tensor, n: int, check, *args: Any) -> Any:
    """``call()`` (torch's own layer call) after the up-front rank/empty check, with the neutral
    ``check(*args)``'s error instead of torch's where it explains the failure. ``args`` may hold
    ``SHAPE``, replaced by the input's shape (built only when a check runs: no cost on success)."""
    if x.dim() != n + 2 or not x.numel():
        err = C.explain(check, *_with_shape(args, x))
        if err is not None:
            raise err
    try:
        return call()
    except (RuntimeError, ValueError):
        err = C.explain(check, *_with_shape(args, x))
        if err is not None:
            raise err from None
        raise


SHAPE = object()


def _with_shape(args: Sequence[Any], x: torch.Tensor) -> list:
    return [tuple(x.shape) if a is SHAPE else a for a in args]


def check_conv_tuples(layer: Any) -> None:
    """kernel_size/stride/dilation/padding of n entries (torch checks them only in forward)."""
    n = layer._n
    for what in ("kernel_size", "stride", "dilation", "padding", "output_padding"):
        v = getattr(layer, what, None)
        if v is not None and not isinstance(v, str):
            C.to_tuple(v, n, what)


class _ConvCheck(Layer):
    _n = 2

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        check_conv_tuples(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return run_checked(lambda: super(_ConvCheck, self).forward(x), x, self._n, C.check_conv_input,
                           type(self).__name__, self.in_channels, SHAPE, self.kernel_size,
                           self.dilation, self.padding, self.padding_mode)


class Conv1d(_ConvCheck, nn.Conv1d):
    """``torch.nn.Conv1d`` (batched NCW input only)."""
    _n = 1


class Conv2d(_ConvCheck, nn.Conv2d):
    """``torch.nn.Conv2d`` (batched NCHW input only)."""


class Conv3d(_ConvCheck, nn.Conv3d):
    """``torch.nn.Conv3d`` (batched NCDHW input only)."""
    _n = 3


class _ConvTransposeCheck(Layer):
    _n = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        n = self._n
        # torch checks output_padding in forward only (a RuntimeError): checked here as on MXNet
        C.check_conv_transpose_args(type(self).__name__, in_channels, out_channels, groups,
                                    C.to_tuple(stride, n, "stride"), C.to_tuple(dilation, n, "dilation"),
                                    C.to_tuple(output_padding, n, "output_padding"), padding_mode)
        C.to_tuple(kernel_size, n, "kernel_size")
        C.to_tuple(padding, n, "padding")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias,
                         dilation, padding_mode, device, dtype)

    def forward(self, x: torch.Tensor, output_size: Optional[Sequence[int]] = None) -> torch.Tensor:
        name = type(self).__name__
        call = lambda: super(_ConvTransposeCheck, self).forward(x, output_size)
        if output_size is not None and x.dim() == self._n + 2:
            C.conv_transpose_output_padding(name, tuple(x.shape), output_size, self.kernel_size, self.stride,
                                            self.padding, self.dilation)
        return run_checked(call, x, self._n, C.check_conv_transpose_input, name, self.in_channels,
                           SHAPE, self.kernel_size, self.stride, self.padding, self.dilation,
                           self.output_padding)


class ConvTranspose1d(_ConvTransposeCheck, nn.ConvTranspose1d):
    """``torch.nn.ConvTranspose1d`` (batched NCW input only); weight (in, out/groups, k)."""
    _n = 1


class ConvTranspose2d(_ConvTransposeCheck, nn.ConvTranspose2d):
    """``torch.nn.ConvTranspose2d`` (batched NCHW input only); weight (in, out/groups, kh, kw)."""


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
