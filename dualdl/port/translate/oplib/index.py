"""Index arithmetic and scatter ops -> torch: ``ravel_multi_index`` / ``unravel_index`` (MXNet's
indices as floats, one row per dimension), ``scatter_nd`` (the inverse of gather_nd, its
gradient gather_nd), ``khatri_rao`` (column-wise Kronecker product), ``_eye``, ``diagflat``,
``index_copy``."""
from __future__ import annotations

from .base import DEVICE, Expr, NeedsName, op, parse_attr
from .numpy import dtype_of

__all__ = ["KHATRI_RAO"]


def _shape(attrs):
    s = parse_attr(attrs.get("shape"), ())
    return (int(s),) if isinstance(s, int) else tuple(int(v) for v in s)


@op("ravel_multi_index", "_ravel_multi_index")
def _ravel(a, attrs, node):
    """sum_i idx[i] * stride_i (float, as MXNet)"""
    shape = _shape(attrs)
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    x = a[0].p()
    return Expr(f"({x} * torch.tensor({strides}, dtype={x}.dtype, device={x}.device).reshape(-1, *([1] * ({x}.dim() - 1))))"
                f".sum(0)")


@op("unravel_index", "_unravel_index")
def _unravel(a, attrs, node):
    """torch.stack of (idx // stride_i) % shape_i (float, as MXNet)"""
    shape = _shape(attrs)
    x = a[0].p()
    if not x.isidentifier():
        raise NeedsName()
    parts, stride = [], 1
    for n in reversed(shape):
        parts.append(f"torch.remainder(torch.div({x}, {stride}, rounding_mode='floor'), {n})")
        stride *= n
    return Expr(f"torch.stack([{', '.join(reversed(parts))}])")


@op("scatter_nd")
def _scatter_nd(a, attrs, node):
    """torch.zeros(shape).index_put(tuple(idx.long()), data)"""
    shape = _shape(attrs)
    d = a[0].p()
    return Expr(f"torch.zeros({shape}, dtype={d}.dtype, device={d}.device).index_put(tuple({a[1].p()}.long()), {a[0].text})")


KHATRI_RAO = '''def khatri_rao(*ms):
    """MXNet khatri_rao: the column-wise Kronecker product of matrices (r_i, k) -> (prod r_i, k)."""
    out = ms[0]
    for m in ms[1:]:
        out = (out[:, None, :] * m[None, :, :]).reshape(-1, out.shape[1])
    return out
'''


@op("khatri_rao")
def _khatri_rao(a, attrs, node):
    """khatri_rao(*matrices) (column-wise Kronecker product)"""
    return Expr(f"khatri_rao({', '.join(e.text for e in a)})", helpers=(KHATRI_RAO,))


@op("_eye")
def _eye(a, attrs, node):
    """torch.eye(N, M) shifted by k, in dtype"""
    n = int(parse_attr(attrs.get("N")))
    m = int(parse_attr(attrs.get("M"), 0) or n)
    k = int(parse_attr(attrs.get("k"), 0))
    dt = dtype_of(attrs, node=node)
    return Expr(f"torch.ones({n}, {m}, dtype={dt}, device={DEVICE}).tril({k}).triu({k})")


@op("_np_diagflat")
def _diagflat(a, attrs, node):
    """torch.diagflat(x, k)"""
    return Expr(f"torch.diagflat({a[0].text}, {int(parse_attr(attrs.get('k'), 0))})")


@op("_contrib_index_copy")
def _index_copy(a, attrs, node):
    """old.index_copy(0, idx.long(), new)"""
    return Expr(f"{a[0].p()}.index_copy(0, {a[1].p()}.long(), {a[2].text})")
