"""MXNet layer ops of an exported symbol -> torch layers, read from the op's attributes (with
MXNet's own defaults where the file leaves one out) and its weights' shapes. The conventions
that change numbers are explicit, as for Gluon blocks: BatchNorm momentum (MXNet 0.9 weights the
old running value, torch's 0.1 the new one), FullyConnected's flattening, pooling's ``ceil_mode``
(``pooling_convention='full'``), Embedding's float ids."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from .errors import TranslationError
from .gate import probability
from .safe import comment
from .ops import parse_attr
from .registry import Call
from .symbol_graph import SymGraph, SymNode

__all__ = ["LayerSpec", "layer_spec"]

_BN = "MXNet momentum {g} weights the old running value; torch's {t} weights the new one"
_FIXED = "MXNet BatchNorm(fix_gamma=True): the scale is 1 and not trained (MXNet ignores the stored gamma)"
_FLAT = "MXNet FullyConnected(flatten=True) flattens all but the batch axis first"


@dataclass
class LayerSpec:
    """``ctor`` builds the torch layer; ``params`` maps the node's input index to the torch
    state_dict name of the weight it takes; ``call`` is the call with ``{m}`` (the module) and
    ``{x}`` (the data input); ``roles`` names each weight as Gluon would (gamma, running_var...)."""
    ctor: Call
    params: Dict[int, str] = field(default_factory=dict)
    roles: Dict[int, str] = field(default_factory=dict)
    call: str = "{m}({x})"
    comment: str = ""
    buffers: Dict[str, int] = field(default_factory=dict)
    momentum: Optional[float] = None
    weights: List[Tuple[int, str, str]] = field(default_factory=list)   # (variable id, torch name, Gluon name)
    n_out: Optional[int] = None          # outputs the torch call returns, when not the op's
    frozen: Dict[int, str] = field(default_factory=dict)   # input index -> why the weight is fixed at 1


def _err(node: SymNode, what: str) -> TranslationError:
    return TranslationError(f"MXNet {node.op} node {node.name!r}: {what} has no torch translation",
                            op=node.op, block=node.op, path=node.name)


def _tuple(v) -> object:
    v = tuple(int(i) for i in (v if isinstance(v, (tuple, list)) else (v,)))
    return v[0] if len(set(v)) == 1 else v


def _shape(g: SymGraph, node: SymNode, i: int) -> Tuple[int, ...]:
    return g.shapes[node.inputs[i]]


def _attr(node: SymNode, key: str, default):
    v = parse_attr(node.attrs.get(key), default)
    return default if v is None else v


def _conv(g, node):
    kernel = tuple(_attr(node, "kernel", ()))
    nd = len(kernel)
    layout = node.attrs.get("layout", "None")
    if layout not in ("None", "NCW", "NCHW", "NCDHW"):
        raise _err(node, f"layout {layout!r} (torch convolutions are channels-first)")
    transposed = node.op == "Deconvolution"
    groups = int(_attr(node, "num_group", 1))
    w = _shape(g, node, 1)
    cin = w[0] if transposed else w[1] * groups
    no_bias = bool(_attr(node, "no_bias", transposed))
    kw = [("stride", _tuple(_attr(node, "stride", (1,) * nd) or (1,) * nd)),
          ("padding", _tuple(_attr(node, "pad", (0,) * nd) or (0,) * nd))]
    if transposed:
        if _attr(node, "target_shape", ()):
            raise _err(node, "Deconvolution(target_shape=...)")
        adj = _tuple(_attr(node, "adj", (0,) * nd) or (0,) * nd)
        if adj != 0:
            kw.append(("output_padding", adj))
    dil = _tuple(_attr(node, "dilate", (1,) * nd) or (1,) * nd)
    if dil != 1:
        kw.append(("dilation", dil))
    if groups != 1:
        kw.append(("groups", groups))
    if no_bias:
        kw.append(("bias", False))
    cls = f"nn.ConvTranspose{nd}d" if transposed else f"nn.Conv{nd}d"
    params = {1: "weight"} if no_bias else {1: "weight", 2: "bias"}
    return LayerSpec(Call(cls, [int(cin), int(_attr(node, "num_filter", 0)), _tuple(kernel)], kw,
                          names=["in_channels", "out_channels", "kernel_size"]), params,
                     {1: "weight", 2: "bias"})


def _fc(g, node):
    out_f, in_f = _shape(g, node, 1)
    no_bias = bool(_attr(node, "no_bias", False))
    ndim = len(_shape(g, node, 0))
    call, comment = "{m}({x})", ""
    if _attr(node, "flatten", True) and ndim > 2:
        call, comment = "{m}(torch.flatten({x}, 1))", _FLAT
    elif ndim > 2:
        comment = "MXNet FullyConnected(flatten=False): applied to the last axis, as nn.Linear is"
    return LayerSpec(Call("nn.Linear", [int(in_f), int(out_f)], [("bias", False)] if no_bias else [],
                          names=["in_features", "out_features"]),
                     {1: "weight"} if no_bias else {1: "weight", 2: "bias"}, {1: "weight", 2: "bias"},
                     call=call, comment=comment)


def _batchnorm(g, node):
    if int(_attr(node, "axis", 1)) != 1:
        raise _err(node, f"BatchNorm(axis={node.attrs['axis']}) (torch normalises axis 1)")
    if _attr(node, "use_global_stats", False):
        raise _err(node, "BatchNorm(use_global_stats=True) (torch has no such flag; freeze with eval())")
    if _attr(node, "output_mean_var", False):
        raise _err(node, "BatchNorm(output_mean_var=True)")
    ndim = len(_shape(g, node, 0))
    cls = {2: "nn.BatchNorm1d", 3: "nn.BatchNorm1d", 4: "nn.BatchNorm2d", 5: "nn.BatchNorm3d"}.get(ndim)
    if cls is None:
        raise _err(node, f"BatchNorm on a {ndim}-d input")
    m = float(_attr(node, "momentum", 0.9))
    mom = round(1.0 - m, 12)
    # MXNet's eps is a double whose default is the float literal 1e-3f (0.0010000000474974513): a graph
    # that does not set it (gluoncv's mx.sym.BatchNorm calls) computes with that value
    eps = float(_attr(node, "eps", float(np.float32(1e-3))))
    fixed = bool(_attr(node, "fix_gamma", True))
    return LayerSpec(Call(cls, [int(_shape(g, node, 1)[0])], [("eps", eps), ("momentum", mom)],
                          names=["num_features"]),
                     {1: "weight", 2: "bias", 3: "running_mean", 4: "running_var"},
                     {1: "fixed_gamma" if fixed else "gamma", 2: "beta", 3: "running_mean", 4: "running_var"},
                     comment=_BN.format(g=m, t=mom), buffers={"num_batches_tracked": 0}, momentum=m,
                     frozen={1: _FIXED} if fixed else {})


def _pooling(g, node):
    pool = node.attrs.get("pool_type", "max")
    if pool not in ("max", "avg"):
        raise _err(node, f"Pooling(pool_type={pool!r})")
    layout = node.attrs.get("layout", "None")
    if layout not in ("None", "NCW", "NCHW", "NCDHW"):
        raise _err(node, f"Pooling(layout={layout!r})")
    kind = "Max" if pool == "max" else "Avg"
    in_shape = _shape(g, node, 0)
    kernel = tuple(_attr(node, "kernel", ()))
    nd = len(kernel) if kernel else len(in_shape) - 2
    if _attr(node, "global_pool", False):
        return LayerSpec(Call(f"nn.Adaptive{kind}Pool{nd}d", [1], names=["output_size"]),
                         comment="MXNet global pooling: one value per channel")
    stride = tuple(_attr(node, "stride", ()) or (1,) * nd)
    pad = tuple(_attr(node, "pad", ()) or (0,) * nd)
    conv = node.attrs.get("pooling_convention", "valid")
    kw = [("stride", _tuple(stride)), ("padding", _tuple(pad))]
    comment = ""
    if conv == "full":
        kw.append(("ceil_mode", True))
        comment = "MXNet pooling_convention='full' is torch's ceil_mode=True"
        out = g.shapes.get((node.id, 0))
        for i, size in enumerate(in_shape[2:]):
            k, s, p = kernel[i], stride[i], pad[i]
            n = -(-(size + 2 * p - k) // s) + 1
            if (n - 1) * s >= size + p:
                n -= 1
            if out is not None and n != out[2 + i]:
                raise _err(node, f"pooling_convention='full' with kernel {k}, stride {s}, pad {p} on size "
                                 f"{size}: MXNet gives {out[2 + i]} outputs, torch's ceil_mode gives {n}")
    elif conv != "valid":
        raise _err(node, f"Pooling(pooling_convention={conv!r})")
    if kind == "Avg" and _attr(node, "count_include_pad", True) is False:
        kw.append(("count_include_pad", False))
        comment = (comment + "; " if comment else "") + "MXNet count_include_pad=False"
    return LayerSpec(Call(f"nn.{kind}Pool{nd}d", [_tuple(kernel)], kw, names=["kernel_size"]), comment=comment)


def _dropout(g, node):
    if node.attrs.get("mode", "training") != "training":
        raise _err(node, f"Dropout(mode={node.attrs['mode']!r})")
    if _attr(node, "axes", ()):
        raise _err(node, f"Dropout(axes={node.attrs['axes']})")
    p = probability(_attr(node, "p", 0.5), f"MXNet Dropout node {comment(node.name)!r}")
    return LayerSpec(Call("nn.Dropout", [p], names=["p"]))


def _embedding(g, node):
    w = _shape(g, node, 1)
    return LayerSpec(Call("nn.Embedding", [int(w[0]), int(w[1])], names=["num_embeddings", "embedding_dim"]),
                     {1: "weight"}, {1: "weight"}, call="{m}({x}.long())",
                     comment="MXNet Embedding takes float ids; torch's takes int64")


def _prelu(g, node):
    c = _shape(g, node, 1)
    return LayerSpec(Call("nn.PReLU", [int(c[0])], names=["num_parameters"]), {1: "weight"}, {1: "alpha"})


_LAYERS = {"Convolution": _conv, "Deconvolution": _conv, "FullyConnected": _fc, "BatchNorm": _batchnorm,
           "Pooling": _pooling, "Dropout": _dropout, "Embedding": _embedding, "LeakyReLU": _prelu}


def layer_spec(g: SymGraph, node: SymNode) -> LayerSpec:
    if node.op == "RNN":
        from .symbol_rnn import rnn_spec
        return rnn_spec(g, node, LayerSpec)
    return _LAYERS[node.op](g, node)
