"""Constructor argument checks of the declared layers, written once for both backends (framework-free).

:func:`check_arguments` runs in ``dualdl/nn/module.py`` ``_build_layer`` on both backends, after the
call is bound to the layer's declaration and before the adapter's ``_dl_cannot`` refusals
(:func:`dualdl.nn.declaration.refuse`) and before any adapter code. For each layer it raises, in this
order:

1. what torch 2.13's own constructor raises for the same call: the exception type and message word
   for word, in torch's order (``ValueError("dropout probability has to be between 0 and 1, but got
   1.5")``, ``RuntimeError("Trying to create tensor with negative dimension -4: [-4, 3]")``, the
   ``AssertionError`` of an Embedding's ``padding_idx``, ...). tests/test_refusals.py compares each
   with torch.nn's own, so on torch the dualdl layer fails exactly as ``torch.nn`` does;
2. then dualdl's earlier checks, with a message naming the layer: values torch takes at construction
   and fails on only in forward (``MaxPool2d(2, padding=2)``, ``GELU("fast")``, a kernel_size of the
   wrong length), refused at construction on both backends.

A value torch honours and only the MXNet build cannot is not invalid: the MXNet adapter declares it
in ``_dl_cannot`` (``NotImplementedError: MaxPool2d(dilation=2) cannot be honoured on the mxnet
backend: ...``). The adapters' constructors check nothing themselves; they convert the values
checked here.
"""
from __future__ import annotations

import collections.abc
import numbers
import sys
from typing import Any, Callable, Dict, Iterable, Mapping, Optional

from .checks import EMBEDDING_BAG_MODES, adaptive_output_size, check_pool_args, to_tuple
from .resample_checks import PAD_LAYERS, check_pad_value, check_upsample_args, pad_sides, unflatten_sizes

__all__ = ["check_arguments", "check_dropout_p", "check_group_norm", "check_child_name"]

Bound = Mapping[str, Any]


def check_arguments(layer: str, bound: Bound) -> None:
    """Raise what an invalid argument of ``layer`` (its declared name) raises, on either backend;
    ``bound`` is the bound call (every declared parameter by name)."""
    check = _CHECKS.get(layer)
    if check is not None:
        check(layer, bound)


# ---- torch's own constructor errors -------------------------------------------------------------
def _ntuple(v: Any, n: int) -> tuple:
    """torch's ``_single``/``_pair``/``_triple``: an iterable as a tuple, anything else n times."""
    return tuple(v) if isinstance(v, collections.abc.Iterable) else (v,) * n


def _created(*shapes: Optional[Iterable[Any]]) -> None:
    """The error of ``torch.empty(shape)`` for the first shape with a negative size: the tensors a
    torch constructor creates, in its order (None: a tensor it does not create). Shapes with a
    non-integer size are left to the constructor (torch raises its own TypeError)."""
    for shape in shapes:
        if shape is None:
            continue
        sizes = list(shape)
        if not all(isinstance(s, numbers.Integral) for s in sizes):
            return
        sizes = [int(s) for s in sizes]
        for s in sizes:
            if s < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {sizes}")


def _as_torch_prints_it(literal: frozenset, owner: str, cls: str) -> set:
    """The set a torch constructor formats into its message (``{'zeros', 'reflect', ...}``), in the
    order torch's prints it. A set literal of 3+ strings is a frozenset constant of the module's .pyc,
    and the order such a set prints in depends on how that constant was built (torch's .pyc, this
    process's string hashes), so an equal literal here may print in another order. When torch is
    loaded (always, on the torch backend) the set is copied from torch's own constant, so the
    message is torch's word for word; otherwise it is this literal's (no torch to compare with)."""
    init = getattr(getattr(sys.modules.get(owner), cls, None), "__init__", None)
    for const in getattr(getattr(init, "__code__", None), "co_consts", ()):
        if isinstance(const, frozenset) and const == literal:
            return set(const)                    # set(frozenset) copies its order, as torch's {...}
    return set(literal)


def _zeros(size: Any) -> None:
    """``torch.zeros(size)``'s error (a norm layer's running statistics) for a negative size."""
    if isinstance(size, numbers.Integral) and size < 0:
        raise RuntimeError("zeros: Dimension size must be non-negative.")


def check_dropout_p(p: Any) -> None:
    """torch.nn.Dropout/Dropout1d/Dropout2d (and the Dropout inside torch's Transformer layers)."""
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _attention(embed_dim: Any, num_heads: Any, kdim: Any = None, vdim: Any = None) -> None:
    """torch.nn.MultiheadAttention's checks and parameters (also built by the Transformer layers)."""
    if embed_dim <= 0 or num_heads <= 0:
        raise ValueError(f"embed_dim and num_heads must be greater than 0,"
                         f" got embed_dim={embed_dim} and num_heads={num_heads} instead")
    kdim = embed_dim if kdim is None else kdim
    vdim = embed_dim if vdim is None else vdim
    if (embed_dim // num_heads) * num_heads != embed_dim:
        raise AssertionError("embed_dim must be divisible by num_heads")
    if not (kdim == embed_dim and vdim == embed_dim):
        _created((embed_dim, embed_dim), (embed_dim, kdim), (embed_dim, vdim))


def _transformer_layer(d_model: Any, nhead: Any, dim_feedforward: Any, dropout: Any, activation: Any) -> None:
    """torch.nn.TransformerEncoderLayer/DecoderLayer: attention block(s), linear1, Dropout, then the
    activation name (torch takes a function too; the MXNet build runs torch's F.relu/torch.relu/F.gelu
    and dl.ops.relu/gelu, and declares it cannot run another function)."""
    _attention(d_model, nhead)
    _created((dim_feedforward, d_model))
    check_dropout_p(dropout)
    if isinstance(activation, str) and activation not in ("relu", "gelu"):
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def check_group_norm(num_groups: Any, num_channels: Any, affine: bool = True) -> None:
    """torch.nn.GroupNorm's divisibility error (``0`` groups: Python's ZeroDivisionError, as torch)
    and weight, then dualdl's: a positive number of groups (torch takes a negative one and fails in
    forward)."""
    if num_channels % num_groups != 0:
        raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
    if affine:
        _created((num_channels,))
    if num_groups <= 0:
        raise ValueError(f"GroupNorm: num_groups must be positive, got {num_groups}")


def check_child_name(name: Any) -> None:
    """torch's ``Module.add_module`` errors for a container child's name (Sequential's OrderedDict
    keys, ModuleDict's keys), after its module-type check: for the MXNet containers, whose children
    torch's ``add_module`` never sees."""
    if not isinstance(name, str):
        raise TypeError(f"module name should be a string. Got {type(name).__name__}")
    if "." in name:
        raise KeyError(f'module name can\'t contain ".", got: {name}')
    if name == "":
        raise KeyError('module name can\'t be empty string ""')


def _embedding_padding_idx(num_embeddings: Any, padding_idx: Any, message: str) -> None:
    if padding_idx is not None:
        if padding_idx > 0:
            if padding_idx >= num_embeddings:
                raise AssertionError(message)
        elif padding_idx < 0:
            if padding_idx < -num_embeddings:
                raise AssertionError(message)


def _embedding_weight(num_embeddings: Any, embedding_dim: Any, weight: Any) -> None:
    if weight is None:
        _created((num_embeddings, embedding_dim))
    elif list(weight.shape) != [num_embeddings, embedding_dim]:
        raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")


# ---- one check per layer (name, bound) ----------------------------------------------------------
def _linear(name: str, a: Bound) -> None:
    _created((a["out_features"], a["in_features"]))


def _conv(n: int, transposed: bool) -> Callable[[str, Bound], None]:
    def check(name: str, a: Bound) -> None:
        groups, cin, cout, padding, mode = (a["groups"], a["in_channels"], a["out_channels"], a["padding"],
                                            a["padding_mode"])
        if transposed and mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if cin % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if cout % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        valid_padding_strings = {"same", "valid"}   # two items: built item by item as torch's, same order
        if isinstance(padding, str) and not transposed:
            if padding not in valid_padding_strings:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {valid_padding_strings}")
            if padding == "same" and any(s != 1 for s in _ntuple(a["stride"], n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        valid_padding_modes = frozenset({"zeros", "reflect", "replicate", "circular"})
        if mode not in valid_padding_modes:
            valid_padding_modes = _as_torch_prints_it(valid_padding_modes, "torch.nn.modules.conv", "_ConvNd")
            raise ValueError(f"padding_mode must be one of {valid_padding_modes}, but got padding_mode='{mode}'")
        k = _ntuple(a["kernel_size"], n)
        _created((cin, cout // groups, *k) if transposed else (cout, cin // groups, *k))
        # dualdl's: n entries each (torch fails in forward only)
        kernel, stride, dilation = (to_tuple(a[w], n, w) for w in ("kernel_size", "stride", "dilation"))
        if not isinstance(padding, str) or transposed:
            to_tuple(padding, n, "padding")
        if transposed:
            # torch: output_padding < max(stride, dilation), checked in forward only (MXNet's adj:
            # smaller than the stride alone, hidden by the adapter)
            out_pad = to_tuple(a["output_padding"], n, "output_padding")
            if any(op < 0 or op >= max(s, d) for op, s, d in zip(out_pad, stride, dilation)):
                raise ValueError(f"{name}: output_padding {out_pad} must be smaller than either stride {stride} "
                                 f"or dilation {dilation}")
    return check


def _pool(n: int, dilated: bool) -> Callable[[str, Bound], None]:
    def check(name: str, a: Bound) -> None:
        # torch's pooling constructors check nothing; dualdl's (torch: in forward): n entries each, a
        # positive kernel and stride, padding at most half the (dilated) kernel
        kernel = to_tuple(a["kernel_size"], n, "kernel_size")
        stride = to_tuple(a["kernel_size"] if a["stride"] is None else a["stride"], n, "stride")
        padding = to_tuple(a["padding"], n, "padding")
        dilation = to_tuple(a["dilation"], n, "dilation") if dilated else None
        check_pool_args(name, kernel, stride, padding, dilation)
    return check


def _adaptive(n: int) -> Callable[[str, Bound], None]:
    def check(name: str, a: Bound) -> None:
        adaptive_output_size(name, a["output_size"], n)      # dualdl's (torch: in forward)
    return check


def _norm(name: str, a: Bound) -> None:
    """BatchNorm1d/2d/3d, InstanceNorm1d/2d: weight and bias (affine), running statistics."""
    if a["affine"]:
        _created((a["num_features"],))
    if a["track_running_stats"]:
        _zeros(a["num_features"])


def _layer_norm(name: str, a: Bound) -> None:
    shape = a["normalized_shape"]
    if a["elementwise_affine"]:
        _created((shape,) if isinstance(shape, numbers.Integral) else tuple(shape))


def _group_norm(name: str, a: Bound) -> None:
    check_group_norm(a["num_groups"], a["num_channels"], a["affine"])


def _dropout(name: str, a: Bound) -> None:
    check_dropout_p(a["p"])


def _rnn(mode: str) -> Callable[[str, Bound], None]:
    """LSTM/GRU/RNN: torch's RNN/RNNBase checks in their order (batch_first is dualdl's: resolved
    with ``layout`` by the adapters)."""
    def check(name: str, a: Bound) -> None:
        if mode == "RNN" and a["nonlinearity"] not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{a['nonlinearity']}'. Select from 'tanh' or 'relu'.")
        dropout = a["dropout"]
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if not isinstance(a["bias"], bool):
            raise TypeError(f"bias should be of type bool, got: {type(a['bias']).__name__}")
        for what in ("input_size", "hidden_size"):
            if not isinstance(a[what], int):
                raise TypeError(f"{what} should be of type int, got: {type(a[what]).__name__}")
            if a[what] <= 0:
                raise ValueError(f"{what} must be greater than zero")
        if a["num_layers"] <= 0:
            raise ValueError("num_layers must be greater than zero")
        proj_size = a.get("proj_size", 0)
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= a["hidden_size"]:
            raise ValueError("proj_size has to be smaller than hidden_size")
    return check


def _cell(chunks: int) -> Callable[[str, Bound], None]:
    def check(name: str, a: Bound) -> None:
        hidden = a["hidden_size"]
        if isinstance(hidden, numbers.Integral):
            _created((chunks * hidden, a["input_size"]))
        if "nonlinearity" in a and a["nonlinearity"] not in ("tanh", "relu"):   # dualdl's (torch: in forward)
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {a['nonlinearity']!r}")
    return check


def _embedding(name: str, a: Bound) -> None:
    _embedding_padding_idx(a["num_embeddings"], a["padding_idx"], "Padding_idx must be within num_embeddings")
    _embedding_weight(a["num_embeddings"], a["embedding_dim"], a["_weight"])


def _embedding_bag(name: str, a: Bound) -> None:
    _embedding_padding_idx(a["num_embeddings"], a["padding_idx"], "padding_idx must be within num_embeddings")
    _embedding_weight(a["num_embeddings"], a["embedding_dim"], a["_weight"])
    if a["mode"] not in EMBEDDING_BAG_MODES:                 # dualdl's (torch: in forward)
        raise ValueError(f"EmbeddingBag: mode must be one of {EMBEDDING_BAG_MODES}, got {a['mode']!r}")


def _prelu(name: str, a: Bound) -> None:
    _created((a["num_parameters"],))


def _gelu(name: str, a: Bound) -> None:
    if a["approximate"] not in ("none", "tanh"):            # dualdl's (torch: in forward)
        raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {a['approximate']!r}")


def _multihead_attention(name: str, a: Bound) -> None:
    _attention(a["embed_dim"], a["num_heads"], a["kdim"], a["vdim"])


def _encoder_decoder_layer(name: str, a: Bound) -> None:
    _transformer_layer(a["d_model"], a["nhead"], a["dim_feedforward"], a["dropout"], a["activation"])


def _transformer(name: str, a: Bound) -> None:
    if a["custom_encoder"] is None or a["custom_decoder"] is None:      # torch builds its own layers
        _encoder_decoder_layer(name, a)


def _positional_encoding(name: str, a: Bound) -> None:
    check_dropout_p(a["dropout"])                                       # its Dropout (torch.nn's on torch)


def _unflatten(name: str, a: Bound) -> None:
    sizes = a["unflattened_size"]
    if not isinstance(sizes, (tuple, list)):
        raise TypeError(f"unflattened_size must be a tuple of ints, but found type {type(sizes).__name__}")
    for idx, elem in enumerate(sizes):
        if not isinstance(elem, int):
            raise TypeError("unflattened_size must be tuple of ints, "
                            f"but found element of type {type(elem).__name__} at pos {idx}")
    unflatten_sizes(sizes)                                   # dualdl's: non-empty, at most one -1


def _upsample(name: str, a: Bound) -> None:
    # dualdl's (torch: in forward)
    check_upsample_args(a["size"], a["scale_factor"], a["mode"], a["align_corners"])


_CHECKS: Dict[str, Callable[[str, Bound], None]] = {
    "Linear": _linear,
    "Conv1d": _conv(1, False), "Conv2d": _conv(2, False), "Conv3d": _conv(3, False),
    "ConvTranspose1d": _conv(1, True), "ConvTranspose2d": _conv(2, True),
    "MaxPool1d": _pool(1, True), "MaxPool2d": _pool(2, True), "MaxPool3d": _pool(3, True),
    "AvgPool1d": _pool(1, False), "AvgPool2d": _pool(2, False), "AvgPool3d": _pool(3, False),
    "AdaptiveAvgPool1d": _adaptive(1), "AdaptiveAvgPool2d": _adaptive(2),
    "AdaptiveMaxPool1d": _adaptive(1), "AdaptiveMaxPool2d": _adaptive(2),
    "BatchNorm1d": _norm, "BatchNorm2d": _norm, "BatchNorm3d": _norm,
    "InstanceNorm1d": _norm, "InstanceNorm2d": _norm,
    "LayerNorm": _layer_norm, "GroupNorm": _group_norm,
    "Dropout": _dropout, "Dropout1d": _dropout, "Dropout2d": _dropout,
    "LSTM": _rnn("LSTM"), "GRU": _rnn("GRU"), "RNN": _rnn("RNN"),
    "LSTMCell": _cell(4), "GRUCell": _cell(3), "RNNCell": _cell(1),
    "Embedding": _embedding, "EmbeddingBag": _embedding_bag,
    "PReLU": _prelu, "GELU": _gelu,
    "MultiheadAttention": _multihead_attention,
    "TransformerEncoderLayer": _encoder_decoder_layer, "TransformerDecoderLayer": _encoder_decoder_layer,
    "Transformer": _transformer, "PositionalEncoding": _positional_encoding,
    "Unflatten": _unflatten, "Upsample": _upsample,
}


# ---- the activations added for torch's module tests (issue 34) --------------------------------
def _hardtanh(name: str, a: Bound) -> None:
    """torch's Hardtanh: the deprecated min_value/max_value replace min_val/max_val, then its check."""
    lo = a["min_val"] if a["min_value"] is None else a["min_value"]
    hi = a["max_val"] if a["max_value"] is None else a["max_value"]
    if hi <= lo:
        raise AssertionError(f"max_val ({hi}) must be greater than min_val ({lo})")


def _softshrink(name: str, a: Bound) -> None:
    if a["lambd"] < 0:                                       # dualdl's (torch: in forward)
        raise ValueError(f"Softshrink: lambd must be >= 0, got {a['lambd']}")


def _celu(name: str, a: Bound) -> None:
    if a["alpha"] == 0:                                      # dualdl's (torch: ZeroDivisionError in forward)
        raise ValueError("CELU: alpha cannot be 0 (it divides the input)")


_CHECKS.update({"Hardtanh": _hardtanh, "Softshrink": _softshrink, "CELU": _celu})


# ---- the padding layers (issue 34): dualdl's checks (torch takes any padding/value and fails in forward)
def _padding(name: str, a: Bound) -> None:
    pad_sides(name, a["padding"])                            # an int or 2n sides of ints
    if "value" in a:
        check_pad_value(name, a["value"])


_CHECKS.update(dict.fromkeys(PAD_LAYERS, _padding))


# ---- the convolutions and pools added for torch's module tests (issue 34) ---------------------
def _lazy_conv(n: int, transposed: bool) -> Callable[[str, Bound], None]:
    """torch's LazyConv*/LazyConvTranspose* build their _ConvNd with 0 in and 0 out channels: its
    errors (groups, padding, padding_mode, negative kernel); then dualdl's (torch: at the first call)."""
    conv = _conv(n, transposed)

    def check(name: str, a: Bound) -> None:
        conv(name, {**a, "in_channels": 0, "out_channels": 0})
        out = a["out_channels"]
        if isinstance(out, numbers.Integral) and out < 0:
            raise ValueError(f"{name}: out_channels must be >= 0, got {out}")
        if isinstance(out, numbers.Integral) and out % a["groups"] != 0:
            raise ValueError("out_channels must be divisible by groups")
    return check


def _lp_pool(n: int) -> Callable[[str, Bound], None]:
    def check(name: str, a: Bound) -> None:
        # torch's constructor checks nothing; dualdl's (torch: in forward)
        if a["norm_type"] == 0:
            raise ValueError(f"{name}: norm_type must not be 0 (the output is raised to 1 / norm_type)")
        if n == 1 and not isinstance(a["kernel_size"], numbers.Integral):
            raise ValueError(f"{name}: kernel_size must be an int, got {a['kernel_size']!r} (torch multiplies "
                             f"the output by it)")
        kernel = to_tuple(a["kernel_size"], n, "kernel_size")
        stride = to_tuple(a["kernel_size"] if a["stride"] is None else a["stride"], n, "stride")
        check_pool_args(name, kernel, stride, (0,) * n)
    return check


def _fractional(n: int) -> Callable[[str, Bound], None]:
    def check(name: str, a: Bound) -> None:
        samples, size, ratio = a["_random_samples"], a["output_size"], a["output_ratio"]
        if samples is not None and not hasattr(samples, "shape"):
            raise TypeError(f"cannot assign '{type(samples).__name__}' object to buffer '_random_samples' "
                            f"(torch Tensor or None required)")
        if size is None and ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if size is not None and ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if ratio is not None and not all(0 < r < 1 for r in _ntuple(ratio, n)[:n]):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {ratio})")
        # dualdl's (torch: in forward, or an empty output MXNet cannot make)
        kernel = to_tuple(a["kernel_size"], n, "kernel_size")
        if any(k <= 0 for k in kernel):
            raise ValueError(f"{name}: kernel_size must be positive, got {kernel}")
        if size is not None and any(o <= 0 for o in to_tuple(size, n, "output_size")):
            raise ValueError(f"{name}: output_size must be positive, got {size!r}")
        if ratio is not None and len(_ntuple(ratio, n)) != n:
            raise ValueError(f"{name}: output_ratio must be a float or a tuple of {n} floats, got {ratio!r}")
    return check


_CHECKS.update({
    "ConvTranspose3d": _conv(3, True),
    **{f"LazyConv{n}d": _lazy_conv(n, False) for n in (1, 2, 3)},
    **{f"LazyConvTranspose{n}d": _lazy_conv(n, True) for n in (1, 2, 3)},
    "AdaptiveAvgPool3d": _adaptive(3), "AdaptiveMaxPool3d": _adaptive(3),
    **{f"LPPool{n}d": _lp_pool(n) for n in (1, 2, 3)},
    "FractionalMaxPool2d": _fractional(2), "FractionalMaxPool3d": _fractional(3),
})


# ---- the normalisation and linear layers added for torch's module tests (issue 34) -------------
def _rms_norm(name: str, a: Bound) -> None:
    shape = a["normalized_shape"]
    if a["elementwise_affine"]:
        _created((shape,) if isinstance(shape, numbers.Integral) else tuple(shape))


def _bilinear(name: str, a: Bound) -> None:
    """torch creates the weight (out, in1, in2) and the bias (out,), then checks in1_features."""
    _created((a["out_features"], a["in1_features"], a["in2_features"]), (a["out_features"],) if a["bias"] else None)
    if isinstance(a["in1_features"], numbers.Integral) and a["in1_features"] <= 0:
        raise ValueError(f"in1_features must be > 0, but got (in1_features={a['in1_features']})")


def _local_response_norm(name: str, a: Bound) -> None:
    if a["size"] <= 0:                                       # dualdl's (torch: in forward)
        raise ValueError(f"LocalResponseNorm: size must be positive, got {a['size']}")


_CHECKS.update({"InstanceNorm3d": _norm, "RMSNorm": _rms_norm, "Bilinear": _bilinear,
                "LocalResponseNorm": _local_response_norm})
