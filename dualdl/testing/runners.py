"""One training step of a model on one backend, everything read back as numpy: the one parity
runner, keyed by backend name. What differs per framework (recording, where gradients live, hooks)
is in each adapter's ``testing`` module, looked up through the registry; nothing here names one.

Hides: torch keeps ``p.grad`` (``None`` before any backward) and needs ``requires_grad`` inputs;
MXNet records under ``autograd.record()``, keeps gradients in ``p.grad()`` (zeros plus a stale flag
after ``zero_grad``), has no 0-d arrays (a reduced loss has shape (1,)) and sums a non-scalar loss
silently in ``backward()`` where torch raises. Every backend returns the same :class:`StepResult`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from ..backend import get_backend
from .capture import flatten

__all__ = ["StepResult", "LossSpec", "Runner", "runner_for", "run_step", "adapter"]


@dataclass
class StepResult:
    outputs: List[np.ndarray]
    loss: float
    grads: Dict[str, Optional[np.ndarray]]
    input_grads: List[Optional[np.ndarray]]
    weights: Dict[str, np.ndarray] = field(default_factory=dict)   # state after the optimizer step


class LossSpec:
    """What to backpropagate: ``fn(output, target)`` (a dualdl loss or any backend-generic callable)
    or, when ``fn`` is None, the projection ``sum_i <output_i, proj_i>`` with fixed random ``proj``
    (every output element gets a distinct gradient)."""

    def __init__(self, fn: Optional[Callable], label: str, proj: Optional[List[np.ndarray]] = None):
        self.fn, self.label, self.proj = fn, label, proj


def adapter(backend: str):
    """The adapter's ``testing`` module of ``backend`` (a name such as "torch" or "mxnet")."""
    return get_backend(backend).module("testing")


class Runner:
    """A model on one backend in one float dtype: inputs in, numpy out."""

    def __init__(self, backend: str, model: Any, dtype=np.float32):
        self.backend, self.model, self.dtype = get_backend(backend).name, model, np.dtype(dtype)
        self.impl = adapter(self.backend)
        self.train = True

    def native(self, a: Any, grad: bool = False):
        """A numpy array as this backend's tensor (floats cast to the runner's dtype)."""
        if a is None or not isinstance(a, np.ndarray):
            return a
        return self.impl.tensor(a.astype(self.dtype) if a.dtype.kind == "f" else a, grad)

    def to_numpy(self, t: Any) -> np.ndarray:
        return self.impl.to_numpy(t)

    def set_mode(self, train: bool) -> None:
        self.train = bool(train)
        self.impl.set_mode(self.model, train)

    def _call(self, xs: Sequence[Any], forward: Optional[Callable]) -> Any:
        return forward(self.model, *xs) if forward else self.model(*xs)

    def infer(self, inputs: Sequence[Any], forward: Optional[Callable] = None) -> StepResult:
        with self.impl.inference(self.train):
            out = self._call([self.native(x) for x in inputs], forward)
        return StepResult([self.to_numpy(o) for o in flatten(out)], float("nan"), {}, [])

    def step(self, inputs: Sequence[Any], target: Any = None, loss: Optional[LossSpec] = None,
             forward: Optional[Callable] = None, optimizer: Any = None,
             grad_outputs: Optional[Sequence[Optional[np.ndarray]]] = None,
             grad_inputs: Optional[Sequence[bool]] = None) -> StepResult:
        """Forward, backward (of ``loss``, or of ``grad_outputs`` into the outputs), the optimizer's
        step when given. ``grad_inputs[i]`` False: no gradient asked for input ``i``."""
        impl = self.impl
        impl.zero_grad(self.model)
        want = list(grad_inputs) if grad_inputs is not None else [True] * len(inputs)
        xs = [self.native(x, grad=w) for x, w in zip(inputs, want)]
        tgt = self.native(target)
        with impl.recording(self.train):
            out = self._call(xs, forward)
            flat = flatten(out)
            value = None
            if grad_outputs is None:
                value = self._loss(out, flat, tgt, loss)
        if grad_outputs is None:
            if not hasattr(value, "shape") or impl.numel(value) != 1:
                raise ValueError(f"the loss must be a single number (reduction='mean' or 'sum'), got "
                                 f"{tuple(value.shape) if hasattr(value, 'shape') else type(value).__name__}")
            impl.backward([value])
        elif any(w and isinstance(x, np.ndarray) and x.dtype.kind == "f" for w, x in zip(want, inputs)) \
                or any(True for _ in self.model.named_parameters()):    # else: nothing can receive a gradient
            impl.backward(flat, [None if g is None else np.asarray(g).astype(self.dtype) for g in grad_outputs])
        res = StepResult([self.to_numpy(o) for o in flat],
                         float("nan") if value is None else float(self.to_numpy(value).reshape(-1)[0]),
                         impl.param_grads(self.model), [impl.input_grad(x) for x in xs])
        if optimizer is not None:
            optimizer.step()
            res.weights = self.state()
        return res

    def _loss(self, out: Any, flat: List[Any], tgt: Any, loss: Optional[LossSpec]) -> Any:
        if loss is not None and loss.fn is not None:
            return loss.fn(out, tgt)
        proj = loss.proj if loss is not None else None
        terms = [(o * self.native(np.asarray(p))).sum() for o, p in zip(flat, proj or []) if self.impl.is_float(o)]
        if not terms:
            raise ValueError("nothing to backpropagate: the model returned no float tensor")
        value = terms[0]
        for t in terms[1:]:
            value = value + t
        return value

    def parameters(self):
        return self.model.parameters()

    def state(self) -> Dict[str, np.ndarray]:
        from dualdl.state import state_dict
        return {k: self.to_numpy(v) for k, v in state_dict(self.model).items()}

    def param_names(self) -> List[str]:
        return [k for k, _ in self.model.named_parameters()]


def runner_for(backend: str, model: Any, dtype=np.float32) -> Runner:
    return Runner(backend, model, dtype)


def run_step(backend: str, model: Any, inputs: Sequence[Any], *, target: Any = None,
             loss: Optional[LossSpec] = None, grad_outputs: Optional[Sequence[Optional[np.ndarray]]] = None,
             forward: Optional[Callable] = None, optimizer: Any = None, train: Optional[bool] = True,
             dtype=np.float32, grad_inputs: Optional[Sequence[bool]] = None) -> StepResult:
    """One step of ``model`` on ``backend`` (a name): outputs, loss, parameter and input gradients
    and, with ``optimizer``, the weights after its step, all as numpy. Backpropagates ``loss``
    (``fn(output, target)`` or a projection) or, with ``grad_outputs``, those output gradients.
    ``train``: the module mode to set (also MXNet's ``record(train_mode=...)``); None keeps the
    model's mode and records in train mode (``autograd.record()``'s default)."""
    r = Runner(backend, model, dtype)
    if train is not None:
        r.set_mode(train)
    return r.step(inputs, target, loss, forward, optimizer, grad_outputs, grad_inputs)
