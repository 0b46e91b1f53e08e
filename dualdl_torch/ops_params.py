"""Parameters and models on torch (``dualdl.params``): torch's own methods."""
from __future__ import annotations

import numpy as np
import torch

from .core import torch_dtype


def model_to_dtype(model, dtype):
    return model.to(torch_dtype(np.dtype(dtype)))


def numel(p):
    return p.numel()


def requires_grad(p):
    return bool(p.requires_grad)


def requires_grad_(p, flag=True):
    return p.requires_grad_(bool(flag))


def grad(p):
    return p.grad


def add_(p, other, alpha=1.0):
    with torch.no_grad():
        return p.add_(other, alpha=alpha)
