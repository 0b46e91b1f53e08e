"""The batches :func:`dualdl.testing.check_native_training` replays, as each framework takes them.

Hides: a script's batches come as numpy arrays, MXNet NDArrays (a Gluon ``DataLoader``) or torch
tensors, and the two frameworks want different dtypes (Gluon's losses take float32 labels,
torch's ``cross_entropy`` int64 ones; Gluon's ``Embedding`` float32 indices, torch's int64).
Every batch goes through numpy once and is converted per framework (and to float64 for the
twins) by :mod:`dualdl.port.inputs`' leaf rules.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional, Tuple

import numpy as np

__all__ = ["Batch", "as_numpy", "iterate_batches"]


def as_numpy(x: Any) -> Any:
    """numpy for an NDArray / torch tensor / array; tuples, lists and dicts element-wise."""
    if isinstance(x, dict):
        return {k: as_numpy(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)) and not (x and np.isscalar(x[0])):
        return type(x)(as_numpy(v) for v in x) if isinstance(x, tuple) else [as_numpy(v) for v in x]
    if hasattr(x, "asnumpy"):
        return x.asnumpy()
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


@dataclass
class Batch:
    """One (inputs, targets) pair, converted for Gluon, torch and their float64 twins."""
    g_args: Any
    t_args: Any
    g_y: Any
    t_y: Any
    size: int
    shapes: Tuple
    g_args64: Any = None
    t_args64: Any = None
    g_y64: Any = None
    t_y64: Any = None


def _convert(inputs: Any, target_inputs: Any, y: np.ndarray, twins: bool) -> Batch:
    import mxnet as mx
    import torch
    from ..port.inputs import as_inputs, gluon_leaf, torch_leaf

    def g_conv(f64):
        def c(a):
            a = gluon_leaf(f64)(np.asarray(a))
            return mx.nd.array(a, dtype=a.dtype)
        return c

    def t_conv(f64):
        return lambda a: torch.from_numpy(np.require(torch_leaf(f64)(np.asarray(a)),
                                                     requirements="C"))
    g_in = as_inputs(inputs)
    t_in = g_in if target_inputs is None else as_inputs(target_inputs)
    shapes = tuple(np.shape(a) for a in g_in.args) + tuple(
        (k, np.shape(v)) for k, v in sorted(g_in.kwargs.items()))
    b = Batch(g_in.convert(g_conv(False)), t_in.convert(t_conv(False)), g_conv(False)(y),
              t_conv(False)(y), int(y.shape[0]) if y.ndim else 1, shapes)
    if twins:
        b.g_args64, b.t_args64 = g_in.convert(g_conv(True)), t_in.convert(t_conv(True))
        b.g_y64, b.t_y64 = g_conv(True)(y), t_conv(True)(y)
    return b


def iterate_batches(batches: Optional[Iterable], inputs: Any, targets: Any, target_inputs: Any,
                    steps: Optional[int], epochs: int, twins: bool
                    ) -> Iterator[Tuple[int, int, bool, Batch]]:
    """``(step, epoch, last_of_epoch, batch)``: ``batches`` (an iterable of ``(inputs, targets)``,
    re-iterated for each of ``epochs``) or the one batch ``inputs, targets`` repeated ``steps``
    times; at most ``steps`` steps in all when given."""
    if batches is None:
        if inputs is None or targets is None:
            raise ValueError("check_native_training: pass batches=ITERABLE of (inputs, targets), "
                             "or inputs= and targets= for one batch repeated steps= times")
        b = _convert(as_numpy(inputs), as_numpy(target_inputs) if target_inputs is not None
                     else None, np.asarray(as_numpy(targets)), twins)
        n = 3 if steps is None else int(steps)
        for s in range(n):
            yield s, 0, s == n - 1, b
        return
    if target_inputs is not None:
        raise ValueError("check_native_training: target_inputs= applies to one repeated batch; "
                         "with batches= yield inputs both models take")
    step = 0
    for epoch in range(int(epochs)):
        it = iter(batches)
        try:
            item = next(it)
        except StopIteration:
            raise ValueError("check_native_training: batches= yielded no batch") from None
        while True:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise ValueError(f"check_native_training: each batch must be (inputs, targets), "
                                 f"got {type(item).__name__}"
                                 f"{' of length ' + str(len(item)) if hasattr(item, '__len__') else ''}")
            nxt = next(it, None)
            x, y = item
            b = _convert(as_numpy(x), None, np.asarray(as_numpy(y)), twins)
            yield step, epoch, nxt is None, b
            step += 1
            if steps is not None and step >= steps:
                return
            if nxt is None:
                break
            item = nxt
