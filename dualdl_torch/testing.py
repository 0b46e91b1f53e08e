"""What a parity step needs from PyTorch (``dualdl.testing.runners`` looks this module up by backend
name): tensors with ``requires_grad``, gradients in ``p.grad`` (``None`` when none arrived),
``torch.no_grad`` for inference, forward hooks ``hook(module, args, output)`` that fire in any mode.
Works on any ``torch.nn.Module`` (dualdl's layers and native ``torch.nn`` references alike)."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterator, Optional, Sequence

import numpy as np
import torch

__all__ = ["tensor", "to_numpy", "is_float", "numel", "set_mode", "zero_grad", "recording", "inference",
           "backward", "param_grads", "input_grad", "forward_hooks", "cast_model", "native_entry", "native_namespace", "FunctionModule"]


def tensor(a: np.ndarray, grad: bool = False) -> torch.Tensor:
    """A tensor owning a copy of ``a``; integer arrays become int64 (torch's index dtype)."""
    if a.dtype.kind in "iu":
        a = a.astype(np.int64)
    t = torch.from_numpy(np.array(a, copy=True))
    if grad and t.is_floating_point():
        t.requires_grad_(True)
    return t


def to_numpy(t: Any) -> np.ndarray:
    return t.detach().cpu().numpy().copy()


def is_float(t: Any) -> bool:
    return t.is_floating_point()


def numel(t: Any) -> int:
    return t.numel()


def set_mode(model: Any, train: bool) -> None:
    model.train(train)


def zero_grad(model: Any) -> None:
    model.zero_grad(set_to_none=True)


def recording(train: bool) -> contextlib.AbstractContextManager:
    """Torch records every op on tensors that require gradients: nothing to enter."""
    return contextlib.nullcontext()


def inference(train: bool) -> contextlib.AbstractContextManager:
    return torch.no_grad()


def backward(outputs: Sequence[Any], grads: Optional[Sequence[np.ndarray]] = None) -> None:
    """``outputs[0].backward()`` for a scalar loss, else backpropagate ``grads`` into ``outputs``
    (each gradient on its output's device: a model on a GPU takes them there)."""
    if grads is None:
        outputs[0].backward()
        return
    pairs = [(o, torch.from_numpy(np.ascontiguousarray(g, dtype=np.dtype(str(o.dtype).replace("torch.", ""))))
              .reshape(o.shape).to(o.device)) for o, g in zip(outputs, grads) if g is not None and o.requires_grad]
    if pairs:
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])


def param_grads(model: Any) -> Dict[str, Optional[np.ndarray]]:
    return {k: (None if p.grad is None else to_numpy(p.grad)) for k, p in model.named_parameters()}


def input_grad(x: Any) -> Optional[np.ndarray]:
    return to_numpy(x.grad) if isinstance(x, torch.Tensor) and x.grad is not None else None


@contextlib.contextmanager
def forward_hooks(model: Any, hook: Callable[[Any, Sequence[Any], Any], None]) -> Iterator[None]:
    handles = [m.register_forward_hook(hook) for _, m in model.named_modules()]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def cast_model(model: Any, dtype: np.dtype) -> Any:
    return model.to(getattr(torch, np.dtype(dtype).name))


class FunctionModule(torch.nn.Module):
    """A function as a parameterless module (an op or loss run where a model is expected)."""

    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self.fn = fn

    def forward(self, *xs: Any) -> Any:
        return self.fn(*xs)


def native_entry(kind: str, name: str) -> Any:
    """PyTorch's own version of a dualdl entry, the parity table's reference: ``torch.nn.<name>``
    for a layer or loss, ``torch.nn.functional.<name>`` (else ``torch.<name>``) for an op."""
    import torch.nn.functional as F
    if kind in ("layer", "loss"):
        return getattr(torch.nn, name)
    fn = getattr(F, name, None) or getattr(torch, name, None)
    if fn is None:
        raise AttributeError(f"torch has no function {name!r} (give the row a ref=)")
    return fn


def native_namespace() -> Any:
    """``torch.nn``: the reference's layers, for table rows whose arguments are modules."""
    return torch.nn
