"""torch containers marked as dualdl layers: Sequential, ModuleList, ModuleDict.

The ``torch.nn`` classes, accepting torch modules only (an MXNet block gets a clear TypeError
instead of torch's "is not a Module subclass"), plus ``ModuleList.index``.
"""
from __future__ import annotations

import sys
from typing import Any, Optional

from torch import nn
from dualdl.nn.registry import defined_in
from .base import Layer


def _check_child(container: str, module: Any, key: Any) -> nn.Module:
    if isinstance(module, nn.Module):
        return module
    gluon = sys.modules.get("mxnet.gluon")
    hint = ("an mxnet (Gluon) block: build every layer under the same backend (dl.use('torch'))"
            if gluon is not None and isinstance(module, gluon.Block) else "expected a torch.nn.Module")
    raise TypeError(f"{container} on the torch backend got {type(module).__module__}."
                    f"{type(module).__name__} for {key!r}, {hint}")


class Sequential(Layer, nn.Sequential):
    """``torch.nn.Sequential`` that accepts torch modules only (clear error for an MXNet block)."""

    def add_module(self, name: str, module: Optional[nn.Module]) -> None:
        super().add_module(name, module if module is None else _check_child("Sequential", module, name))

    def insert(self, index: int, module: nn.Module) -> "Sequential":
        return super().insert(index, _check_child("Sequential", module, index))

    def __setitem__(self, idx: int, module: nn.Module) -> None:
        super().__setitem__(idx, _check_child("Sequential", module, idx))


class ModuleList(Layer, nn.ModuleList):
    """``torch.nn.ModuleList`` that accepts torch modules only, with ``list.index``."""

    def add_module(self, name: str, module: Optional[nn.Module]) -> None:
        super().add_module(name, module if module is None else _check_child("ModuleList", module, name))

    def insert(self, index: int, module: nn.Module) -> None:
        super().insert(index, _check_child("ModuleList", module, index))

    def __setitem__(self, idx: int, module: nn.Module) -> None:
        super().__setitem__(idx, _check_child("ModuleList", module, idx))

    def index(self, module: nn.Module) -> int:
        for i, m in enumerate(self):
            if m is module:
                return i
        raise ValueError(f"{type(module).__name__} is not in the ModuleList")


class ModuleDict(Layer, nn.ModuleDict):
    """``torch.nn.ModuleDict`` that accepts torch modules only."""

    def add_module(self, name: str, module: Optional[nn.Module]) -> None:
        super().add_module(name, module if module is None else _check_child("ModuleDict", module, name))


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
