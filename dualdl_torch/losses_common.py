"""What the torch losses share (losses.py and losses_margin.py): conversions of targets to
tensors, the class-index check, the reduction, the same-shape pair check."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

from dualdl.losses import _checks as ck


# ---- conversions --------------------------------------------------------------------------------
def _host(x: Any) -> np.ndarray:
    """A numpy copy of a torch tensor, an NDArray, a numpy array or a list (for small index data)."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if hasattr(x, "asnumpy"):
        return x.asnumpy()
    return np.asarray(x)


def _native(x: Any, like: torch.Tensor) -> Optional[torch.Tensor]:
    """``x`` as a tensor on ``like``'s device and float dtype (keeps autograd for torch tensors)."""
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        return x.to(device=like.device, dtype=like.dtype)
    if isinstance(x, (int, float)):
        return torch.tensor(float(x), device=like.device, dtype=like.dtype)
    return torch.as_tensor(np.array(_host(x)), device=like.device, dtype=like.dtype)


def _index_target(target: Any, device: torch.device) -> torch.Tensor:
    if isinstance(target, torch.Tensor) and target.dtype == torch.int64:
        return target
    if isinstance(target, torch.Tensor):
        return target.detach().to(torch.int64)
    return torch.as_tensor(_host(target).astype(np.int64), device=device)


def _check_class_indices(name: str, target: Any, num_classes: int, ignore_index: Optional[int] = None) -> None:
    """``ck.check_class_indices`` for a torch tensor, computed where the tensor lives: one
    ``aminmax`` (plus an integrality test for float targets) and one host read of two scalars,
    instead of a host copy of the targets each call. Only when a value is out of range (or an
    ``ignore_index`` is present) does it look further, and only on failure does it build the
    shared error message from a host copy."""
    if not isinstance(target, torch.Tensor) or target.dtype == torch.bool or target.is_complex():
        ck.check_class_indices(name, _host(target), num_classes, ignore_index)
        return
    t = target.detach()
    if t.numel() == 0:
        return
    if t.is_floating_point() and not torch.equal(t, t.trunc()):      # NaN != NaN: caught here too
        ck.check_class_indices(name, _host(t), num_classes, ignore_index)   # raises ValueError
    lo, hi = torch.aminmax(t)
    lo, hi = torch.stack((lo, hi)).tolist() if t.device.type != "cpu" else (lo.item(), hi.item())
    if lo >= 0 and hi < num_classes:
        return
    bad = (t < 0) | (t >= num_classes)
    if ignore_index is not None:
        bad &= t != ignore_index
    if bool(bad.any()):
        ck.check_class_indices(name, _host(t), num_classes, ignore_index)   # raises IndexError/ValueError
        raise IndexError(f"{name}: target class indices must lie in [0, {num_classes})")   # not reached


def reduce(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    """PyTorch's reduction: 'mean' over all elements, 'sum', or 'none' (unchanged)."""
    ck.check_reduction("reduce", reduction)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


# ---- elementwise losses ---------------------------------------------------------------------------
def _pair(name: str, input: torch.Tensor, target: Any, reduction: str) -> torch.Tensor:
    ck.check_reduction(name, reduction)
    target = _native(target, input)
    ck.check_same_shape(name, tuple(input.shape), tuple(target.shape))
    return target


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
