"""torch.optim's Adagrad, Adadelta, Adamax and NAdam with ``step(batch_size=...)`` added
(dualdl_mx.optim_adaptive computes their formulas on Gluon Parameters)."""
from __future__ import annotations

import torch

from .optim import _BatchSizeStep

__all__ = ["Adagrad", "Adadelta", "Adamax", "NAdam"]


def _with_batch_size_step(torch_cls: type) -> type:
    """``class Name(_BatchSizeStep, torch.optim.Name)``, as the classes of dualdl_torch.optim."""
    name = torch_cls.__name__
    return type(name, (_BatchSizeStep, torch_cls), {"_dl_optimizer": name, "_torch_cls": torch_cls,
                                                    "__module__": __name__, "__doc__": torch_cls.__doc__})


Adagrad = _with_batch_size_step(torch.optim.Adagrad)
Adadelta = _with_batch_size_step(torch.optim.Adadelta)
Adamax = _with_batch_size_step(torch.optim.Adamax)
NAdam = _with_batch_size_step(torch.optim.NAdam)
