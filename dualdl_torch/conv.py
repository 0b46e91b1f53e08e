"""Convolutions on torch: ``torch.nn.Conv1d/2d/3d`` and ``ConvTranspose1d/2d/3d``, batched or
unbatched as torch takes them, empty inputs refused (MXNet cannot run them), and, when torch's own
call fails, the neutral check's message (the one MXNet raises) instead of torch's."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
from torch import nn

from dualdl.nn import checks as C
from dualdl.nn.registry import defined_in
from .base import Layer, explained


def run_checked(call, x: torch.Tensor, n: int, check, *args: Any) -> Any:
    """``call()`` (torch's own layer call) after the up-front rank/empty check (torch takes empty
    input, MXNet cannot), explained on failure by the neutral ``check(*args)``
    (:func:`~dualdl_torch.base.explained`). ``args`` may hold ``SHAPE``, replaced by the input's
    shape (built only when a check runs: no cost on success)."""
    if x.dim() not in (n + 1, n + 2) or not x.numel():
        err = C.explain(check, *_with_shape(args, x))
        if err is not None:
            raise err
    return explained(call, check, lambda: _with_shape(args, x))


SHAPE = object()


def _with_shape(args: Sequence[Any], x: torch.Tensor) -> list:
    return [tuple(x.shape) if a is SHAPE else a for a in args]


class _ConvCheck(Layer):
    """Arguments: checked before construction by dualdl.nn.arguments (torch's errors, then n-entry
    kernel_size/stride/dilation/padding, which torch checks only in forward)."""
    _n = 2

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return run_checked(lambda: super(_ConvCheck, self).forward(input), input, self._n, C.check_conv_input,
                           type(self).__name__, self.in_channels, SHAPE, self.kernel_size,
                           self.dilation, self.padding, self.padding_mode)


class Conv1d(_ConvCheck, nn.Conv1d):
    """``torch.nn.Conv1d`` (NCW or CW input)."""
    _n = 1


class Conv2d(_ConvCheck, nn.Conv2d):
    """``torch.nn.Conv2d`` (NCHW or CHW input)."""


class Conv3d(_ConvCheck, nn.Conv3d):
    """``torch.nn.Conv3d`` (NCDHW or CDHW input)."""
    _n = 3


class _ConvTransposeCheck(Layer):
    """Arguments: checked before construction by dualdl.nn.arguments (torch's errors, then n-entry
    tuples and torch's ``output_padding < max(stride, dilation)``, which torch checks only in forward)."""
    _n = 2

    def forward(self, input: torch.Tensor, output_size: Optional[Sequence[int]] = None) -> torch.Tensor:
        name, x = type(self).__name__, input
        call = lambda: super(_ConvTransposeCheck, self).forward(x, output_size)
        if output_size is not None and x.dim() in (self._n + 1, self._n + 2):
            C.conv_transpose_output_padding(name, tuple(x.shape), output_size, self.kernel_size, self.stride,
                                            self.padding, self.dilation)
        return run_checked(call, x, self._n, C.check_conv_transpose_input, name, self.in_channels,
                           SHAPE, self.kernel_size, self.stride, self.padding, self.dilation,
                           self.output_padding)


class ConvTranspose1d(_ConvTransposeCheck, nn.ConvTranspose1d):
    """``torch.nn.ConvTranspose1d`` (NCW or CW input); weight (in, out/groups, k)."""
    _n = 1


class ConvTranspose2d(_ConvTransposeCheck, nn.ConvTranspose2d):
    """``torch.nn.ConvTranspose2d`` (NCHW or CHW input); weight (in, out/groups, kh, kw)."""


class ConvTranspose3d(_ConvTransposeCheck, nn.ConvTranspose3d):
    """``torch.nn.ConvTranspose3d`` (NCDHW or CDHW input); weight (in, out/groups, kd, kh, kw)."""
    _n = 3


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
