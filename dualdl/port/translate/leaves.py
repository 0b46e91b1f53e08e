"""Gluon leaf layers -> idiomatic torch layers, with every number-changing MXNet convention made
explicit: Dense flattening, BatchNorm momentum (Gluon 0.9 weights the old running value, torch
0.1 the new one) and, on request, Gluon's biased running variance, pooling ``ceil_mode``
(``pooling_convention='full'``), RNN layout and outputs, Embedding's float ids. A subclass of a
Gluon layer that computes what the layer computes (gluoncv's ``BatchNormCudnnOff``) is that layer."""
from __future__ import annotations

import json
import weakref

from typing import Any, Callable, Dict, List, Optional, Tuple

from .conventions import (ACTIVATIONS, FROZEN_BATCHNORM, RNN_MODES, ConventionError, batchnorm_class, bn_momentum,
                          bn_momentum_comment, channels_first, conv_call, float32_value, linear_comment, pool_call,
                          rnn_weight_names)
from .errors import TranslationError
from .gate import probability
from .registry import Call, Leaf, Step
from .safe import docstring_text

__all__ = ["builtin_leaf", "is_gluon_builtin", "fused_helper", "weight_drop_note", "gluon_base", "flatten_step",
           "float_ids_step", "batchnorm_call", "rnn_layer"]

_BN_FROZEN = ("momentum=0: MXNet updates running stats in backward, which never runs for a BatchNorm "
              "without trainable parameters before it")
_IDS = "Gluon's Embedding takes float ids (nd.array's default float32) and casts them; torch's takes int64"

#: attributes that choose a kernel, not the numbers (a subclass setting them computes the same)
_KERNEL_ONLY = frozenset({"cudnn_off", "cudnn_tune", "workspace", "name"})
_SAME: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # block -> its Gluon layer class or None


def gluon_base(block: Any) -> Optional[type]:
    """The Gluon layer class (``nn.BatchNorm``...) whose translation ``block`` takes: its own class,
    or the nearest Gluon layer it subclasses when the subclass computes the same (no ``forward``/
    ``hybrid_forward`` of its own, or one whose symbol graph equals the layer's up to kernel choices
    such as ``cudnn_off``). None otherwise (the block is traced as a user block)."""
    cls = type(block)
    base = next((c for c in cls.__mro__ if c.__module__.startswith("mxnet.gluon") and c.__name__ in _LEAVES), None)
    if base is None or base is cls:
        return base
    try:
        return _SAME[block]
    except (KeyError, TypeError):
        same = base if _computes_like(block, base) else None
    try:
        _SAME[block] = same
    except TypeError:      # not weak-referenceable: decided again next time
        pass
    return same


def _computes_like(block: Any, base: type) -> bool:
    cls = type(block)
    own = [m for m in ("__call__", "forward", "hybrid_forward") if getattr(cls, m, None) is not getattr(base, m, None)]
    if not own:
        return True
    if "__call__" in own or base.__name__ in ("LSTM", "GRU", "RNN") or not hasattr(base, "hybrid_forward"):
        return False
    import mxnet as mx
    try:
        params = {k: p.var() for k, p in block._reg_params.items()}
        x = mx.sym.var("__x")
        if "forward" in own:
            mine = cls.forward(block, x)
        else:
            mine = cls.hybrid_forward(block, mx.sym, x, **params)
        theirs = base.hybrid_forward(block, mx.sym, x, **params)
        return _graph(mine) == _graph(theirs)
    except Exception:      # it does something else with its input: trace it as a user block
        return False


def _graph(sym) -> str:
    nodes = json.loads(sym.tojson())["nodes"]
    out = []
    for n in nodes:
        attrs = {k: v for k, v in n.get("attrs", {}).items() if k not in _KERNEL_ONLY}
        out.append((n["op"], n["name"] if n["op"] == "null" else "", sorted(attrs.items()),
                    [tuple(i[:2]) for i in n.get("inputs", [])]))
    return repr(out)


def flatten_step(comment: str = "") -> Step:
    """Dense / FullyConnected(flatten=True) on a >2-d input flattens all but the batch axis before
    the layer (nn.Linear applies to the last axis): the step, for either reader."""
    return Step(Call("nn.Flatten"), "torch.flatten({x}, 1)", comment)


def float_ids_step(comment: str = "") -> Step:
    """Gluon's and MXNet's Embedding take float ids; torch's takes int64: the cast before the layer."""
    return Step(None, "{x}.long()", comment)


def batchnorm_call(who: str, ndim: int, num_features: int, *, eps: float, momentum: Any,
                   use_global_stats: bool = False, affine: bool = True, frozen_comment: Optional[str] = None,
                   gluon_stats: bool = False) -> Tuple[Call, List[str]]:
    """torch's BatchNorm for MXNet's, for either reader: (the constructor call, helper class sources).
    The class by input rank (MXNet's one op takes any; ConventionError beyond 5-d), torch's momentum
    1 - MXNet's (MXNet weights the old running value, torch the new one), ``frozen_comment``: a layer
    whose statistics never update (momentum 0, that comment). ``use_global_stats``: FrozenBatchNorm
    (the running statistics in train mode too, never updated; torch's would use the batch's);
    ``gluon_stats``: GluonBatchNorm (the biased batch variance, MXNet's float32 momentum)."""
    cls = batchnorm_class(ndim)
    mom = bn_momentum(momentum)
    comment = bn_momentum_comment(who, momentum, mom)
    if frozen_comment is not None:
        mom, comment = 0.0, frozen_comment
    helpers: List[str] = []
    d = cls[-2:]
    if use_global_stats:
        cls, helpers, mom = f"FrozenBatchNorm{d}", [FROZEN_BATCHNORM.format(d=d)], 0.0
        comment = f"{who} BatchNorm(use_global_stats=True): the running statistics in train mode too, never updated"
    elif gluon_stats:
        cls, helpers = f"GluonBatchNorm{d}", [GLUON_BATCHNORM.format(d=d)]
        if mom:      # MXNet keeps momentum as a float32 attribute: 1 - float32(0.9) = 0.10000002384185791
            mom = bn_momentum(momentum, as_float32=True)
            comment += " (MXNet's momentum is a float32)"
    kwargs = [("eps", float(eps)), ("momentum", mom)] + ([] if affine else [("affine", False)])
    return Call(cls, [int(num_features)], kwargs, names=["num_features"], comment=comment), helpers


def rnn_layer(mode: str, input_size: int, hidden_size: int, *, layers: int, bidirectional: bool, dropout: float,
              batch_first: bool, comment: str) -> Call:
    """nn.LSTM/GRU/RNN for MXNet's RNN settings, for either reader: keywords only where they differ from
    torch's defaults, ``batch_first`` always (Gluon's NTC layout is True, the symbol op's TNC False)."""
    cls, extra, _ = RNN_MODES[mode]
    kwargs = [("num_layers", int(layers))] if int(layers) != 1 else []
    kwargs += extra
    if bidirectional:
        kwargs.append(("bidirectional", True))
    if dropout:
        kwargs.append(("dropout", dropout))
    kwargs.append(("batch_first", bool(batch_first)))
    return Call(cls, [int(input_size), int(hidden_size)], kwargs, names=["input_size", "hidden_size"], comment=comment)


def is_gluon_builtin(block: Any) -> bool:
    return gluon_base(block) is not None


def builtin_leaf(block: Any, info: Any) -> Optional[Leaf]:
    base = gluon_base(block)
    return _LEAVES[base.__name__](block, info) if base is not None else None


def fused_helper(leaf: Leaf, gluon_name: str) -> Tuple[str, str]:
    """(class name, source) of one torch module for a layer with steps Gluon runs inside it:
    a subclass of the torch layer whose forward adds the steps (``LinearReLU``)."""
    base = leaf.ctor.fn
    short = base.split(".")[-1]
    pre = "".join(_step_name(s) for s in leaf.pre)
    post = "".join(_step_name(s) for s in leaf.post)
    name = f"{pre}{short}{post}"
    x = "x"
    for s in leaf.pre:
        x = s.expr.format(x=x)
    y = f"super().forward({x})"
    for s in leaf.post:
        y = s.expr.format(x=y)
    what = "; ".join(dict.fromkeys(s.comment for s in leaf.pre + leaf.post if s.comment))
    src = (f"class {name}({base}):\n"
           f'    """{docstring_text(short)} with the steps Gluon {docstring_text(gluon_name)} runs inside the layer: '
           f'{docstring_text(what)}."""\n\n'
           f"    def forward(self, x):\n        return {y}\n")
    return name, src


def _step_name(s: Step) -> str:
    if s.module is not None:
        return s.module.fn.split(".")[-1]
    return "Long" if ".long()" in s.expr else "Step"


def weight_drop_note(block: Any, path: str) -> str:
    """gluonnlp's weight drop (``WeightDropParameter``, AWDRNN's ``weight_drop``/``drop_e``): the
    note written beside the layer; refused when it drops at inference too (mode 'always')."""
    dropped = [(k, p) for k, p in block._reg_params.items()
               if type(p).__name__ == "WeightDropParameter" and getattr(p, "_rate", 0)]
    if not dropped:
        return ""
    always = [k for k, p in dropped if getattr(p, "_mode", "training") != "training"]
    if always:
        raise TranslationError(f"weight drop in mode 'always' on {always} (random at inference too; torch "
                               f"has no such layer): set its rate to 0 or mode 'training' before translating",
                               block=type(block).__name__, path=path)
    desc = ", ".join(f"{k} rate {float(p._rate):g}" for k, p in dropped)
    return (f"Gluon weight drop ({desc}; gluonnlp WeightDropParameter) is not in this module: identity at "
            f"inference as in Gluon, but training here does not drop these weights")


def _err(block, info, msg):
    return TranslationError(msg, block=type(block).__name__, path=info.path)


def _act_step(block, info, act) -> list:
    """Gluon Conv/Dense(activation=...) runs its activation inside the layer."""
    if act is None:
        return []
    name = act._act_type
    if name not in ACTIVATIONS:
        raise _err(block, info, f"activation {name!r} fused into the layer has no translation")
    mod, expr = ACTIVATIONS[name]
    return [Step(Call(mod), expr, f"Gluon {type(block).__name__}(activation={name!r})")]


def _conv(block, info):
    kw = block._kwargs
    if not channels_first(kw.get("layout")):
        raise _err(block, info, f"layout {kw['layout']!r} (torch convolutions are channels-first)")
    w = block.weight.shape
    transposed = block._op_name == "Deconvolution"
    groups = int(kw["num_group"])
    ctor = Call(**conv_call(transposed=transposed, nd=len(kw["kernel"]),
                            in_channels=w[0] if transposed else w[1] * groups, out_channels=kw["num_filter"],
                            kernel=kw["kernel"], stride=kw["stride"], pad=kw["pad"], dilate=kw["dilate"],
                            groups=groups, no_bias=kw["no_bias"], adj=kw.get("adj", ())))
    params = {"weight": "weight"} if kw["no_bias"] else {"weight": "weight", "bias": "bias"}
    return Leaf(ctor, params, post=_act_step(block, info, block.act))


def _dense(block, info):
    out_f, in_f = block.weight.shape
    has_bias = block.bias is not None
    kwargs = [] if has_bias else [("bias", False)]
    ndim = len(info.in_shapes[0]) if info.in_shapes else 2
    pre, comment = [], linear_comment("Gluon", "Dense", block._flatten, ndim)
    if block._flatten and ndim > 2:
        pre, comment = [flatten_step(comment)], ""
    params = {"weight": "weight", "bias": "bias"} if has_bias else {"weight": "weight"}
    return Leaf(Call("nn.Linear", [int(in_f), int(out_f)], kwargs, names=["in_features", "out_features"],
                     comment=comment), params, pre=pre, post=_act_step(block, info, block.act))


def _batchnorm(block, info):
    kw = block._kwargs
    ndim = len(info.in_shapes[0]) if info.in_shapes else 4
    if int(kw["axis"]) != 1:
        raise _err(block, info, f"BatchNorm(axis={kw['axis']}) (torch normalises axis 1)")
    frozen = bool(kw.get("use_global_stats"))
    fixed_gamma = bool(kw.get("fix_gamma")) or block.gamma.grad_req == "null"
    fixed_beta = block.beta.grad_req == "null"
    affine = not (fixed_gamma or fixed_beta)
    if not affine:
        if not (fixed_gamma and fixed_beta):
            raise _err(block, info, "BatchNorm with only one of scale=False / center=False (torch's affine "
                                    "is all or nothing)")
        if float(abs(block.beta.data().asnumpy()).max()) != 0.0:
            raise _err(block, info, "BatchNorm(center=False) with a nonzero fixed beta")
    try:
        call, helpers = batchnorm_call("Gluon", ndim, block.gamma.shape[0], eps=kw["eps"], momentum=kw["momentum"],
                                       use_global_stats=frozen, affine=affine,
                                       frozen_comment=None if affine or info.after_trainable else _BN_FROZEN,
                                       gluon_stats=getattr(info, "batchnorm", "torch") == "gluon")
    except ConventionError as e:
        raise _err(block, info, str(e)) from None
    params = {"running_mean": "running_mean", "running_var": "running_var"}
    if affine:
        params.update(gamma="weight", beta="bias")
    return Leaf(call, params, buffers={"num_batches_tracked": 0}, helpers=helpers)


GLUON_BATCHNORM = '''class GluonBatchNorm{d}(nn.BatchNorm{d}):
    """nn.BatchNorm{d} whose running variance is updated with the biased batch variance, as Gluon's
    BatchNorm does (torch's uses the unbiased one: n/(n-1) larger). `momentum` is torch's: the
    weight of the new batch value (1 - Gluon's momentum). Output and eval mode are torch's own."""

    running_var_estimate = "biased"

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        out = F.batch_norm(x, None, None, self.weight, self.bias, True, 0.0, self.eps)
        with torch.no_grad():
            var, mean = torch.var_mean(x, [0] + list(range(2, x.dim())), correction=0)
            self.running_mean.mul_(1 - self.momentum).add_(mean * self.momentum)
            self.running_var.mul_(1 - self.momentum).add_(var * self.momentum)
            self.num_batches_tracked.add_(1)
        return out
'''


def _layernorm(block, info):
    kw = block._kwargs
    if int(kw["axis"]) != -1:
        raise _err(block, info, f"LayerNorm(axis={kw['axis']}) (torch normalises the last axes)")
    if not (kw["center"] and kw["scale"]):
        raise _err(block, info, "LayerNorm with center=False or scale=False")
    return Leaf(Call("nn.LayerNorm", [int(block.gamma.shape[0])], [("eps", float(kw["eps"]))],
                     names=["normalized_shape"]), {"gamma": "weight", "beta": "bias"})


def _activation(block, info):
    name = block._act_type
    if name not in ACTIVATIONS:
        raise _err(block, info, f"Activation({name!r})")
    return Leaf(Call(ACTIVATIONS[name][0]))


_F32_ALPHA = "MXNet keeps alpha as a float32"


def _leaky(block, info):
    return Leaf(Call("nn.LeakyReLU", [float32_value(block._alpha)], names=["negative_slope"], comment=_F32_ALPHA))


def _prelu(block, info):
    return Leaf(Call("nn.PReLU", [int(block.alpha.shape[0])], names=["num_parameters"]), {"alpha": "weight"})


def _elu(block, info):
    return Leaf(Call("nn.ELU", [float32_value(block._alpha)], names=["alpha"], comment=_F32_ALPHA))


def _gelu(block, info):
    return Leaf(Call("nn.GELU"))


def _pool(block, info):
    kw = block._kwargs
    known = bool(info.in_shapes and info.out_shapes)
    try:
        return Leaf(Call(**pool_call("Gluon", pool_type=kw["pool_type"], nd=len(kw["kernel"]), kernel=kw["kernel"],
                                     stride=kw["stride"], pad=kw["pad"], convention=kw["pooling_convention"],
                                     count_include_pad=bool(kw.get("count_include_pad", True)),
                                     global_pool=bool(kw["global_pool"]),
                                     in_spatial=info.in_shapes[0][2:] if known else None,
                                     out_spatial=info.out_shapes[0][2:] if known else None)))
    except ConventionError as e:
        raise _err(block, info, str(e)) from None


SHARED_DROPOUT = '''class SharedDropout(nn.Dropout):
    """Gluon Dropout(axes=...): one dropout mask shared along `axes` (e.g. every time step)."""

    def __init__(self, p, axes):
        super().__init__(p)
        self.axes = tuple(axes)

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        shape = [1 if i in self.axes else s for i, s in enumerate(x.shape)]
        mask = torch.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(1 - self.p)
        return x * mask / (1 - self.p)
'''


def _dropout(block, info):
    rate = probability(block._rate, f"Gluon {type(block).__name__}")
    if block._axes:
        return Leaf(Call("SharedDropout", [rate, tuple(int(a) for a in block._axes)],
                         names=["p", "axes"]), helpers=[SHARED_DROPOUT])
    return Leaf(Call("nn.Dropout", [rate], names=["p"]))


def _embedding(block, info):
    kw = block._kwargs
    return Leaf(Call("nn.Embedding", [int(kw["input_dim"]), int(kw["output_dim"])],
                     names=["num_embeddings", "embedding_dim"]), {"weight": "weight"},
                pre=[float_ids_step(_IDS)])


def _flatten(block, info):
    return Leaf(Call("nn.Flatten"))


def _identity(block, info):
    return Leaf(Call("nn.Identity"))


def _rnn(block, info):
    mode = block._mode
    if block._projection_size:
        raise _err(block, info, "LSTM with projection_size")
    if getattr(block, "_use_sequence_length", False):
        raise _err(block, info, "use_sequence_length=True")
    comment = f"Gluon layout {block._layout!r}" + (" (RNN default relu)" if mode == "rnn_relu" else "")
    ctor = rnn_layer(mode, block._reg_params["l0_i2h_weight"].shape[1], block._hidden_size,
                     layers=block._num_layers, bidirectional=block._dir == 2, dropout=float(block._dropout or 0),
                     batch_first=block._layout == "NTC", comment=comment)
    params = dict(rnn_weight_names(block._num_layers, block._dir))
    with_states = info.n_args > 1
    if with_states:
        call = "{m}({args})" if mode != "lstm" else "{m}({x}, {rest_tuple})"
        call_comment = "torch takes and returns LSTM states as a tuple (h, c); Gluon as a list"
        if mode != "lstm":
            call = "{m}({x}, {rest}[0])"
            call_comment = "Gluon passes the state as a one-element list"
        leaf = Leaf(ctor, params, call=call, call_comment=call_comment)
        leaf.states_out = mode
        return leaf
    leaf = Leaf(ctor, params, call="{m}({args})[0]",
                call_comment="Gluon returns only the output when called without begin states (zeros)")
    leaf.n_inputs = 1
    return leaf


_LEAVES: Dict[str, Callable] = {
    "Conv1D": _conv, "Conv2D": _conv, "Conv3D": _conv, "Conv1DTranspose": _conv, "Conv2DTranspose": _conv,
    "Conv3DTranspose": _conv, "Dense": _dense, "BatchNorm": _batchnorm, "LayerNorm": _layernorm,
    "Activation": _activation, "LeakyReLU": _leaky, "PReLU": _prelu, "ELU": _elu, "GELU": _gelu,
    "MaxPool1D": _pool, "MaxPool2D": _pool, "MaxPool3D": _pool, "AvgPool1D": _pool, "AvgPool2D": _pool,
    "AvgPool3D": _pool, "GlobalAvgPool1D": _pool, "GlobalAvgPool2D": _pool, "GlobalAvgPool3D": _pool,
    "GlobalMaxPool1D": _pool, "GlobalMaxPool2D": _pool, "GlobalMaxPool3D": _pool, "Dropout": _dropout,
    "Embedding": _embedding, "Flatten": _flatten, "Identity": _identity, "LSTM": _rnn, "GRU": _rnn,
    "RNN": _rnn,
}
