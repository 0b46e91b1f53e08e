"""Op rows for issue 14's second batch of ops (indexing, sorting, shape, math, creation and the
functional layers): dualdl.ops.<name> on each backend, MXNet also on Symbols where the op has a
Symbol form (tests/test_ops_more.py checks the clear errors where it has not), against
torch.nn.functional.<name> (else torch.<name>, else the Tensor method given as ``ref``)."""
from dualdl.testing.spec import In, idx, mask, op

from .ops import EAGER

X = (2, 3, 4)
P = (2, 3, 5)                   # standard normal: distinct values, so sort/topk indices are unique
IMG = (2, 3, 5, 6)
Q, K, V = (2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5)
STAT = In((3,), grad=False)                         # batch_norm's running statistics
STAT_VAR = In((3,), "positive", grad=False)
DTYPE = In((1,), grad=False)    # creation ops have no tensor input: this one carries the row's dtype
# MXNet computes these in float32 inside float64 ops (measured max abs differences to torch)
ERF64 = dict(tol64=2e-7, reason="MXNet's erf gradient has float32 precision in float64 (measured 5.9e-8)")
BILINEAR64 = dict(tol64=2e-6, reason="MXNet's BilinearResize2D computes its weights in float32 "
                                     "(measured in float64: output 4.7e-7, input gradient 6.6e-7, where the weights "
                                     "are not exact in float32)")


def method(name):
    """The reference for an op torch only has as a Tensor method (``x.expand(*sizes)``)."""
    return lambda x, *args: getattr(x, name)(*args)


def additive_mask(m):
    """A float attention mask (0 or -1e9) from a float input, in its dtype on every backend."""
    return m * 0 + (m > 0.5) * -1e9


def linspaces(f, x):
    return (f(0.0, 1.0, 7, dtype=x.dtype), f(-3.5, 2.25, 11, dtype=x.dtype), f(1.0, 1.0, 1, dtype=x.dtype),
            f(0, 10, 6, dtype=x.dtype), f(2.0, -1.0, 0, dtype=x.dtype))


ROWS = [
    # indexing and sorting
    op("gather", [X, idx((2, 5, 4), 3)], call=lambda f, x, i: f(x, 1, i), id="dim 1, larger index"),
    op("gather", [X, idx((1, 2, 6), 4)], call=lambda f, x, i: f(x, 2, i), id="dim 2, smaller index"),
    op("gather", [(1, 3), idx((1, 2), 1)], call=lambda f, x, i: f(x, 0, i), id="size-1 dim"),
    op("index_select", [X, idx((4,), 4)], call=lambda f, x, i: f(x, -1, i), id="dim -1"),
    op("take_along_dim", [X, idx((2, 2, 4), 3)], call=lambda f, x, i: f(x, i, 1), id="dim 1"),
    op("take_along_dim", [X, idx((1, 3, 2), 4)], call=lambda f, x, i: f(x, i, 2), id="broadcast", checks=EAGER),
    op("take_along_dim", [X, idx((5,), 24)], id="flat"),
    op("topk", P, 3), op("topk", P, 2, dim=1, largest=False, id="smallest dim 1"),
    op("topk", P, 5, id="k = size"),
    op("sort", P), op("sort", P, 0, descending=True, id="descending dim 0"),
    op("sort", (3, 1), dim=1, id="length 1"),
    op("sort", In((3, 17), "ties"), dim=1, stable=True, id="stable ties", checks=EAGER),
    op("argsort", P, dim=1, id="dim 1"),
    op("argsort", In((19, 2), "ties"), dim=0, descending=True, stable=True, id="stable ties descending",
       checks=EAGER),
    # shape and layout
    op("expand", (4, 1), 2, -1, 3, ref=method("expand"), id="new dim", checks=EAGER),
    op("expand", (2, 3, 1), 2, -1, 4, ref=method("expand"), id="same rank"),
    op("repeat", X, 2, 1, 3, ref=method("repeat")),
    op("repeat", X, (2, 1, 2, 1), ref=method("repeat"), id="new dims"),
    op("tile", X, (2, 2)),
    op("flip", X, (0, -1), id="negative dim", checks=EAGER), op("flip", X, (0, 2), id="dims 0, 2"),
    op("roll", X, (1, -2), (0, -1), id="two dims"), op("roll", X, 5, id="flat"),
    op("tril", X), op("triu", X, 1, id="1"), op("triu", (5, 3), -1, id="-1"),
    op("pad", X, (1, 2, 0, 3), value=0.5, id="constant"),
    op("pad", IMG, (2, 1, 1, 2), mode="reflect", id="reflect"),
    op("pad", X, (3, 1), mode="replicate", id="replicate"),
    op("pad", IMG, (1, 2, 2, 0), mode="circular", id="circular"),
    op("pad", (1, 1, 1, 1), (2, 2, 1, 1), mode="replicate", id="replicate 1x1"),
    # math
    op("cumsum", X, 1, id="dim 1"), op("cumsum", X, -1, id="dim -1", checks=EAGER),
    op("cumprod", X, call=lambda f, x: f(x * (x < 1.0), -1), id="with zeros", checks=EAGER),
    op("cumprod", (1, 4), 0, id="length 1", checks=EAGER),
    op("norm", X, id="fro"), op("norm", X, 1, dim=1, id="1, dim"),
    op("norm", X, float("inf"), dim=-1, keepdim=True, id="inf keepdim"),
    op("norm", X, 3, dim=(0, 2), id="3, dims"),
    op("var", X, 1, id="dim"), op("var", X, id="all"),
    op("var", X, (0, 2), correction=0, keepdim=True, id="biased keepdim"),
    op("var", (3, 1), 1, correction=0, id="single element"),
    op("std", X, -1, id="dim -1"), op("std", X, 2, correction=2, id="correction 2"),
    op("logsumexp", X, call=lambda f, x: f(x * 30, 1), id="large values"),
    op("logsumexp", X, (0, 2), keepdim=True, id="dims keepdim"),
    op("erf", X, **ERF64),
    op("clip", X, -0.5, 1.0),
    op("maximum", [X, (3, 1)], id="broadcast"), op("minimum", [X, (4,)], id="broadcast"),
    op("isnan", In(X, "nonfinite", grad=False)), op("isfinite", In(X, "nonfinite", grad=False)),
    op("einsum", [X, (2, 4, 5)], call=lambda f, a, b: f("bij,bjk->bik", a, b), id="batched matmul"),
    op("einsum", X, call=lambda f, a: f("ijk->ki", [a]), id="operand list"),
    op("bmm", [X, (2, 4, 5)]),
    op("baddbmm", [(3, 5), X, (2, 4, 5)], beta=0.5, alpha=2.0, id="broadcast input"),
    op("baddbmm", [(2, 3, 5), X, (2, 4, 5)], id="defaults"),
    op("outer", [(3,), (5,)]),
    # creation ops: NDArrays only (no Symbol to create from)
    op("eye", DTYPE, call=lambda f, x: (f(3, dtype=x.dtype), f(2, 4, dtype=x.dtype), f(4, 1, dtype=x.dtype)),
       checks=EAGER),
    op("linspace", DTYPE, call=linspaces, checks=EAGER),
    # functional layers
    op("interpolate", IMG, scale_factor=2, id="nearest x2"),
    op("interpolate", IMG, size=(7, 4), id="nearest size", checks=EAGER),
    op("interpolate", IMG, scale_factor=1.5, id="nearest x1.5", checks=EAGER),
    op("interpolate", IMG, size=(7, 9), mode="bilinear", id="bilinear", **BILINEAR64),
    op("interpolate", IMG, size=(4, 9), mode="bilinear", align_corners=True, id="bilinear align_corners",
       **BILINEAR64),
    op("interpolate", IMG, scale_factor=2, mode="bilinear", align_corners=False, id="bilinear x2"),
    op("interpolate", (1, 2, 1, 1), size=(3, 2), mode="bilinear", id="bilinear from 1x1"),
    op("conv2d", [IMG, (4, 3, 3, 3), (4,)], stride=2, padding=1, id="stride 2", checks=EAGER),
    op("conv2d", [IMG, (6, 1, 3, 3)], groups=3, dilation=(1, 2), padding="same", id="groups dilation same",
       checks=EAGER),
    op("max_pool2d", IMG, 2), op("max_pool2d", IMG, 3, stride=2, padding=1, id="padding"),
    op("max_pool2d", (2, 2, 8, 7), 3, 2, 1, ceil_mode=True, id="ceil_mode"),
    op("max_pool2d", (1, 2, 7, 7), 3, stride=2, ceil_mode=True, id="ceil_mode no padding"),
    op("avg_pool2d", IMG, (2, 3), stride=1, id="(2, 3)"),
    op("avg_pool2d", IMG, 3, 2, 1, count_include_pad=False, id="padding excluded"),
    op("avg_pool2d", (2, 2, 8, 7), 3, 2, 1, ceil_mode=True, id="ceil_mode"),
    op("avg_pool2d", (2, 2, 7, 6), 2, 2, 1, ceil_mode=True, count_include_pad=False,
       id="ceil_mode padding excluded"),
    op("batch_norm", [IMG, STAT, STAT_VAR, (3,), (3,)], id="eval, running stats"),
    op("batch_norm", [IMG, (3,), (3,)], call=lambda f, x, w, b: f(x, None, None, w, b, training=True),
       id="training, batch stats"),
    op("layer_norm", [IMG, (5, 6), (5, 6)], call=lambda f, x, w, b: f(x, (5, 6), w, b), id="2 dims affine"),
    op("layer_norm", X, (4,), eps=1e-3, id="no affine"),
    op("group_norm", [(2, 4, 3, 5), (4,), (4,)], call=lambda f, x, w, b: f(x, 2, w, b), id="affine"),
    op("group_norm", (2, 6, 7), 3, id="3-d"), op("group_norm", (3, 2, 4), 1, id="one group"),
    op("scaled_dot_product_attention", [Q, K, V]),
    op("scaled_dot_product_attention", [Q, K, V], is_causal=True, scale=0.3, id="causal scale"),
    op("scaled_dot_product_attention", [Q, K, V, In((4, 6), grad=False)],
       call=lambda f, q, k, v, m: f(q, k, v, attn_mask=additive_mask(m)), id="float mask"),
    op("scaled_dot_product_attention", [Q, K, V, mask(4, 6)], call=lambda f, q, k, v, m: f(q, k, v, attn_mask=m),
       id="bool mask", checks=EAGER),
    op("scaled_dot_product_attention", [(1, 3, 2), (1, 1, 2), (1, 1, 4)], id="one key"),
]
