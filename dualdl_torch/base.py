"""The base of write-once modules on torch (``Module``), parameter creation, the shape error
every torch layer raises and the one "explain on failure" path (:func:`explained`). Imports no other
layer module: the family modules build on it."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Optional, Sequence, Tuple

import numpy as np
import torch

from dualdl.devices import Device, device as _parse_device
from dualdl.tensor import _dtype
from dualdl.nn.checks import explain
from dualdl.nn.registry import register
from dualdl.parallel import resolve_devices
from .core import native_device, torch_dtype

__all__ = ["Module", "Layer", "make_parameter", "shape_error", "factory_kwargs"]


def factory_kwargs(layer: str, device: Any, dtype: Any) -> Tuple[Optional[torch.device], Optional[torch.dtype], Any]:
    """torch's ``device=``/``dtype=``, also given as dualdl's neutral values (``"cpu"``, ``dl.cpu()``,
    ``"float64"``, a numpy dtype): returns the torch values and a scope (nothing to enter on torch)."""
    if device is not None and not isinstance(device, torch.device):
        device = native_device(_parse_device(device))
    if dtype is not None and not isinstance(dtype, torch.dtype):
        dtype = torch_dtype(_dtype(dtype))
    return device, dtype, contextlib.nullcontext()


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


class Layer:
    """Mixed into every built-in torch layer (before the ``torch.nn`` class): a public subclass
    defined in ``dualdl_torch`` registers as the dualdl layer of its class name (``_dl_layer``,
    ``backend.module("nn").<name>``; see dualdl/nn/registry.py). Adds no method."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register(cls, __package__)


def make_parameter(data: Any, requires_grad: bool = True) -> torch.nn.Parameter:
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(np.array(data, copy=True))
    if not isinstance(data, torch.Tensor):
        raise TypeError(f"nn.Parameter expects a numpy array or a torch tensor on the torch backend, "
                        f"got {type(data).__name__}")
    return torch.nn.Parameter(data.detach().clone(), requires_grad=requires_grad)


def shape_error(layer: str, expected: str, x: torch.Tensor) -> ValueError:
    return ValueError(f"{layer}: expected input of shape {expected}, got {tuple(x.shape)}")


# The failures of torch's own layer computation that a neutral input check may explain; any other
# error is torch's to report, untouched:
# - RuntimeError: torch's C++ checks (TORCH_CHECK) on ranks, sizes and channels, e.g. "mat1 and mat2
#   shapes cannot be multiplied", "Given groups=1, weight of size [...] expected input[...] to have 3
#   channels", "Calculated padded input size per channel ... Kernel size can't be greater" (and its
#   subclass NotImplementedError, e.g. F.interpolate's "Got 4D input, but linear mode needs 3D input");
# - ValueError: the Python-side input checks of torch.nn.functional and of the layers ("expected 4D
#   input (got 3D input)", "Expected more than 1 value per channel when training");
# - IndexError: a dim out of range for the input's rank ("Dimension out of range").
# Not TypeError or AttributeError: a non-tensor argument is no shape problem (reading its shape for
# the check would fail too). When the check finds the input fine (a dtype or device without a kernel,
# out of memory), torch's own error is re-raised untouched.
EXPLAINABLE = (RuntimeError, ValueError, IndexError)


def explained(call: Callable[[], Any], check: Callable[..., None], args: Callable[[], Sequence[Any]]) -> Any:
    """``call()`` (torch's own computation); when it fails with an :data:`EXPLAINABLE` error, the
    error of the neutral ``check(*args())`` (dualdl/nn/checks.py: the one the MXNet adapter raises for
    the same input) instead, or torch's own when the check finds nothing wrong. The one "explain on
    failure" path of the torch adapter: the check and its arguments (``args`` is called only then)
    cost nothing when torch's call succeeds."""
    try:
        return call()
    except EXPLAINABLE:
        err = explain(check, *args())
        if err is not None:
            raise err from None
        raise
