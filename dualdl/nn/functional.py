"""``torch.nn.functional`` written once: ``from dualdl.nn import functional as F`` and call
``F.relu(x)``, ``F.adaptive_avg_pool2d(x, 1)``, ``F.interpolate(x, scale_factor=2)``,
``F.scaled_dot_product_attention(q, k, v, is_causal=True)``, ``F.cross_entropy(logits, y)`` with
torch 2.13's names, signatures and defaults on torch tensors, MXNet NDArrays and, inside a
hybridized block, MXNet Symbols.

Each function dispatches on its first argument's type (one dict lookup) to the backend's
``ops_functional`` module: on torch that *is* ``torch.nn.functional``'s own function (the numbers are
torch's, bit for bit); on MXNet an implementation with torch's semantics that works eager and
hybridized (``mx.nd`` or ``mx.sym`` picked from the argument), checked against
``torch.nn.functional`` in float32 and float64, forward and input gradients
(tests/test_nn_functional*.py). What MXNet does differently, or cannot do, is in each function's
docstring (and in the table ``dualdl.functional_spec.FUNCTIONAL``); a torch name not written yet
raises an ``AttributeError`` that says what to use instead. The losses (``cross_entropy``,
``mse_loss``, ``nll_loss``, ``binary_cross_entropy(_with_logits)``, ...) are
``dualdl.losses.functional``'s.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Dict

from ..backend import backend_for
from ..functional_spec import FUNCTIONAL, NOT_WRITTEN
from ..losses import functional as _losses
from ..losses.functional import *  # noqa: F401,F403  (the losses, torch's names and signatures)

_IMPL: Dict[type, Any] = {}


def _impl(x: Any):
    """The backend's ``ops_functional`` module for ``x``'s type (cached: on every call's path)."""
    try:
        return _IMPL[type(x)]
    except KeyError:
        mod = _IMPL[type(x)] = backend_for(x).module("ops_functional")
        return mod


def _dispatcher(name: str, signature: str, mxnet: str) -> Callable[..., Any]:
    """``def name<signature>: return _impl(<first>).name(<every parameter>)``, compiled once: the
    function has torch's exact signature (``inspect.signature`` shows it) and passes each argument
    on as given (positional parameters by position, keyword-only ones by name)."""
    params = list(inspect.signature(eval(f"lambda {signature[1:-1]}: 0")).parameters.values())  # noqa: S307
    call = ", ".join(p.name if p.kind is p.POSITIONAL_OR_KEYWORD else f"{p.name}={p.name}" for p in params)
    src = f"def {name}{signature}:\n    return _impl({params[0].name}).{name}({call})\n"
    ns: Dict[str, Any] = {"_impl": _impl}
    exec(compile(src, f"<dualdl.nn.functional.{name}>", "exec"), ns)  # noqa: S102 (our own table)
    fn = ns[name]
    fn.__module__ = __name__
    fn.__qualname__ = name
    fn.__doc__ = (f"``torch.nn.functional.{name}`` written once (torch: torch's own function)."
                  + (f"\n\nMXNet: {mxnet}." if mxnet else ""))
    return fn


for _name, (_sig, _mx) in FUNCTIONAL.items():
    globals()[_name] = _dispatcher(_name, _sig, _mx)

__all__ = [*FUNCTIONAL, *_losses.__all__]


def __getattr__(name: str):
    if name in NOT_WRITTEN:
        raise AttributeError(f"dualdl.nn.functional.{name} (torch.nn.functional.{name}) is not written once "
                             f"yet: {NOT_WRITTEN[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
