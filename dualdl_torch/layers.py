"""Native PyTorch implementations of dualdl's core layers and containers.

Each class *is* the ``torch.nn`` layer (a thin subclass marked with ``_dl_layer``) that adds the
checks the MXNet side also makes, so both backends reject the same inputs with the same errors:
batched input only (torch also takes unbatched), a ValueError naming the layer, the expected
layout and the shape received; integer in-range indices for Embedding; containers that hold
torch modules only.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import nn

from dualdl.nn.checks import empty_batch_error

from .nn import shape_error

__all__ = [
    "Conv1d", "Conv2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "Dropout", "Embedding", "Flatten", "Identity",
    "ReLU", "Sigmoid", "Tanh", "GELU", "LeakyReLU", "ELU", "SiLU", "Softmax", "LogSoftmax",
]
__all__ += ["Sequential", "ModuleList", "ModuleDict"]    # from .containers


def _pair(v: Any, n: int) -> Tuple[int, ...]:
    return tuple(int(i) for i in v) if isinstance(v, (tuple, list)) else (int(v),) * n


# ---- convolutions ----------------------------------------------------------------------------
class _ConvCheck:
    _n = 2
    _layout = "(N, C_in, H, W)"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != self._n + 2 or x.shape[1] != self.in_channels:
            raise shape_error(f"{type(self).__name__}(in_channels={self.in_channels})",
                              self._layout.replace("C_in", str(self.in_channels)), x)
        if not x.numel():
            raise empty_batch_error(f"{type(self).__name__}(in_channels={self.in_channels})", tuple(x.shape))
        for i in range(self._n):
            eff = self.dilation[i] * (self.kernel_size[i] - 1) + 1
            pad = eff - 1 if self.padding == "same" else 0 if self.padding == "valid" else 2 * self.padding[i]
            if x.shape[2 + i] + pad < eff:
                raise ValueError(f"{type(self).__name__}: input spatial size {tuple(x.shape[2:])} "
                                 f"(padded by {self.padding}) is smaller than the kernel "
                                 f"{self.kernel_size} (dilation {self.dilation})")
            if self.padding_mode == "reflect" and pad - pad // 2 >= x.shape[2 + i]:
                raise ValueError(f"{type(self).__name__}: padding_mode='reflect' needs padding < input "
                                 f"size, got padding {self.padding} for input {tuple(x.shape[2:])}")
        return super().forward(x)


class Conv1d(_ConvCheck, nn.Conv1d):
    """``torch.nn.Conv1d`` (batched NCW input only)."""
    _dl_layer = "Conv1d"
    _n = 1
    _layout = "(N, C_in, L)"


class Conv2d(_ConvCheck, nn.Conv2d):
    """``torch.nn.Conv2d`` (batched NCHW input only)."""
    _dl_layer = "Conv2d"


# ---- pooling -----------------------------------------------------------------------------------
class _PoolCheck:
    _n = 2
    _layout = "(N, C, H, W)"

    def _dl_validate(self) -> None:
        k, p = self._dl_kernel(), _pair(self.padding, self._n)
        if any(pi < 0 or pi > ki // 2 for pi, ki in zip(p, k)):
            raise ValueError(f"{type(self).__name__}: padding {p} should be at most half of the kernel size {k}")

    def _dl_kernel(self) -> Tuple[int, ...]:
        d = _pair(getattr(self, "dilation", 1), self._n)
        return tuple(di * (ki - 1) + 1 for di, ki in zip(d, _pair(self.kernel_size, self._n)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != self._n + 2:
            raise shape_error(f"{type(self).__name__}(kernel_size={self.kernel_size})", self._layout, x)
        k = self._dl_kernel()
        s, p = (_pair(v, self._n) for v in (self.stride, self.padding))
        sizes = []
        for i in range(self._n):
            h = x.shape[2 + i]
            if self.ceil_mode:
                o = -(-(h + 2 * p[i] - k[i]) // s[i]) + 1
                o -= (o - 1) * s[i] >= h + p[i]
            else:
                o = (h + 2 * p[i] - k[i]) // s[i] + 1
            sizes.append(o)
        if any(o <= 0 for o in sizes):
            raise ValueError(f"{type(self).__name__}(kernel_size={self.kernel_size}): input spatial size "
                             f"{tuple(x.shape[2:])} is too small (output would be {tuple(sizes)})")
        return super().forward(x)


class MaxPool1d(_PoolCheck, nn.MaxPool1d):
    """``torch.nn.MaxPool1d`` (batched NCW input only)."""
    _dl_layer = "MaxPool1d"
    _n = 1
    _layout = "(N, C, L)"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dl_validate()


class MaxPool2d(_PoolCheck, nn.MaxPool2d):
    """``torch.nn.MaxPool2d`` (batched NCHW input only)."""
    _dl_layer = "MaxPool2d"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dl_validate()


class AvgPool1d(_PoolCheck, nn.AvgPool1d):
    """``torch.nn.AvgPool1d`` (batched NCW input only)."""
    _dl_layer = "AvgPool1d"
    _n = 1
    _layout = "(N, C, L)"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dl_validate()


class AvgPool2d(_PoolCheck, nn.AvgPool2d):
    """``torch.nn.AvgPool2d`` (batched NCHW input only)."""
    _dl_layer = "AvgPool2d"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dl_validate()


class AdaptiveAvgPool2d(nn.AdaptiveAvgPool2d):
    """``torch.nn.AdaptiveAvgPool2d`` (batched NCHW input only)."""
    _dl_layer = "AdaptiveAvgPool2d"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4:
            raise shape_error(f"AdaptiveAvgPool2d(output_size={self.output_size})", "(N, C, H, W)", x)
        return super().forward(x)


# ---- normalisation, dropout, embedding --------------------------------------------------------
class _BNCheck:
    _layouts: Tuple[str, ...] = ("(N, C, H, W)",)
    _ndims: Tuple[int, ...] = (4,)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                 affine: bool = True, track_running_stats: bool = True, **kwargs: Any) -> None:
        if momentum is None:
            raise NotImplementedError(f"{type(self).__name__}: momentum=None (cumulative average) is not "
                                      f"supported by dualdl; pass a float")
        super().__init__(num_features, eps, momentum, affine, track_running_stats, **kwargs)

    def _check_input_dim(self, x: torch.Tensor) -> None:
        if x.dim() not in self._ndims or x.shape[1] != self.num_features:
            layouts = " or ".join(l.replace("C", str(self.num_features), 1) for l in self._layouts)
            raise shape_error(f"{type(self).__name__}({self.num_features})", layouts, x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(x)
        if self.training and x.numel() // max(self.num_features, 1) <= 1:
            raise ValueError(f"{type(self).__name__}: expected more than 1 value per channel when "
                             f"training, got input of shape {tuple(x.shape)}")
        return super().forward(x)


class BatchNorm1d(_BNCheck, nn.BatchNorm1d):
    """``torch.nn.BatchNorm1d`` ((N, C) or (N, C, L)); momentum=None is rejected."""
    _dl_layer = "BatchNorm1d"
    _layouts = ("(N, C)", "(N, C, L)")
    _ndims = (2, 3)


class BatchNorm2d(_BNCheck, nn.BatchNorm2d):
    """``torch.nn.BatchNorm2d`` ((N, C, H, W)); momentum=None is rejected."""
    _dl_layer = "BatchNorm2d"


class LayerNorm(nn.LayerNorm):
    """``torch.nn.LayerNorm`` with a ValueError for a trailing shape that does not match."""
    _dl_layer = "LayerNorm"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = len(self.normalized_shape)
        if x.dim() < k or tuple(x.shape[x.dim() - k:]) != tuple(self.normalized_shape):
            raise shape_error(f"LayerNorm({tuple(self.normalized_shape)})",
                              "(*, " + ", ".join(map(str, self.normalized_shape)) + ")", x)
        return super().forward(x)


class Dropout(nn.Dropout):
    """``torch.nn.Dropout``."""
    _dl_layer = "Dropout"


class Embedding(nn.Embedding):
    """``torch.nn.Embedding`` with an IndexError that names the valid range and a TypeError for
    non-integer indices."""
    _dl_layer = "Embedding"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        name = f"Embedding({self.num_embeddings}, {self.embedding_dim})"
        if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
            raise TypeError(f"{name}: indices must be an integer tensor (int32/int64), got {x.dtype}")
        if x.numel():
            lo, hi = (int(v) for v in torch.aminmax(x))
            if lo < 0 or hi >= self.num_embeddings:
                bad = lo if lo < 0 else hi
                raise IndexError(f"{name}: index {bad} is out of range [0, {self.num_embeddings})")
        return super().forward(x)


# ---- shape utilities and activations ----------------------------------------------------------
class Flatten(nn.Flatten):
    """``torch.nn.Flatten`` with a ValueError for dims outside the input's rank."""
    _dl_layer = "Flatten"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = max(x.dim(), 1)
        s = self.start_dim + n if self.start_dim < 0 else self.start_dim
        e = self.end_dim + n if self.end_dim < 0 else self.end_dim
        if not (0 <= s < n and 0 <= e < n) or s > e:
            raise ValueError(f"Flatten(start_dim={self.start_dim}, end_dim={self.end_dim}): invalid for "
                             f"input of shape {tuple(x.shape)}")
        return super().forward(x)


class Identity(nn.Identity):
    """``torch.nn.Identity``."""
    _dl_layer = "Identity"


def _simple(name: str, base: type) -> type:
    return type(name, (base,), {"_dl_layer": name, "__module__": __name__,
                                "__doc__": f"``torch.nn.{name}``."})


class GELU(nn.GELU):
    """``torch.nn.GELU``; an unknown ``approximate`` fails at construction (torch: at forward)."""
    _dl_layer = "GELU"

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        super().__init__(approximate)


ReLU = _simple("ReLU", nn.ReLU)
Sigmoid = _simple("Sigmoid", nn.Sigmoid)
Tanh = _simple("Tanh", nn.Tanh)
LeakyReLU = _simple("LeakyReLU", nn.LeakyReLU)
ELU = _simple("ELU", nn.ELU)
SiLU = _simple("SiLU", nn.SiLU)
Softmax = _simple("Softmax", nn.Softmax)
LogSoftmax = _simple("LogSoftmax", nn.LogSoftmax)


from .containers import *  # noqa: F401,F403,E402
