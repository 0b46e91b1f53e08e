"""Linear algebra (legacy ``linalg_*``, the numpy interface's ``_npi_*``) -> torch.linalg.

MXNet's ``linalg`` ops work on the last two axes (batches before them) as torch's do; ``gemm``
is ``alpha * op(A) @ op(B) + beta * C`` with MXNet's float32-kept ``alpha``/``beta`` attributes
(C++ doubles in 1.9.1: written as given); ``sumlogdiag`` sums the log of the diagonal."""
from __future__ import annotations

from ..safe import literal
from .arith import func
from .base import Expr, NeedsName, op, parse_attr, unsupported

__all__: list = []


def _t(x: str, flag) -> str:
    return f"{x}.transpose(-1, -2)" if parse_attr(flag, False) else x


def _gemm(with_c: bool):
    def fn(a, attrs, node):
        if int(parse_attr(attrs.get("axis"), -2)) != -2:
            raise unsupported(node, f"{node.op}(axis != -2)")
        alpha = float(parse_attr(attrs.get("alpha"), 1.0))
        prod = f"torch.matmul({_t(a[0].p(), attrs.get('transpose_a'))}, {_t(a[1].p(), attrs.get('transpose_b'))})"
        body = prod if alpha == 1.0 else f"{alpha!r} * {prod}"
        if with_c:
            beta = float(parse_attr(attrs.get("beta"), 1.0))
            body += f" + {a[2].p()}" if beta == 1.0 else f" + {beta!r} * {a[2].p()}"
        return Expr(body, atomic=alpha == 1.0 and not with_c)
    fn.torch_form = "alpha * op(A) @ op(B)" + (" + beta * C" if with_c else "")
    return fn


def _syrk(a, attrs, node):
    """alpha * A @ A^T (A^T @ A with transpose)"""
    x = a[0].p()
    if not x.isidentifier():
        raise NeedsName()
    alpha = float(parse_attr(attrs.get("alpha"), 1.0))
    t = parse_attr(attrs.get("transpose"), False)
    prod = f"torch.matmul({x}.transpose(-1, -2), {x})" if t else f"torch.matmul({x}, {x}.transpose(-1, -2))"
    return Expr(prod if alpha == 1.0 else f"{alpha!r} * {prod}", atomic=alpha == 1.0)


def _extractdiag(a, attrs, node):
    """torch.diagonal(A, offset, -2, -1)"""
    return Expr(f"torch.diagonal({a[0].text}, {int(parse_attr(attrs.get('offset'), 0))}, -2, -1)")


def _makediag(a, attrs, node):
    """torch.diag_embed(x, offset)"""
    return Expr(f"torch.diag_embed({a[0].text}, {int(parse_attr(attrs.get('offset'), 0))})")


def _sumlogdiag(a, attrs, node):
    """torch.log(torch.diagonal(A, 0, -2, -1)).sum(-1)"""
    return Expr(f"torch.log(torch.diagonal({a[0].text}, 0, -2, -1)).sum(-1)")


def _slogdet(a, attrs, node):
    """tuple(torch.linalg.slogdet(A)) (sign, log|det|)"""
    return Expr(f"tuple(torch.linalg.slogdet({a[0].text}))")


def _tensordot(a, attrs, node):
    """torch.tensordot(a, b, dims)"""
    if node.op == "_npi_tensordot_int_axes":
        return Expr(f"torch.tensordot({a[0].text}, {a[1].text}, dims={int(parse_attr(attrs.get('axes'), 2))})")
    ax, bx = parse_attr(attrs.get("a_axes_summed"), ()), parse_attr(attrs.get("b_axes_summed"), ())
    ax = [ax] if isinstance(ax, int) else [int(v) for v in ax]
    bx = [bx] if isinstance(bx, int) else [int(v) for v in bx]
    return Expr(f"torch.tensordot({a[0].text}, {a[1].text}, dims=({ax}, {bx}))")


def _einsum(a, attrs, node):
    """torch.einsum(subscripts, *operands)"""
    if int(parse_attr(attrs.get("optimize"), 0)):
        pass      # a contraction order only: the same result
    sub = str(attrs.get("subscripts", ""))
    if not all(c.isalpha() or c in ",->. " for c in sub):
        raise unsupported(node, "einsum with subscripts other than letters, ',', '->' and '...'")
    return Expr(f"torch.einsum({literal(sub)}, {', '.join(e.text for e in a)})")


def _trmm(a, attrs, node):
    """alpha * op(tril(A)) @ B (B @ op(tril(A)) with rightside)"""
    lower = bool(parse_attr(attrs.get("lower"), True))
    t = "tril" if lower else "triu"
    A = _t(f"torch.{t}({a[0].text})", attrs.get("transpose"))
    alpha = float(parse_attr(attrs.get("alpha"), 1.0))
    prod = f"torch.matmul({a[1].p()}, {A})" if parse_attr(attrs.get("rightside"), False) else f"torch.matmul({A}, {a[1].p()})"
    return Expr(prod if alpha == 1.0 else f"{alpha!r} * {prod}", atomic=alpha == 1.0)


def _trsm(a, attrs, node):
    """alpha * op(A)^-1 @ B (B @ op(A)^-1 with rightside), A triangular"""
    lower = bool(parse_attr(attrs.get("lower"), True))
    t = "tril" if lower else "triu"
    trans = bool(parse_attr(attrs.get("transpose"), False))
    A = f"torch.{t}({a[0].text})"
    A = f"{A}.transpose(-1, -2)" if trans else A
    up = (not lower) != trans      # op(A) is upper triangular
    alpha = float(parse_attr(attrs.get("alpha"), 1.0))
    left = not parse_attr(attrs.get("rightside"), False)
    b = a[1].p() if alpha == 1.0 else f"({alpha!r} * {a[1].p()})"
    return Expr(f"torch.linalg.solve_triangular({A}, {b}, upper={up}, left={left})")


def _potri(a, attrs, node):
    """torch.cholesky_inverse(L) (lower L)"""
    return Expr(f"torch.cholesky_inverse(torch.tril({a[0].text}))")


TRIAN = '''def trian_index(n, offset, lower, device):
    """MXNet's packing of a triangle: the lower one row by row; the upper one as the lower triangle
    of the transpose (column by column)."""
    r, c = torch.tril_indices(n, n, offset if lower else -offset, device=device)
    return (r, c) if lower else (c, r)


def extract_trian(x, offset, lower):
    """MXNet extracttrian: the triangle of the last two axes packed into one axis."""
    r, c = trian_index(x.shape[-1], offset, lower, x.device)
    return x[..., r, c]


def make_trian(x, n, offset, lower):
    """MXNet maketrian: the packed triangle x (..., m) written into an n x n matrix, zeros elsewhere."""
    r, c = trian_index(n, offset, lower, x.device)
    out = x.new_zeros(x.shape[:-1] + (n, n))
    out[..., r, c] = x
    return out
'''


def _trian_args(attrs):
    return int(parse_attr(attrs.get("offset"), 0)), bool(parse_attr(attrs.get("lower"), True))


def _extracttrian(a, attrs, node):
    """extract_trian(A, offset, lower) (MXNet's packing order)"""
    k, lower = _trian_args(attrs)
    return Expr(f"extract_trian({a[0].text}, {k}, {lower})", helpers=(TRIAN,))


def _maketrian(a, attrs, node):
    """make_trian(x, n, offset, lower) (the packed triangle back into a matrix)"""
    out = node.out_shapes[0][-1] if node.out_shapes and node.out_shapes[0] else None
    if out is None:
        raise unsupported(node, "maketrian of unknown output shape")
    k, lower = _trian_args(attrs)
    return Expr(f"make_trian({a[0].text}, {out}, {k}, {lower})", helpers=(TRIAN,))


op("linalg_extracttrian", "_linalg_extracttrian")(_extracttrian)
op("linalg_maketrian", "_linalg_maketrian")(_maketrian)
op("linalg_trmm", "_linalg_trmm")(_trmm)
op("linalg_trsm", "_linalg_trsm")(_trsm)
op("linalg_potri", "_linalg_potri")(_potri)
op("linalg_gemm", "_linalg_gemm")(_gemm(True))
op("linalg_gemm2", "_linalg_gemm2")(_gemm(False))
op("linalg_syrk", "_linalg_syrk")(_syrk)
op("linalg_det", "_linalg_det", "_npi_det")(func("torch.linalg.det({})"))
op("linalg_slogdet", "_linalg_slogdet", "_npi_slogdet", n_outputs=lambda attrs: 2)(_slogdet)
op("linalg_inverse", "_linalg_inverse", "_npi_inv")(func("torch.linalg.inv({})"))
op("linalg_potrf", "_linalg_potrf", "_npi_cholesky")(func("torch.linalg.cholesky({})"))
op("linalg_extractdiag", "_linalg_extractdiag")(_extractdiag)
op("linalg_makediag", "_linalg_makediag")(_makediag)
op("linalg_sumlogdiag", "_linalg_sumlogdiag")(_sumlogdiag)
op("_npi_solve")(func("torch.linalg.solve({}, {})"))
op("_npi_tensordot", "_npi_tensordot_int_axes")(_tensordot)
op("_npi_einsum")(_einsum)
