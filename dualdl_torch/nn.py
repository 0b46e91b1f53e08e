"""Native PyTorch implementations of dualdl's layers, and the base of write-once modules.

Every layer here *is* the ``torch.nn`` layer (a thin subclass that adds a shape check whose error
names the layer, the expected layout and the shape received). ``_dl_layer`` marks the dualdl
layer each class implements; ``dualdl_mx.nn`` has a class of the same name for each.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dualdl.devices import Device
from dualdl.nn.checks import empty_batch_error
from dualdl.parallel import resolve_devices
from .core import native_device

__all__ = ["Module", "make_parameter", "Linear"]


class Module(torch.nn.Module):
    """Base mixed into write-once modules on torch: nothing to add, torch.nn.Module is the model."""

    @classmethod
    def _dl_native_namespace(cls, user_cls: type) -> dict:
        return {}

    def to(self, *args: Any, **kwargs: Any) -> "Module":
        """torch's ``to``; also takes a dualdl device or a list of them, as on MXNet (whose
        ``to([cpu(0), cpu(1)])`` keeps one parameter copy per context). torch replicas share one
        copy, so devices that are one torch device (virtual ``cpu(i)``) move the model there;
        several GPUs are refused (use ``dl.Trainer(devices=...)``: DataParallel replicates)."""
        if len(args) != 1 or kwargs or not isinstance(args[0], (Device, list, tuple)):
            return super().to(*args, **kwargs)
        devs = resolve_devices(args[0], Device("cpu", 0))
        natives = sorted({str(native_device(d)) for d in devs})
        if len(natives) > 1:
            raise ValueError(f"model.to({devs}): on torch a model holds one copy of its parameters, "
                             f"so it cannot be placed on several devices {natives}; for data "
                             f"parallelism over GPUs use dl.Trainer(model, ..., devices={devs})")
        return super().to(natives[0])

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """torch's ``register_buffer``; also takes a numpy array (write-once code has no torch tensors)."""
        if isinstance(tensor, np.ndarray):
            tensor = torch.from_numpy(np.array(tensor, copy=True))
        super().register_buffer(name, tensor, persistent)


def make_parameter(data: Any, requires_grad: bool = True) -> torch.nn.Parameter:
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(np.array(data, copy=True))
    if not isinstance(data, torch.Tensor):
        raise TypeError(f"nn.Parameter expects a numpy array or a torch tensor on the torch backend, "
                        f"got {type(data).__name__}")
    return torch.nn.Parameter(data.detach().clone(), requires_grad=requires_grad)


def shape_error(layer: str, expected: str, x: torch.Tensor) -> ValueError:
    return ValueError(f"{layer}: expected input of shape {expected}, got {tuple(x.shape)}")


class Linear(torch.nn.Linear):
    """``torch.nn.Linear``: applies to the last axis."""
    _dl_layer = "Linear"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.numel():
            raise empty_batch_error(f"Linear(in_features={self.in_features}, out_features={self.out_features})",
                                    tuple(x.shape))
        try:
            return torch.nn.functional.linear(x, self.weight, self.bias)
        except RuntimeError:            # explained only on failure: the check is on the hot path
            if x.dim() == 0 or x.shape[-1] != self.in_features:
                raise shape_error(f"Linear(in_features={self.in_features}, out_features={self.out_features})",
                                  f"(*, {self.in_features})", x) from None
            raise


from .layers import *  # noqa: F401,F403,E402  (core layers and containers)
from .transformer import *  # noqa: F401,F403,E402  (Transformer encoder layers)
from .rnn import *  # noqa: F401,F403,E402  (LSTM, GRU, RNN and cells)
