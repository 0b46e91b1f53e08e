"""Parameters and models on MXNet/Gluon (``dualdl.params``): what torch has as methods. Gluon's
``Parameter`` has no ``numel()``/``requires_grad``/``.grad`` attribute/``add_``: its size is the
product of its shape, ``grad_req`` says whether it learns ('null': no), its gradient is one array per
context (``list_grad``), and an update writes every context's copy outside autograd."""
from __future__ import annotations

import math

import mxnet as mx
import numpy as np


def _is_param(p) -> bool:
    return isinstance(p, mx.gluon.Parameter)


def model_to_dtype(model, dtype):
    """Gluon's ``cast`` (parameters and running statistics), in place; returns the model as torch's ``.to``."""
    model.cast(np.dtype(dtype).name)
    return model


def numel(p):
    return int(math.prod(p.shape)) if _is_param(p) else int(p.size)


def requires_grad(p):
    return p.grad_req != "null" if _is_param(p) else p.grad is not None


def requires_grad_(p, flag=True):
    if not _is_param(p):
        raise ValueError("requires_grad_: an MXNet NDArray takes a gradient by attach_grad(); pass a Parameter")
    p.grad_req = "write" if flag else "null"
    return p


def grad(p):
    """The gradient (the sum over the parameter's contexts, on its first); None when it takes none."""
    if not _is_param(p):
        return p.grad
    if p.grad_req == "null" or p._grad is None:
        return None
    grads = p.list_grad()
    total = grads[0]
    for g in grads[1:]:
        total = total + g.as_in_context(total.context)
    return total


def add_(p, other, alpha=1.0):
    """``p += alpha * other`` on every context's copy, outside autograd."""
    with mx.autograd.pause():
        arrays = p.list_data() if _is_param(p) else [p]
        for a in arrays:
            o = other.as_in_context(a.context) if isinstance(other, mx.nd.NDArray) else other
            a[:] = a + o * float(alpha) if alpha != 1 else a + o
    return p
