"""Write-once models: ``dualdl.nn.Module`` and the built-in layers (PyTorch's names and signatures).

A model class written once builds a native ``torch.nn.Module`` or Gluon ``HybridBlock`` depending
on the active backend (``dualdl.use``) or the ``backend=`` keyword.

The losses are here too, with torch's names (``nn.CrossEntropyLoss()``: a ``torch.nn`` loss on
torch, a Gluon block on MXNet; :mod:`dualdl.losses.modules`), loaded on first use.
"""
from .module import Module, ModuleMeta, Parameter, native_class
from .layers import *  # noqa: F401,F403
from .layers import LAYERS, __all__ as _layer_names

# dualdl.losses.modules builds these (tests/test_losses_nn.py checks the two lists agree)
LOSSES = ("L1Loss", "MSELoss", "SmoothL1Loss", "HuberLoss", "KLDivLoss", "BCELoss", "BCEWithLogitsLoss",
          "NLLLoss", "CrossEntropyLoss", "CTCLoss", "PoissonNLLLoss", "GaussianNLLLoss", "MarginRankingLoss",
          "CosineEmbeddingLoss", "TripletMarginLoss", "HingeEmbeddingLoss", "SoftMarginLoss", "MultiMarginLoss",
          "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "LinearCrossEntropyLoss")

__all__ = ["Module", "Parameter", "native_class", *_layer_names, *LOSSES]


def __getattr__(name: str):
    if name == "functional":    # torch.nn.functional written once (lazily: it imports dualdl.losses)
        import importlib
        return importlib.import_module(f"{__name__}.functional")
    if name in LOSSES:          # imported lazily: dualdl.losses imports dualdl.nn's checks
        from ..losses import modules
        value = globals()[name] = modules.LOSSES[name]
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(LOSSES))


from . import init  # noqa: E402,F401  (torch.nn.init written once; imports no framework)
