"""The torch side of a converted Gluon project: what a Gluon script relies on that torch spells
differently or not at all, in torch and numpy only. ``dualdl convert-project`` copies these
definitions (with the recipe's optimizers, samplers, metrics and initializers) into the
project's ``gluon2torch.py``; nothing here imports dualdl or mxnet.

What it hides:

* Gluon's deferred shapes (``Dense(128)`` learns ``in_units`` at the first forward): torch's
  ``Lazy*`` layers, kept lazy (``cls_to_become = None``) so that a layer keeps Gluon's
  ``activation=`` / ``flatten=`` and ``state_dict`` keys equal Gluon's ``save_parameters`` keys.
* Gluon's training mode lives in ``autograd.record()``, torch's in ``module.train()``:
  ``record()`` / ``is_training()`` and the mode-aware ``Dropout``/``BatchNorm`` here.
* ``gluon.Trainer.step(batch_size)`` rescales by ``1/batch_size`` and Gluon overwrites gradients
  at each ``backward`` (``grad_req='write'``): ``Trainer`` steps a Gluon-exact optimizer with
  ``batch_size`` and clears the gradients it used, unless ``grad_req='add'``.
* Gluon's per-sample losses; the training half (parameters, ``net.initialize(init)`` applied
  when shapes are known, the Trainer, Gluon's ``DataLoader`` order and MNIST files) is in
  :mod:`dualdl.port.project.torch_runtime_train`.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator, List, Optional, Sequence

import numpy as np
import torch
from torch import nn

# ----------------------------------------------------------------------------- devices, arrays


def cpu(device_id: int = 0) -> torch.device:
    return torch.device("cpu")


def gpu(device_id: int = 0) -> torch.device:
    return torch.device("cuda", device_id)


def num_gpus() -> int:
    return torch.cuda.device_count()


def context(x: Any) -> Any:
    """``x.context`` of an NDArray: a tensor's ``device``; any other object's own."""
    return x.device if isinstance(x, torch.Tensor) else x.context


def asnumpy(x: Any) -> np.ndarray:
    """``NDArray.asnumpy()`` for a torch tensor or a numpy array."""
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def astype(x: Any, dtype: Any) -> Any:
    """``x.astype(dtype)`` for numpy arrays and torch tensors alike."""
    if isinstance(x, torch.Tensor):
        if isinstance(dtype, torch.dtype):          # g2t.astype(y_hat, y.dtype), y a tensor
            return x.to(dtype)
        return x.to(torch.from_numpy(np.zeros(0, np.dtype(dtype))).dtype)
    return np.asarray(x).astype(dtype)


def array(x: Any, ctx: Any = None, dtype: Any = None) -> torch.Tensor:
    """``mx.nd.array``: float32 unless ``dtype`` (or ``x``'s own numpy dtype) says otherwise."""
    a = np.asarray(asnumpy(x) if isinstance(x, torch.Tensor) else x)
    if dtype is None and not isinstance(x, np.ndarray):
        dtype = np.float32
    t = torch.from_numpy(np.ascontiguousarray(a.astype(dtype) if dtype is not None else a))
    return t.to(ctx) if ctx is not None else t


def zeros(shape: Any, ctx: Any = None, dtype: Any = "float32", **_: Any) -> torch.Tensor:
    """``mx.nd.zeros``: float32 unless ``dtype`` says otherwise, on ``ctx``."""
    return torch.zeros(shape, dtype=astype(torch.zeros(0), dtype).dtype, device=ctx)


def ones(shape: Any, ctx: Any = None, dtype: Any = "float32", **_: Any) -> torch.Tensor:
    return torch.ones(shape, dtype=astype(torch.zeros(0), dtype).dtype, device=ctx)


def waitall() -> None:
    """``mx.nd.waitall()``: torch's CPU ops are done when they return; CUDA synchronises."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class Unconverted:
    """A Gluon name the converter left under a ``# dualdl: TODO`` line: the converted module still
    imports (a class may derive from it), and any use fails in one line naming the API."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, key: str) -> "Unconverted":
        if key.startswith("__"):
            raise AttributeError(key)
        return Unconverted(f"{self._name}.{key}")

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (object,)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{self._name} was not converted to torch (see its "
                                  f"'# dualdl: TODO' line in the converted source)")


# ----------------------------------------------------------------------------- autograd
_TRAINING = [False]


def is_training() -> bool:
    return _TRAINING[-1]


@contextlib.contextmanager
def record(train_mode: bool = True) -> Iterator[None]:
    """``autograd.record()``: gradients on, and Gluon's training mode for Dropout/BatchNorm."""
    _TRAINING.append(bool(train_mode))
    try:
        with torch.enable_grad():
            yield
    finally:
        _TRAINING.pop()


@contextlib.contextmanager
def predict_mode() -> Iterator[None]:
    _TRAINING.append(False)
    try:
        yield
    finally:
        _TRAINING.pop()


def backward(x: Any) -> None:
    """``x.backward()`` on a non-scalar NDArray, ``autograd.backward([l0, l1])`` on a list (one
    loss per device): head gradient 1 (the sum's gradient)."""
    heads = list(x) if isinstance(x, (list, tuple)) else [x]
    for h in heads:
        _RECORDER.loss(h)
    torch.autograd.backward(heads, [torch.ones_like(h) for h in heads])


# ----------------------------------------------------------------------------- layers
#: the proof's float64 run: the inputs it saw within float32 rounding of a kink (a ReLU input
#: near 0, a max-pool window's two largest near equal) that carried a gradient, this update
_KINKS: List[str] = []
#: the layer running now (``layer 2 (Activation)``), for those notes (set by forward pre-hooks in
#: the proof's float64 run only: torch_runtime_train.initialize)
_WHERE: List[str] = [""]
#: "within float32 rounding": this many float32 epsilons of the tensor's largest magnitude (as
#: the proof's ROUNDING_RATIO: MXNet's float32 BatchNorm lands ~8x further from float64 than torch's)
_KINK_ULPS = 64.0


def _kink_margin(x: torch.Tensor) -> Optional[float]:
    """The margin under which a float32 run can land on the other side of a kink, in the proof's
    float64 run only (``GLUON2TORCH_DTYPE=float64`` with ``GLUON2TORCH_RECORD``); else None."""
    if not (x.requires_grad and x.dtype == torch.float64 and x.numel()
            and os.environ.get("GLUON2TORCH_DTYPE") == "float64"
            and os.environ.get("GLUON2TORCH_RECORD")):
        return None
    return _KINK_ULPS * float(np.finfo(np.float32).eps) * float(x.detach().abs().max())


def _watch(out: torch.Tensor, near: torch.Tensor, what: str, gap: torch.Tensor) -> None:
    """Note, at backward, the near-kink elements whose gradient is not 0 (a float32 run that
    takes the kink's other side drops or moves exactly that gradient: a jump, not rounding)."""
    where = f" in {_WHERE[0]}" if _WHERE[0] else ""

    def hook(g: torch.Tensor) -> None:
        hit = near & (g != 0)
        if bool(hit.any()):
            _KINKS.append(f"{what}{where}: {int(hit.sum())} element(s) {float(gap[hit].min()):.2g} "
                          f"from it, carrying gradient up to {float(g[hit].abs().max()):.2g}")
    out.register_hook(hook)


def _relu(x: torch.Tensor) -> torch.Tensor:
    """``relu``; in the proof's float64 run it notes inputs within float32 rounding of 0."""
    out, margin = torch.relu(x), _kink_margin(x)
    if margin is not None:
        near = x.detach().abs() <= margin
        if bool(near.any()):
            _watch(out, near, "a ReLU input at 0 (its kink)", x.detach().abs())
    return out


_ACT = {"relu": _relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
        "softrelu": nn.functional.softplus, "softsign": nn.functional.softsign}


def _act(name: Optional[str]) -> Optional[Callable]:
    if name is None:
        return None
    if name not in _ACT:
        raise ValueError(f"activation {name!r}: one of {sorted(_ACT)}")
    return _ACT[name]


class Dense(nn.LazyLinear):
    """``gluon.nn.Dense(units, activation, use_bias, flatten, in_units)``: torch's LazyLinear (the
    weight is ``(units, in_units)`` in both), flattening all but the first axis as Gluon does."""
    cls_to_become = None

    def __init__(self, units: int, activation: Optional[str] = None, use_bias: bool = True,
                 flatten: bool = True, dtype: Any = "float32", weight_initializer: Any = None,
                 bias_initializer: Any = "zeros", in_units: int = 0, params: Any = None, **_: Any):
        super().__init__(units, bias=use_bias)
        self._flatten, self._act = flatten, _act(activation)
        tied = params["weight"] if params is not None and "weight" in params else None
        in_units = in_units or (tied.shape[1] if tied is not None else 0)
        if in_units:
            self.in_features = in_units
            self.weight.materialize((units, in_units))
            if use_bias:
                self.bias.materialize((units,))
            self.reset_parameters()
        if tied is not None:           # Gluon's tying: nn.Dense(..., params=other.params)
            self.weight = tied

    def initialize_parameters(self, x: torch.Tensor) -> None:
        """``in_units`` from the flattened input, as Gluon infers it."""
        super().initialize_parameters(x.reshape(x.shape[0], -1) if self._flatten else x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._flatten and x.dim() != 2:
            x = x.reshape(x.shape[0], -1)
        y = super().forward(x)
        return self._act(y) if self._act is not None else y


class Conv2D(nn.LazyConv2d):
    """``gluon.nn.Conv2D(channels, kernel_size, strides, padding, dilation, groups, activation,
    use_bias, in_channels)`` (layout NCHW, as torch's)."""
    cls_to_become = None

    def __init__(self, channels: int, kernel_size: Any, strides: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, layout: str = "NCHW",
                 activation: Optional[str] = None, use_bias: bool = True, in_channels: int = 0,
                 **_: Any):
        if layout != "NCHW":
            raise ValueError(f"Conv2D layout {layout!r}: only NCHW converts")
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, use_bias)
        self._act = _act(activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        return self._act(y) if self._act is not None else y


class MaxPool2D(nn.MaxPool2d):
    """``gluon.nn.MaxPool2D``: torch's. An exact tie goes to the window's first element in both
    (row-major, measured float32 and float64, MXNet 1.9.1 CPU and torch); in the proof's float64
    run a window whose two largest are within float32 rounding (not equal) is noted: a float32
    run can pick the other one."""

    def __init__(self, pool_size: Any = (2, 2), strides: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, **_: Any):
        super().__init__(pool_size, strides if strides is not None else pool_size, padding,
                         ceil_mode=ceil_mode)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, margin = super().forward(x), _kink_margin(x)
        if margin is not None and x.dim() == 4 and not self.ceil_mode:
            k, st, pad = (nn.modules.utils._pair(v) for v in (self.kernel_size, self.stride,
                                                               self.padding))
            xp = nn.functional.pad(x.detach(), (pad[1], pad[1], pad[0], pad[0]),
                                   value=float("-inf"))
            w = xp.unfold(2, k[0], st[0]).unfold(3, k[1], st[1]).flatten(-2)
            top = w.topk(2, dim=-1).values if w.shape[-1] > 1 else None
            if top is not None and top.shape[2:4] == out.shape[2:4]:
                gap = top[..., 0] - top[..., 1]
                near = (gap > 0) & (gap <= margin)
                if bool(near.any()):
                    _watch(out, near, "a max-pool window's two largest (its kink)", gap)
        return out


def AvgPool2D(pool_size: Any = (2, 2), strides: Any = None, padding: Any = 0,
              ceil_mode: bool = False, count_include_pad: bool = True, **_: Any) -> nn.AvgPool2d:
    return nn.AvgPool2d(pool_size, strides if strides is not None else pool_size, padding,
                        ceil_mode, count_include_pad)


def GlobalAvgPool2D(**_: Any) -> nn.AdaptiveAvgPool2d:
    return nn.AdaptiveAvgPool2d(1)


class Activation(nn.Module):
    def __init__(self, activation: str, **_: Any):
        super().__init__()
        self._act = _act(activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._act(x)


class Dropout(nn.Module):
    """``gluon.nn.Dropout(rate)``: active inside ``record()`` (Gluon's training mode)."""

    def __init__(self, rate: float, axes: Sequence[int] = (), **_: Any):
        super().__init__()
        self.rate = float(rate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.dropout(x, self.rate, training=is_training())


class BatchNorm(nn.modules.lazy.LazyModuleMixin, nn.Module):
    """``gluon.nn.BatchNorm(axis=1, momentum=0.9, epsilon=1e-5)`` with Gluon's names (``gamma``,
    ``beta``, ``running_mean``, ``running_var``) and statistics: inside ``record()`` it normalises
    by the batch's mean and *biased* variance and keeps ``momentum`` of the old running values
    (torch's BatchNorm keeps the unbiased variance and takes ``momentum`` of the new)."""
    cls_to_become = None

    def __init__(self, axis: int = 1, momentum: float = 0.9, epsilon: float = 1e-5,
                 center: bool = True, scale: bool = True, use_global_stats: bool = False,
                 in_channels: int = 0, **_: Any):
        super().__init__()
        # MXNet's kernel takes momentum as a float32 attribute (0.9 is 0.8999999762): the same in
        # a float32 run, and the proof's float64 run then updates the statistics as MXNet's does
        self.axis, self.momentum, self.eps = axis, float(np.float32(momentum)), float(epsilon)
        self.use_global_stats = use_global_stats
        self.gamma = nn.parameter.UninitializedParameter(requires_grad=scale)
        self.beta = nn.parameter.UninitializedParameter(requires_grad=center)
        self.register_buffer("running_mean", nn.parameter.UninitializedBuffer())
        self.register_buffer("running_var", nn.parameter.UninitializedBuffer())

    def initialize_parameters(self, x: torch.Tensor) -> None:
        c = x.shape[self.axis]
        with torch.no_grad():
            for t, v in ((self.gamma, 1.0), (self.beta, 0.0), (self.running_mean, 0.0),
                         (self.running_var, 1.0)):
                t.materialize((c,))
                t.fill_(v)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = [1] * x.dim()
        shape[self.axis] = -1
        dims = [d for d in range(x.dim()) if d != self.axis % x.dim()]
        if is_training() and not self.use_global_stats:
            mean = x.mean(dim=dims)
            var = ((x - mean.reshape(shape)) ** 2).mean(dim=dims)
            with torch.no_grad():
                m = self.momentum
                self.running_mean.mul_(m).add_(mean.detach(), alpha=1 - m)
                self.running_var.mul_(m).add_(var.detach(), alpha=1 - m)
        else:
            mean, var = self.running_mean, self.running_var
        y = (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + self.eps)
        return y * self.gamma.reshape(shape) + self.beta.reshape(shape)


class Sequential(nn.Sequential):
    """``gluon.nn.Sequential`` / ``HybridSequential``: ``add(*blocks)`` appends."""

    def add(self, *blocks: nn.Module) -> None:
        for b in blocks:
            self.append(b)

    def hybridize(self, *args: Any, **kwargs: Any) -> None:
        """Gluon compiles the graph here; torch runs it as it is."""


# ----------------------------------------------------------------------------- losses
def _reduce(loss: torch.Tensor, batch_axis: int = 0) -> torch.Tensor:
    dims = [d for d in range(loss.dim()) if d != batch_axis]
    return loss.mean(dim=dims) if dims else loss


class SoftmaxCrossEntropyLoss(nn.Module):
    """Gluon's per-sample softmax cross-entropy (``sparse_label``: class indices of any dtype)."""

    def __init__(self, axis: int = -1, sparse_label: bool = True, from_logits: bool = False,
                 weight: Optional[float] = None, batch_axis: int = 0, **_: Any):
        super().__init__()
        self.axis, self.sparse, self.from_logits = axis, sparse_label, from_logits
        self.weight, self.batch_axis = weight, batch_axis

    def forward(self, pred: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        logp = pred if self.from_logits else torch.log_softmax(pred, dim=self.axis)
        if self.sparse:
            axis = self.axis % logp.dim()        # Gluon's pick takes (N,) and (N, 1) labels
            index = label.long().reshape(logp.shape[:axis] + logp.shape[axis + 1:])
            loss = -torch.gather(logp, self.axis, index.unsqueeze(axis))
        else:
            loss = -(logp * label.to(logp.dtype)).sum(dim=self.axis, keepdim=True)
        if self.weight is not None:
            loss = loss * self.weight
        return _reduce(loss, self.batch_axis)


class L2Loss(nn.Module):
    """Gluon's ``L2Loss``: ``weight/2 * (pred - label)^2``, the mean over all but the batch axis."""

    def __init__(self, weight: float = 1.0, batch_axis: int = 0, **_: Any):
        super().__init__()
        self.weight, self.batch_axis = weight, batch_axis

    def forward(self, pred: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        return _reduce(self.weight / 2 * (pred - label.reshape(pred.shape)) ** 2, self.batch_axis)


class L1Loss(L2Loss):
    def forward(self, pred: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        return _reduce(self.weight * (pred - label.reshape(pred.shape)).abs(), self.batch_axis)
