"""torch.optim's Adagrad, Adadelta, Adamax and NAdam with ``step(batch_size=...)`` added
(dualdl_mx.optim_adaptive computes their formulas on Gluon Parameters)."""
from __future__ import annotations

import torch

from .optim import _BatchSizeStep

__all__ = ["Adagrad", "Adadelta", "Adamax", "NAdam"]


class Adagrad(_BatchSizeStep, torch.optim.Adagrad):
    _dl_optimizer = "Adagrad"
    _torch_cls = torch.optim.Adagrad


class Adadelta(_BatchSizeStep, torch.optim.Adadelta):
    _dl_optimizer = "Adadelta"
    _torch_cls = torch.optim.Adadelta


class Adamax(_BatchSizeStep, torch.optim.Adamax):
    _dl_optimizer = "Adamax"
    _torch_cls = torch.optim.Adamax


class NAdam(_BatchSizeStep, torch.optim.NAdam):
    _dl_optimizer = "NAdam"
    _torch_cls = torch.optim.NAdam
