"""Gradients on PyTorch: the trainable parameters, where the model lives, zeroing, scaling and
the stale-gradient check.

Hides: a parameter without a gradient is ``grad is None`` in torch (Gluon keeps a zero array and
a freshness flag), and replicas accumulate into the one parameter, so there is nothing to all-reduce.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from dualdl.devices import Device

__all__ = ["model_devices", "trainable", "zero_grad", "allreduce_grads", "scale_grads", "stale",
           "grad_arrays", "overwrite_next_backward", "accumulate_again"]


# ---- model inspection ------------------------------------------------------------------------
def _dev(t: torch.Tensor) -> Device:
    return Device("gpu", t.device.index or 0) if t.device.type == "cuda" else Device("cpu", 0)


def model_devices(model: torch.nn.Module) -> List[Device]:
    """The one device holding the model's tensors (``cpu(0)`` for an empty model)."""
    devs = sorted({_dev(t) for t in list(model.parameters()) + list(model.buffers())})
    if len(devs) > 1:
        raise ValueError(f"the model's parameters and buffers span several devices {devs}; data "
                         f"parallelism needs the whole model on the first device")
    return devs or [Device("cpu", 0)]


def trainable(model: torch.nn.Module) -> List[Tuple[str, torch.nn.Parameter]]:
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


# ---- gradients -------------------------------------------------------------------------------
def zero_grad(params: Sequence[torch.Tensor], cache: Optional[Dict[str, Any]] = None) -> None:
    """``grad = None`` (torch's default ``set_to_none=True``): an unused parameter stays None.
    ``cache`` (the contract's: an adapter may keep state there between calls) is not needed here."""
    for p in params:
        p.grad = None


def overwrite_next_backward(params: Sequence[torch.Tensor], cache: Optional[Dict[str, Any]] = None) -> None:
    """:func:`zero_grad`: with ``grad = None`` torch's next backward writes the gradients."""
    zero_grad(params, cache)


def accumulate_again(params: Sequence[torch.Tensor], cache: Optional[Dict[str, Any]] = None) -> None:
    """Nothing to do: torch adds into an existing ``.grad`` by itself."""


def allreduce_grads(params: Sequence[torch.Tensor]) -> None:
    """Nothing to do: replicas (virtual or DataParallel's) accumulate into the one parameter."""


@torch.no_grad()
def scale_grads(params: Sequence[torch.Tensor], factor: float) -> None:
    for p in params:
        if p.grad is not None:
            p.grad.mul_(factor)


def stale(named: Sequence[Tuple[str, torch.Tensor]]) -> List[str]:
    """Names of parameters with no gradient since the last zero_grad."""
    return [n for n, p in named if p.grad is None]


def grad_arrays(params: Sequence[torch.Tensor]) -> List[Optional[np.ndarray]]:
    return [None if p.grad is None else p.grad.detach().cpu().numpy().copy() for p in params]
