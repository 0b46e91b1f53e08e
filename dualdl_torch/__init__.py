"""The PyTorch adapter of dualdl: ``Backend`` plus modules with the same names as ``dualdl_mx``."""
from .core import Backend

__all__ = ["Backend"]
