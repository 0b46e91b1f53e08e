"""The functional layers of ``dualdl.ops`` (``torch.nn.functional``'s names, arguments and
defaults): dropout, interpolate, conv2d, max_pool2d, avg_pool2d, batch_norm, layer_norm,
group_norm, scaled_dot_product_attention, dispatched on the tensor's type like every op. Import
them from ``dualdl.ops``; the MXNet differences are given per function.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

from .ops_dispatch import Tensor, _ops

__all__ = [
    "dropout", "interpolate", "conv2d", "max_pool2d", "avg_pool2d", "batch_norm", "layer_norm",
    "group_norm", "scaled_dot_product_attention",
]


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Inverted dropout when ``training`` (scale 1/(1-p) on both). Unlike Gluon, the argument
    decides, not ``autograd.record()``. Masks come from each framework's RNG: they differ."""
    return _ops(x).dropout(x, p, training)


def interpolate(input: Tensor, size: Union[None, int, Sequence[int]] = None,
                scale_factor: Union[None, float, Sequence[float]] = None, mode: str = "nearest",
                align_corners: Optional[bool] = None, recompute_scale_factor: Optional[bool] = None,
                antialias: bool = False) -> Tensor:
    """``F.interpolate`` for 4-D (N, C, H, W) input, modes 'nearest' and 'bilinear'. MXNet's
    ``BilinearResize2D`` defaults to ``align_corners=True``, torch to False (a classic porting bug:
    0.08 to 0.55 max abs difference measured on [0, 1) images); here both follow
    ``align_corners`` (default False). On Symbols 'nearest' needs one integer ``scale_factor``."""
    return _ops(input).interpolate(input, size, scale_factor, mode, align_corners,
                                   recompute_scale_factor, antialias)


def conv2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
           stride: Union[int, Sequence[int]] = 1, padding: Union[str, int, Sequence[int]] = 0,
           dilation: Union[int, Sequence[int]] = 1, groups: int = 1) -> Tensor:
    """``F.conv2d``, weight (out, in/groups, kH, kW). MXNet's ``Convolution`` needs the kernel size
    and filter count: read from the weight, so Symbols (hybridized) raise: use ``nn.Conv2d``."""
    return _ops(input).conv2d(input, weight, bias, stride, padding, dilation, groups)


def max_pool2d(input: Tensor, kernel_size: Union[int, Sequence[int]],
               stride: Union[None, int, Sequence[int]] = None, padding: Union[int, Sequence[int]] = 0,
               dilation: Union[int, Sequence[int]] = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor:
    """``F.max_pool2d`` (stride defaults to the kernel). MXNet: ``Pooling``; dilation and
    ``return_indices`` are refused."""
    return _ops(input).max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def avg_pool2d(input: Tensor, kernel_size: Union[int, Sequence[int]],
               stride: Union[None, int, Sequence[int]] = None, padding: Union[int, Sequence[int]] = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: Optional[int] = None) -> Tensor:
    """``F.avg_pool2d``. MXNet: ``Pooling(count_include_pad=)``; ``divisor_override`` refused."""
    return _ops(input).avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                  divisor_override)


def batch_norm(input: Tensor, running_mean: Optional[Tensor], running_var: Optional[Tensor],
               weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """``F.batch_norm`` over dim 1: training normalises with the biased batch variance and
    updates the running stats in place (running_var unbiased), eval uses the running stats.
    MXNet: written out; in-place updates need NDArrays."""
    return _ops(input).batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def layer_norm(input: Tensor, normalized_shape: Union[int, Sequence[int]], weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """``F.layer_norm`` over the last ``len(normalized_shape)`` dims (biased variance)."""
    return _ops(input).layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input: Tensor, num_groups: int, weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """``F.group_norm``: channels (dim 1) split into ``num_groups``, each normalised over its
    channels and spatial dims; weight/bias per channel."""
    return _ops(input).group_norm(input, num_groups, weight, bias, eps)


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, *,
                                 scale: Optional[float] = None, enable_gqa: bool = False) -> Tensor:
    """``F.scaled_dot_product_attention``: ``softmax(q k^T * scale + mask) v`` with scale
    ``1/sqrt(E)`` by default; a bool ``attn_mask`` marks the positions that take part, a float one
    is added; ``is_causal`` keeps key j <= query i. ``dropout_p`` applies whenever > 0 (as torch).
    MXNet: written out (matmul, softmax); on Symbols pass a float mask (a Symbol has no dtype);
    ``enable_gqa`` refused."""
    return _ops(query).scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                                    scale=scale, enable_gqa=enable_gqa)
