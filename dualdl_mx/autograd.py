"""Autograd on MXNet/Gluon: recording scopes and backward.

Hides: MXNet records only inside ``autograd.record()`` and ``pause()`` is its ``no_grad``
(see ``dualdl.autograd``).
"""
from __future__ import annotations

from typing import Any, List, Optional

from mxnet import autograd, nd

__all__ = ["record", "no_grad", "backward"]


def record(train_mode: bool = True):
    return autograd.record(train_mode=train_mode)


def no_grad():
    return autograd.pause()


def backward(losses: List[nd.NDArray], grads: Optional[List[Any]], retain_graph: bool) -> None:
    for loss in losses:
        if not isinstance(loss, nd.NDArray):
            raise TypeError(f"backward() expects NDArrays on the mxnet backend, got {type(loss).__name__}")
    autograd.backward(losses, head_grads=grads, retain_graph=retain_graph)
