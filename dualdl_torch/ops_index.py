"""dualdl.ops on torch, indexing and sorting: the torch functions themselves."""
from __future__ import annotations

from typing import Optional

import torch

Tensor = torch.Tensor


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    return torch.gather(input, dim, index, sparse_grad=sparse_grad)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    return torch.index_select(input, dim, index)


def take_along_dim(input: Tensor, indices: Tensor, dim: Optional[int] = None) -> Tensor:
    return torch.take_along_dim(input, indices, dim)


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    return torch.topk(input, k, dim, largest, sorted)


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    return torch.sort(input, dim=dim, descending=descending, stable=stable)


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    return torch.argsort(input, dim=dim, descending=descending, stable=stable)
