"""Reductions (``sum``/``mean``/``max``... with MXNet's ``axis``, ``keepdims`` and ``exclude``),
arg-reductions, norms, sorting and cumulative sums -> torch.

Conventions that differ: legacy MXNet reduces everything to shape (1,), the numpy interface to ();
``exclude=True`` reduces the axes *not* listed; max/min pass the gradient in full to every element
equal to the result (torch.amax shares it among ties); legacy ``argmax``/``argmin``/``argsort``/
``topk`` return indices as float32 (or ``dtype``), the numpy interface int64."""
from __future__ import annotations

from .base import Expr, NeedsName, ndim, op, parse_attr, unsupported

__all__ = ["TIED_MAX", "reduce"]


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


def _axes(attrs, node):
    """The axes an MXNet reduction reduces: None for all; ``exclude=True`` inverts the list."""
    axis = parse_attr(attrs.get("axis"))
    if axis == ():
        axis = None
    if axis is not None:
        axis = (int(axis),) if isinstance(axis, int) else tuple(int(v) for v in axis)
    if parse_attr(attrs.get("exclude"), False):
        nd = ndim(node)
        keep = {v % nd for v in (axis or ())}
        axis = tuple(i for i in range(nd) if i not in keep)
    return axis


def _one(attrs, node) -> str:
    """Legacy MXNet's full reduction gives shape (1,), the numpy interface's ()."""
    keep = bool(parse_attr(attrs.get("keepdims"), False))
    return ".reshape(1)" if not keep and node.out_shapes and node.out_shapes[0] == (1,) else ""


def reduce(fn_name: str):
    """An MXNet reduction as ``x.<fn_name>(dim=..., keepdim=...)``: amax/amin keep MXNet's tied gradient."""
    def fn(a, attrs, node):
        dims = _axes(attrs, node)
        keep = bool(parse_attr(attrs.get("keepdims"), False))
        one = _one(attrs, node)
        x = a[0].p()
        if fn_name in ("amax", "amin"):
            return Expr(f"TiedMax.apply({a[0].text}, {dims}, {keep}, {fn_name == 'amax'}){one}", helpers=(TIED_MAX,))
        if dims == ():
            return a[0]
        if fn_name == "prod" and (dims is None or len(dims) > 1):   # torch.prod takes one dim
            if not x.isidentifier():
                raise NeedsName()
            dims = tuple(range(ndim(node))) if dims is None else dims
            body = x
            for d in sorted((d % ndim(node) for d in dims), reverse=True):
                body = f"{body}.prod(dim={d}, keepdim=True)"
            if not keep:
                body = f"{body}.squeeze({tuple(sorted(d % ndim(node) for d in dims))})" if dims else body
            return Expr(body + one)
        if dims is None:
            return Expr(f"{x}.{fn_name}(){one}" if not keep else f"{x}.{fn_name}(dim=tuple(range({x}.dim())), keepdim=True)")
        d = dims[0] if fn_name == "prod" or len(dims) == 1 else dims
        return Expr(f"{x}.{fn_name}(dim={d}{', keepdim=True' if keep else ''}){one}")
    fn.torch_form = {"amax": "x.amax(dim) (tied gradient in full)", "amin": "x.amin(dim) (tied gradient in full)"}.get(
        fn_name, f"x.{fn_name}(dim, keepdim)")
    return fn


def _nan(fn_name: str):
    def fn(a, attrs, node):
        x = a[0].p()
        fill = "0" if fn_name == "sum" else "1"
        inner = Expr(f"torch.nan_to_num({x}, nan={fill}.0, posinf=float('inf'), neginf=float('-inf'))")
        return reduce(fn_name)([inner], attrs, node) if fn_name == "sum" else reduce("prod")([inner], attrs, node)
    fn.torch_form = f"x.{fn_name}(dim) with nan as {'0' if fn_name == 'sum' else '1'}"
    return fn


def _arg(largest: bool, legacy: bool):
    def fn(a, attrs, node):
        axis = parse_attr(attrs.get("axis"))
        keep = bool(parse_attr(attrs.get("keepdims"), False))
        name = "argmax" if largest else "argmin"
        x = a[0].p()
        if axis is None:
            body = f"torch.{name}({x}.reshape(-1))" + (f".reshape((1,) * {x}.dim())" if keep else "")
            if legacy and not keep and node.out_shapes and node.out_shapes[0] == (1,):
                body += ".reshape(1)"
        else:
            body = f"torch.{name}({a[0].text}, dim={int(axis)}{', keepdim=True' if keep else ''})"
        return Expr(f"{body}.to({x}.dtype)" if legacy else body)
    fn.torch_form = f"torch.{'argmax' if largest else 'argmin'}(x, dim)" + (" (in x's dtype)" if legacy else "")
    return fn


def _argmax_channel(a, attrs, node):
    """torch.argmax(x, dim=1) in x's dtype"""
    return Expr(f"torch.argmax({a[0].text}, dim=1).to({a[0].p()}.dtype)")


def _norm(a, attrs, node):
    """torch.linalg.vector_norm(x, ord, dim, keepdim)"""
    ord_ = int(parse_attr(attrs.get("ord"), 2))
    if ord_ not in (1, 2):
        raise unsupported(node, f"norm(ord={ord_})")
    dims = _axes(attrs, node)
    keep = bool(parse_attr(attrs.get("keepdims"), False))
    one = _one(attrs, node)
    dim = "" if dims is None else f", dim={dims}"
    return Expr(f"torch.linalg.vector_norm({a[0].text}, {ord_}{dim}{', keepdim=True' if keep else ''}){one}")


def _cumsum(a, attrs, node):
    """torch.cumsum(x, dim) (flattened without an axis)"""
    axis = parse_attr(attrs.get("axis"))
    d = attrs.get("dtype")
    dt = "" if d in (None, "None") else f", dtype=torch.{d}"
    if axis is None:
        return Expr(f"torch.cumsum({a[0].p()}.reshape(-1), 0{dt})")
    return Expr(f"torch.cumsum({a[0].text}, {int(axis)}{dt})")


def _sort(a, attrs, node):
    """torch.sort(x, dim, descending, stable=True).values"""
    axis = parse_attr(attrs.get("axis"), -1)
    desc = not bool(parse_attr(attrs.get("is_ascend"), True))
    x = a[0].text if axis is not None else f"{a[0].p()}.reshape(-1)"
    return Expr(f"torch.sort({x}, dim={int(axis) if axis is not None else 0}, descending={desc}, stable=True)[0]")


def _argsort(a, attrs, node):
    """torch.argsort(x, dim, descending, stable=True) in dtype (float32 by default)"""
    axis = parse_attr(attrs.get("axis"), -1)
    desc = not bool(parse_attr(attrs.get("is_ascend"), True))
    x = a[0].text if axis is not None else f"{a[0].p()}.reshape(-1)"
    dtype = attrs.get("dtype", "float32")
    return Expr(f"torch.argsort({x}, dim={int(axis) if axis is not None else 0}, descending={desc}, stable=True)"
                f".to(torch.{dtype})")


def _moments(a, attrs, node):
    """(x.mean(dim, keepdim), x.var(dim, unbiased=False, keepdim)) (two outputs)"""
    dims = _axes({"axis": attrs.get("axes")}, node)
    keep = bool(parse_attr(attrs.get("keepdims"), False))
    x = a[0].p()
    if not x.isidentifier():
        raise NeedsName()
    dim = f"dim=tuple(range({x}.dim()))" if dims is None else f"dim={dims}"
    return Expr(f"({x}.mean({dim}, keepdim={keep}), {x}.var({dim}, unbiased=False, keepdim={keep}))")


def _np_norm(a, attrs, node):
    """torch.linalg.vector_norm(x, ord, dim, keepdim) (matrix_norm for an ord over two axes)"""
    flag = int(parse_attr(attrs.get("flag"), -2))
    ord_ = parse_attr(attrs.get("ord"), 2)
    ord_ = float(ord_) if isinstance(ord_, (int, float)) or ord_ in ("inf", "-inf") else ord_
    axis = parse_attr(attrs.get("axis"))
    dims = None if axis is None else ((int(axis),) if isinstance(axis, int) else tuple(int(v) for v in axis))
    keep = bool(parse_attr(attrs.get("keepdims"), False))
    kd = ", keepdim=True" if keep else ""
    if flag in (-2, 1) or (flag == -1 and isinstance(ord_, float)):
        dim = "" if dims is None else f", dim={dims}"
        return Expr(f"torch.linalg.vector_norm({a[0].text}, {ord_ if flag == -1 else 2.0!r}{dim}{kd})")
    raise unsupported(node, f"np.linalg.norm(ord={ord_!r}) over two axes (matrix norms: MXNet 1.9.1's gradient of "
                            f"the 1-norm differs from the true one, measured 0.23; spectral / nuclear not written)")


def _percentile(a, attrs, node):
    """torch.quantile(x.detach(), q / 100, dim, keepdim, interpolation) (no gradient: MXNet's is zero, measured)"""
    q = parse_attr(attrs.get("q_scalar"))
    if q is None:
        raise unsupported(node, "np.percentile with q as an array")
    axis = parse_attr(attrs.get("axis"))
    if isinstance(axis, tuple):
        raise unsupported(node, "np.percentile over several axes")
    keep = bool(parse_attr(attrs.get("keepdims"), False))
    how = attrs.get("interpolation", "linear")
    if how not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise unsupported(node, f"np.percentile(interpolation={how!r})")
    x = f"{a[0].p()}.detach()" if axis is not None else f"{a[0].p()}.detach().reshape(-1)"
    dim = 0 if axis is None else int(axis)
    out = f"torch.quantile({x}, {float(q) / 100!r}, dim={dim}, keepdim={keep and axis is not None}, interpolation={how!r})"
    return Expr(out if not (keep and axis is None) else f"{out}.reshape((1,) * {a[0].p()}.dim())")


op("_npi_norm")(_np_norm)
op("_npi_percentile")(_percentile)
op("sum", "sum_axis", "_sparse_sum", "_np_sum")(reduce("sum"))
op("mean", "_sparse_mean")(reduce("mean"))
op("prod", "_np_prod", "_np_product")(reduce("prod"))
op("max", "max_axis", "_np_max", "_np_amax")(reduce("amax"))
op("min", "min_axis", "_np_min", "_np_amin")(reduce("amin"))
op("nansum")(_nan("sum"))
op("nanprod")(_nan("prod"))
op("argmax")(_arg(True, True))
op("argmin")(_arg(False, True))
op("_npi_argmax")(_arg(True, False))
op("_npi_argmin")(_arg(False, False))
op("argmax_channel")(_argmax_channel)
op("norm", "_sparse_norm")(_norm)
op("cumsum", "_np_cumsum")(_cumsum)
op("sort", "_npi_sort")(_sort)
op("argsort", "_npi_argsort")(_argsort)
op("moments", n_outputs=lambda attrs: 2)(_moments)
