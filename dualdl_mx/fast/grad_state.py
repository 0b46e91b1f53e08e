"""MXNet's fresh-gradient flags, read and written straight on the array handles.

Hides: torch says ``grad is None`` for a parameter without a gradient since ``zero_grad``; Gluon
keeps a zero array and a flag on the parameter's autograd node, which backward sets
(``NDArray._fresh_grad``). That attribute is a Python property around one C call, reached
through Gluon's ``Parameter.list_data()`` and its checks: 1-2 us a parameter, and a step reads
or writes the flags of every parameter two or three times (the demo CRNN has 30). These helpers
make the same C calls (``MXNDArrayGetGradState`` / ``MXNDArraySetGradState``) on the handles.
"""
from __future__ import annotations

import ctypes
from typing import Iterable, List, Sequence, Tuple

from mxnet import gluon, nd
from mxnet.base import _LIB, check_call

__all__ = ["is_fresh", "fresh_params", "stale_names", "read_flags", "set_flags"]

_GET = _LIB.MXNDArrayGetGradState
_SET = _LIB.MXNDArraySetGradState


def _get(handle, out: ctypes.c_int) -> bool:
    ret = _GET(handle, ctypes.byref(out))
    if ret:
        check_call(ret)                     # raises MXNet's error
    return bool(out.value)


def _fresh(p: gluon.Parameter, out: ctypes.c_int) -> bool:
    data = p._data
    return data is not None and p._grad_req != "null" and _get(data[0].handle, out)


def is_fresh(p: gluon.Parameter) -> bool:
    """Whether ``p`` (its first context's copy) got a gradient since its flag was last cleared;
    False while Gluon's deferred initialisation has not run and for ``grad_req='null'``."""
    return _fresh(p, ctypes.c_int())


def fresh_params(params: Iterable[gluon.Parameter]) -> List[gluon.Parameter]:
    """The parameters a step reads: those :func:`is_fresh` says got a gradient."""
    out = ctypes.c_int()
    return [p for p in params if _fresh(p, out)]


def stale_names(named: Iterable[Tuple[str, gluon.Parameter]]) -> List[str]:
    """The names of the parameters :func:`is_fresh` says got no gradient."""
    out = ctypes.c_int()
    return [n for n, p in named if not _fresh(p, out)]


def read_flags(arrays: Sequence[nd.NDArray]) -> List[bool]:
    out = ctypes.c_int()
    return [_get(a.handle, out) for a in arrays]


def set_flags(arrays: Sequence[nd.NDArray], fresh: bool) -> None:
    """Every array's flag to ``fresh`` (False: what ``zero_grad`` leaves)."""
    state = 1 if fresh else 0
    for a in arrays:
        ret = _SET(a.handle, state)
        if ret:
            check_call(ret)
