"""The losses as modules, with torch's names, under :mod:`dualdl.nn` (``dl.nn.CrossEntropyLoss``),
where torch-style code looks for them: ``self.criterion = nn.CrossEntropyLoss(weight=w)`` in a
write-once model builds, like a layer, the active backend's native module:

- on torch, a subclass of the ``torch.nn`` loss (``isinstance(c, torch.nn.CrossEntropyLoss)``; its
  ``weight`` a buffer; ``.to()``, ``train()``/``eval()``, hooks, ``state_dict`` as torch's);
- on MXNet, a Gluon ``HybridBlock`` (a child of the model: ``weight`` is a buffer under the same
  state-dict key, ``.to()``/``cast``/``train()``/``eval()``); on NDArrays it runs the checked
  function of ``dualdl_mx.losses`` as one compiled graph (``hybridize()`` changes nothing for it),
  on Symbols (inside a hybridized model) the formula in the model's graph.

Both forwards compute what :mod:`dualdl.losses` computes (same checks, same numbers). The call is
bound against torch's signature (Python's wording of a wrong call) and its values are checked once,
for both backends, by the plain loss of :mod:`dualdl.losses` (``LinearCrossEntropyLoss``, which has
parameters and no plain form: by torch's own constructor errors). ``dl.losses.<Loss>`` stays the
backend-free callable (it dispatches on its first argument's type).
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Dict, Optional

from ..backend import _using, backend_of, get_backend
from ..nn.declaration import Declaration, layer

__all__ = ["LOSSES", "LossModuleMeta"]

_P = inspect.Parameter
# the arguments that hold tensors: made the backend's own (numpy arrays, lists, the other
# backend's tensors accepted), as write-once code has no torch tensors on MXNet
_TENSOR_ARGS = ("weight", "pos_weight")
_LCE = ("in_features, num_classes, *, out_features=(), bias=False, device=None, dtype=None, reduction='mean', "
        "weight=None, ignore_index=None, label_smoothing=0.0, options=None")


def _signature_text(cls: type) -> str:
    """A plain loss's constructor signature as declaration text (names, kinds and defaults)."""
    parts, star = [], False
    for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if p.kind is _P.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        parts.append(p.name if p.default is _P.empty else f"{p.name}={p.default!r}")
    return ", ".join(parts)


def _declarations() -> Dict[str, Declaration]:
    from . import __all__ as names
    from .. import losses
    out = {}
    for name in names:
        cls = getattr(losses, name)
        if isinstance(cls, type) and issubclass(cls, losses.Loss) and cls is not losses.Loss:
            dualdl = {"check_log_probs": "dualdl's (see dl.losses.CTCLoss)"} if name == "CTCLoss" else {}
            out[name] = layer(_signature_text(cls), cls.__doc__ or "", dualdl)
    out["LinearCrossEntropyLoss"] = layer(_LCE, "A Linear child (linear.weight, linear.bias) then cross-entropy; "
                                                "options (torch's chunking) is used on torch, ignored on MXNet.")
    return out


def _native(value: Any, be: Any) -> Any:
    """A tensor argument as ``be``'s tensor (None and numbers unchanged)."""
    if value is None or isinstance(value, (int, float)):
        return value
    if backend_of(value, default=None) is be:
        return value
    from ..tensor import from_numpy, is_tensor, to_numpy
    return from_numpy(to_numpy(value) if is_tensor(value) else value, backend=be.name)


def _check_linear_ce(bound: Dict[str, Any]) -> None:
    """torch's ``LinearCrossEntropyLoss`` constructor errors, word for word (RuntimeErrors)."""
    from ..nn.arguments import check_arguments
    from ._checks import check_reduction
    C, weight, ls = bound["num_classes"], bound["weight"], bound["label_smoothing"]
    if weight is not None and tuple(weight.shape) != (C,):
        raise RuntimeError(f"expected weight shape to be {(C,)}, got {tuple(weight.shape)}")
    if ls < 0 or ls > 1.0:
        raise RuntimeError(f"expected label_smoothing to be in range [0, 1], got {ls}")
    check_reduction("LinearCrossEntropyLoss", bound["reduction"])
    check_arguments("Linear", {"in_features": bound["in_features"],
                               "out_features": math.prod(tuple(bound["out_features"]), start=C)})


class LossModuleMeta(type):
    """``dl.nn.<Loss>(...)`` builds the active backend's (or ``backend=``'s) loss module;
    ``isinstance(m, dl.nn.<Loss>)`` holds for either backend's."""

    def __call__(cls, *args: Any, backend: Optional[str] = None, **kwargs: Any) -> Any:
        name = cls.__name__
        be = get_backend(backend)
        _, kw, bound = cls._dl_decl.bind(name, args, kwargs)
        for k in _TENSOR_ARGS:
            if k in kw:
                kw[k] = bound[k] = _native(bound[k], be)
        if name == "LinearCrossEntropyLoss":
            _check_linear_ce(bound)
        else:
            from .. import losses
            getattr(losses, name)(**bound)          # dualdl's value checks, the same on both backends
        impl = be.module("losses").loss_modules()[name]
        with _using(be.name):
            if kw.get("device") is not None or kw.get("dtype") is not None:
                kw["device"], kw["dtype"], scope = be.module("nn").factory_kwargs(name, kw["device"], kw["dtype"])
                with scope:
                    return impl(**kw)
            return impl(**kw)

    def __instancecheck__(cls, obj: Any) -> bool:
        return getattr(type(obj), "_dl_loss", None) == cls.__name__ or type.__instancecheck__(cls, obj)


def _doc(name: str, decl: Declaration) -> str:
    return (f"``dl.nn.{name}({decl.signature})``: torch.nn.{name} as a module on the active backend (see "
            f":mod:`dualdl.losses.modules`).\n\n{decl.mxnet}")


def _declare(name: str, decl: Declaration) -> type:
    sig = decl.compile(name)[0]
    sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    return LossModuleMeta(name, (), {"_dl_decl": decl, "__doc__": _doc(name, decl), "__module__": "dualdl.nn",
                                     "__signature__": sig, "__qualname__": name})


LOSSES = {name: _declare(name, decl) for name, decl in _declarations().items()}
globals().update(LOSSES)
__all__ += sorted(LOSSES)
