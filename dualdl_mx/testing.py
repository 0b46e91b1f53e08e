"""What a parity step needs from MXNet (``dualdl.testing.runners`` looks this module up by backend
name): ``attach_grad`` inputs, recording under ``autograd.record(train_mode=...)``, gradients in
``p.grad()`` (zeros plus a stale flag after ``zero_grad``: reported as ``None``), no 0-d arrays
(a reduced loss has shape (1,)), and Gluon forward hooks that fire only for blocks run imperatively
(a hybridized model is un-hybridized while hooked, its state restored after)."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterator, Optional, Sequence

import numpy as np
from mxnet import autograd, nd

__all__ = ["tensor", "to_numpy", "is_float", "numel", "set_mode", "zero_grad", "recording", "inference",
           "backward", "param_grads", "input_grad", "forward_hooks", "cast_model"]


def tensor(a: np.ndarray, grad: bool = False) -> Any:
    """An NDArray copy of ``a`` (bool arrays through dualdl's conversion: legacy ``nd.array`` has no bool)."""
    if a.dtype == np.bool_:
        from dualdl.tensor import from_numpy
        return from_numpy(a, backend="mxnet")
    t = nd.array(a, dtype=a.dtype)
    if grad and a.dtype.kind == "f" and a.size:     # an empty array cannot take a gradient buffer
        if a.ndim == 0:      # attach_grad's zeros_like cannot build a () buffer on MXNet 1.x
            autograd.mark_variables([t], [nd.array(np.zeros((), a.dtype), dtype=a.dtype)])
        else:
            t.attach_grad()
    return t


def to_numpy(t: Any) -> np.ndarray:
    return t.asnumpy()


def is_float(t: Any) -> bool:
    return np.dtype(t.dtype).kind == "f"


def numel(t: Any) -> int:
    return int(t.size)


def set_mode(model: Any, train: bool) -> None:
    model.train(train)


def zero_grad(model: Any) -> None:
    model.zero_grad()


def recording(train: bool) -> contextlib.AbstractContextManager:
    return autograd.record(train_mode=train)


def inference(train: bool) -> contextlib.AbstractContextManager:
    return autograd.pause(train_mode=train)


def backward(outputs: Sequence[Any], grads: Optional[Sequence[np.ndarray]] = None) -> None:
    if grads is None:
        outputs[0].backward()
        return
    pairs = [(o, nd.array(np.asarray(g).reshape(o.shape), dtype=o.dtype)) for o, g in zip(outputs, grads)
             if g is not None and is_float(o)]
    if pairs:
        autograd.backward([o for o, _ in pairs], [g for _, g in pairs])


def param_grads(model: Any) -> Dict[str, Optional[np.ndarray]]:
    grads = {}
    for k, p in model.named_parameters():
        fresh = p.grad_req != "null" and bool(getattr(p.list_data()[0], "_fresh_grad", True))
        grads[k] = p.list_grad()[0].asnumpy() if fresh else None
    return grads


def input_grad(x: Any) -> Optional[np.ndarray]:
    return x.grad.asnumpy() if isinstance(x, nd.NDArray) and x.grad is not None else None


@contextlib.contextmanager
def forward_hooks(model: Any, hook: Callable[[Any, Sequence[Any], Any], None]) -> Iterator[None]:
    modules = [m for _, m in model.named_modules()]
    active = [(m, m._active) for m in modules if getattr(m, "_active", False)]
    if active:
        model.hybridize(False)
    handles = [m.register_forward_hook(hook) for m in modules]
    try:
        yield
    finally:
        for h in handles:
            h.detach()
        for m, act in active:
            m._active = act


def cast_model(model: Any, dtype: np.dtype) -> Any:
    model.cast(np.dtype(dtype).name)
    return model
