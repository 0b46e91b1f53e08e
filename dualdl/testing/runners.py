"""Running one training step of a model on one backend and reading everything back as numpy.

Hides: torch keeps ``p.grad`` (``None`` before any backward) and needs ``requires_grad`` inputs;
MXNet records under ``autograd.record()``, keeps gradients in ``p.grad()`` (zeros plus a stale flag
after ``zero_grad``), has no 0-d arrays (a reduced loss has shape (1,)) and sums a non-scalar loss
silently in ``backward()`` where torch raises. Both runners return the same :class:`StepResult`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from .capture import flatten


@dataclass
class StepResult:
    outputs: List[np.ndarray]
    loss: float
    grads: Dict[str, Optional[np.ndarray]]
    input_grads: List[Optional[np.ndarray]]


class LossSpec:
    """What to backpropagate: ``fn(output, target)`` (a dualdl loss or any backend-generic callable)
    or, when ``fn`` is None, the projection ``sum_i <output_i, proj_i>`` with fixed random ``proj``
    (every output element gets a distinct gradient)."""

    def __init__(self, fn: Optional[Callable], label: str, proj: Optional[List[np.ndarray]] = None):
        self.fn, self.label, self.proj = fn, label, proj


def _float_dtype(a: np.ndarray, dtype) -> np.ndarray:
    return a.astype(dtype) if a.dtype.kind == "f" else a


class TorchRunner:
    backend = "torch"

    def __init__(self, model: Any, dtype=np.float32):
        self.model, self.dtype = model, np.dtype(dtype)

    def native(self, a: Any, grad: bool = False):
        import torch
        if a is None or not isinstance(a, np.ndarray):
            return a
        a = _float_dtype(a, self.dtype)
        if a.dtype.kind in "iu":
            a = a.astype(np.int64)        # torch indexing/embeddings want int64
        t = torch.from_numpy(np.ascontiguousarray(a))
        if grad and t.is_floating_point():
            t.requires_grad_(True)
        return t

    def to_numpy(self, t: Any) -> np.ndarray:
        return t.detach().cpu().numpy().copy()

    def set_mode(self, train: bool) -> None:
        self.model.train(train)

    def infer(self, inputs: Sequence[Any], forward: Optional[Callable]) -> StepResult:
        import torch
        with torch.no_grad():
            xs = [self.native(x) for x in inputs]
            out = forward(self.model, *xs) if forward else self.model(*xs)
        return StepResult([self.to_numpy(o) for o in flatten(out)], float("nan"), {}, [])

    def step(self, inputs: Sequence[Any], target: Any, loss: LossSpec, forward: Optional[Callable],
             optimizer: Any = None) -> StepResult:
        import torch
        self.model.zero_grad(set_to_none=True)
        xs = [self.native(x, grad=True) for x in inputs]
        out = forward(self.model, *xs) if forward else self.model(*xs)
        flat = flatten(out)
        if loss.fn is None:
            value = sum((o * torch.from_numpy(p.astype(self.dtype))).sum()
                        for o, p in zip(flat, loss.proj) if o.is_floating_point())
        else:
            value = loss.fn(out, self.native(target))
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            raise ValueError(f"the loss must be a single number (reduction='mean' or 'sum'), got "
                             f"{tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__}")
        value.backward()
        grads = {k: (None if p.grad is None else self.to_numpy(p.grad)) for k, p in self.model.named_parameters()}
        dx = [self.to_numpy(x.grad) if isinstance(x, torch.Tensor) and x.grad is not None else None for x in xs]
        res = StepResult([self.to_numpy(o) for o in flat], float(value.detach().reshape(())), grads, dx)
        if optimizer is not None:
            optimizer.step()
        return res

    def parameters(self):
        return self.model.parameters()

    def state(self) -> Dict[str, np.ndarray]:
        from dualdl.state import state_dict
        return {k: self.to_numpy(v) for k, v in state_dict(self.model).items()}

    def param_names(self) -> List[str]:
        return [k for k, _ in self.model.named_parameters()]


class MXNetRunner:
    backend = "mxnet"

    def __init__(self, model: Any, dtype=np.float32):
        self.model, self.dtype = model, np.dtype(dtype)
        self.train = True

    def native(self, a: Any, grad: bool = False):
        from mxnet import nd
        if a is None or not isinstance(a, np.ndarray):
            return a
        a = _float_dtype(a, self.dtype)
        t = nd.array(a, dtype=a.dtype)
        if grad and a.dtype.kind == "f":
            t.attach_grad()
        return t

    def to_numpy(self, t: Any) -> np.ndarray:
        return t.asnumpy()

    def set_mode(self, train: bool) -> None:
        self.train = bool(train)
        self.model.train(train)

    def infer(self, inputs: Sequence[Any], forward: Optional[Callable]) -> StepResult:
        from mxnet import autograd
        with autograd.pause(train_mode=self.train):
            xs = [self.native(x) for x in inputs]
            out = forward(self.model, *xs) if forward else self.model(*xs)
        return StepResult([o.asnumpy() for o in flatten(out)], float("nan"), {}, [])

    def step(self, inputs: Sequence[Any], target: Any, loss: LossSpec, forward: Optional[Callable],
             optimizer: Any = None) -> StepResult:
        from mxnet import autograd, nd
        self.model.zero_grad()
        xs = [self.native(x, grad=True) for x in inputs]
        tgt = self.native(target)
        with autograd.record(train_mode=self.train):
            out = forward(self.model, *xs) if forward else self.model(*xs)
            flat = flatten(out)
            if loss.fn is None:
                terms = [(o * nd.array(p, dtype=self.dtype)).sum() for o, p in zip(flat, loss.proj)
                         if np.dtype(o.dtype).kind == "f"]
                value = terms[0]
                for t in terms[1:]:
                    value = value + t
            else:
                value = loss.fn(out, tgt)
        if not isinstance(value, nd.NDArray) or value.size != 1:
            raise ValueError(f"the loss must be a single number (reduction='mean' or 'sum'), got "
                             f"{value.shape if isinstance(value, nd.NDArray) else type(value).__name__}")
        value.backward()
        grads = {}
        for k, p in self.model.named_parameters():
            if p.grad_req == "null":
                grads[k] = None
                continue
            fresh = bool(getattr(p.list_data()[0], "_fresh_grad", True))
            grads[k] = p.list_grad()[0].asnumpy() if fresh else None
        dx = [x.grad.asnumpy() if isinstance(x, nd.NDArray) and x.grad is not None else None for x in xs]
        res = StepResult([o.asnumpy() for o in flat], float(value.asnumpy().reshape(-1)[0]), grads, dx)
        if optimizer is not None:
            optimizer.step()
        return res

    def parameters(self):
        return self.model.parameters()

    def state(self) -> Dict[str, np.ndarray]:
        from dualdl.state import state_dict
        return {k: v.asnumpy() for k, v in state_dict(self.model).items()}

    def param_names(self) -> List[str]:
        return [k for k, _ in self.model.named_parameters()]


def runner_for(backend: str, model: Any, dtype=np.float32):
    return (TorchRunner if backend == "torch" else MXNetRunner)(model, dtype)
