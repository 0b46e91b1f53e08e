"""Random tensors on torch (``dualdl.random``): torch's own samplers, drawn from torch's global
generator, which ``dualdl.seed`` seeds."""
from __future__ import annotations

import torch

from .core import torch_dtype


def rand(size, dtype, device):
    return torch.rand(size, dtype=torch_dtype(dtype), device=device)


def randn(size, dtype, device):
    return torch.randn(size, dtype=torch_dtype(dtype), device=device)


def randint(low, high, size, dtype, device):
    return torch.randint(low, high, size, dtype=torch_dtype(dtype), device=device)


def rand_like(input, dtype=None):
    return torch.rand_like(input, dtype=None if dtype is None else torch_dtype(dtype))


def randn_like(input, dtype=None):
    return torch.randn_like(input, dtype=None if dtype is None else torch_dtype(dtype))


def randint_like(input, low, high, dtype=None):
    return torch.randint_like(input, low, high, dtype=None if dtype is None else torch_dtype(dtype))


def multinomial(input, num_samples, replacement=False):
    return torch.multinomial(input, num_samples, replacement)


def bernoulli(input, p=None):
    return torch.bernoulli(input) if p is None else torch.bernoulli(input, p)


def normal_(tensor, mean=0.0, std=1.0):
    with torch.no_grad():
        return tensor.normal_(mean, std)


def uniform_(tensor, a=0.0, b=1.0):
    with torch.no_grad():
        return tensor.uniform_(a, b)
