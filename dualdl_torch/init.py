"""``dualdl.nn.init`` on torch tensors and Parameters: ``torch.nn.init`` itself (its checks, its
``no_grad`` writes and its draws from the tensor's device generator, bit for bit)."""
from __future__ import annotations

from typing import Any, Dict

import torch

__all__ = ["apply"]


def apply(name: str, tensor: Any, kwargs: Dict[str, Any]) -> Any:
    """``torch.nn.init.<name>(tensor, **kwargs)``; returns what torch returns (the tensor)."""
    return getattr(torch.nn.init, name)(tensor, **kwargs)
