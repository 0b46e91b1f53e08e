"""MXNet numpy-interface ops (``_npi_*``, ``_np_*``, ``_npx_*``: what ``mx.np`` / ``mx.npx`` code
traces to) -> torch expressions, registered into ops.py's table.

Differences spelled out: ``np.reshape`` takes -1 only, while ``npx.reshape`` has its own codes
(-2 copy, -3 drop a size-1 axis, -4 copy the rest, -5 merge two, -6 split one) that differ from
the legacy ``Reshape`` codes; ``np.dot`` on N-d arrays contracts the last axis of ``a`` with the
second-to-last of ``b`` (not ``matmul``); ``npx.one_hot``, ``np.zeros`` and ``np.arange`` are float32 unless asked otherwise (written
as torch's default dtype);
``np.transpose`` without axes reverses them; comparisons give bool (the legacy ops gave 0/1).
Sizes the Python code read from ``x.shape`` and passed back to ``reshape`` of the same tensor
(``__dualdl_dims__``, set by the tracer) are written as ``x.shape[i]``, not as the sample's numbers.
"""
from __future__ import annotations

import ast
from typing import Callable, Dict

from .ops import DEVICE, Expr, NeedsName, _TABLE, _binary, _func, _ndim, _num, _reduce, _scalar, _unsupported, parse_attr

__all__ = ["NP_OPS"]


def _np_reshape(a, attrs, node):
    shape = parse_attr(attrs.get("newshape"), ())
    shape = [shape] if isinstance(shape, int) else list(shape)
    if any(c < -1 for c in shape):
        raise _unsupported(node, f"np.reshape(newshape={tuple(shape)}) (only -1 is special)")
    refs = _dims(attrs, len(shape))
    x = a[0].p()
    if any(refs) and not x.isidentifier():
        raise NeedsName()
    out = [f"{x}.shape[{r[1]}]" if r else str(c) for c, r in zip(shape, refs)]
    return Expr(f"{x}.reshape({', '.join(out) or '()'})")


def _dims(attrs, n):
    raw = attrs.get("__dualdl_dims__")
    if not raw:
        return [None] * n
    refs = ast.literal_eval(raw)
    return list(refs) + [None] * (n - len(refs))


def _npx_reshape(a, attrs, node):
    codes = parse_attr(attrs.get("newshape"), ())
    codes = [codes] if isinstance(codes, int) else list(codes)
    if parse_attr(attrs.get("reverse"), False):
        raise _unsupported(node, "npx.reshape(reverse=True)")
    x = a[0].p()
    nd = _ndim(node)
    if any(c <= -2 for c in codes) and not x.isidentifier():
        raise NeedsName()
    out, i, j = [], 0, 0
    while j < len(codes):
        c = codes[j]
        if c >= 0 or c == -1:
            out.append(str(c)); i += 1
        elif c == -2:
            out.append(f"{x}.shape[{i}]"); i += 1
        elif c == -3:      # drop a size-1 axis
            i += 1
        elif c == -4:
            out.append(f"*{x}.shape[{i}:]"); i = nd
        elif c == -5:
            out.append(f"{x}.shape[{i}] * {x}.shape[{i + 1}]"); i += 2
        elif c == -6:
            d1, d2 = codes[j + 1], codes[j + 2]
            out += [str(d1) if d1 != -1 else f"{x}.shape[{i}] // {d2}",
                    str(d2) if d2 != -1 else f"{x}.shape[{i}] // {d1}"]
            i += 1; j += 2
        else:
            raise _unsupported(node, f"npx.reshape code {c}")
        j += 1
    return Expr(f"{x}.reshape({', '.join(out) or '()'})")


def _np_transpose(a, attrs, node):
    axes = parse_attr(attrs.get("axes"))
    if axes is None or axes == ():
        axes = tuple(reversed(range(_ndim(node))))
    return Expr(f"{a[0].p()}.permute({', '.join(str(int(v)) for v in axes)})")


def _concatenate(a, attrs, node):
    axis = parse_attr(attrs.get("axis"), 0)
    if axis is None:       # np.concatenate(axis=None) flattens first
        return Expr(f"torch.cat([{', '.join(e.p() + '.flatten()' for e in a)}])")
    return Expr(f"torch.cat([{', '.join(e.text for e in a)}], dim={int(axis)})")


def _np_stack(a, attrs, node):
    return Expr(f"torch.stack([{', '.join(e.text for e in a)}], dim={int(parse_attr(attrs.get('axis'), 0))})")


def _np_squeeze(a, attrs, node):
    axis = parse_attr(attrs.get("axis"))
    if axis is None:
        return Expr(f"{a[0].p()}.squeeze()")
    return Expr(f"{a[0].p()}.squeeze({axis})")


def _np_dot(a, attrs, node):
    s0, s1 = node.in_shapes[0] if node.in_shapes else None, node.in_shapes[1] if len(node.in_shapes) > 1 else None
    if s0 is None or s1 is None:
        raise _unsupported(node, "np.dot on inputs of unknown rank")
    if len(s0) == 0 or len(s1) == 0:
        return Expr(f"{a[0].p()} * {a[1].p()}", atomic=False)
    if len(s0) <= 2 and len(s1) <= 2:
        return Expr(f"torch.matmul({a[0].text}, {a[1].text})")
    # N-d: the last axis of a with the second-to-last of b (the last if b is 1-d)
    return Expr(f"torch.tensordot({a[0].text}, {a[1].text}, dims=([{len(s0) - 1}], [{max(len(s1) - 2, 0)}]))")


def _repeat(a, attrs, node):
    r = int(parse_attr(attrs.get("repeats")))
    axis = parse_attr(attrs.get("axis"))
    if axis is None:       # flattened first
        return Expr(f"torch.repeat_interleave({a[0].p()}.flatten(), {r})")
    return Expr(f"torch.repeat_interleave({a[0].text}, {r}, dim={int(axis)})")


def _tile(a, attrs, node):
    reps = parse_attr(attrs.get("reps"), ())
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    return Expr(f"{a[0].p()}.tile({reps!r})")


def _dtype(attrs, default="float32", node=None):
    """MXNet's default float (float32) is written as torch's default dtype, so the generated module
    also runs after ``.double()`` (with ``torch.set_default_dtype``); other dtypes as they are."""
    d = attrs.get("dtype", default)
    d = default if d in (None, "None") else d
    if d == "float32":
        return "torch.get_default_dtype()"
    if d not in ("float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"):
        raise _unsupported(node, f"{node.op}(dtype={d!r})")
    return f"torch.{d}"


def _one_hot(a, attrs, node):
    """MXNet's one_hot is float32 unless asked: written as the float dtype of the ids when they are
    floats (Gluon feeds ids as float32, so a model cast to float64 stays float64), else torch's
    default dtype."""
    depth = int(attrs["depth"])
    on, off = float(parse_attr(attrs.get("on_value"), 1.0)), float(parse_attr(attrs.get("off_value"), 0.0))
    x = a[0].p()
    d = attrs.get("dtype")
    if d in (None, "None", "float32"):
        if not x.isidentifier():
            raise NeedsName()
        dtype = f"{x}.dtype if {x}.is_floating_point() else torch.get_default_dtype()"
        body = f"F.one_hot({x}.long(), {depth}).to({dtype})"
    else:
        body = f"F.one_hot({x}.long(), {depth}).to({_dtype(attrs, node=node)})"
    if (on, off) != (1.0, 0.0):
        body = f"{body} * {on - off!r} + {off!r}"
    return Expr(body, atomic=(on, off) == (1.0, 0.0))


def _filled(value):
    def fn(a, attrs, node):
        shape = parse_attr(attrs.get("shape"), ())
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        v = value if value is not None else float(parse_attr(attrs.get("value"), 0.0))
        call = {0: "torch.zeros", 1: "torch.ones"}.get(v)
        if call:
            return Expr(f"{call}({shape!r}, dtype={_dtype(attrs, node=node)}, device={DEVICE})")
        return Expr(f"torch.full({shape!r}, {v!r}, dtype={_dtype(attrs, node=node)}, device={DEVICE})")
    return fn


def _arange(a, attrs, node):
    start = parse_attr(attrs.get("start"), 0)
    stop = parse_attr(attrs.get("stop"))
    step = parse_attr(attrs.get("step"), 1)
    if parse_attr(attrs.get("repeat"), 1) not in (1, None):
        raise _unsupported(node, "arange(repeat=...)")
    args = [repr(start), repr(stop)] if stop is not None else [repr(start)]
    if step != 1:
        args.append(repr(step))
    return Expr(f"torch.arange({', '.join(args)}, dtype={_dtype(attrs, node=node)}, device={DEVICE})")


def _broadcast_to(a, attrs, node):
    shape = parse_attr(attrs.get("shape"), ())
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return Expr(f"{a[0].p()}.expand({', '.join(str(int(s)) for s in shape)})")


def _compare(sym: str):
    def fn(a, attrs, node):   # numpy comparisons give bool, as torch's do
        return Expr(f"{a[0].p()} {sym} {a[1].p()}", atomic=False)
    return fn


def _compare_scalar(sym: str):
    def fn(a, attrs, node):
        return Expr(f"{a[0].p()} {sym} {_num(attrs['scalar'])}", atomic=False)
    return fn


def _clamp(kind: str):
    def fn(a, attrs, node):
        return Expr(f"torch.clamp({a[0].text}, {kind}={_num(attrs['scalar'])})")
    return fn


def _where(a, attrs, node):
    return Expr(f"torch.where({a[0].p()}.bool(), {a[1].text}, {a[2].text})")


def _mean(a, attrs, node):
    if attrs.get("dtype") not in (None, "None"):
        raise _unsupported(node, "np.mean(dtype=...)")
    return _reduce("mean")(a, attrs, node)


def _moment(kind: str):
    def fn(a, attrs, node):   # measured on MXNet 1.9.1: x.std(axis=1) / x.var(axis=1) backward gives 0.0
        raise _unsupported(node, f"np.{kind} (MXNet 1.9.1 computes no gradient through np.{kind}: all zeros, "
                                 f"where torch.{kind}'s is the true one, so training would differ; write it as "
                                 f"((x - x.mean(axis, keepdims=True)) ** 2).mean(axis) in the Gluon code)")
    return fn


def _layer_norm(a, attrs, node):
    """``npx.layer_norm(x, gamma, beta)`` as an op (a LayerNorm layer is translated as a layer)."""
    nd = _ndim(node)
    axis = int(parse_attr(attrs.get("axis"), -1))
    if axis % nd != nd - 1 or parse_attr(attrs.get("output_mean_var"), False):
        raise _unsupported(node, f"LayerNorm(axis={axis}) over an axis other than the last, or with output_mean_var")
    import numpy as np
    eps = float(np.float32(float(parse_attr(attrs.get("eps"), 1e-5))))   # a float32 attribute in MXNet
    return Expr(f"F.layer_norm({a[0].text}, ({node.in_shapes[0][-1]},), {a[1].text}, {a[2].text}, {eps!r})")


def _gather_nd(a, attrs, node):
    """MXNet gather_nd(x, idx): idx's first axis indexes x's first axes (x[idx[0], idx[1], ...])."""
    return Expr(f"{a[0].p()}[tuple({a[1].p()}.long())]")


NP_OPS: Dict[str, Callable] = {
    "_npi_add": _binary("+"), "_npi_subtract": _binary("-"), "_npi_multiply": _binary("*"),
    "_npi_true_divide": _binary("/"), "_npi_power": _binary("**"), "_npi_mod": _binary("%"),
    "_npi_add_scalar": _scalar("+"), "_npi_subtract_scalar": _scalar("-"), "_npi_rsubtract_scalar": _scalar("-", True),
    "_npi_multiply_scalar": _scalar("*"), "_npi_true_divide_scalar": _scalar("/"),
    "_npi_rtrue_divide_scalar": _scalar("/", True), "_npi_power_scalar": _scalar("**"),
    "_npi_rpower_scalar": _scalar("**", True), "_npi_mod_scalar": _scalar("%"),
    "_npi_maximum": _func("torch.maximum({}, {})"), "_npi_minimum": _func("torch.minimum({}, {})"),
    "_npi_maximum_scalar": _clamp("min"), "_npi_minimum_scalar": _clamp("max"),
    "_maximum_scalar": _clamp("min"), "_minimum_scalar": _clamp("max"),
    "_npx_relu": _func("torch.relu({})"), "_npx_sigmoid": _func("torch.sigmoid({})"),
    "_npi_tanh": _func("torch.tanh({})"), "_npi_exp": _func("torch.exp({})"), "_npi_log": _func("torch.log({})"),
    "_npi_sqrt": _func("torch.sqrt({})"), "_npi_absolute": _func("torch.abs({})"), "_npi_abs": _func("torch.abs({})"),
    "_npi_square": _func("torch.square({})"), "_npi_sin": _func("torch.sin({})"), "_npi_cos": _func("torch.cos({})"),
    "_npi_negative": lambda a, at, n: Expr(f"-{a[0].p()}"), "_npi_reciprocal": _func("torch.reciprocal({})"),
    "_npi_log1p": _func("torch.log1p({})"), "_npi_expm1": _func("torch.expm1({})"),
    "_np_reshape": _np_reshape, "_npx_reshape": _npx_reshape, "_np_transpose": _np_transpose,
    "_npi_concatenate": _concatenate, "_npi_stack": _np_stack, "_np_squeeze": _np_squeeze,
    "_npi_mean": _mean, "_np_sum": _reduce("sum"), "_np_max": _reduce("amax"), "_np_min": _reduce("amin"),
    "_np_prod": _reduce("prod"), "_npi_std": _moment("std"), "_npi_var": _moment("var"),
    "_npi_matmul": _func("torch.matmul({}, {})"), "_np_dot": _np_dot,
    "repeat": _repeat, "_np_repeat": _repeat, "tile": _tile, "_np_tile": _tile, "one_hot": _one_hot,
    "_npi_zeros": _filled(0), "_npi_ones": _filled(1), "_zeros": _filled(0), "_ones": _filled(1),
    "_npi_full": _filled(None), "_npi_arange": _arange, "_npi_broadcast_to": _broadcast_to,
    "_npi_equal": _compare("=="), "_npi_not_equal": _compare("!="), "_npi_less": _compare("<"),
    "_npi_greater": _compare(">"), "_npi_less_equal": _compare("<="), "_npi_greater_equal": _compare(">="),
    "_npi_equal_scalar": _compare_scalar("=="), "_npi_not_equal_scalar": _compare_scalar("!="),
    "_npi_less_scalar": _compare_scalar("<"), "_npi_greater_scalar": _compare_scalar(">"),
    "_npi_less_equal_scalar": _compare_scalar("<="), "_npi_greater_equal_scalar": _compare_scalar(">="),
    "_npi_where": _where, "_np_copy": _func("{}"), "_npi_copy": _func("{}"),
    "LayerNorm": _layer_norm, "gather_nd": _gather_nd, "batch_flatten": _func("torch.flatten({}, 1)"),
}
NP_OPS = {k: v for k, v in NP_OPS.items() if v is not None}

for _name, _fn in NP_OPS.items():     # ops.py's own entries (and H-ops' additions) win
    _TABLE.setdefault(_name, _fn)
