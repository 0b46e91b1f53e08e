"""dualdl.ops on torch: the torch functions themselves, with dualdl's argument checks.

PyTorch's semantics are dualdl's contract, so almost everything here is a direct call. What is
added: ``reshape`` rejects MXNet's special codes with the same ``ValueError`` as on MXNet;
``where``/``masked_fill`` accept non-bool masks (non-zero is true), as MXNet does.
"""
from __future__ import annotations

import builtins
from typing import Any, Optional, Sequence, Union

import torch
import torch.nn.functional as TF

from dualdl.nn.checks import check_not_empty
from dualdl.tensor import resolve_shape

Tensor = torch.Tensor


def _bool(mask: Any) -> Any:
    if isinstance(mask, Tensor) and mask.dtype != torch.bool:
        return mask != 0
    return mask


# ---- activations -----------------------------------------------------------------------------
def relu(x: Tensor) -> Tensor:
    if not x.numel():                   # torch returns an empty output; MXNet cannot: refused on both
        check_not_empty("relu", tuple(x.shape))
    return torch.relu(x)


def sigmoid(x: Tensor) -> Tensor:
    return torch.sigmoid(x)


def tanh(x: Tensor) -> Tensor:
    return torch.tanh(x)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return TF.gelu(x, approximate=approximate)


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    return TF.leaky_relu(x, negative_slope)


def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    return TF.elu(x, alpha)


def silu(x: Tensor) -> Tensor:
    return TF.silu(x)


def softmax(x: Tensor, dim: int) -> Tensor:
    return torch.softmax(x, dim)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    return torch.log_softmax(x, dim)


# ---- linear algebra --------------------------------------------------------------------------
def matmul(a: Tensor, b: Tensor) -> Tensor:
    if not (a.numel() and b.numel()):   # refused on both (MXNet cannot run an empty operand)
        check_not_empty("matmul", tuple(a.shape))
        check_not_empty("matmul", tuple(b.shape))
    return torch.matmul(a, b)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    return TF.linear(x, weight, bias)


# ---- elementwise -----------------------------------------------------------------------------
def add(a, b):
    return a + b          # torch.add; either argument may be a Python number


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def div(a, b):
    return a / b          # true division, also for integer tensors


def pow(x, exponent):
    return torch.pow(x, exponent)


def exp(x: Tensor) -> Tensor:
    return torch.exp(x)


def log(x: Tensor) -> Tensor:
    return torch.log(x)


def sqrt(x: Tensor) -> Tensor:
    return torch.sqrt(x)


def abs(x: Tensor) -> Tensor:
    return torch.abs(x)


def clamp(x: Tensor, min: Optional[float] = None, max: Optional[float] = None) -> Tensor:
    return torch.clamp(x, min, max)


def zeros_like(x: Tensor) -> Tensor:
    return torch.zeros_like(x)


def ones_like(x: Tensor) -> Tensor:
    return torch.ones_like(x)


def where(cond, a, b):
    return torch.where(_bool(cond), a, b)


def masked_fill(x: Tensor, mask: Tensor, value: float) -> Tensor:
    return x.masked_fill(_bool(mask), value)


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    return TF.dropout(x, p, training)


# ---- shapes ----------------------------------------------------------------------------------
def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    return torch.cat(tensors, dim)


concat = cat


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    return torch.stack(tensors, dim)


def split(x: Tensor, split_size_or_sections: Union[int, Sequence[int]], dim: int = 0):
    if not isinstance(split_size_or_sections, int):
        sizes = [int(s) for s in split_size_or_sections]
        n = x.shape[dim]
        if builtins.sum(sizes) != n:
            raise ValueError(f"split: sections {sizes} do not sum to the size {n} of dim {dim} "
                             f"(input shape {tuple(x.shape)})")
        split_size_or_sections = sizes
    elif split_size_or_sections <= 0:
        raise ValueError(f"split: split_size must be positive, got {split_size_or_sections}")
    return torch.split(x, split_size_or_sections, dim)


def chunk(x: Tensor, chunks: int, dim: int = 0):
    if int(chunks) <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    return torch.chunk(x, int(chunks), dim)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    return torch.transpose(x, dim0, dim1)


def permute(x: Tensor, dims: Sequence[int]) -> Tensor:
    dims = tuple(int(d) for d in dims)
    if len(dims) != x.dim():
        raise ValueError(f"permute: dims {dims} do not match the input's {x.dim()} dimensions "
                         f"(shape {tuple(x.shape)})")
    return x.permute(dims)


def reshape(x: Tensor, shape: Union[int, Sequence[int]]) -> Tensor:
    return x.reshape(resolve_shape(shape, x.numel(), tuple(x.shape)))


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    return torch.flatten(x, start_dim, end_dim)


def squeeze(x: Tensor, dim: Optional[int] = None) -> Tensor:
    return torch.squeeze(x) if dim is None else torch.squeeze(x, dim)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    return torch.unsqueeze(x, dim)


# ---- reductions ------------------------------------------------------------------------------
def _dims(dim):
    return tuple(dim) if isinstance(dim, list) else dim


def sum(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    if dim is None:
        return x.sum().reshape((1,) * x.dim()) if keepdim else x.sum()
    return torch.sum(x, _dims(dim), keepdim)


def mean(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    if dim is None:
        return x.mean().reshape((1,) * x.dim()) if keepdim else x.mean()
    return torch.mean(x, _dims(dim), keepdim)


def max(x: Tensor, dim: Optional[int] = None, keepdim: bool = False):
    return torch.max(x) if dim is None else torch.max(x, dim, keepdim)


def min(x: Tensor, dim: Optional[int] = None, keepdim: bool = False):
    return torch.min(x) if dim is None else torch.min(x, dim, keepdim)


def argmax(x: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    return torch.argmax(x, dim, keepdim)


def argmin(x: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    return torch.argmin(x, dim, keepdim)


# ---- indices ---------------------------------------------------------------------------------
def embedding(input: Tensor, weight: Tensor) -> Tensor:
    return TF.embedding(input, weight)


def one_hot(x: Tensor, num_classes: int = -1) -> Tensor:
    return TF.one_hot(x, num_classes)


# ---- the ops of the other files (one module for backend.module("ops")) -----------------------
from .ops_index import argsort, gather, index_select, sort, take_along_dim, topk  # noqa: E402
from .ops_math import (bmm, baddbmm, cumprod, cumsum, einsum, erf, eye, isfinite, isnan,  # noqa: E402
                       linspace, logsumexp, maximum, minimum, norm, outer, std, var)
from .ops_nn import (avg_pool2d, batch_norm, conv2d, group_norm, interpolate, layer_norm,  # noqa: E402
                     max_pool2d, scaled_dot_product_attention)
from .ops_shape import expand, flip, pad, repeat, roll, tile, tril, triu  # noqa: E402
from .ops_params import add_, grad, model_to_dtype, numel, requires_grad, requires_grad_  # noqa: E402,F401
from .ops_random import (bernoulli, multinomial, normal_, rand, rand_like, randint,  # noqa: E402,F401
                         randint_like, randn, randn_like, uniform_)

clip = clamp
