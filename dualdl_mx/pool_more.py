"""More pools: LPPool, FractionalMaxPool, 3-d adaptive pools on MXNet."""
from __future__ import annotations

from dualdl.nn.registry import defined_in

__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
