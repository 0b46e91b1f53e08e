"""The padding layers (torch.nn.*Pad1d/2d/3d) on torch."""
from __future__ import annotations

from dualdl.nn.registry import defined_in

__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
