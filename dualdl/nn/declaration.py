"""A layer's neutral declaration: PyTorch's constructor signature, written out as data (no torch
import), and the one place a call is bound before it reaches a backend.

``Declaration.bind(args, kwargs)`` runs a Python function compiled once from the signature text, so a
wrong call fails with Python's own ``TypeError`` wording, the same as torch's
(``Linear.__init__() missing 1 required positional argument: 'out_features'``) on both backends.
``refuse`` turns an argument an adapter cannot honour (its class attribute ``_dl_cannot``) into a
``NotImplementedError`` naming the layer, the argument, the value and why.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

__all__ = ["Declaration", "layer", "refuse", "fit_keywords"]

_P = inspect.Parameter


@dataclass(frozen=True)
class Declaration:
    """One public layer: ``signature`` is PyTorch 2.13's parameter list as Python source without
    ``self`` (``"in_features, out_features, bias=True, device=None, dtype=None"``); ``mxnet`` says
    what MXNet/Gluon does differently that the MXNet adapter hides; ``dualdl`` names each parameter
    whose name or default departs from torch's, with the reason; ``torch`` is False for a layer
    torch.nn does not have (dualdl's own), whose ``doc`` then gives its summary and Args/Shape
    sections (torch's are stored in layer_docs.py); ``example`` is the positional arguments of a
    small instance that has parameters, for the contract tests (``device=``/``dtype=`` on both
    backends; needed where the signature has required parameters and ``device``/``dtype``)."""
    signature: str
    mxnet: str
    dualdl: Mapping[str, str] = field(default_factory=dict)
    torch: bool = True
    doc: Tuple[str, str] = ("", "")
    example: tuple = ()

    def compile(self, name: str) -> Tuple[inspect.Signature, Callable[..., Dict[str, Any]]]:
        """The ``inspect.Signature`` and the binder function (built once per layer, then cached)."""
        return self._compiled(name)[:2]

    def _compiled(self, name: str) -> Tuple[inspect.Signature, Callable[..., Dict[str, Any]], tuple]:
        cached = _COMPILED.get((name, self.signature))
        if cached is None:
            ns: Dict[str, Any] = {}
            params = f"self, {self.signature}" if self.signature.strip() else "self"
            exec(compile(f"class {name}:\n    def __init__({params}):\n        return locals()\n",
                         f"<dualdl declaration of {name}>", "exec"), ns)
            fn = ns[name].__init__
            sig = inspect.signature(fn)
            varargs = any(p.kind is _P.VAR_POSITIONAL for p in sig.parameters.values())
            plan = tuple((p.name, _ROUTE[p.kind] if not (varargs and p.kind is _P.POSITIONAL_OR_KEYWORD)
                          else "pos") for p in list(sig.parameters.values())[1:])
            cached = _COMPILED[(name, self.signature)] = (sig, fn, plan)
        return cached

    def bind(self, name: str, args: tuple, kwargs: dict) -> Tuple[tuple, Dict[str, Any], Dict[str, Any]]:
        """Bind a call: ``(positional, keywords, bound)`` to pass on, or Python's TypeError."""
        _, fn, plan = self._compiled(name)
        bound = fn(None, *args, **kwargs)
        del bound["self"]
        pos: list = []
        kw: Dict[str, Any] = {}
        for arg, route in plan:
            if route == "kw":
                kw[arg] = bound[arg]
            elif route == "pos":
                pos.append(bound[arg])
            elif route == "*":
                pos.extend(bound[arg])
            else:
                kw.update(bound[arg])
        return tuple(pos), kw, bound


_ROUTE = {_P.POSITIONAL_ONLY: "pos", _P.POSITIONAL_OR_KEYWORD: "kw", _P.VAR_POSITIONAL: "*",
          _P.KEYWORD_ONLY: "kw", _P.VAR_KEYWORD: "**"}
_COMPILED: Dict[Tuple[str, str], Tuple[inspect.Signature, Callable[..., Dict[str, Any]], tuple]] = {}


def layer(signature: str, mxnet: str, dualdl: Optional[Mapping[str, str]] = None,
          torch: bool = True, doc: Tuple[str, str] = ("", ""), example: tuple = ()) -> Declaration:
    """Declare a layer (see :class:`Declaration`); the registry is ``dualdl.nn.layers.LAYERS``."""
    return Declaration(signature, mxnet, dict(dualdl or {}), torch, doc, tuple(example))


_ACCEPTS: Dict[type, Optional[frozenset]] = {}


def _accepted(impl: type) -> Optional[frozenset]:
    """The keyword names ``impl(...)`` takes (None: it takes any, ``**kwargs``)."""
    if impl not in _ACCEPTS:
        try:
            params = inspect.signature(impl.__init__).parameters.values()
        except (TypeError, ValueError):
            params = ()
        _ACCEPTS[impl] = (None if not params or any(p.kind is _P.VAR_KEYWORD for p in params)
                          else frozenset(p.name for p in params))
    return _ACCEPTS[impl]


def fit_keywords(name: str, decl: Declaration, impl: type, kw: Dict[str, Any], framework: str) -> Dict[str, Any]:
    """The keywords ``impl`` is built with. Declarations are torch 2.13's signatures; an older
    framework's class may lack a keyword (torch < 2.13: ``bias`` of BatchNorm, GroupNorm and
    InstanceNorm). Left at its declared default, the keyword is dropped (the old class behaves so);
    any other value is refused with what to do, not torch's ``unexpected keyword argument``."""
    accepts = _accepted(impl)
    if accepts is None or all(k in accepts for k in kw):
        return kw
    sig = decl.compile(name)[0]
    out = {}
    for k, v in kw.items():
        if k in accepts:
            out[k] = v
            continue
        default = sig.parameters[k].default if k in sig.parameters else _P.empty
        if default is not _P.empty and type(v) is type(default) and v == default:
            continue
        import sys
        version = getattr(sys.modules.get(framework), "__version__", "?")
        raise NotImplementedError(
            f"{name}({k}={v!r}) needs a newer {framework}: the installed {framework} {version} has no {k!r} "
            f"argument in {name} (dualdl's layers follow torch 2.13's signatures); upgrade {framework}, or "
            f"leave {k} at its default {default!r}")
    return out


def _matches(value: Any, refused: Any, bound: Mapping[str, Any]) -> bool:
    if callable(refused):
        return bool(refused(value, bound))
    return any(type(value) is type(r) and value == r for r in refused)


def refuse(name: str, impl: type, bound: Mapping[str, Any], backend: str) -> None:
    """Raise the adapter's declared refusal for an argument it cannot honour (a valid value: invalid
    ones were refused before, by :func:`dualdl.nn.arguments.check_arguments`, as torch refuses them).

    ``impl._dl_cannot`` maps an argument to ``(values, reason)`` or ``(predicate, reason)``, the
    predicate called with the value and the whole bound call, e.g.
    ``{"padding_mode": (("circular",), "MXNet has no circular padding")}`` or
    ``{"kdim": (lambda v, bound: v not in (None, bound["embed_dim"]), "...")}``."""
    for arg, (refused, why) in getattr(impl, "_dl_cannot", {}).items():
        if arg in bound and _matches(bound[arg], refused, bound):
            raise NotImplementedError(f"{name}({arg}={bound[arg]!r}) cannot be honoured on the {backend} "
                                      f"backend: {why}")
