"""The few autograd calls a hand-written training loop needs, the same on both backends.

Hides:
- MXNet records a graph only inside ``with autograd.record():``; torch always records. Write the
  forward pass (and the loss) inside ``with dl.record(model):`` and it works on both.
- MXNet's ``loss.backward()`` on a non-scalar loss backpropagates its **sum**; torch raises
  ("grad can be implicitly created only for scalar outputs"). :func:`backward` backpropagates the
  sum on both (so per-sample losses + ``opt.step(batch_size=B)`` is the same recipe on both).
- MXNet turns Dropout/BatchNorm training behaviour on from ``record()``'s ``train_mode``; dualdl
  layers follow ``model.train()/eval()`` on both, and ``record(model)`` passes ``model.training``
  through so native Gluon layers inside agree.

A loop written with these pieces::

    opt.zero_grad()
    with dl.record(model):
        loss = loss_fn(model(x), y)          # mean over the batch
    dl.backward(loss)
    opt.step()                                # torch semantics: gradients used as they are
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional, Sequence, Union

from .backend import backend_for, get_backend

__all__ = ["record", "no_grad", "backward"]


def _backend(model: Any, backend: Optional[str]):
    if backend is not None or model is None:
        return get_backend(backend)
    from .state import backend_of_model
    return backend_of_model(model)


@contextlib.contextmanager
def record(model: Any = None, backend: Optional[str] = None, train_mode: Optional[bool] = None) -> Iterator[None]:
    """Record operations for :func:`backward`: ``mx.autograd.record(train_mode=...)`` on MXNet,
    ``torch.enable_grad()`` on torch. ``train_mode`` defaults to ``model.training`` (True without
    a model). The backend is the model's, else ``backend``, else the active one."""
    be = _backend(model, backend)
    if train_mode is None:
        train_mode = bool(getattr(model, "training", True)) if model is not None else True
    with be.module("autograd").record(train_mode):
        yield


@contextlib.contextmanager
def no_grad(model: Any = None, backend: Optional[str] = None) -> Iterator[None]:
    """Run without recording (``torch.no_grad()`` / ``mx.autograd.pause()``)."""
    with _backend(model, backend).module("autograd").no_grad():
        yield


def backward(loss: Union[Any, Sequence[Any]], grad: Any = None, retain_graph: bool = False) -> None:
    """Backpropagate ``loss`` (a tensor, or a list of tensors e.g. one per device) into the
    parameters' gradients. A non-scalar loss backpropagates its sum on both backends; ``grad``
    (a tensor or list like ``loss``) gives explicit head gradients instead."""
    losses = list(loss) if isinstance(loss, (list, tuple)) else [loss]
    if not losses:
        raise ValueError("backward() got an empty list of losses")
    grads = None
    if grad is not None:
        grads = list(grad) if isinstance(grad, (list, tuple)) else [grad]
        if len(grads) != len(losses):
            raise ValueError(f"backward() got {len(losses)} loss(es) but {len(grads)} gradient(s)")
    be = backend_for(losses[0])
    be.module("autograd").backward(losses, grads, retain_graph)
