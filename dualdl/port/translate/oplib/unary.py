"""Elementwise math (legacy ``mx.nd.sin``..., the numpy interface's ``_npi_sin``..., the sparse API's
``_sparse_sin`` aliases) -> torch.

Conventions that differ: MXNet's ``round`` rounds half away from zero (torch.round: half to even,
which is MXNet's ``rint`` and numpy's ``around``); ``cbrt`` of a negative number is negative
(``x ** (1/3)`` would be nan); ``gamma`` is the gamma function (torch has only its logarithm:
written as ``exp(lgamma)`` with the sign of gamma for negative x); legacy ``logical_not`` returns
0/1 in the input's dtype, the numpy one bool. The gradient of round/rint/fix/floor/ceil/sign is
zero on both sides."""
from __future__ import annotations

from .arith import func
from .base import Expr, f32, op, parse_attr

__all__ = ["ROUND", "RINT", "GAMMA", "CBRT"]

ROUND = '''def round_half_away(x):
    """MXNet round: halves away from zero (torch.round rounds them to even); gradient zero."""
    a = x.abs()
    return torch.sign(x) * torch.where(a - a.floor() >= 0.5, a.ceil(), a.floor())
'''

GAMMA = '''def gamma_fn(x):
    """MXNet gamma: the gamma function, exp(lgamma(x)) with its sign (negative where -1 < x < 0,
    -3 < x < -2, ...); the gradient gamma(x) * digamma(x) by autograd."""
    sign = torch.where((x < 0) & (torch.floor(-x) % 2 == 0), -torch.ones_like(x), torch.ones_like(x))
    return sign * torch.exp(torch.lgamma(x))
'''

RINT = '''def rint_mx(x):
    """MXNet rint: floor(x) when x - floor(x) <= 0.5, else ceil(x) (2.5 -> 2, -2.5 -> -3, 0.5 -> 0;
    torch.round rounds halves to even); gradient zero."""
    f = x.floor()
    return torch.where(x - f <= 0.5, f, x.ceil())
'''

CBRT = '''def cbrt(x):
    """MXNet cbrt: the real cube root (negative for negative x, where x ** (1/3) is nan)."""
    return torch.sign(x) * x.abs() ** (1.0 / 3.0)
'''


#: the elementwise ops the sparse API registers again as ``_sparse_<name>``
_SPARSE = frozenset("abs arccos arccosh arcsin arcsinh arctan arctanh cbrt ceil cos cosh degrees exp expm1 fix floor "
                    "gamma gammaln log log10 log1p log2 negative radians relu rint round rsqrt sigmoid sign sin sinh "
                    "sqrt square tan tanh trunc".split())


def _names(base: str, np_name: str = ""):
    out = [base] + ([f"_sparse_{base}"] if base in _SPARSE else [])
    return out + ([f"_npi_{np_name}"] if np_name else [])


_SIMPLE = {   # MXNet name: (torch call, numpy-interface name)
    "abs": ("torch.abs({})", "abs"), "sin": ("torch.sin({})", "sin"), "cos": ("torch.cos({})", "cos"),
    "tan": ("torch.tan({})", "tan"), "arcsin": ("torch.asin({})", "arcsin"), "arccos": ("torch.acos({})", "arccos"),
    "arctan": ("torch.atan({})", "arctan"), "sinh": ("torch.sinh({})", "sinh"), "cosh": ("torch.cosh({})", "cosh"),
    "tanh": ("torch.tanh({})", "tanh"), "arcsinh": ("torch.asinh({})", "arcsinh"),
    "arccosh": ("torch.acosh({})", "arccosh"), "arctanh": ("torch.atanh({})", "arctanh"),
    "exp": ("torch.exp({})", "exp"), "expm1": ("torch.expm1({})", "expm1"), "log": ("torch.log({})", "log"),
    "log10": ("torch.log10({})", "log10"), "log2": ("torch.log2({})", "log2"), "log1p": ("torch.log1p({})", "log1p"),
    "sqrt": ("torch.sqrt({})", "sqrt"), "square": ("torch.square({})", "square"),
    "reciprocal": ("torch.reciprocal({})", "reciprocal"), "sign": ("torch.sign({})", "sign"),
    "floor": ("torch.floor({})", "floor"), "ceil": ("torch.ceil({})", "ceil"), "trunc": ("torch.trunc({})", "trunc"),
    "fix": ("torch.trunc({})", "fix"), "rsqrt": ("torch.rsqrt({})", ""),
    "relu": ("torch.relu({})", ""), "sigmoid": ("torch.sigmoid({})", ""), "softsign": ("F.softsign({})", ""),
}
#: measured: MXNet 1.9.1 computes these gradients in float32 also on float64 data (erf 3.3e-8,
#: erfinv 4.3e-8, gammaln 8.7e-8 off torch's float64 gradient)
_F32_NOTE = {"erf": "its float64 gradient is 3.3e-8 off the true one", "erfinv": "its gradient is computed in float32",
             "gammaln": "its gradient (digamma) is 2.3e-6 relative off"}
_F32_GRAD = {"erf": ("torch.erf({})", "_npx_erf"), "erfinv": ("torch.erfinv({})", "_npx_erfinv"),
             "gammaln": ("torch.lgamma({})", "_npx_gammaln")}
_MORE = {"abs": ("_npi_absolute",), "relu": ("_npx_relu",), "sigmoid": ("_npx_sigmoid",)}
for _mx, (_t, _np) in _SIMPLE.items():
    op(*_names(_mx, _np), *_MORE.get(_mx, ()))(func(_t))
for _mx, (_t, _npx) in _F32_GRAD.items():
    op(*_names(_mx), _npx, float32_internal=True, float32_note=_F32_NOTE[_mx])(func(_t))


@op(*_names("negative", "negative"))
def _negative(a, attrs, node):
    """-x"""
    return Expr(f"-{a[0].p()}")


@op(*_names("round"))
def _round(a, attrs, node):
    """round_half_away(x) (halves away from zero)"""
    return Expr(f"round_half_away({a[0].text})", helpers=(ROUND,))


@op(*_names("gamma"), "_npx_gamma", float32_internal=True, float32_note="its gradient (digamma) is 3.4e-7 off")
def _gamma(a, attrs, node):
    """gamma_fn(x) = sign * exp(torch.lgamma(x))"""
    return Expr(f"gamma_fn({a[0].text})", helpers=(GAMMA,))


@op(*_names("cbrt", "cbrt"))
def _cbrt(a, attrs, node):
    """cbrt(x) = sign(x) * |x| ** (1/3)"""
    return Expr(f"cbrt({a[0].text})", helpers=(CBRT,))


@op("rcbrt")
def _rcbrt(a, attrs, node):
    """1 / cbrt(x)"""
    return Expr(f"1 / cbrt({a[0].text})", atomic=False, helpers=(CBRT,))


@op(*_names("rint", "rint"))
def _rint(a, attrs, node):
    """rint_mx(x) (halves toward the floor: MXNet's rint)"""
    return Expr(f"rint_mx({a[0].text})", helpers=(RINT,))


#: MXNet's degrees/radians multiply by 180/pi and pi/180 rounded to float32 (measured: exact on
#: float64 data with these factors; torch.rad2deg is 5e-8 relative off)
DEGREES, RADIANS = float.fromhex("0x1.ca5dc0p+5"), float.fromhex("0x1.1df46ap-6")


@op(*_names("degrees", "degrees"))
def _degrees(a, attrs, node):
    """x * float32(180 / pi) (MXNet's factor)"""
    return Expr(f"{a[0].p()} * {DEGREES!r}", atomic=False)


@op(*_names("radians", "radians"))
def _radians(a, attrs, node):
    """x * float32(pi / 180) (MXNet's factor)"""
    return Expr(f"{a[0].p()} * {RADIANS!r}", atomic=False)


@op("logical_not")
def _logical_not(a, attrs, node):
    """(x == 0) in x's dtype"""
    return Expr(f"({a[0].p()} == 0).to({a[0].p()}.dtype)")


op("_npi_logical_not")(func("torch.logical_not({})"))
op("_npi_isnan")(func("torch.isnan({})"))
op("_npi_isinf")(func("torch.isinf({})"))
op("_npi_isfinite")(func("torch.isfinite({})"))
op("_npi_isposinf")(func("torch.isposinf({})"))
op("_npi_isneginf")(func("torch.isneginf({})"))


@op("_npi_around")
def _around(a, attrs, node):
    """torch.round(x, decimals=d) (halves to even, as numpy)"""
    d = int(parse_attr(attrs.get("decimals"), 0))
    return Expr(f"torch.round({a[0].text}, decimals={d})" if d else f"torch.round({a[0].text})")


@op("_npi_nan_to_num")
def _nan_to_num(a, attrs, node):
    """torch.nan_to_num(x, nan, posinf, neginf)"""
    nan = float(parse_attr(attrs.get("nan"), 0.0))
    kw = [f"nan={nan!r}"]
    for k in ("posinf", "neginf"):
        v = parse_attr(attrs.get(k))
        if v is not None:
            kw.append(f"{k}={float(v)!r}")
    return Expr(f"torch.nan_to_num({a[0].text}, {', '.join(kw)})")


@op("hard_sigmoid")
def _hard_sigmoid(a, attrs, node):
    """torch.clamp(alpha * x + beta, 0, 1) (alpha, beta float32 as MXNet keeps them)"""
    alpha, beta = f32(attrs.get("alpha", "0.2")), f32(attrs.get("beta", "0.5"))
    return Expr(f"torch.clamp({a[0].p()} * {alpha} + {beta}, 0, 1)")
