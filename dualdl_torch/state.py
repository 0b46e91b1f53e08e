"""State dicts on torch: native ``state_dict`` minus BatchNorm's ``num_batches_tracked``."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, Tuple

import numpy as np
import torch

from .core import _TORCH_TO_NP

_SKIP = ("num_batches_tracked",)


def is_model(obj: Any) -> bool:
    return isinstance(obj, torch.nn.Module)


def state_dict(model: torch.nn.Module) -> "OrderedDict[str, torch.Tensor]":
    return OrderedDict((k, v.detach()) for k, v in model.state_dict().items() if not k.endswith(_SKIP))


def state_targets(model: torch.nn.Module) -> Dict[str, Tuple[Tuple[int, ...], np.dtype]]:
    return OrderedDict((k, (tuple(v.shape), _TORCH_TO_NP[v.dtype]))
                       for k, v in model.state_dict().items() if not k.endswith(_SKIP))


def assign(model: torch.nn.Module, arrays: Dict[str, np.ndarray]) -> None:
    live = model.state_dict(keep_vars=True)
    with torch.no_grad():
        for k, a in arrays.items():
            t = live[k]
            t.copy_(torch.from_numpy(a).to(t.device))
