"""MXNet layer ops of an exported symbol -> torch layers, read from the op's attributes (with
MXNet's own defaults where the file leaves one out) and its weights' shapes. The conventions
that change numbers are explicit, as for Gluon blocks: BatchNorm momentum (MXNet 0.9 weights the
old running value, torch's 0.1 the new one), FullyConnected's flattening, pooling's ``ceil_mode``
(``pooling_convention='full'``), Embedding's float ids."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .conventions import BN_EPS_DEFAULT, ConventionError, channels_first, conv_call, linear_comment, pool_call
from .errors import TranslationError
from .gate import probability
from .leaves import batchnorm_call, flatten_step, float_ids_step
from .safe import comment
from .ops import parse_attr
from .registry import Call, Leaf
from .symbol_graph import SymGraph, SymNode
from .symbol_rnn import rnn_spec

__all__ = ["LayerSpec", "layer_spec"]

_FIXED = "MXNet BatchNorm(fix_gamma=True): the scale is 1 and not trained (MXNet ignores the stored gamma)"


@dataclass
class LayerSpec(Leaf):
    """The torch layer of a layer node: a :class:`Leaf`, the spec a Gluon layer becomes too (``ctor``,
    ``params``: each weight's Gluon role -> its torch state_dict name, ``call`` with ``{m}`` the
    module and ``{x}`` the data input, ``pre`` the steps before it, ``buffers``, ``helpers``), plus
    what only a node says: ``inputs``, the node input holding each weight (index -> role: gamma,
    running_var...), BatchNorm's ``momentum`` for the proof, an RNN's ``weights``."""
    inputs: Dict[int, str] = field(default_factory=dict)
    momentum: Optional[float] = None
    weights: List[Tuple[int, str, str]] = field(default_factory=list)   # (variable id, torch name, Gluon name)
    n_out: Optional[int] = None          # outputs the torch call returns, when not the op's
    frozen: Dict[str, str] = field(default_factory=dict)   # torch name -> why the weight is fixed at 1


_WEIGHT_BIAS = {"weight": "weight", "bias": "bias"}


def _weight_bias(no_bias: bool) -> Dict[int, str]:
    return {1: "weight"} if no_bias else {1: "weight", 2: "bias"}


def _err(node: SymNode, what: str) -> TranslationError:
    return TranslationError(f"MXNet {node.op} node {node.name!r}: {what} has no torch translation",
                            op=node.op, block=node.op, path=node.name)


def _shape(g: SymGraph, node: SymNode, i: int) -> Tuple[int, ...]:
    return g.shapes[node.inputs[i]]


def _attr(node: SymNode, key: str, default):
    v = parse_attr(node.attrs.get(key), default)
    return default if v is None else v


def _conv(g, node):
    kernel = tuple(_attr(node, "kernel", ()))
    nd = len(kernel)
    layout = node.attrs.get("layout", "None")
    if not channels_first(layout):
        raise _err(node, f"layout {layout!r} (torch convolutions are channels-first)")
    transposed = node.op == "Deconvolution"
    if transposed and _attr(node, "target_shape", ()):
        raise _err(node, "Deconvolution(target_shape=...)")
    groups = int(_attr(node, "num_group", 1))
    w = _shape(g, node, 1)
    no_bias = bool(_attr(node, "no_bias", transposed))
    ctor = Call(**conv_call(transposed=transposed, nd=nd, in_channels=w[0] if transposed else w[1] * groups,
                            out_channels=int(_attr(node, "num_filter", 0)), kernel=kernel,
                            stride=_attr(node, "stride", ()), pad=_attr(node, "pad", ()),
                            dilate=_attr(node, "dilate", ()), groups=groups, no_bias=no_bias, adj=_attr(node, "adj", ())))
    return LayerSpec(ctor, dict(_WEIGHT_BIAS), inputs=_weight_bias(no_bias))


def _fc(g, node):
    out_f, in_f = _shape(g, node, 1)
    no_bias = bool(_attr(node, "no_bias", False))
    ndim = len(_shape(g, node, 0))
    flatten = bool(_attr(node, "flatten", True))
    return LayerSpec(Call("nn.Linear", [int(in_f), int(out_f)], [("bias", False)] if no_bias else [],
                          names=["in_features", "out_features"],
                          comment=linear_comment("MXNet", "FullyConnected", flatten, ndim)),
                     dict(_WEIGHT_BIAS), pre=[flatten_step()] if flatten and ndim > 2 else [],
                     inputs=_weight_bias(no_bias))


def _batchnorm(g, node):
    if int(_attr(node, "axis", 1)) != 1:
        raise _err(node, f"BatchNorm(axis={node.attrs['axis']}) (torch normalises axis 1)")
    if _attr(node, "output_mean_var", False):
        raise _err(node, "BatchNorm(output_mean_var=True)")
    m = float(_attr(node, "momentum", 0.9))
    fixed = bool(_attr(node, "fix_gamma", True))
    try:        # eps: gluoncv's mx.sym.BatchNorm calls leave it out; momentum m stays the proof's record of the node
        call, helpers = batchnorm_call("MXNet", len(_shape(g, node, 0)), _shape(g, node, 1)[0],
                                       eps=float(_attr(node, "eps", BN_EPS_DEFAULT)), momentum=m,
                                       use_global_stats=bool(_attr(node, "use_global_stats", False)))
    except ConventionError as e:
        raise _err(node, str(e)) from None
    gamma = "fixed_gamma" if fixed else "gamma"
    return LayerSpec(call, {gamma: "weight", "beta": "bias", "running_mean": "running_mean",
                            "running_var": "running_var"},
                     buffers={"num_batches_tracked": 0}, helpers=helpers,
                     inputs={1: gamma, 2: "beta", 3: "running_mean", 4: "running_var"}, momentum=m,
                     frozen={"weight": _FIXED} if fixed else {})


def _pooling(g, node):
    layout = node.attrs.get("layout", "None")
    if not channels_first(layout):
        raise _err(node, f"Pooling(layout={layout!r})")
    in_shape = _shape(g, node, 0)
    kernel = tuple(_attr(node, "kernel", ()))
    out = g.shapes.get((node.id, 0))
    try:
        ctor = Call(**pool_call("MXNet", pool_type=node.attrs.get("pool_type", "max"),
                                nd=len(kernel) if kernel else len(in_shape) - 2, kernel=kernel,
                                stride=_attr(node, "stride", ()), pad=_attr(node, "pad", ()),
                                convention=node.attrs.get("pooling_convention", "valid"),
                                count_include_pad=_attr(node, "count_include_pad", True),
                                global_pool=bool(_attr(node, "global_pool", False)), in_spatial=in_shape[2:],
                                out_spatial=out[2:] if out is not None else None))
    except ConventionError as e:
        raise _err(node, str(e)) from None
    return LayerSpec(ctor)


def _dropout(g, node):
    if node.attrs.get("mode", "training") != "training":
        raise _err(node, f"Dropout(mode={node.attrs['mode']!r})")
    if _attr(node, "axes", ()):
        raise _err(node, f"Dropout(axes={node.attrs['axes']})")
    p = probability(_attr(node, "p", 0.5), f"MXNet Dropout node {comment(node.name)!r}")
    return LayerSpec(Call("nn.Dropout", [p], names=["p"]))


def _embedding(g, node):
    w = _shape(g, node, 1)
    return LayerSpec(Call("nn.Embedding", [int(w[0]), int(w[1])], names=["num_embeddings", "embedding_dim"],
                          comment="MXNet Embedding takes float ids; torch's takes int64"),
                     {"weight": "weight"}, pre=[float_ids_step()], inputs={1: "weight"})


def _prelu(g, node):
    c = _shape(g, node, 1)
    return LayerSpec(Call("nn.PReLU", [int(c[0])], names=["num_parameters"]), {"alpha": "weight"}, inputs={1: "alpha"})


_LAYERS = {"Convolution": _conv, "Deconvolution": _conv, "FullyConnected": _fc, "BatchNorm": _batchnorm,
           "Pooling": _pooling, "Dropout": _dropout, "Embedding": _embedding, "LeakyReLU": _prelu}


def layer_spec(g: SymGraph, node: SymNode) -> LayerSpec:
    if node.op == "RNN":
        return rnn_spec(g, node, LayerSpec)
    return _LAYERS[node.op](g, node)
