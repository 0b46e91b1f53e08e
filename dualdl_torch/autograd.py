"""Autograd on PyTorch: recording scopes and backward with MXNet's head-gradient rule.

Hides: torch records every operation; MXNet only inside ``autograd.record()`` (see
``dualdl.autograd``), so ``record`` is ``enable_grad`` here.
"""
from __future__ import annotations

from typing import Any, List, Optional

import torch

__all__ = ["record", "no_grad", "backward"]


def record(train_mode: bool = True):
    return torch.enable_grad()


def no_grad():
    return torch.no_grad()


def backward(losses: List[torch.Tensor], grads: Optional[List[Any]], retain_graph: bool) -> None:
    """Backpropagate each loss; a non-scalar loss backpropagates its sum (MXNet's rule)."""
    heads, head_grads = [], []
    for i, loss in enumerate(losses):
        if not isinstance(loss, torch.Tensor):
            raise TypeError(f"backward() expects torch tensors on the torch backend, got {type(loss).__name__}")
        g = grads[i] if grads is not None else None
        heads.append(loss)
        head_grads.append(torch.ones_like(loss) if g is None else g)
    torch.autograd.backward(heads, head_grads, retain_graph=retain_graph)
