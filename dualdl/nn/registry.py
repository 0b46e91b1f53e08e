"""Each adapter's layer classes, registered by their class name (no framework import).

An adapter's layer base (``dualdl_torch.base.Layer``, ``dualdl_mx.base.Layer``) calls
:func:`register` from ``__init_subclass__``, so a class is a dualdl layer because of how it is
written, not because a list names it: ``class GELU(Layer)`` (or ``type("GELU", (Layer, ...), ns)``)
in ``dualdl_mx/activation.py`` *is* ``backend.module("nn").GELU`` on MXNet, with ``_dl_layer = "GELU"``
set here. The adapter's ``nn`` index (``dualdl_torch/nn.py``, ``dualdl_mx/nn.py``) imports its family
modules and exports :func:`adapter_layers`; a family module's ``__all__`` is :func:`defined_in`.

- A class whose name starts with ``_`` (a shared base such as ``_BatchNorm``) does not register.
- A class defined outside the adapter's package (a user's subclass of an adapter layer) does not
  register: it keeps its parent's ``_dl_layer``, as any subclass does.
- A public class whose name is not declared in ``dualdl.nn.layers.LAYERS`` does not register
  either: it is listed by :func:`undeclared`, which tests/test_layer_contract.py requires empty.
- Two classes of one adapter with the same declared name fail at import (``nn.X`` would be ambiguous).
"""
from __future__ import annotations

from typing import Dict, List

__all__ = ["register", "adapter_layers", "defined_in", "undeclared"]

_LAYERS: Dict[str, Dict[str, type]] = {}        # adapter package -> layer name -> class
_UNDECLARED: Dict[str, List[type]] = {}         # adapter package -> public classes not in LAYERS


def register(cls: type, package: str) -> None:
    """Register ``cls`` (a new subclass of ``package``'s layer base) as the layer of its name."""
    from .layers import LAYERS
    name = cls.__name__
    if name.startswith("_") or not (cls.__module__ == package or cls.__module__.startswith(package + ".")):
        return
    if name not in LAYERS:
        _UNDECLARED.setdefault(package, []).append(cls)
        return
    known = _LAYERS.setdefault(package, {}).get(name)
    if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
        raise TypeError(f"{cls.__module__}.{cls.__qualname__}: {package} already has the layer {name} "
                        f"({known.__module__}.{known.__qualname__}); one class per declared layer")
    cls._dl_layer = name
    _LAYERS[package][name] = cls


def adapter_layers(package: str) -> Dict[str, type]:
    """Name -> class of every layer ``package`` registered so far, in registration order."""
    return dict(_LAYERS.get(package, {}))


def defined_in(module: str) -> List[str]:
    """The names of the layers defined in ``module`` (a family module's ``__all__``)."""
    package = module.split(".", 1)[0]
    return [name for name, cls in _LAYERS.get(package, {}).items() if cls.__module__ == module]


def undeclared(package: str) -> List[str]:
    """``module.Class`` of each public layer class of ``package`` whose name ``LAYERS`` does not declare."""
    return [f"{c.__module__}.{c.__qualname__}" for c in _UNDECLARED.get(package, [])]
