"""Write-once models: ``dualdl.nn.Module`` and the built-in layers (PyTorch's names and signatures).

A model class written once builds a native ``torch.nn.Module`` or Gluon ``HybridBlock`` depending
on the active backend (``dualdl.use``) or the ``backend=`` keyword.
"""
from .module import Module, ModuleMeta, Parameter, native_class
from .layers import *  # noqa: F401,F403
from .layers import LAYERS, __all__ as _layer_names

__all__ = ["Module", "Parameter", "native_class", *_layer_names]
from . import init  # noqa: E402,F401  (torch.nn.init written once; imports no framework)
