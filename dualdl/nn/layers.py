"""The built-in layers. Each class is a declaration: instantiating it returns the active backend's
native implementation (``torch.nn.Linear`` subclass on torch, a Gluon ``HybridBlock`` on MXNet)
with PyTorch's signature, parameter names, shapes and default initialisation on both.

``isinstance(layer, dualdl.nn.Linear)`` holds for either backend's Linear.
"""
from __future__ import annotations

from .module import Module

# name -> what MXNet does differently that the MXNet implementation hides
LAYERS = {
    "Linear": "Gluon Dense flattens non-batch axes by default and infers in_units lazily; "
              "Linear applies to the last axis and creates its weight (out, in) at once.",
}


def _declare(name: str, doc: str) -> type:
    return type(name, (Module,), {"_dl_layer": name, "__doc__": doc, "__module__": __name__})


globals().update({name: _declare(name, doc) for name, doc in LAYERS.items()})
__all__ = sorted(LAYERS)
