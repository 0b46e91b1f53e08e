"""dualdl.ops on torch, math: the torch functions themselves."""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

Tensor = torch.Tensor


def _dtype(dtype):
    return None if dtype is None else getattr(torch, np.dtype(dtype).name)


def cumsum(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    return torch.cumsum(input, dim, dtype=_dtype(dtype))


def cumprod(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    return torch.cumprod(input, dim, dtype=_dtype(dtype))


def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    return torch.norm(input, p, dim, keepdim, dtype=_dtype(dtype))


def var(input: Tensor, dim=None, *, correction: float = 1, keepdim: bool = False) -> Tensor:
    return torch.var(input, dim, correction=correction, keepdim=keepdim)


def std(input: Tensor, dim=None, *, correction: float = 1, keepdim: bool = False) -> Tensor:
    return torch.std(input, dim, correction=correction, keepdim=keepdim)


def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    return torch.logsumexp(input, dim, keepdim)


def erf(input: Tensor) -> Tensor:
    return torch.erf(input)


def maximum(input: Tensor, other: Tensor) -> Tensor:
    return torch.maximum(input, other)


def minimum(input: Tensor, other: Tensor) -> Tensor:
    return torch.minimum(input, other)


def isnan(input: Tensor) -> Tensor:
    return torch.isnan(input)


def isfinite(input: Tensor) -> Tensor:
    return torch.isfinite(input)


def einsum(equation: str, *operands) -> Tensor:
    return torch.einsum(equation, *operands)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    return torch.bmm(input, mat2)


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:
    return torch.baddbmm(input, batch1, batch2, beta=beta, alpha=alpha)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    return torch.outer(input, vec2)


def eye(n: int, m: Optional[int], dtype: np.dtype, device) -> Tensor:
    return torch.eye(n, n if m is None else m, dtype=_dtype(dtype), device=device)


def linspace(start: float, end: float, steps: int, dtype: np.dtype, device) -> Tensor:
    return torch.linspace(start, end, steps, dtype=_dtype(dtype), device=device)
