"""``mx.init`` initializers as torch functions, applied by parameter name.

What differs from ``torch.nn.init``: Gluon's ``Xavier`` computes fans from the *Gluon* shape
(``fan_in = shape[1] * prod(shape[2:])``) with ``scale = sqrt(magnitude / factor)`` and draws
``uniform(-scale, scale)`` or ``normal(0, scale)`` (torch's ``xavier_uniform_`` is
``sqrt(6 / (fan_in + fan_out))``, i.e. ``magnitude=3``, ``factor_type='avg'`` only); the bounds
and sigmas reach MXNet's samplers as C++ ``float`` (rounded to float32 here too); ``Uniform``
defaults to ``0.07`` and ``Normal`` to ``0.01``; each parameter's own initializer (a Dense bias's
``'zeros'``, a BatchNorm's ``gamma`` ``'ones'``, running statistics) wins over the global one,
as in ``Parameter.initialize``. Random draws use torch's RNG: the same distribution as Gluon's,
not the same numbers."""
from __future__ import annotations

import math
import struct
from typing import Any, Optional, Sequence

import torch


def _f32(x: float) -> float:
    """``x`` as the C++ ``float`` field of an MXNet operator parameter stores it."""
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def xavier_scale(shape: Sequence[int], factor_type: str = "avg", magnitude: float = 3.0) -> float:
    """``mx.init.Xavier``'s bound (uniform) or sigma (gaussian) for a Gluon ``shape``."""
    if len(shape) < 2:
        raise ValueError(f"Xavier initializer cannot be applied to vector of shape {tuple(shape)}:"
                         f" it requires at least 2D")
    hw_scale = math.prod(shape[2:]) if len(shape) > 2 else 1.0
    fan_in, fan_out = shape[1] * hw_scale, shape[0] * hw_scale
    if factor_type == "avg":
        factor = (fan_in + fan_out) / 2.0
    elif factor_type == "in":
        factor = fan_in
    elif factor_type == "out":
        factor = fan_out
    else:
        raise ValueError(f"Incorrect factor type {factor_type!r} (avg, in or out)")
    return math.sqrt(float(magnitude) / factor)


def uniform_(t: torch.Tensor, scale: float = 0.07,
             generator: Optional[torch.Generator] = None) -> None:
    """``mx.init.Uniform(scale)``: ``U(-scale, scale)``."""
    t.uniform_(-_f32(scale), _f32(scale), generator=generator)


def normal_(t: torch.Tensor, sigma: float = 0.01,
            generator: Optional[torch.Generator] = None) -> None:
    """``mx.init.Normal(sigma)``: ``N(0, sigma^2)``."""
    t.normal_(0.0, _f32(sigma), generator=generator)


def xavier_(t: torch.Tensor, gluon_shape: Sequence[int], rnd_type: str = "uniform",
            factor_type: str = "avg", magnitude: float = 3.0,
            generator: Optional[torch.Generator] = None) -> None:
    """``mx.init.Xavier`` (and ``MSRAPrelu``: gaussian, ``magnitude = 2 / (1 + slope^2)``)."""
    scale = xavier_scale(gluon_shape, factor_type, magnitude)
    if rnd_type == "uniform":
        uniform_(t, scale, generator)
    elif rnd_type == "gaussian":
        normal_(t, scale, generator)
    else:
        raise ValueError(f"Unknown random type {rnd_type!r} (uniform or gaussian)")


def orthogonal_(t: torch.Tensor, gluon_shape: Sequence[int], scale: float = 1.414,
                rand_type: str = "uniform", generator: Optional[torch.Generator] = None) -> None:
    """``mx.init.Orthogonal``: the left (or right) singular vectors of a random
    ``(shape[0], prod(shape[1:]))`` matrix, times ``scale``."""
    nout, nin = int(gluon_shape[0]), math.prod(gluon_shape[1:])
    tmp = torch.empty(nout, nin, dtype=torch.float32)
    if rand_type == "uniform":
        tmp.uniform_(-1.0, 1.0, generator=generator)
    else:
        tmp.normal_(0.0, 1.0, generator=generator)
    u, _, v = torch.linalg.svd(tmp, full_matrices=False)
    res = u if u.shape == tmp.shape else v
    t.copy_((res * float(scale)).reshape(t.shape))


def bilinear_(t: torch.Tensor, gluon_shape: Sequence[int]) -> None:
    """``mx.init.Bilinear``: the bilinear upsampling kernel (deterministic)."""
    n = math.prod(gluon_shape)
    f = math.ceil(gluon_shape[3] / 2.0)
    c = (2 * f - 1 - f % 2) / (2.0 * f)
    i = torch.arange(n, dtype=torch.float64)
    x = torch.remainder(i, gluon_shape[3])
    y = torch.remainder(torch.div(i, gluon_shape[3], rounding_mode="floor"), gluon_shape[2])
    w = (1 - (x / f - c).abs()) * (1 - (y / f - c).abs())
    t.copy_(w.to(torch.float32).reshape(t.shape))


def lstm_bias_(t: torch.Tensor, forget_bias: float = 1.0) -> None:
    """``mx.init.LSTMBias``: zeros, and ``forget_bias`` on the second of the four gates."""
    t.zero_()
    n = int(t.shape[0] / 4)
    t[n:2 * n] = forget_bias


def constant_(t: torch.Tensor, value: Any) -> None:
    """``mx.init.Constant`` / ``Zero`` / ``One`` (a list value is broadcast like ``arr[:] = v``)."""
    t.copy_(torch.as_tensor(value, dtype=t.dtype).expand_as(t))


def apply_rule(t: torch.Tensor, kind: str, args: dict, gluon_shape: Sequence[int],
               generator: Optional[torch.Generator] = None) -> None:
    """One row of the recipe's init table."""
    if kind == "constant":
        constant_(t, args["value"])
    elif kind == "uniform":
        uniform_(t, args["scale"], generator)
    elif kind == "normal":
        normal_(t, args["sigma"], generator)
    elif kind == "xavier":
        xavier_(t, gluon_shape, args["rnd_type"], args["factor_type"], args["magnitude"],
                generator)
    elif kind == "orthogonal":
        orthogonal_(t, gluon_shape, args["scale"], args["rand_type"], generator)
    elif kind == "bilinear":
        bilinear_(t, gluon_shape)
    elif kind == "lstm_bias":
        lstm_bias_(t, args["forget_bias"])
    else:
        raise ValueError(f"unknown init rule {kind!r}")
