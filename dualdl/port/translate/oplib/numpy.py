"""MXNet numpy-interface ops (``_npi_*``, ``_np_*``, ``_npx_*``: what ``mx.np`` / ``mx.npx`` code
traces to) -> torch expressions, registered into the op registry.

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


from .base import DEVICE, Expr, NeedsName, ndim, op, parse_attr, refuse, unsupported
from .reduce import reduce
from .shape import NPX_CODES, reshape_codes

__all__ = ["dtype_of"]


def _np_reshape(a, attrs, node):
    shape = parse_attr(attrs.get("newshape"), ())
    shape = [shape] if isinstance(shape, int) else list(shape)
    if any(c < -1 for c in shape):
        raise unsupported(node, f"np.reshape(newshape={tuple(shape)}) (only -1 is special)")
    refs = _dims(attrs, len(shape), node)
    x = a[0].p()
    if any(refs) and not x.isidentifier():
        raise NeedsName()
    out = [f"{x}.shape[{r[1]}]" if r else str(c) for c, r in zip(shape, refs)]
    return Expr(f"{x}.reshape({', '.join(out) or '()'})")


def _dims(attrs, n, node=None):
    """The tracer's ``__dualdl_dims__``: per size None, or ('d', i) for ``x.shape[i]`` (anything else
    is refused: the attribute comes from the model file)."""
    raw = attrs.get("__dualdl_dims__")
    if not raw:
        return [None] * n
    refs = parse_attr(raw)
    ok = isinstance(refs, (list, tuple)) and all(
        r is None or (isinstance(r, tuple) and len(r) == 2 and r[0] == "d" and type(r[1]) is int) for r in refs)
    if not ok:
        raise unsupported(node, f"np.reshape with a malformed __dualdl_dims__ attribute {str(raw)[:60]!r}")
    return list(refs) + [None] * (n - len(refs))


def _npx_reshape(a, attrs, node):
    codes = parse_attr(attrs.get("newshape"), ())
    codes = [codes] if isinstance(codes, int) else list(codes)
    if parse_attr(attrs.get("reverse"), False):
        raise unsupported(node, "npx.reshape(reverse=True)")
    x = a[0].p()
    nd = ndim(node)
    if any(c <= -2 for c in codes) and not x.isidentifier():
        raise NeedsName()
    return Expr(f"{x}.reshape({', '.join(reshape_codes(x, codes, nd, NPX_CODES, node)) or '()'})")


def _concatenate(a, attrs, node):
    axis = parse_attr(attrs.get("axis"), 0)
    if axis is None:       # np.concatenate(axis=None) flattens first
        return Expr(f"torch.cat([{', '.join(e.p() + '.flatten()' for e in a)}])")
    return Expr(f"torch.cat([{', '.join(e.text for e in a)}], dim={int(axis)})")


def _np_dot(a, attrs, node):
    s0, s1 = node.in_shapes[0] if node.in_shapes else None, node.in_shapes[1] if len(node.in_shapes) > 1 else None
    if s0 is None or s1 is None:
        raise unsupported(node, "np.dot on inputs of unknown rank")
    if len(s0) == 0 or len(s1) == 0:
        return Expr(f"{a[0].p()} * {a[1].p()}", atomic=False)
    if len(s0) <= 2 and len(s1) <= 2:
        return Expr(f"torch.matmul({a[0].text}, {a[1].text})")
    # N-d: the last axis of a with the second-to-last of b (the last if b is 1-d)
    return Expr(f"torch.tensordot({a[0].text}, {a[1].text}, dims=([{len(s0) - 1}], [{max(len(s1) - 2, 0)}]))")


def dtype_of(attrs, default="float32", node=None):
    """MXNet's default float (float32) is written as torch's default dtype, so the generated module
    also runs after ``.double()`` (with ``torch.set_default_dtype``); other dtypes as they are."""
    d = attrs.get("dtype", default)
    d = default if d in (None, "None") else d
    if d == "float32":
        return "torch.get_default_dtype()"
    if d not in ("float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"):
        raise unsupported(node, f"{node.op}(dtype={d!r})")
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
        body = f"F.one_hot({x}.long(), {depth}).to({dtype_of(attrs, node=node)})"
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
            return Expr(f"{call}({shape!r}, dtype={dtype_of(attrs, node=node)}, device={DEVICE})")
        return Expr(f"torch.full({shape!r}, {v!r}, dtype={dtype_of(attrs, node=node)}, device={DEVICE})")
    return fn


def _arange(a, attrs, node):
    start = parse_attr(attrs.get("start"), 0)
    stop = parse_attr(attrs.get("stop"))
    step = parse_attr(attrs.get("step"), 1)
    if parse_attr(attrs.get("repeat"), 1) not in (1, None):
        raise unsupported(node, "arange(repeat=...)")
    args = [repr(start), repr(stop)] if stop is not None else [repr(start)]
    if step != 1:
        args.append(repr(step))
    return Expr(f"torch.arange({', '.join(args)}, dtype={dtype_of(attrs, node=node)}, device={DEVICE})")


def _broadcast_to(a, attrs, node):
    shape = parse_attr(attrs.get("shape"), ())
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return Expr(f"{a[0].p()}.expand({', '.join(str(int(s)) for s in shape)})")


def _where(a, attrs, node):
    return Expr(f"torch.where({a[0].p()}.bool(), {a[1].text}, {a[2].text})")


def _mean(a, attrs, node):
    if attrs.get("dtype") not in (None, "None"):
        raise unsupported(node, "np.mean(dtype=...)")
    return reduce("mean")(a, attrs, node)


def _layer_norm(a, attrs, node):
    """``npx.layer_norm(x, gamma, beta)`` as an op (a LayerNorm layer is translated as a layer)."""
    nd = ndim(node)
    axis = int(parse_attr(attrs.get("axis"), -1))
    if axis % nd != nd - 1 or parse_attr(attrs.get("output_mean_var"), False):
        raise unsupported(node, f"LayerNorm(axis={axis}) over an axis other than the last, or with output_mean_var")
    import numpy as np
    eps = float(np.float32(float(parse_attr(attrs.get("eps"), 1e-5))))   # a float32 attribute in MXNet
    return Expr(f"F.layer_norm({a[0].text}, ({node.in_shapes[0][-1]},), {a[1].text}, {a[2].text}, {eps!r})")


def _gather_nd(a, attrs, node):
    """MXNet gather_nd(x, idx): idx's first axis indexes x's first axes (x[idx[0], idx[1], ...])."""
    return Expr(f"{a[0].p()}[tuple({a[1].p()}.long())]")


op("_np_reshape", torch="x.reshape(newshape) (-1 only)")(_np_reshape)
op("_npx_reshape", "_npi_reshape", torch="x.reshape(npx codes -2..-6 resolved)")(_npx_reshape)
op("_npi_concatenate", torch="torch.cat(xs, dim) (flattened for axis=None)")(_concatenate)
op("_npi_mean", torch="x.mean(dim, keepdim)")(_mean)
# measured on MXNet 1.9.1: x.std(axis=1) / x.var(axis=1) backward gives 0.0
refuse("MXNet 1.9.1 computes no gradient through np.std / np.var (all zeros) where torch's is the true one, so "
       "training would differ; write it as ((x - x.mean(axis, keepdims=True)) ** 2).mean(axis) in the Gluon code",
       "_npi_std", "_npi_var")
op("_npi_matmul", torch="torch.matmul(a, b)")(lambda a, attrs, node: Expr(f"torch.matmul({a[0].text}, {a[1].text})"))
op("_np_dot", torch="torch.matmul / torch.tensordot (numpy's dot)")(_np_dot)
op("one_hot", "_npx_one_hot", torch="F.one_hot(ids.long(), depth).to(float dtype)")(_one_hot)
op("_npi_zeros", "_zeros", torch="torch.zeros(shape, dtype)")(_filled(0))
op("_npi_ones", "_ones", torch="torch.ones(shape, dtype)")(_filled(1))
op("_npi_full", "_full", torch="torch.full(shape, value, dtype)")(_filled(None))
op("_npi_arange", torch="torch.arange(start, stop, step, dtype)")(_arange)
op("_npi_broadcast_to", torch="x.expand(shape)")(_broadcast_to)
op("_npi_where", torch="torch.where(cond, x, y)")(_where)
op("LayerNorm", "_npx_layer_norm", torch="F.layer_norm(x, (C,), gamma, beta, eps) (last axis)")(_layer_norm)
op("gather_nd", "_npi_gather_nd", "_npx_gather_nd", torch="x[tuple(idx.long())]")(_gather_nd)
