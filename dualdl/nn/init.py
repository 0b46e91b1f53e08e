"""``torch.nn.init`` written once: ``dl.nn.init.kaiming_normal_(m.weight, mode="fan_out")`` on either backend.

Hides: MXNet initialises through ``Initializer`` objects given to ``Block.initialize`` and has no
in-place ``init.xxx_(tensor)`` functions, no fan computation of torch's, and an RNG that cannot
reproduce torch's streams. Each function here has torch 2.13's name and signature and works on the
tensor's own framework (found by its type, not by the active backend):

- a torch tensor or Parameter: ``torch.nn.init`` itself (torch's numbers, bit for bit);
- an MXNet NDArray or an initialised Gluon Parameter (every context): written in place, outside
  autograd (torch's ``no_grad``), the same object returned. The draws are torch's: made on the host
  with torch's CPU generator when torch is importable (``dl.seed(n)`` seeds it), so they equal
  torch's for the same seed and generator state; on an MXNet-only install they come from MXNet's
  RNG with the same distribution. ``constant_``/``ones_``/``zeros_``/``eye_``/``dirac_`` draw
  nothing and are exact everywhere.

The validation, the fan and gain arithmetic and each function's recipe (:func:`_plan`) are written
once here; the adapters (``dualdl_torch/init.py``, ``dualdl_mx/init.py``) only write the values.
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..backend import backend_of

__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
    "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
    "orthogonal_", "sparse_",
    # torch's deprecated aliases (FutureWarning, as torch)
    "uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
    "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse",
]

Tensor = Any        # torch.Tensor / torch.nn.Parameter, mx.nd.NDArray / gluon.Parameter
Generator = Any     # torch.Generator (on MXNet too: its draws are torch's)

_LINEAR_FNS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
               "conv_transpose3d")
# warnings point at the caller of dl.nn.init.<fn>: fn -> _init -> adapter.apply -> _plan -> recipe
_STACK = 6


def calculate_gain(nonlinearity: str, param: Optional[float] = None) -> float:
    """The recommended gain for ``nonlinearity`` (torch's table: linear/conv/sigmoid 1, tanh 5/3,
    relu sqrt(2), leaky_relu sqrt(2 / (1 + slope^2)), selu 3/4)."""
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, int) or isinstance(param, float):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _shape(tensor: Any) -> Tuple[int, ...]:
    return tuple(int(s) for s in tensor.shape)


def _fans(shape: Sequence[int]) -> Tuple[int, int]:
    if len(shape) < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive_field_size = 1
    for s in shape[2:]:
        receptive_field_size *= s
    return shape[1] * receptive_field_size, shape[0] * receptive_field_size


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> Tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight, torch's rule: ``size(1)`` / ``size(0)`` times the product
    of the trailing sizes; any tensor or parameter with a ``shape`` (Gluon's included)."""
    return _fans(_shape(tensor))


def _correct_fan(shape: Sequence[int], mode: str) -> int:
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _fans(shape)
    return fan_in if mode == "fan_in" else fan_out


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    """``fan_in`` or ``fan_out`` of ``tensor`` by ``mode`` (torch's ``ValueError`` otherwise)."""
    return _correct_fan(_shape(tensor), mode)


# ---- the public functions: torch's signatures ------------------------------------------------
def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Optional[Generator] = None) -> Tensor:
    """Fill ``tensor`` with draws from U(a, b)."""
    return _init("uniform_", tensor, a=a, b=b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Optional[Generator] = None) -> Tensor:
    """Fill ``tensor`` with draws from N(mean, std^2)."""
    return _init("normal_", tensor, mean=mean, std=std, generator=generator)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator: Optional[Generator] = None) -> Tensor:
    """Fill ``tensor`` with draws from N(mean, std^2) truncated to [a, b] (torch's rejection sampler)."""
    return _init("trunc_normal_", tensor, mean=mean, std=std, a=a, b=b, generator=generator)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill ``tensor`` with ``val``."""
    return _init("constant_", tensor, val=val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with 1."""
    return _init("ones_", tensor)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with 0."""
    return _init("zeros_", tensor)


def eye_(tensor: Tensor) -> Tensor:
    """Fill the 2-d ``tensor`` with the identity matrix."""
    return _init("eye_", tensor)


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill the 3/4/5-d ``tensor`` with the Dirac delta (identity convolution), per group."""
    return _init("dirac_", tensor, groups=groups)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Optional[Generator] = None) -> Tensor:
    """Glorot uniform: U(-a, a), ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    return _init("xavier_uniform_", tensor, gain=gain, generator=generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Optional[Generator] = None) -> Tensor:
    """Glorot normal: N(0, std^2), ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    return _init("xavier_normal_", tensor, gain=gain, generator=generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: Optional[Generator] = None) -> Tensor:
    """He uniform: U(-bound, bound), ``bound = gain * sqrt(3 / fan_mode)``."""
    return _init("kaiming_uniform_", tensor, a=a, mode=mode, nonlinearity=nonlinearity, generator=generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator: Optional[Generator] = None) -> Tensor:
    """He normal: N(0, std^2), ``std = gain / sqrt(fan_mode)``."""
    return _init("kaiming_normal_", tensor, a=a, mode=mode, nonlinearity=nonlinearity, generator=generator)


def orthogonal_(tensor: Tensor, gain: float = 1, generator: Optional[Generator] = None) -> Tensor:
    """A (semi-)orthogonal matrix times ``gain`` (trailing dimensions flattened), from the QR of a
    standard-normal draw with torch's sign correction."""
    return _init("orthogonal_", tensor, gain=gain, generator=generator)


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Optional[Generator] = None) -> Tensor:
    """N(0, std^2) with ``ceil(sparsity * rows)`` entries of each column zeroed (2-d only)."""
    return _init("sparse_", tensor, sparsity=sparsity, std=std, generator=generator)


def _deprecated(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    new_name = fn.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args: Any, **kwargs: Any) -> Tensor:
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.",
                      FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)
    deprecated_init.__name__ = deprecated_init.__qualname__ = old_name
    deprecated_init.__doc__ = f"{old_name}(...): deprecated in favor of :func:`{new_name}` (as in torch)."
    return deprecated_init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)


# ---- dispatch ----------------------------------------------------------------------------------
_ADAPTERS: Dict[str, Any] = {}


def _init(name: str, tensor: Tensor, **kwargs: Any) -> Tensor:
    """Run init function ``name`` in the adapter of ``tensor``'s framework."""
    be = backend_of(tensor, None)
    if be is None:
        t = type(tensor)
        raise TypeError(f"nn.init.{name} fills a tensor or parameter in place: a torch Tensor/Parameter "
                        f"or an MXNet NDArray/Gluon Parameter, got {t.__module__}.{t.__qualname__}")
    impl = _ADAPTERS.get(be.name)
    if impl is None:
        impl = _ADAPTERS[be.name] = be.module("init")
    return impl.apply(name, tensor, kwargs)


# ---- the recipe: torch's checks, arithmetic and draws, for an adapter that does not call torch ----
class Draw(NamedTuple):
    """What to write: ``kind`` and its numbers (``None`` kind: leave the tensor as it is).

    ``uniform (lo, hi)``, ``normal (mean, std)``, ``trunc_normal (mean, std, a, b, lo, hi, by_normal)``
    (``lo``/``hi``: ``a``/``b`` in the tensor's dtype; ``by_normal``: torch redraws normal samples
    outside [lo, hi], else it accepts or rejects uniform samples of [a, b]),
    ``orthogonal (rows, cols, gain)``, ``sparse (num_zeros, std)``: random; ``fill (val,)`` and
    ``values (array,)``: exact."""
    kind: Optional[str]
    args: tuple = ()

    @property
    def random(self) -> bool:
        return self.kind in ("uniform", "normal", "trunc_normal", "orthogonal", "sparse")


# torch's C++ dtype names in its RNG messages
_CPP_DTYPE = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16"}


def _real(fn: str, arg: str, pos: int, v: Any) -> float:
    if not isinstance(v, numbers.Real):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be float, not {type(v).__name__}")
    return float(v)


def _check_uniform(lo: Any, hi: Any, dtype: str) -> Tuple[float, float]:
    """torch's ``uniform_`` checks (RuntimeError, torch's messages)."""
    lo, hi = _real("uniform_", "from", 1, lo), _real("uniform_", "to", 2, hi)
    cname = _CPP_DTYPE.get(dtype, dtype)
    fmax = float(np.finfo(dtype).max) if dtype in ("float16", "float32", "float64") else math.inf
    if not -fmax <= lo <= fmax:
        raise RuntimeError(f"from is out of bounds for {cname}")
    if not -fmax <= hi <= fmax:
        raise RuntimeError(f"to is out of bounds for {cname}")
    if lo > hi:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={lo:g} > to={hi:g}")
    if hi - lo > fmax:
        raise RuntimeError(f"uniform_ expects to-from <= std::numeric_limits<{cname.replace('c10::', '')}>::max(), "
                           f"but found to={hi:g} and from={lo:g} which result in to-from to exceed the limit")
    return lo, hi


def _check_normal(mean: Any, std: Any) -> Tuple[float, float]:
    mean, std = _real("normal_", "mean", 1, mean), _real("normal_", "std", 2, std)
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    return mean, std


def _uniform(shape, dtype, a=0.0, b=1.0, generator=None) -> Draw:
    return Draw("uniform", _check_uniform(a, b, dtype))


def _normal(shape, dtype, mean=0.0, std=1.0, generator=None) -> Draw:
    return Draw("normal", _check_normal(mean, std))


def _trunc_normal(shape, dtype, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None) -> Draw:
    def norm_cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=_STACK)
    p = norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std)
    if p > 0.3:
        mean, std = _check_normal(mean, std)
    else:
        _check_uniform(a, b, dtype)
    lo, hi = (float(np.asarray(v, dtype=dtype)) for v in (a, b))     # the bounds in the tensor's dtype
    return Draw("trunc_normal", (float(mean), float(std), float(a), float(b), lo, hi, p > 0.3))


def _constant(shape, dtype, val) -> Draw:
    if not isinstance(val, numbers.Number):
        raise TypeError(f"constant_(): argument 'val' must be a number, not {type(val).__name__}")
    return Draw("fill", (val,))


def _ones(shape, dtype) -> Draw:
    return Draw("fill", (1.0,))


def _zeros(shape, dtype) -> Draw:
    return Draw("fill", (0,))


def _eye(shape, dtype) -> Draw:
    if len(shape) != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return Draw("values", (np.eye(*shape, dtype=dtype),))


def _dirac(shape, dtype, groups=1) -> Draw:
    dimensions = len(shape)
    if dimensions not in [3, 4, 5]:
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_chans_per_grp = shape[0] // groups
    min_dim = min(out_chans_per_grp, shape[1])
    values = np.zeros(shape, dtype=dtype)
    centre = tuple(s // 2 for s in shape[2:])
    for g in range(groups):
        for d in range(min_dim):
            values[(g * out_chans_per_grp + d, d) + centre] = 1
    return Draw("values", (values,))


def _xavier_uniform(shape, dtype, gain=1.0, generator=None) -> Draw:
    fan_in, fan_out = _fans(shape)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return Draw("uniform", _check_uniform(-a, a, dtype))


def _xavier_normal(shape, dtype, gain=1.0, generator=None) -> Draw:
    fan_in, fan_out = _fans(shape)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return Draw("normal", _check_normal(0.0, std))


def _kaiming_std(shape, a, mode, nonlinearity) -> Optional[float]:
    if 0 in shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=_STACK + 1)
        return None
    fan = _correct_fan(shape, mode)
    gain = calculate_gain(nonlinearity, a)
    return gain / math.sqrt(fan)


def _kaiming_uniform(shape, dtype, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None) -> Draw:
    std = _kaiming_std(shape, a, mode, nonlinearity)
    if std is None:
        return Draw(None)
    bound = math.sqrt(3.0) * std
    return Draw("uniform", _check_uniform(-bound, bound, dtype))


def _kaiming_normal(shape, dtype, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None) -> Draw:
    std = _kaiming_std(shape, a, mode, nonlinearity)
    if std is None:
        return Draw(None)
    return Draw("normal", _check_normal(0, std))


def _orthogonal(shape, dtype, gain=1, generator=None) -> Draw:
    if len(shape) < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    numel = int(np.prod(shape))
    if numel == 0:
        return Draw(None)
    return Draw("orthogonal", (shape[0], numel // shape[0], gain))


def _sparse(shape, dtype, sparsity, std=0.01, generator=None) -> Draw:
    if len(shape) != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    num_zeros = math.ceil(sparsity * shape[0])
    return Draw("sparse", (num_zeros, _check_normal(0, std)[1]))


_RECIPES: Dict[str, Callable[..., Draw]] = {
    "uniform_": _uniform, "normal_": _normal, "trunc_normal_": _trunc_normal, "constant_": _constant,
    "ones_": _ones, "zeros_": _zeros, "eye_": _eye, "dirac_": _dirac,
    "xavier_uniform_": _xavier_uniform, "xavier_normal_": _xavier_normal,
    "kaiming_uniform_": _kaiming_uniform, "kaiming_normal_": _kaiming_normal,
    "orthogonal_": _orthogonal, "sparse_": _sparse,
}


def _plan(name: str, shape: Sequence[int], dtype: str, kwargs: Dict[str, Any]) -> Draw:
    """Function ``name``'s checks (torch's exceptions, messages and warnings, in torch's order) and
    what it writes into a tensor of ``shape`` and numpy ``dtype``; ``kwargs`` as the caller gave."""
    draw = _RECIPES[name](tuple(int(s) for s in shape), dtype, **kwargs)
    if draw.random and int(np.prod(shape)) and not np.issubdtype(np.dtype(dtype), np.floating):
        raise NotImplementedError(f"nn.init.{name} draws floating-point values; the tensor is {dtype}")
    return draw
