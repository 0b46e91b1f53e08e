"""Random tensors on MXNet (``dualdl.random``), drawn from MXNet's generator, which ``dualdl.seed``
seeds (``mx.random.seed``): the same seed gives the same numbers on MXNet, other numbers than
torch's. Inside a hybridized write-once forward a tensor made from nothing (``randn(2, 3)``) is a
graph node (``mx.sym.random.*``), so each call of the graph draws anew, as eager code does; the
``*_like`` functions, ``bernoulli`` and ``multinomial`` draw through ``mx.nd``/``mx.sym`` of their
argument. ``multinomial`` without replacement is the Gumbel top-k (MXNet's op samples with
replacement only); both take unnormalised weights, as torch."""
from __future__ import annotations

import mxnet as mx
import numpy as np

from .ops_base import _F, _is_nd
from .torch_style import tracing


def _name(dtype) -> str:
    return np.dtype(dtype).name


def rand(size, dtype, device):
    if tracing():
        return mx.sym.random.uniform(0.0, 1.0, shape=tuple(size), dtype=_name(dtype))
    return mx.nd.random.uniform(0.0, 1.0, shape=tuple(size), dtype=_name(dtype), ctx=device)


def randn(size, dtype, device):
    if tracing():
        return mx.sym.random.normal(0.0, 1.0, shape=tuple(size), dtype=_name(dtype))
    return mx.nd.random.normal(0.0, 1.0, shape=tuple(size), dtype=_name(dtype), ctx=device)


def randint(low, high, size, dtype, device):
    ns = mx.sym if tracing() else mx.nd
    kw = {} if tracing() else {"ctx": device}
    out = ns.random.randint(int(low), int(high), shape=tuple(size), dtype="int64", **kw)
    return out if np.dtype(dtype) == np.int64 else ns.cast(out, dtype=_name(dtype))


def _cast(F, y, dtype):
    return y if dtype is None else F.cast(y, dtype=_name(dtype))


def rand_like(input, dtype=None):
    F = _F(input)
    return _cast(F, F.random.uniform_like(F.BlockGrad(input)), dtype)


def randn_like(input, dtype=None):
    F = _F(input)
    return _cast(F, F.random.normal_like(F.BlockGrad(input)), dtype)


def randint_like(input, low, high, dtype=None):
    F = _F(input)
    u = F.random.uniform_like(F.BlockGrad(input))
    out = F.floor(u * float(int(high) - int(low))) + float(low)
    return _cast(F, out, dtype)


def multinomial(input, num_samples, replacement=False):
    """Indices (int64) of ``num_samples`` draws per row of the weights ``input`` (1-D or 2-D)."""
    F = _F(input)
    if _is_nd(input):
        if input.ndim not in (1, 2):
            raise ValueError(f"multinomial: prob_dist must be 1 or 2 dim, got {input.ndim}")
        if not replacement and int(num_samples) > input.shape[-1]:
            raise ValueError("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without "
                             "replacement")
    w = F.BlockGrad(input)
    if replacement:
        p = F.broadcast_div(w, F.sum(w, axis=-1, keepdims=True))
        return F.cast(F.random.multinomial(p, shape=int(num_samples)), dtype="int64")
    u = F.random.uniform_like(w)
    keys = F.log(w) - F.log(-F.log(u))                     # Gumbel top-k: weights need no normalising
    return F.topk(keys, axis=-1, k=int(num_samples), ret_typ="indices", dtype="int64")


def bernoulli(input, p=None):
    """1 with probability ``input`` (or the float ``p``), in the input's dtype."""
    F = _F(input)
    u = F.random.uniform_like(F.BlockGrad(input))
    return (u < float(p)) if p is not None else (u < F.BlockGrad(input))


def _fill(tensor, draw):
    """Overwrite every copy of ``tensor`` (an NDArray, or a Gluon Parameter on each of its contexts)."""
    with mx.autograd.pause():
        arrays = tensor.list_data() if isinstance(tensor, mx.gluon.Parameter) else [tensor]
        value = draw(arrays[0])                 # one draw: every context holds the same values
        for a in arrays:
            a[:] = value.as_in_context(a.context)
    return tensor


def normal_(tensor, mean=0.0, std=1.0):
    return _fill(tensor, lambda a: mx.nd.random.normal(float(mean), float(std), shape=a.shape, dtype=a.dtype,
                                                       ctx=a.context))


def uniform_(tensor, a=0.0, b=1.0):
    return _fill(tensor, lambda t: mx.nd.random.uniform(float(a), float(b), shape=t.shape, dtype=t.dtype,
                                                        ctx=t.context))
