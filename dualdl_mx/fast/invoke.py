"""Prepared operator calls: one MXNet operator, called again and again on the same arrays with the
same attributes (an optimizer's multi-tensor update, ``zero_grad``'s ``reset_arrays``, the
Trainer's gradient check), with its C arguments built once.

Hides: ``nd.<op>(...)`` rebuilds everything per call: it checks every array's class, builds the
handle array, formats each attribute as a string (a tuple of 60 learning rates as 60 numbers), and
looks the operator up. On the benchmark MLP a ``multi_sgd_mom_update`` over 4 parameters took
37 us that way and 20 us prepared (dispatch and kernel, measured in one loop); the operator, its
inputs and outputs, and so the result, are the same bit for bit (tests/test_mx_invoke.py).
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from mxnet import nd
from mxnet.base import _LIB, MXNetError, NDArrayHandle, c_str, c_str_array, check_call

__all__ = ["PreparedCall", "MULTI_MAX", "kept"]

# MXNet's multi-tensor operators take at most 60 tensors a call (61 crashes MXNet 1.9.1: measured)
MULTI_MAX = 60

_OPS: Dict[str, ctypes.c_void_p] = {}


def _op_handle(name: str) -> ctypes.c_void_p:
    h = _OPS.get(name)
    if h is None:
        raw = ctypes.c_void_p()
        try:
            check_call(_LIB.NNGetOpHandle(c_str(name), ctypes.byref(raw)))
        except MXNetError:
            raw = ctypes.c_void_p()
        if not raw.value:
            raise ValueError(f"MXNet has no operator {name!r}")
        h = _OPS[name] = raw
    return h


def _attr(v: Any) -> str:
    # what nd.<op> sends: str() of each value (tuples as "(a, b)", bools as "True")
    return str(v)


class PreparedCall:
    """``op(*inputs, out=outputs, **attrs)`` with its arguments built once.

    Args:
        op: the operator's registered name (e.g. ``"multi_sgd_mom_update"``).
        inputs: the input NDArrays (kept alive by this object).
        outputs: the arrays the operator writes (``out=``), so that every call writes the same
            arrays and no NDArray is made per call; empty only for an operator without outputs
            (``reset_arrays``, which writes its inputs).
        **attrs: the operator's attributes, as for ``nd.<op>``.

    ``set_attrs(**attrs)`` changes attribute values (e.g. a new learning rate) without rebuilding
    the array arguments; ``set_input(i, array)`` puts another array in input slot ``i``. Calls
    are recorded by autograd exactly as ``nd.<op>`` calls are.
    """

    __slots__ = ("_handle", "_inputs", "_outputs", "_n_in", "_in_handles", "_out_handles",
                 "_n_out", "_attrs", "_n_attrs", "_keys", "_vals")

    def __init__(self, op: str, inputs: Sequence[nd.NDArray], outputs: Sequence[nd.NDArray],
                 **attrs: Any) -> None:
        for what, arrays in (("input", inputs), ("output", outputs)):
            for a in arrays:
                if not isinstance(a, nd.NDArray):
                    raise TypeError(f"PreparedCall({op!r}): every {what} must be an mxnet NDArray, "
                                    f"got {type(a).__name__}")
        self._handle = _op_handle(op)
        self._inputs, self._outputs = list(inputs), list(outputs)
        self._n_in = ctypes.c_int(len(self._inputs))
        self._in_handles = (NDArrayHandle * len(self._inputs))(*[a.handle for a in self._inputs])
        self._n_out = len(self._outputs)
        self._out_handles = (ctypes.cast((NDArrayHandle * self._n_out)(*[a.handle for a in self._outputs]),
                                         ctypes.POINTER(NDArrayHandle)) if self._outputs else None)
        self._attrs: Dict[str, Any] = {}
        self.set_attrs(**attrs)

    def set_attrs(self, **attrs: Any) -> None:
        """Change (or add) attributes; the arrays stay as prepared."""
        if attrs and all(k in self._attrs and self._attrs[k] == v for k, v in attrs.items()):
            return
        self._attrs.update(attrs)
        keys = list(self._attrs)
        self._n_attrs = ctypes.c_int(len(keys))
        self._keys = c_str_array(keys)
        self._vals = c_str_array([_attr(self._attrs[k]) for k in keys])

    def set_input(self, i: int, array: nd.NDArray) -> None:
        """Input ``i`` is ``array`` from the next call on (kept alive by this object)."""
        if not isinstance(array, nd.NDArray):
            raise TypeError(f"PreparedCall.set_input: expected an mxnet NDArray, got {type(array).__name__}")
        self._inputs[i] = array
        self._in_handles[i] = array.handle

    @property
    def outputs(self) -> List[nd.NDArray]:
        return self._outputs

    def __call__(self) -> List[nd.NDArray]:
        n_out = ctypes.c_int(self._n_out)
        outs = self._out_handles if self._n_out else ctypes.POINTER(NDArrayHandle)()
        stypes = ctypes.POINTER(ctypes.c_int)()
        check_call(_LIB.MXImperativeInvokeEx(self._handle, self._n_in, self._in_handles,
                                             ctypes.byref(n_out), ctypes.byref(outs),
                                             self._n_attrs, self._keys, self._vals,
                                             ctypes.byref(stypes)))
        return self._outputs


def kept(cache: Optional[Dict[str, Any]], name: str, key: Tuple, build: Callable[[], Tuple[Any, Any]]) -> Any:
    """A plan of prepared calls, kept in ``cache[name]`` (a dict its caller keeps between steps)
    while ``key`` is unchanged. ``key`` holds the ``id()`` of the arrays (and other objects) the
    plan was built from; ``build()`` returns ``(plan, objects)``, and the entry holds those
    objects, so that their ids cannot be reused by new ones while the plan is kept."""
    if cache is None:
        return build()[0]
    hit = cache.get(name)
    if hit is not None and hit[0] == key:
        return hit[1]
    plan, objects = build()
    cache[name] = (key, plan, objects)
    return plan
