"""MXNet symbol ops -> torch expressions, for the ops a block computes itself in ``hybrid_forward``
(elementwise arithmetic, activations, concat, reshape codes, transpose, slicing, reductions...).

Each translation gets the torch expressions of the op's inputs and returns an ``Expr``; MXNet
attributes arrive as the strings the symbol stores. Conventions that differ are spelled out:
MXNet ``Reshape`` codes (0 copies a dimension, -2 the rest, -3 merges two, -4 splits one),
``Flatten`` keeps axis 0, ``transpose()`` without axes reverses them.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .errors import TranslationError
from .registry import op_translation
from .safe import literal

__all__ = ["Expr", "OpNode", "translate_op", "parse_attr", "NeedsName", "n_outputs"]


@dataclass
class Expr:
    """A torch expression; ``atomic`` is False for binary operations (parenthesised when nested).
    ``helpers``: source of functions the expression calls, written once into the file."""
    text: str
    atomic: bool = True
    helpers: Tuple[str, ...] = ()

    def p(self) -> str:
        return self.text if self.atomic else f"({self.text})"


# An op that creates a tensor from nothing (arange, zeros) writes ``device=`` this token; the
# forward writer replaces it with a variable holding its first input's device (a generated module
# moved to a GPU then creates them there). NUL bytes: no name or value from a model can contain it.
DEVICE = "\x00device\x00"


def bind_device(lines: List[str], sources: Sequence[str], fresh: Callable[[str], str]) -> List[str]:
    """``lines`` of a forward with :data:`DEVICE` replaced by a variable holding the device of the
    first of ``sources`` (the forward's input expressions): MXNet creates such a tensor on the
    context of the graph; torch needs ``device=`` or creates it on the CPU."""
    if not any(DEVICE in ln for ln in lines):
        return lines
    import re
    name, text = fresh("device"), "\n".join(lines).replace(DEVICE, "") + " " + " ".join(sources)
    while re.search(rf"\b{name}\b(?!=)", text):      # a name the forward already uses (not the keyword device=)
        name += "_"
    src = f"{sources[0]}.device" if sources else "None"
    return [f"{name} = {src}"] + [ln.replace(DEVICE, name) for ln in lines]


@dataclass
class OpNode:
    op: str
    name: str
    attrs: Dict[str, str]
    in_shapes: List[Optional[Tuple[int, ...]]] = field(default_factory=list)
    out_shapes: List[Optional[Tuple[int, ...]]] = field(default_factory=list)
    block: str = ""
    path: str = ""


def parse_attr(v: Optional[str], default: Any = None) -> Any:
    if v is None:
        return default
    if v in ("True", "true"):
        return True
    if v in ("False", "false"):
        return False
    if v == "None":
        return None
    try:
        return ast.literal_eval(v)
    except (ValueError, SyntaxError):
        return v


class NeedsName(Exception):
    """The translation refers to its input several times: bind the input to a variable first."""


def _num(v: str) -> str:
    f = float(v)
    return repr(int(f)) if f.is_integer() and "." not in v and "e" not in v else literal(f)


def _f32(v: str) -> str:
    """An attribute MXNet keeps as a C++ float (eps, slope): the float32 value it computes with."""
    import numpy as np
    f = float(np.float32(float(v)))
    return repr(int(f)) if f.is_integer() and abs(f) < 2 ** 53 else literal(f)


def _binary(sym: str):
    def fn(a, attrs, node):
        return Expr(f"{a[0].p()} {sym} {a[1].p()}", atomic=False)
    return fn


def _scalar(sym: str, reverse: bool = False):
    def fn(a, attrs, node):
        s = _num(attrs["scalar"])
        return Expr(f"{s} {sym} {a[0].p()}" if reverse else f"{a[0].p()} {sym} {s}", atomic=False)
    return fn


def _func(template: str):
    def fn(a, attrs, node):
        return Expr(template.format(*[e.text for e in a]))
    return fn


_ACT = {"relu": "torch.relu({})", "sigmoid": "torch.sigmoid({})", "tanh": "torch.tanh({})",
        "softrelu": "F.softplus({})", "softsign": "F.softsign({})"}


def _activation(a, attrs, node):
    t = attrs.get("act_type", "relu")
    if t not in _ACT:
        raise _unsupported(node, f"Activation(act_type={t!r})")
    return Expr(_ACT[t].format(a[0].text))


def _leaky(a, attrs, node):
    t = attrs.get("act_type", "leaky")
    slope = attrs.get("slope", "0.25")   # a float32 attribute: MXNet's elu with 0.7 computes with 0.699999988
    if t == "leaky":
        return Expr(f"F.leaky_relu({a[0].text}, {_f32(slope)})")
    if t == "elu":
        return Expr(f"F.elu({a[0].text}, {_f32(slope)})")
    if t == "gelu":
        return Expr(f"F.gelu({a[0].text})")
    if t == "prelu":
        return Expr(f"F.prelu({a[0].text}, {a[1].text})")
    if t == "selu":   # measured: 0.161 where the true derivative is 0.238 (x = -2)
        raise _unsupported(node, "LeakyReLU(act_type='selu') (MXNet 1.9.1's selu gradient is scale*(y+alpha) "
                           "for x < 0 where y already holds the scale; torch's is scale*alpha*exp(x))")
    raise _unsupported(node, f"LeakyReLU(act_type={t!r})")


def _clip(a, attrs, node):
    lo, hi = float(attrs["a_min"]), float(attrs["a_max"])
    if lo == 0 and hi == 6:
        return Expr(f"F.relu6({a[0].text})")
    if lo == float("-inf") and hi == float("inf"):
        return a[0]
    return Expr(f"torch.clamp({a[0].text}, {_num(attrs['a_min'])}, {_num(attrs['a_max'])})")


def _concat(a, attrs, node):
    dim = int(attrs.get("dim", 1))
    return Expr(f"torch.cat([{', '.join(e.text for e in a)}], dim={dim})")


def _stack(a, attrs, node):
    return Expr(f"torch.stack([{', '.join(e.text for e in a)}], dim={int(attrs.get('axis', 0))})")


INTERLEAVED = '''def interleaved_qk(qkv, heads):
    """MXNet _contrib_interleaved_matmul_selfatt_qk: qkv (T, N, heads*3*D) interleaved per head
    -> scores (N*heads, T, T) = (q / sqrt(D)) @ k^T."""
    t, n, _ = qkv.shape
    qkv = qkv.reshape(t, n, heads, 3, -1)
    d = qkv.shape[-1]
    q = qkv[:, :, :, 0].permute(1, 2, 0, 3).reshape(n * heads, t, d)
    k = qkv[:, :, :, 1].permute(1, 2, 0, 3).reshape(n * heads, t, d)
    return torch.matmul(q / d ** 0.5, k.transpose(1, 2))


def interleaved_valatt(qkv, att, heads):
    """MXNet _contrib_interleaved_matmul_selfatt_valatt: attention (N*heads, T, T) applied to the
    values of qkv -> (T, N, heads*D)."""
    t, n, _ = qkv.shape
    v = qkv.reshape(t, n, heads, 3, -1)[:, :, :, 2]
    d = v.shape[-1]
    out = torch.matmul(att, v.permute(1, 2, 0, 3).reshape(n * heads, t, d))
    return out.reshape(n, heads, t, d).permute(2, 0, 1, 3).reshape(t, n, heads * d)
'''


def _interleaved_qk(a, attrs, node):
    return Expr(f"interleaved_qk({a[0].text}, {int(attrs['heads'])})", helpers=(INTERLEAVED,))


def _interleaved_valatt(a, attrs, node):
    return Expr(f"interleaved_valatt({a[0].text}, {a[1].text}, {int(attrs['heads'])})", helpers=(INTERLEAVED,))


def _broadcast_axis(a, attrs, node):
    axes, sizes = parse_attr(attrs.get("axis"), ()), parse_attr(attrs.get("size"), ())
    axes = [axes] if isinstance(axes, int) else list(axes)
    sizes = [sizes] if isinstance(sizes, int) else list(sizes)
    nd = _ndim(node)
    target = {ax % nd: sz for ax, sz in zip(axes, sizes)}
    return Expr(f"{a[0].p()}.expand({', '.join(str(target.get(i, -1)) for i in range(nd))})")


def _arange_like(a, attrs, node):
    axis = parse_attr(attrs.get("axis"))
    start, step = parse_attr(attrs.get("start"), 0.0), parse_attr(attrs.get("step"), 1.0)
    if axis is None or parse_attr(attrs.get("repeat"), 1) != 1:
        raise _unsupported(node, "_contrib_arange_like without axis or with repeat")
    x = a[0].p()
    if not x.isidentifier():
        raise NeedsName()
    n = f"{x}.shape[{int(axis)}]"
    body = f"torch.arange({n}, dtype={x}.dtype, device={x}.device)"
    if float(step) != 1.0:
        body = f"{body} * {float(step)!r}"
    if float(start) != 0.0:
        body = f"{body} + {float(start)!r}"
    return Expr(body, atomic=float(step) == 1.0 and float(start) == 0.0)


SEQUENCE_MASK = '''def sequence_mask(x, length, axis, value):
    """MXNet SequenceMask: entries at time positions >= length along `axis` (0 or 1) set to value."""
    keep = torch.arange(x.shape[axis], device=x.device)[None, :] < length.reshape(-1, 1)   # (N, T)
    if axis == 0:
        keep = keep.t()
    keep = keep.reshape(keep.shape + (1,) * (x.dim() - 2))
    return torch.where(keep, x, torch.full_like(x, value))
'''


def _sequence_mask(a, attrs, node):
    if not parse_attr(attrs.get("use_sequence_length"), False):
        return a[0]
    return Expr(f"sequence_mask({a[0].text}, {a[1].text}, {int(parse_attr(attrs.get('axis'), 0))}, "
                f"{float(parse_attr(attrs.get('value'), 0.0))!r})", helpers=(SEQUENCE_MASK,))


def _compare_op(sym: str):
    def fn(a, attrs, node):   # MXNet comparisons return 0/1 in the input's dtype, torch's bool
        return Expr(f"({a[0].p()} {sym} {a[1].p()}).to({a[0].p()}.dtype)")
    return fn


def _compare_scalar(sym: str):
    def fn(a, attrs, node):   # 0/1 in the input's dtype, as MXNet's *_scalar comparisons return
        return Expr(f"({a[0].p()} {sym} {_num(attrs['scalar'])}).to({a[0].p()}.dtype)")
    return fn


def _flatten(a, attrs, node):
    return Expr(f"torch.flatten({a[0].text}, 1)")


def _ndim(node, i=0):
    s = node.in_shapes[i] if node.in_shapes and i < len(node.in_shapes) else None
    if s is None:
        raise _unsupported(node, f"{node.op} on an input of unknown rank")
    return len(s)


def _reshape(a, attrs, node):
    codes = parse_attr(attrs.get("shape"), ())
    codes = [codes] if isinstance(codes, int) else list(codes)
    x = a[0].p()
    if parse_attr(attrs.get("reverse"), False):   # codes matched from the right
        if any(c < -1 for c in codes):
            raise _unsupported(node, f"Reshape(shape={tuple(codes)}, reverse=True)")
        nd = _ndim(node)
        if 0 in codes and not x.isidentifier():
            raise NeedsName()
        k = len(codes)
        out = [f"{x}.shape[{nd - k + i}]" if c == 0 else str(c) for i, c in enumerate(codes)]
        return Expr(f"{x}.reshape({', '.join(out)})")
    k = next((i for i, c in enumerate(codes) if c != 0), len(codes))
    if codes[k:] == [-1] and k > 0:          # (0, ..., 0, -1): keep k axes, merge the rest
        return Expr(f"{x}.flatten({k})")
    in_ndim = _ndim(node)
    if any(c in (0, -2, -3, -4) for c in codes) and not x.isidentifier():
        raise NeedsName()
    out, i, j = [], 0, 0
    while j < len(codes):
        c = codes[j]
        if c == 0:
            out.append(f"{x}.shape[{i}]"); i += 1
        elif c == -1 or c > 0:
            out.append(str(c)); i += 1
        elif c == -2:
            out.append(f"*{x}.shape[{i}:]"); i = in_ndim
        elif c == -3:
            out.append(f"{x}.shape[{i}] * {x}.shape[{i + 1}]"); i += 2
        elif c == -4:
            a1, a2 = codes[j + 1], codes[j + 2]
            out += [str(a1) if a1 != -1 else f"{x}.shape[{i}] // {a2}",
                    str(a2) if a2 != -1 else f"{x}.shape[{i}] // {a1}"]
            i += 1; j += 2
        else:
            raise _unsupported(node, f"Reshape code {c}")
        j += 1
    return Expr(f"{x}.reshape({', '.join(out)})")


def _transpose(a, attrs, node):
    axes = parse_attr(attrs.get("axes"), ())
    if not axes:
        axes = tuple(reversed(range(_ndim(node))))
    return Expr(f"{a[0].p()}.permute({', '.join(str(int(v)) for v in axes)})")


def _swap(a, attrs, node):
    return Expr(f"{a[0].p()}.transpose({int(attrs.get('dim1', 0))}, {int(attrs.get('dim2', 0))})")


def _expand(a, attrs, node):
    return Expr(f"{a[0].p()}.unsqueeze({int(attrs['axis'])})")


def _squeeze(a, attrs, node):
    axis = parse_attr(attrs.get("axis"))
    if axis is None:
        return Expr(f"{a[0].p()}.squeeze()")
    return Expr(f"{a[0].p()}.squeeze({axis})")


def _index(node, axis, sl):
    nd = _ndim(node)
    axis = axis % nd
    return "[" + ", ".join([":"] * axis + [sl]) + "]"


def _slice_axis(a, attrs, node):
    begin, end = parse_attr(attrs.get("begin")), parse_attr(attrs.get("end"))
    sl = f"{'' if begin in (None, 0) else begin}:{'' if end is None else end}"
    return Expr(f"{a[0].p()}{_index(node, int(attrs['axis']), sl)}")


def _seq(v) -> list:
    """A slice attribute as a list: MXNet's numpy symbol ``y[:1]`` stores end=1, step=None."""
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _slice(a, attrs, node):
    begin, end = _seq(parse_attr(attrs.get("begin"))), _seq(parse_attr(attrs.get("end")))
    step = _seq(parse_attr(attrs.get("step"), ()) or ())
    parts = []
    for k, (b, e) in enumerate(zip(begin, end)):
        s = step[k] if k < len(step) else None
        parts.append(f"{'' if b in (None, 0) else b}:{'' if e is None else e}" + ("" if s in (None, 1) else f":{s}"))
    return Expr(f"{a[0].p()}[{', '.join(parts)}]")


def _split(a, attrs, node):
    n, axis = int(attrs["num_outputs"]), int(attrs.get("axis", 1))
    if n == 1:      # MXNet returns the one part itself, not a list (gluoncv Faster R-CNN at batch 1)
        squeeze = parse_attr(attrs.get("squeeze_axis"), False)
        return Expr(f"{a[0].p()}.squeeze({axis})" if squeeze else a[0].text, atomic=not squeeze or a[0].atomic)
    if parse_attr(attrs.get("squeeze_axis"), False):
        return Expr(f"torch.unbind({a[0].text}, dim={axis})")
    return Expr(f"torch.chunk({a[0].text}, {n}, dim={axis})")


TIED_MAX = '''class TiedMax(torch.autograd.Function):
    """MXNet max/min: the gradient reaches every element equal to the result in full (torch.amax
    and amin share it among tied elements; MXNet's max([1, 3, 3, 2]) has gradient [0, 1, 1, 0])."""

    @staticmethod
    def forward(ctx, x, dims, keepdim, largest):
        dims = tuple(range(x.dim())) if dims is None else dims
        out = x.amax(dim=dims, keepdim=True) if largest else x.amin(dim=dims, keepdim=True)
        ctx.save_for_backward(x, out)
        return out if keepdim else out.squeeze(dims)

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        return grad.reshape(out.shape) * (x == out).to(grad.dtype), None, None, None
'''


def _reduce(fn_name: str):
    def fn(a, attrs, node):
        axis = parse_attr(attrs.get("axis"))
        keep = bool(parse_attr(attrs.get("keepdims"), False))
        if parse_attr(attrs.get("exclude"), False):
            raise _unsupported(node, f"{node.op}(exclude=True)")
        x = a[0].p()
        # legacy MXNet reduces everything to shape (1,), the numpy interface to ()
        one = ".reshape(1)" if not keep and node.out_shapes and node.out_shapes[0] == (1,) else ""
        if fn_name in ("amax", "amin"):
            dims = None if axis is None or axis == () else ((axis,) if isinstance(axis, int) else tuple(axis))
            return Expr(f"TiedMax.apply({a[0].text}, {dims}, {keep}, {fn_name == 'amax'}){one}", helpers=(TIED_MAX,))
        if axis is None or axis == ():
            return Expr(f"{x}.{fn_name}(){one}" if not keep else f"{x}.{fn_name}(dim=tuple(range({x}.dim())), keepdim=True)")
        dims = axis if isinstance(axis, int) else tuple(axis)
        return Expr(f"{x}.{fn_name}(dim={dims}{', keepdim=True' if keep else ''}){one}")
    return fn


LENGTH_SOFTMAX = '''def length_softmax(x, length, dim):
    """MXNet softmax(use_length=True): positions >= length along `dim` are left out (output 0)."""
    dim = dim % x.dim()
    shape = [1] * x.dim()
    shape[dim] = -1
    keep = torch.arange(x.shape[dim], device=x.device).reshape(shape) < length.unsqueeze(dim)
    return torch.softmax(x.masked_fill(~keep, float("-inf")), dim=dim).masked_fill(~keep, 0.0)
'''


def _softmax(name: str):
    def fn(a, attrs, node):
        if attrs.get("temperature") not in (None, "None", "1", "1.0"):
            raise _unsupported(node, f"{node.op}(temperature=...)")
        axis = int(parse_attr(attrs.get("axis"), -1))
        if parse_attr(attrs.get("use_length"), False):
            if name != "softmax":
                raise _unsupported(node, f"{node.op}(use_length=True)")
            return Expr(f"length_softmax({a[0].text}, {a[1].text}, {axis})", helpers=(LENGTH_SOFTMAX,))
        return Expr(f"torch.{name}({a[0].text}, dim={axis})")
    return fn


def _dot(a, attrs, node):
    x, y = a[0].p(), a[1].p()
    if parse_attr(attrs.get("transpose_a"), False):
        x = f"{x}.transpose(-1, -2)" if node.op == "batch_dot" else f"{x}.t()"
    if parse_attr(attrs.get("transpose_b"), False):
        y = f"{y}.transpose(-1, -2)" if node.op == "batch_dot" else f"{y}.t()"
    return Expr(f"torch.matmul({x}, {y})")


def _fully_connected(a, attrs, node):
    x = a[0].text
    if parse_attr(attrs.get("flatten"), True) and _ndim(node) > 2:
        x = f"torch.flatten({x}, 1)"
    bias = "None" if parse_attr(attrs.get("no_bias"), False) else a[2].text
    return Expr(f"F.linear({x}, {a[1].text}, {bias})")


def _pooling(a, attrs, node):
    kernel = parse_attr(attrs.get("kernel"), ())
    pool = attrs.get("pool_type", "max")
    nd = len(kernel) if kernel else _ndim(node) - 2
    if pool not in ("max", "avg"):
        raise _unsupported(node, f"Pooling(pool_type={pool!r})")
    if parse_attr(attrs.get("global_pool"), False):
        return Expr(f"F.adaptive_{pool}_pool{nd}d({a[0].text}, 1)")
    stride = parse_attr(attrs.get("stride"), kernel) or kernel
    pad = parse_attr(attrs.get("pad"), (0,) * nd) or (0,) * nd
    extra = ", ceil_mode=True" if attrs.get("pooling_convention") == "full" else ""
    if pool == "avg" and parse_attr(attrs.get("count_include_pad"), True) is False:
        extra += ", count_include_pad=False"
    return Expr(f"F.{pool}_pool{nd}d({a[0].text}, {tuple(kernel)}, {tuple(stride)}, {tuple(pad)}{extra})")


SHARED_DROPOUT_FN = '''def shared_dropout(x, p, axes, training):
    """MXNet Dropout(axes=...): one mask shared along `axes` (every time step of gluonnlp's
    StandardRNN), scaled by 1 / (1 - p) as F.dropout does."""
    shape = [1 if i in axes else s for i, s in enumerate(x.shape)]
    return x * F.dropout(torch.ones(shape, dtype=x.dtype, device=x.device), p, training)
'''


def _dropout(a, attrs, node):
    axes = parse_attr(attrs.get("axes"), ()) or ()
    p = _num(attrs.get("p", "0.5"))
    if attrs.get("mode", "training") == "always":
        raise _unsupported(node, "Dropout(mode='always') as an op")
    if axes:
        axes = (axes,) if isinstance(axes, int) else tuple(int(v) % _ndim(node) for v in axes)
        return Expr(f"shared_dropout({a[0].text}, {p}, {axes}, self.training)", helpers=(SHARED_DROPOUT_FN,))
    return Expr(f"F.dropout({a[0].text}, {p}, self.training)")


def _cast(a, attrs, node):
    return Expr(f"{a[0].p()}.to(torch.{attrs['dtype']})")


_TABLE: Dict[str, Callable] = {
    "elemwise_add": _binary("+"), "_plus": _binary("+"), "_Plus": _binary("+"), "broadcast_add": _binary("+"),
    "broadcast_plus": _binary("+"), "_add": _binary("+"),
    "elemwise_sub": _binary("-"), "_minus": _binary("-"), "_Minus": _binary("-"), "broadcast_sub": _binary("-"),
    "broadcast_minus": _binary("-"), "_sub": _binary("-"),
    "elemwise_mul": _binary("*"), "_mul": _binary("*"), "_Mul": _binary("*"), "broadcast_mul": _binary("*"),
    "elemwise_div": _binary("/"), "_div": _binary("/"), "_Div": _binary("/"), "broadcast_div": _binary("/"),
    "_plus_scalar": _scalar("+"), "_PlusScalar": _scalar("+"), "_minus_scalar": _scalar("-"),
    "_MinusScalar": _scalar("-"), "_rminus_scalar": _scalar("-", True), "_RMinusScalar": _scalar("-", True),
    "_mul_scalar": _scalar("*"), "_MulScalar": _scalar("*"), "_div_scalar": _scalar("/"),
    "_DivScalar": _scalar("/"), "_rdiv_scalar": _scalar("/", True), "_RDivScalar": _scalar("/", True),
    "_power_scalar": _scalar("**"), "_PowerScalar": _scalar("**"),
    "broadcast_maximum": _func("torch.maximum({}, {})"), "broadcast_minimum": _func("torch.minimum({}, {})"),
    "_maximum": _func("torch.maximum({}, {})"), "_minimum": _func("torch.minimum({}, {})"),
    "Activation": _activation, "relu": _func("torch.relu({})"), "sigmoid": _func("torch.sigmoid({})"),
    "tanh": _func("torch.tanh({})"), "exp": _func("torch.exp({})"), "log": _func("torch.log({})"),
    "sqrt": _func("torch.sqrt({})"), "abs": _func("torch.abs({})"), "square": _func("torch.square({})"),
    "negative": lambda a, at, n: Expr(f"-{a[0].p()}"), "erf": _func("torch.erf({})"),
    "LeakyReLU": _leaky, "clip": _clip, "Concat": _concat, "concat": _concat, "stack": _stack,
    "Embedding": lambda a, at, n: Expr(f"F.embedding({a[0].p()}.long(), {a[1].text})"),
    "broadcast_lesser": _compare_op("<"), "broadcast_greater": _compare_op(">"),
    "broadcast_equal": _compare_op("=="), "broadcast_lesser_equal": _compare_op("<="),
    "broadcast_greater_equal": _compare_op(">="), "broadcast_not_equal": _compare_op("!="),
    "_greater": _compare_op(">"), "_greater_equal": _compare_op(">="), "_lesser": _compare_op("<"),
    "_lesser_equal": _compare_op("<="), "_equal": _compare_op("=="), "_not_equal": _compare_op("!="),
    "_greater_scalar": _compare_scalar(">"), "_greater_equal_scalar": _compare_scalar(">="),
    "_lesser_scalar": _compare_scalar("<"), "_lesser_equal_scalar": _compare_scalar("<="),
    "_equal_scalar": _compare_scalar("=="), "_not_equal_scalar": _compare_scalar("!="),
    "SequenceMask": _sequence_mask,
    "where": _func("torch.where({}.bool(), {}, {})"), "_contrib_arange_like": _arange_like, "broadcast_axis": _broadcast_axis, "broadcast_axes": _broadcast_axis,
    "_contrib_interleaved_matmul_selfatt_qk": _interleaved_qk,
    "_contrib_interleaved_matmul_selfatt_valatt": _interleaved_valatt, "Flatten": _flatten,
    "flatten": _flatten, "Reshape": _reshape, "reshape": _reshape, "transpose": _transpose,
    "SwapAxis": _swap, "swapaxes": _swap, "expand_dims": _expand, "squeeze": _squeeze,
    "slice_axis": _slice_axis, "slice": _slice, "SliceChannel": _split, "split": _split,
    "sum": _reduce("sum"), "mean": _reduce("mean"), "max": _reduce("amax"), "min": _reduce("amin"),
    "softmax": _softmax("softmax"), "log_softmax": _softmax("log_softmax"), "dot": _dot, "batch_dot": _dot,
    "FullyConnected": _fully_connected, "Pooling": _pooling, "Dropout": _dropout, "Cast": _cast,
    "cast": _cast, "zeros_like": _func("torch.zeros_like({})"), "ones_like": _func("torch.ones_like({})"),
    "_copy": _func("{}"), "identity": _func("{}"), "BlockGrad": _func("{}.detach()"),
    "stop_gradient": _func("{}.detach()"),
}


def _unsupported(node: OpNode, what: str) -> TranslationError:
    return TranslationError(f"MXNet op {what} has no torch translation", op=node.op, block=node.block,
                            path=node.path)


_LOADED: List[str] = []


def _load_tables() -> None:
    """Add the contrib and numpy-interface tables on first use (they import this module's helpers,
    so importing them here at module level would be an import circle)."""
    if not _LOADED:
        from . import ops_np    # registers its ops with setdefault
        from .ops_contrib import CONTRIB_TABLE
        from .ops_roi import ROI_TABLE
        _TABLE.update(CONTRIB_TABLE)
        _TABLE.update(ROI_TABLE)
        _LOADED.append(ops_np.__name__)


def n_outputs(op: str, attrs: Dict[str, str]) -> int:
    """How many outputs an MXNet op node has (SliceChannel/split, topk ret_typ='both', ...)."""
    from .ops_contrib import n_outputs as _n
    return _n(op, attrs)


def translate_op(node: OpNode, args: List[Expr]) -> Expr:
    """The torch expression of one MXNet op node (a user registration wins over the table)."""
    fn = op_translation(node.op)
    if fn is not None:
        out = fn([a.text for a in args], dict(node.attrs), node)
        return out if isinstance(out, Expr) else Expr(str(out), atomic=False)
    _load_tables()
    fn = _TABLE.get(node.op)
    if fn is None:
        raise _unsupported(node, repr(node.op))
    return fn(args, node.attrs, node)
