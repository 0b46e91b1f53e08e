"""Random-number state on PyTorch (CPU generator and, once initialised, every CUDA device's)."""
from __future__ import annotations

from typing import Any, Dict

import numpy as np
import torch

__all__ = ["rng_state", "set_rng_state"]


def rng_state() -> Dict[str, Any]:
    st = {"torch": torch.get_rng_state().numpy().copy()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        st["cuda"] = [s.numpy().copy() for s in torch.cuda.get_rng_state_all()]
    return st


def set_rng_state(state: Dict[str, Any]) -> None:
    if state.get("torch") is not None:
        torch.set_rng_state(torch.from_numpy(np.asarray(state["torch"], dtype=np.uint8).copy()))
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.from_numpy(np.asarray(s, dtype=np.uint8).copy())
                                      for s in state["cuda"]])
