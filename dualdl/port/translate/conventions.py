"""MXNet -> torch layer conventions, written once for both readers: a traced Gluon layer
(``leaves.py``) and a layer node of an exported symbol (``symbol_layers.py``, ``symbol_rnn.py``)
take their torch constructor from here. Each function hides one difference that changes numbers:
BatchNorm momentum (MXNet weights the old running value, torch the new one) and eps default,
pooling's ``'full'`` convention (torch's ``ceil_mode``, except where MXNet keeps a last window
that starts in the padding: refused with both output sizes), ``count_include_pad``, global
pooling, the convolution keyword set, Dense/FullyConnected flattening, RNN modes and weight names.
``who`` ("Gluon" or "MXNet") only names the source in the comments written beside the layer.
It imports nothing of the package (the op registry calls it too): a layer's constructor comes back
as the keyword arguments of :class:`~dualdl.port.translate.registry.Call`."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["ConventionError", "int_or_tuple", "channels_first", "conv_call", "batchnorm_class",
           "bn_momentum", "bn_momentum_comment", "BN_EPS_DEFAULT", "FROZEN_BATCHNORM", "pool_call",
           "full_pool_outputs", "full_pool_problem", "linear_comment", "ACTIVATIONS", "RNN_MODES",
           "rnn_weight_names", "float32_value"]


class ConventionError(ValueError):
    """A layer setting torch cannot express; the reader turns it into a TranslationError naming
    the block or node (the message says what is not translatable)."""


def int_or_tuple(v: Any) -> Any:
    """MXNet tuples as torch's arguments: one int where every entry is equal (``(3, 3)`` -> 3)."""
    v = tuple(int(i) for i in (v if isinstance(v, (tuple, list)) else (v,)))
    return v[0] if len(set(v)) == 1 else v


def channels_first(layout: Optional[str]) -> bool:
    """torch's convolutions and poolings are channels-first (MXNet's default, written 'None' in a
    symbol file when left out)."""
    return layout in (None, "None") or str(layout).startswith("NC")


def conv_call(*, transposed: bool, nd: int, in_channels: int, out_channels: int, kernel: Sequence[int],
              stride: Sequence[int], pad: Sequence[int], dilate: Sequence[int], groups: int, no_bias: bool,
              adj: Sequence[int] = ()) -> Dict[str, Any]:
    """nn.Conv{nd}d / nn.ConvTranspose{nd}d with MXNet's settings; keywords only where they differ
    from torch's defaults (MXNet's adj is torch's output_padding). An empty setting is MXNet's default."""
    stride, pad, dilate = tuple(stride) or (1,) * nd, tuple(pad) or (0,) * nd, tuple(dilate) or (1,) * nd
    kw: List[Tuple[str, Any]] = [("stride", int_or_tuple(stride)), ("padding", int_or_tuple(pad))]
    if transposed and tuple(adj) and int_or_tuple(adj) != 0:
        kw.append(("output_padding", int_or_tuple(adj)))
    if int_or_tuple(dilate) != 1:
        kw.append(("dilation", int_or_tuple(dilate)))
    if groups != 1:
        kw.append(("groups", int(groups)))
    if no_bias:
        kw.append(("bias", False))
    cls = f"nn.ConvTranspose{nd}d" if transposed else f"nn.Conv{nd}d"
    return dict(fn=cls, args=[int(in_channels), int(out_channels), int_or_tuple(kernel)], kwargs=kw,
                names=["in_channels", "out_channels", "kernel_size"])


def batchnorm_class(ndim: int) -> str:
    """torch's BatchNorm class for an input of ``ndim`` axes (MXNet's one op takes any)."""
    cls = {2: "nn.BatchNorm1d", 3: "nn.BatchNorm1d", 4: "nn.BatchNorm2d", 5: "nn.BatchNorm3d"}.get(ndim)
    if cls is None:
        raise ConventionError(f"BatchNorm on a {ndim}-d input")
    return cls


#: MXNet's BatchNorm eps is a double whose default is the float literal 1e-3f (0.0010000000474974513):
#: a symbol that does not set it computes with that value (Gluon's layer sets 1e-5 itself)
BN_EPS_DEFAULT = float(np.float32(1e-3))


#: MXNet BatchNorm(use_global_stats=True): the running statistics in train mode too, never updated
#: (torch's nn.BatchNorm in train mode would use the batch's): a subclass with nn.BatchNorm's keys
FROZEN_BATCHNORM = '''class FrozenBatchNorm{d}(nn.BatchNorm{d}):
    """MXNet BatchNorm(use_global_stats=True): normalises with the running statistics in train
    mode too and never updates them (nn.BatchNorm{d} in train mode would use the batch statistics).
    weight and bias still train; the state_dict keys are nn.BatchNorm{d}'s."""

    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps)
'''


def float32_value(v: Any) -> float:
    """A number MXNet keeps as a C++ float (an alpha, a threshold): the float32 value it computes with."""
    return float(np.float32(v))


def bn_momentum(mxnet_momentum: float, *, as_float32: bool = False) -> float:
    """torch's momentum for MXNet's: MXNet keeps ``m * running + (1 - m) * batch``, torch
    ``(1 - t) * running + t * batch``, so t = 1 - m. ``as_float32``: MXNet's kernel reads m as a
    float32 (1 - float32(0.9) = 0.10000002384185791), for a layer that reproduces MXNet's update."""
    if as_float32:
        return 1.0 - float(np.float32(mxnet_momentum))
    return round(1.0 - float(mxnet_momentum), 12)


def bn_momentum_comment(who: str, mxnet_momentum: Any, torch_momentum: float) -> str:
    return (f"{who} momentum {mxnet_momentum} weights the old running value; torch's {torch_momentum} weights "
            f"the new one")


def full_pool_outputs(size: int, kernel: int, stride: int, pad: int) -> int:
    """torch's ceil_mode output size: ceil((size + 2 pad - kernel) / stride) + 1, minus a last
    window that would start in the right padding (torch drops it; MXNet's 'full' keeps it)."""
    n = -(-(size + 2 * pad - kernel) // stride) + 1
    if (n - 1) * stride >= size + pad:
        n -= 1
    return n


def full_pool_problem(kernel: Sequence[int], stride: Sequence[int], pad: Sequence[int],
                      in_spatial: Optional[Sequence[int]], out_spatial: Optional[Sequence[int]]) -> str:
    """Why pooling_convention='full' is not torch's ceil_mode on these sizes ('' where it is, or
    where a size is unknown): MXNet keeps a last window that starts in the padding, torch drops it."""
    if in_spatial is None or out_spatial is None:
        return ""
    for i, size in enumerate(in_spatial):
        k, s, p = int(kernel[i]), int(stride[i]), int(pad[i])
        n = full_pool_outputs(int(size), k, s, p)
        if out_spatial[i] is not None and n != int(out_spatial[i]):
            return (f"pooling_convention='full' with kernel {k}, stride {s}, pad {p} on size {size}: MXNet gives "
                    f"{out_spatial[i]} outputs, torch's ceil_mode gives {n}")
    return ""


def pool_call(who: str, *, pool_type: str, nd: int, kernel: Sequence[int] = (), stride: Sequence[int] = (),
              pad: Sequence[int] = (), convention: str = "valid", count_include_pad: Any = True,
              global_pool: bool = False, in_spatial: Optional[Sequence[int]] = None,
              out_spatial: Optional[Sequence[int]] = None) -> Dict[str, Any]:
    """nn.{Max,Avg}Pool{nd}d (nn.Adaptive*Pool with output 1 for global pooling) from MXNet's
    pooling settings. 'full' becomes ceil_mode=True where the sizes agree (both known: checked per
    axis); MXNet's default stride is 1, its count_include_pad True as torch's."""
    if pool_type not in ("max", "avg"):
        raise ConventionError(f"Pooling(pool_type={pool_type!r})")
    kind = "Max" if pool_type == "max" else "Avg"
    if global_pool:
        return dict(fn=f"nn.Adaptive{kind}Pool{nd}d", args=[1], names=["output_size"],
                    comment=f"{who} global pooling: one value per channel")
    kernel = tuple(int(k) for k in kernel)
    stride = tuple(int(s) for s in stride) or (1,) * nd
    pad = tuple(int(p) for p in pad) or (0,) * nd
    kw: List[Tuple[str, Any]] = [("stride", int_or_tuple(stride)), ("padding", int_or_tuple(pad))]
    notes = []
    if convention == "full":
        kw.append(("ceil_mode", True))
        notes.append(f"{who} pooling_convention='full' is torch's ceil_mode=True")
        problem = full_pool_problem(kernel, stride, pad, in_spatial, out_spatial)
        if problem:
            raise ConventionError(problem)
    elif convention != "valid":
        raise ConventionError(f"Pooling(pooling_convention={convention!r})")
    if kind == "Avg" and count_include_pad is False:
        kw.append(("count_include_pad", False))
        notes.append(f"{who} count_include_pad=False")
    return dict(fn=f"nn.{kind}Pool{nd}d", args=[int_or_tuple(kernel)], kwargs=kw, names=["kernel_size"],
                comment="; ".join(notes))


def linear_comment(who: str, layer: str, flatten: bool, ndim: int) -> str:
    """What a Dense/FullyConnected does that nn.Linear alone does not say: flatten=True flattens
    all but the batch axis first (the caller writes torch.flatten(x, 1)); flatten=False is nn.Linear's
    last-axis rule."""
    if ndim <= 2:
        return ""
    if flatten:
        return f"{who} {layer}(flatten=True) flattens all but the batch axis first"
    return f"{who} {layer}(flatten=False): applied to the last axis, as nn.Linear is"


#: MXNet Activation act_type -> (torch module, the same as a call on ``{x}``)
ACTIVATIONS = {"relu": ("nn.ReLU", "torch.relu({x})"), "sigmoid": ("nn.Sigmoid", "torch.sigmoid({x})"),
               "tanh": ("nn.Tanh", "torch.tanh({x})"), "softrelu": ("nn.Softplus", "F.softplus({x})"),
               "softsign": ("nn.Softsign", "F.softsign({x})")}


#: MXNet RNN mode -> (torch class, its extra keywords, gates per weight block)
RNN_MODES = {"lstm": ("nn.LSTM", [], 4), "gru": ("nn.GRU", [], 3),
             "rnn_relu": ("nn.RNN", [("nonlinearity", "relu")], 1),
             "rnn_tanh": ("nn.RNN", [("nonlinearity", "tanh")], 1)}


def rnn_weight_names(layers: int, dirs: int, *, concat_order: bool = False) -> List[Tuple[str, str]]:
    """(Gluon name, torch name) of an RNN layer's weights: ``l0_i2h_weight`` -> ``weight_ih_l0``,
    ``r0_h2h_bias`` -> ``bias_hh_l0_reverse`` (the gate order inside each is the same in both).
    ``concat_order``: in the order of MXNet's flat parameter vector (all weights, then all biases)."""
    out = []
    kinds = ("weight", "bias")
    for t in (kinds if concat_order else (None,)):
        for k in range(layers):
            for d, suffix in (("l", ""), ("r", "_reverse"))[:dirs]:
                for gname, tname in (("i2h", "ih"), ("h2h", "hh")):
                    for kind in ((t,) if t else kinds):
                        out.append((f"{d}{k}_{gname}_{kind}", f"{kind}_{tname}_l{k}{suffix}"))
    return out
