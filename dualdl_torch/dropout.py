"""Dropout on torch: ``torch.nn.Dropout``, marked as the dualdl layer."""
from __future__ import annotations

from torch import nn

__all__ = ["Dropout"]


class Dropout(nn.Dropout):
    """``torch.nn.Dropout``."""
    _dl_layer = "Dropout"
