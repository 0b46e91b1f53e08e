"""The MXNet/Gluon adapter of dualdl: ``Backend`` plus modules with the same names as ``dualdl_torch``."""
from .core import Backend

__all__ = ["Backend"]
