"""Op rows: dualdl.ops.<name>(*inputs, *args, **kwargs) on each backend (MXNet also on Symbols,
inside a hybridized block) against torch.nn.functional.<name> (else torch.<name>)."""
from dualdl.testing.spec import In, idx, mask, op, pos

from .known import F32_ACT_HYB

EAGER = ("train", "float64")     # NDArrays only: no Symbol form (tests/test_ops.py checks which)
X = (2, 3, 4)


def pair(f, a, b, **kw):
    return f([a, b], **kw)


def where_nonzero(c, a, b):
    """torch.where wants a bool condition; dualdl's where also takes a float one (nonzero = True)."""
    import torch
    return torch.where(c != 0, a, b)


ROWS = [
    op("relu", X), op("sigmoid", X), op("tanh", X), op("gelu", X, **F32_ACT_HYB), op("silu", X),
    op("gelu", X, approximate="tanh", id="tanh"),
    op("leaky_relu", X, 0.2, id="0.2", **F32_ACT_HYB), op("leaky_relu", X, id="default slope", **F32_ACT_HYB),
    op("elu", X, 0.5, id="0.5"),
    op("softmax", X, dim=-1, id="dim -1"), op("softmax", X, 0, id="dim 0"),
    op("softmax", (3, 1), dim=1, id="size-1 dim"),
    op("log_softmax", X, dim=1, id="dim 1"),
    op("matmul", [(3, 4), (4, 5)], id="2-d"),
    op("matmul", [(2, 3, 4), (2, 4, 5)], id="3-d"),
    op("matmul", [(5, 1, 3, 4), (2, 4, 6)], id="broadcast middle", checks=EAGER),
    op("matmul", [(2, 1, 3, 4), (1, 5, 4, 2)], id="broadcast both", checks=EAGER),
    op("matmul", [(1, 3, 4), (2, 4, 5)], id="broadcast lead"),
    op("matmul", [(2, 5, 3, 4), (5, 4, 2)], id="broadcast rhs"),
    op("matmul", [(4,), (2, 4, 5)], id="vec @ 3-d"),
    op("matmul", [(2, 3, 4), (4,)], id="3-d @ vec"),
    op("matmul", [(4,), (4, 5)], id="vec @ mat"),
    op("matmul", [(3, 4), (4,)], id="mat @ vec"),
    op("matmul", [(4,), (4,)], id="vec @ vec", checks=EAGER),
    op("linear", [X, (5, 4), (5,)]),
    op("linear", [X, (5, 4)], id="no bias"),
    op("add", [(3, 1), (1, 4)], id="broadcast"), op("sub", [X, (4,)], id="broadcast"),
    op("mul", [(3, 1), (2, 1, 4)], id="broadcast"), op("div", [X, pos(3, 1)], id="broadcast"),
    op("add", X, 2.5, id="scalar"), op("mul", X, call=lambda f, a: f(3.0, a), id="scalar left"),
    op("sub", X, call=lambda f, a: f(1.0, a), ref=lambda a, b: a - b, id="scalar left"),
    op("div", pos(2, 3), call=lambda f, a: f(1.0, a), ref=lambda a, b: a / b, id="scalar left"),
    op("div", idx((3,), 9), 2, id="int / int", checks=EAGER),
    op("pow", X, 3, id="scalar exponent"), op("pow", [pos(*X), pos(4)], id="tensor exponent"),
    op("exp", X), op("log", pos(*X)), op("sqrt", pos(*X)), op("abs", X),
    op("clamp", X, min=-0.5, id="min"), op("clamp", X, max=0.5, id="max"), op("clamp", X, -0.5, 0.7, id="both", tol64=2e-8,
       reason="MXNet's clip keeps its bounds as float32: 0.7 -> 0.69999999 in float64 (1.2e-8)"),
    op("zeros_like", X), op("ones_like", X),
    op("where", [mask(3, 1), (4,), (3, 4)], id="broadcast"),
    op("where", [mask(3, 4), (3, 4)], call=lambda f, c, b: f(c, -1.0, b), id="scalar"),
    op("where", [In((6,), grad=False), (6,), (6,)], ref=where_nonzero, id="float condition",
       call=lambda f, c, a, b: f(c * (c > 0), a, b)),                  # zeros where c <= 0
    op("masked_fill", [X, mask(3, 1)], -1e9),
    op("masked_fill", [X, mask(3, 1)], float("-inf"), id="-inf"),
    op("dropout", X, 0.5, training=False, id="eval"), op("dropout", X, 0.0, id="p=0"),
    op("dropout", X, 1.0, id="p=1"),
    op("cat", [X, (2, 2, 4)], call=lambda f, a, b: pair(f, a, b, dim=1)),
    op("concat", [X, X], call=lambda f, a, b: pair(f, a, b, dim=-1), id="dim -1"),
    op("stack", [X, X], call=pair), op("stack", [X, X], call=lambda f, a, b: pair(f, a, b, dim=-1), id="dim -1"),
    op("split", (7, 2), 3, dim=0, id="size 3 of 7", checks=EAGER),
    op("split", X, [1, 2, 1], dim=-1, id="sections"),
    op("chunk", (7, 2), 3, id="uneven", checks=EAGER), op("chunk", (2, 6), 4, dim=1, id="fewer", checks=EAGER),
    op("chunk", X, 2, dim=-1, id="even"),
    op("transpose", X, 0, -1), op("permute", X, (2, 0, 1)),
    op("permute", X, (-1, 0, 1), id="negative", checks=EAGER),
    op("reshape", X, (4, -1)), op("reshape", X, (-1,), id="flat"),
    op("flatten", X), op("flatten", X, 1, id="1"), op("flatten", X, 0, 1, id="0,1"),
    op("flatten", (2, 3, 4, 5), 1, 2, id="1,2 of 4-d"), op("flatten", X, -2, -1, id="negative", checks=EAGER),
    op("squeeze", (2, 1, 3), 1, id="dim"), op("squeeze", (2, 1, 3), 0, id="no-op", checks=EAGER),
    op("squeeze", (1, 2, 1, 3), id="all"),
    op("unsqueeze", X, -1, id="-1"), op("unsqueeze", X, 1, id="1"),
    op("sum", X), op("sum", (5,), id="1-d"), op("sum", X, dim=1, id="dim"),
    op("sum", X, dim=(0, 2), keepdim=True, id="dims keepdim"),
    op("sum", X, dim=None, keepdim=True, id="all keepdim"),
    op("mean", X), op("mean", X, -1, keepdim=True, id="dim keepdim"),
    op("max", X), op("min", X), op("max", X, dim=1, id="dim (values, indices)"),
    op("min", X, dim=-1, keepdim=True, id="dim keepdim (values, indices)"),
    op("argmax", X, dim=1, id="dim"), op("argmax", X, dim=-1, keepdim=True, id="keepdim"), op("argmax", X, id="all"),
    op("argmin", X, 2, id="dim"),
    op("embedding", [idx((2, 3), 5), (5, 3)]),
    op("one_hot", idx((2, 3), 5), 6), op("one_hot", idx((2, 3), 5), checks=EAGER, id="inferred classes"),
]
