"""Activations on torch: the ``torch.nn`` classes marked as dualdl layers; GELU checks
``approximate`` at construction (torch only at forward)."""
from __future__ import annotations

from torch import nn

__all__ = ["ReLU", "Sigmoid", "Tanh", "GELU", "LeakyReLU", "ELU", "SiLU", "Softmax", "LogSoftmax"]


def _simple(name: str, base: type) -> type:
    return type(name, (base,), {"_dl_layer": name, "__module__": __name__,
                                "__doc__": f"``torch.nn.{name}``."})


class GELU(nn.GELU):
    """``torch.nn.GELU``; an unknown ``approximate`` fails at construction (torch: at forward)."""
    _dl_layer = "GELU"

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        super().__init__(approximate)


ReLU = _simple("ReLU", nn.ReLU)
Sigmoid = _simple("Sigmoid", nn.Sigmoid)
Tanh = _simple("Tanh", nn.Tanh)
LeakyReLU = _simple("LeakyReLU", nn.LeakyReLU)
ELU = _simple("ELU", nn.ELU)
SiLU = _simple("SiLU", nn.SiLU)
Softmax = _simple("Softmax", nn.Softmax)
LogSoftmax = _simple("LogSoftmax", nn.LogSoftmax)
