"""Per-layer capture: every layer call's inputs and outputs, in execution order, on either backend.

Hides: torch forward hooks are ``hook(module, args, output)`` and fire under any mode; Gluon's
``register_forward_hook(hook(block, inputs, output))`` fires only for blocks run imperatively (a
hybridized parent runs its children inside one cached graph, so the capture un-hybridizes), and
MXNet errors surface only at the next read (``asnumpy`` in the hook synchronises each layer).
Hooks fire when a call *finishes*, so a layer is listed before the parent that called it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["flatten", "LayerCall", "capture", "capture_grads", "leaf_calls", "replay", "pair_calls"]


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (np.ndarray, np.generic)) \
        and not isinstance(x, (int, float))


def flatten(out: Any) -> List[Any]:
    """Nested tuples/lists/dicts of tensors -> flat list of tensors (other values dropped)."""
    if out is None:
        return []
    if isinstance(out, dict):
        return [t for k in out for t in flatten(out[k])]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in flatten(o)]
    return [out] if _is_tensor(out) or isinstance(out, np.ndarray) else []


@dataclass
class LayerCall:
    name: str                       # structural name ("features.0"); "" is the root
    call: int                       # 0 for the first call of this layer, 1 for the second, ...
    type: str
    inputs: List[np.ndarray] = field(default_factory=list)
    outputs: List[np.ndarray] = field(default_factory=list)
    grad_outputs: List[Optional[np.ndarray]] = field(default_factory=list)
    replayable: bool = True         # positional tensor arguments only (can be re-run alone)


def _numpy(t: Any) -> np.ndarray:
    if isinstance(t, np.ndarray):
        return t
    if hasattr(t, "asnumpy"):
        return t.asnumpy()
    return t.detach().cpu().numpy().copy()


class _CallCounter:
    """``(structural name, call number)`` of a sub-module call; None for modules outside ``model``."""

    def __init__(self, model: Any) -> None:
        self.names = {id(m): n for n, m in model.named_modules()}
        self.counts: Dict[str, int] = {}

    def __call__(self, mod: Any) -> Optional[Tuple[str, int]]:
        name = self.names.get(id(mod))
        if name is None:
            return None
        k = self.counts.get(name, 0)
        self.counts[name] = k + 1
        return name, k


def capture(model: Any, backend: str, inputs: Sequence[Any], forward: Optional[Callable] = None,
            train: bool = False) -> Tuple[List[LayerCall], List[np.ndarray]]:
    """Run ``model`` once (no gradients) with a hook on every sub-module; returns the layer calls in
    the order they finished and the model's flattened outputs. ``inputs`` are native tensors."""
    calls: List[LayerCall] = []
    call_key = _CallCounter(model)

    def hook(mod, args, out):
        key = call_key(mod)
        if key is None:
            return
        name, k = key
        calls.append(LayerCall(name, k, type(mod).__name__, [_numpy(a) for a in flatten(list(args))],
                               [_numpy(o) for o in flatten(out)]))

    from .runners import adapter
    impl = adapter(backend)
    with impl.forward_hooks(model, hook), impl.inference(train):
        out = forward(model, *inputs) if forward else model(*inputs)
    return calls, [_numpy(o) for o in flatten(out)]


def pair_calls(a: List[LayerCall], b: List[LayerCall]) -> List[Tuple[LayerCall, LayerCall]]:
    """Pair layer calls of two runs: by (structural name, call index), which dualdl keeps identical on
    both backends, in ``b``'s order; when fewer than half the calls pair by name, by execution
    order among calls with the same output shapes (the fallback for models named differently)."""
    by_key = {(c.name, c.call): c for c in a}
    pairs = [(by_key[(c.name, c.call)], c) for c in b if (c.name, c.call) in by_key]
    if len(pairs) * 2 >= max(len(a), len(b)):
        return pairs
    pairs, j = [], 0
    for cb in b:
        shapes = [o.shape for o in cb.outputs]
        k = j
        while k < len(a) and [o.shape for o in a[k].outputs] != shapes:
            k += 1
        if k < len(a):
            pairs.append((a[k], cb))
            j = k + 1
    return pairs


def capture_grads(model: Any, run_step: Callable[[], Any], backend: str = "torch") -> List[LayerCall]:
    """Tensors with ``register_hook`` (torch) only: run ``run_step()`` (forward, loss, backward) with hooks that keep every layer
    call's inputs and the gradient arriving at each of its outputs (zeros for unused outputs)."""
    calls: List[LayerCall] = []
    call_key = _CallCounter(model)

    def hook(mod, args, out):
        key = call_key(mod)
        if key is None:
            return
        name, k = key
        flat_in, flat_out = flatten(list(args)), flatten(out)
        call = LayerCall(name, k, type(mod).__name__, [_numpy(a) for a in flat_in], [_numpy(o) for o in flat_out],
                         [None] * len(flat_out), replayable=len(flat_in) == len(args))
        for i, o in enumerate(flat_out):
            if getattr(o, "requires_grad", False):
                o.register_hook(lambda g, c=call, i=i: c.grad_outputs.__setitem__(i, _numpy(g)))
        calls.append(call)

    from .runners import adapter
    with adapter(backend).forward_hooks(model, hook):
        run_step()
    for c in calls:
        c.grad_outputs = [np.zeros_like(o) if g is None else g for g, o in zip(c.grad_outputs, c.outputs)]
    return calls


def leaf_calls(calls: List[LayerCall]) -> List[LayerCall]:
    """Calls of layers none of whose sub-layers ran (the smallest units that can be replayed)."""
    ran = {c.name for c in calls}
    out = []
    for c in calls:
        pre = c.name + "." if c.name else ""
        if c.replayable and not any(n != c.name and n.startswith(pre) for n in ran):
            out.append(c)
    return out


def replay(module: Any, backend: str, inputs: Sequence[np.ndarray], grad_outputs: Sequence[np.ndarray],
           train: bool, dtype=np.float32) -> Tuple[List[Optional[np.ndarray]], Dict[str, np.ndarray]]:
    """Run one layer alone on ``inputs``, backpropagate ``grad_outputs``; returns the input gradients
    and the layer's parameter gradients (MXNet under ``record(train_mode=train)``, as dl.record does)."""
    from .runners import run_step
    res = run_step(backend, module, list(inputs), grad_outputs=list(grad_outputs), train=train, dtype=dtype)
    return res.input_grads, {k: g for k, g in res.grads.items() if g is not None}
