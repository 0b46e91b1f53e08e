"""Arithmetic, comparison and logical ops (legacy ``elemwise_*``/``broadcast_*``/``_*_scalar`` and
the numpy interface's ``_npi_*``) -> torch operators.

Conventions that differ: legacy comparisons and logical ops return 0/1 in the input's dtype (torch
and the numpy interface return bool); ``mod`` takes the divisor's sign (torch.remainder, as numpy)
and gives 0 for a zero divisor where torch gives nan (the generated code writes that case);
legacy division of integers truncates toward zero, a scalar divisor taken as an integer first
(C++: ``int64 7 / 2.5`` is 3, ``-7 / 2`` is -3) where torch's ``/`` gives floats (``mx_div``; the
numpy interface's ``true_divide`` is torch's ``/``); legacy ``maximum``/``minimum`` with a scalar
are ``clamp``."""
from __future__ import annotations

from .base import Expr, num, op, refuse

__all__ = ["binary", "scalar", "func"]


def binary(sym: str):
    def fn(a, attrs, node):
        return Expr(f"{a[0].p()} {sym} {a[1].p()}", atomic=False)
    fn.torch_form = f"a {sym} b"
    return fn


def scalar(sym: str, reverse: bool = False):
    def fn(a, attrs, node):
        s = num(attrs["scalar"])
        return Expr(f"{s} {sym} {a[0].p()}" if reverse else f"{a[0].p()} {sym} {s}", atomic=False)
    fn.torch_form = f"scalar {sym} x" if reverse else f"x {sym} scalar"
    return fn


def func(template: str):
    """An op that is one torch call: ``template`` with the inputs' expressions in its ``{}``."""
    def fn(a, attrs, node):
        return Expr(template.format(*[e.text for e in a]))
    fn.torch_form = template.replace("{}", "x", 1).replace("{}", "y", 1).replace("{}", "z", 1)
    return fn


def _as_dtype(sym: str, bool_out: bool):
    """A comparison: bool (numpy interface) or 0/1 in the first input's dtype (legacy)."""
    def fn(a, attrs, node):
        body = f"{a[0].p()} {sym} {a[1].p()}"
        return Expr(body, atomic=False) if bool_out else Expr(f"({body}).to({a[0].p()}.dtype)")
    fn.torch_form = f"a {sym} b" + ("" if bool_out else " (in a's dtype)")
    return fn


def _as_dtype_scalar(sym: str, bool_out: bool, reverse: bool = False):
    def fn(a, attrs, node):
        s = num(attrs["scalar"])
        body = f"{s} {sym} {a[0].p()}" if reverse else f"{a[0].p()} {sym} {s}"
        return Expr(body, atomic=False) if bool_out else Expr(f"({body}).to({a[0].p()}.dtype)")
    fn.torch_form = f"x {sym} scalar" + ("" if bool_out else " (in x's dtype)")
    return fn


def _logical(name: str, bool_out: bool):
    def fn(a, attrs, node):
        body = f"torch.logical_{name}({a[0].text}.bool(), {a[1].text}.bool())"
        return Expr(body if bool_out else f"{body}.to({a[0].p()}.dtype)")
    fn.torch_form = f"torch.logical_{name}(a, b)" + ("" if bool_out else " (in a's dtype)")
    return fn


def _logical_scalar(name: str, bool_out: bool):
    def fn(a, attrs, node):
        s = "True" if float(attrs["scalar"]) != 0 else "False"
        body = f"torch.logical_{name}({a[0].text}.bool(), torch.tensor({s}, device={a[0].p()}.device))"
        return Expr(body if bool_out else f"{body}.to({a[0].p()}.dtype)")
    fn.torch_form = f"torch.logical_{name}(x, scalar)" + ("" if bool_out else " (in x's dtype)")
    return fn


def _mod(a, attrs, node):
    """torch.remainder(a, b) (0 where b == 0, as MXNet)"""
    x, y = a[0].p(), a[1].p()
    return Expr(f"torch.where({y} == 0, torch.zeros_like({x} * {y}), torch.remainder({x}, {y}))")


def _mod_scalar(reverse: bool):
    def fn(a, attrs, node):
        s = num(attrs["scalar"])
        if reverse:
            x = a[0].p()
            return Expr(f"torch.where({x} == 0, torch.zeros_like({x}), torch.remainder(torch.full_like({x}, {s}), {x}))")
        if float(attrs["scalar"]) == 0:
            return Expr(f"torch.zeros_like({a[0].text})")
        return Expr(f"torch.remainder({a[0].text}, {s})")
    fn.torch_form = "torch.remainder(scalar, x)" if reverse else "torch.remainder(x, scalar)"
    return fn


def _clamp(kind: str):
    def fn(a, attrs, node):
        return Expr(f"torch.clamp({a[0].text}, {kind}={num(attrs['scalar'])})")
    fn.torch_form = f"torch.clamp(x, {kind}=scalar)"
    return fn


def _rpower(a, attrs, node):
    """scalar ** x"""
    return Expr(f"{num(attrs['scalar'])} ** {a[0].p()}", atomic=False)


def _with_scalar(fn_name: str, reverse: bool):
    """``torch.<fn_name>(x, scalar)`` (or ``(scalar, x)``) with the scalar as a tensor like x."""
    def fn(a, attrs, node):
        s = f"torch.full_like({a[0].text}, {num(attrs['scalar'])})"
        return Expr(f"torch.{fn_name}({s}, {a[0].text})" if reverse else f"torch.{fn_name}({a[0].text}, {s})")
    fn.torch_form = f"torch.{fn_name}(scalar, x)" if reverse else f"torch.{fn_name}(x, scalar)"
    return fn


MX_DIV = '''def mx_div(a, b):
    """MXNet's legacy a / b: integer tensors divide truncated toward zero (C++), a scalar taken as an
    integer first; floating tensors as torch's /."""
    t = b if isinstance(a, (int, float)) else a
    if t.is_floating_point():
        return a / b
    a = torch.full_like(t, int(a)) if isinstance(a, (int, float)) else a
    b = torch.full_like(t, int(b)) if isinstance(b, (int, float)) else b
    return torch.div(a, b, rounding_mode="trunc")
'''


def _div(a, attrs, node):
    """mx_div(a, b) (a / b; integers truncated toward zero as MXNet)"""
    return Expr(f"mx_div({a[0].text}, {a[1].text})", helpers=(MX_DIV,))


def _div_scalar(reverse: bool):
    def fn(a, attrs, node):
        s = num(attrs["scalar"])
        return Expr(f"mx_div({s}, {a[0].text})" if reverse else f"mx_div({a[0].text}, {s})", helpers=(MX_DIV,))
    fn.torch_form = "mx_div(scalar, x) (scalar / x; integers truncated as MXNet)" if reverse else \
        "mx_div(x, scalar) (x / scalar; integers truncated as MXNet)"
    return fn


_LEGACY = {
    "+": ("elemwise_add", "_add", "_plus", "_Plus", "broadcast_add", "broadcast_plus", "_grad_add",
          "_sparse_elemwise_add", "_sparse_broadcast_add", "_sparse_broadcast_plus"),
    "-": ("elemwise_sub", "_sub", "_minus", "_Minus", "broadcast_sub", "broadcast_minus", "_sparse_elemwise_sub",
          "_sparse_broadcast_sub", "_sparse_broadcast_minus"),
    "*": ("elemwise_mul", "_mul", "_Mul", "broadcast_mul", "_sparse_elemwise_mul", "_sparse_broadcast_mul"),
    "**": ("_power", "_Power", "broadcast_power"),
}
for _sym, _names in _LEGACY.items():
    op(*_names)(binary(_sym))
for _sym, _names in {"+": ("_npi_add",), "-": ("_npi_subtract",), "*": ("_npi_multiply",), "/": ("_npi_true_divide",),
                     "**": ("_npi_power",)}.items():
    op(*_names)(binary(_sym))

for _sym, _names in {"+": ("_plus_scalar", "_PlusScalar", "_npi_add_scalar", "_scatter_plus_scalar"),
                     "-": ("_minus_scalar", "_MinusScalar", "_npi_subtract_scalar", "_scatter_minus_scalar"),
                     "*": ("_mul_scalar", "_MulScalar", "_npi_multiply_scalar"),
                     "/": ("_npi_true_divide_scalar",),
                     "**": ("_power_scalar", "_PowerScalar", "_npi_power_scalar")}.items():
    op(*_names)(scalar(_sym))
op("_rminus_scalar", "_RMinusScalar", "_npi_rsubtract_scalar")(scalar("-", True))
op("_npi_rtrue_divide_scalar")(scalar("/", True))
op("elemwise_div", "_div", "_Div", "broadcast_div", "_sparse_elemwise_div", "_sparse_broadcast_div")(_div)
op("_div_scalar", "_DivScalar")(_div_scalar(False))
op("_rdiv_scalar", "_RDivScalar")(_div_scalar(True))
op("_rpower_scalar", "_RPowerScalar", "_npi_rpower_scalar")(_rpower)
op("_scatter_elemwise_div")(binary("/"))

op("broadcast_maximum", "_maximum", "_Maximum", "_npi_maximum")(func("torch.maximum({}, {})"))
op("broadcast_minimum", "_minimum", "_Minimum", "_npi_minimum")(func("torch.minimum({}, {})"))
op("_maximum_scalar", "_MaximumScalar", "_npi_maximum_scalar")(_clamp("min"))
op("_minimum_scalar", "_MinimumScalar", "_npi_minimum_scalar")(_clamp("max"))
op("broadcast_hypot", "_hypot", "_Hypot", "_npi_hypot")(func("torch.hypot({}, {})"))
op("_hypot_scalar", "_HypotScalar", "_npi_hypot_scalar")(_with_scalar("hypot", False))
op("broadcast_mod", "_mod", "_Mod", "_npi_mod")(_mod)
op("_mod_scalar", "_ModScalar", "_npi_mod_scalar")(_mod_scalar(False))
op("_rmod_scalar", "_RModScalar", "_npi_rmod_scalar")(_mod_scalar(True))
op("_npi_arctan2")(func("torch.atan2({}, {})"))
op("_npi_arctan2_scalar")(_with_scalar("atan2", False))
refuse("MXNet 1.9.1's gradient of np.arctan2(scalar, x) is wrong (measured 2.2 off the true "
       "-s / (s^2 + x^2)), so a torch translation would train differently; write np.arctan2(np.full_like(x, s), x)",
       "_npi_rarctan2_scalar")
op("_npi_copysign")(func("torch.copysign({}, {})"))
op("_npi_copysign_scalar")(_with_scalar("copysign", False))
op("_npi_rcopysign_scalar")(_with_scalar("copysign", True))

_CMP = {"==": ("equal", "Equal", "equal", "Equal"), "!=": ("not_equal", "Not_Equal", "not_equal", "NotEqual"),
        ">": ("greater", "Greater", "greater", "Greater"), ">=": ("greater_equal", "Greater_Equal", "greater_equal",
                                                                 "GreaterEqual"),
        "<": ("lesser", "Lesser", "less", "Lesser"), "<=": ("lesser_equal", "Lesser_Equal", "less_equal",
                                                            "LesserEqual")}
for _sym, (_lo, _up, _np, _sc) in _CMP.items():
    op(f"broadcast_{_lo}", f"_{_lo}", f"_{_up}")(_as_dtype(_sym, False))
    op(f"_{_lo}_scalar", f"_{_sc}Scalar")(_as_dtype_scalar(_sym, False))
    op(f"_npi_{_np}")(_as_dtype(_sym, True))
    op(f"_npi_{_np}_scalar")(_as_dtype_scalar(_sym, True))

for _n, _up in (("and", "And"), ("or", "Or"), ("xor", "Xor")):
    op(f"broadcast_logical_{_n}", f"_logical_{_n}", f"_Logical_{_up}")(_logical(_n, False))
    op(f"_logical_{_n}_scalar", f"_Logical{_up}Scalar")(_logical_scalar(_n, False))


def _bitwise(name: str, with_scalar: bool = False):
    def fn(a, attrs, node):
        if with_scalar:
            return Expr(f"torch.{name}({a[0].text}, torch.full_like({a[0].text}, {int(float(attrs['scalar']))}))")
        return Expr(f"torch.{name}({', '.join(e.text for e in a)})")
    fn.torch_form = f"torch.{name}(a, {'scalar' if with_scalar else 'b'})" if name != "bitwise_not" else "torch.bitwise_not(x)"
    return fn


for _n in ("and", "or", "xor"):
    op(f"_npi_bitwise_{_n}")(_bitwise(f"bitwise_{_n}"))
    op(f"_npi_bitwise_{_n}_scalar")(_bitwise(f"bitwise_{_n}", True))
op("_npi_bitwise_not")(_bitwise("bitwise_not"))
op("_npi_lcm")(_bitwise("lcm"))
op("_npi_lcm_scalar")(_bitwise("lcm", True))
