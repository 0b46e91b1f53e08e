"""dualdl.ops on torch, shape and layout: the torch functions themselves."""
from __future__ import annotations

import torch
import torch.nn.functional as TF

Tensor = torch.Tensor


def expand(input: Tensor, *sizes) -> Tensor:
    return input.expand(*sizes)


def repeat(input: Tensor, *repeats) -> Tensor:
    return input.repeat(*repeats)


def tile(input: Tensor, dims) -> Tensor:
    return torch.tile(input, tuple(dims))


def flip(input: Tensor, dims) -> Tensor:
    return torch.flip(input, (dims,) if isinstance(dims, int) else tuple(dims))


def roll(input: Tensor, shifts, dims=None) -> Tensor:
    return torch.roll(input, shifts, dims)


def pad(input: Tensor, pad, mode: str = "constant", value=None) -> Tensor:
    return TF.pad(input, tuple(pad), mode, value)


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    return torch.tril(input, diagonal)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    return torch.triu(input, diagonal)
