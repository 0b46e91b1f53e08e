"""Small contrib ops -> torch: ``quadratic``, ``gradientmultiplier`` (identity forward, scaled
gradient), the straight-through estimators ``round_ste``/``sign_ste`` (forward round/sign,
gradient passed through unchanged), ``index_array``, ``box_iou`` and SSD's ``MultiBoxPrior`` anchors
(computed in float32 in MXNet's order: per cell, the sizes at ratio 1, then the other ratios at
the first size)."""
from __future__ import annotations

from .base import Expr, NeedsName, ndim, op, parse_attr, unsupported
from .unary import ROUND

__all__ = ["GRAD_MULT", "BOX_IOU", "INDEX_ARRAY", "MULTIBOX_PRIOR"]

GRAD_MULT = '''class GradMultiplier(torch.autograd.Function):
    """MXNet _contrib_gradientmultiplier: the identity forward, the gradient times `scalar`."""

    @staticmethod
    def forward(ctx, x, scalar):
        ctx.scalar = scalar
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scalar, None
'''

BOX_IOU = '''def box_iou(a, b, center):
    """MXNet _contrib_box_iou: IoU of every box of a (..., 4) with every box of b (..., 4), shape
    a.shape[:-1] + b.shape[:-1]; corner (x1, y1, x2, y2) or center (x, y, w, h) boxes. No gradient:
    MXNet's backward of this op is zero (measured)."""
    a, b = a.detach(), b.detach()
    if center:
        a = torch.cat([a[..., :2] - a[..., 2:] / 2, a[..., :2] + a[..., 2:] / 2], dim=-1)
        b = torch.cat([b[..., :2] - b[..., 2:] / 2, b[..., :2] + b[..., 2:] / 2], dim=-1)
    sa, sb = a.shape[:-1], b.shape[:-1]
    a, b = a.reshape(-1, 1, 4), b.reshape(1, -1, 4)
    iw = (torch.minimum(a[..., 2], b[..., 2]) - torch.maximum(a[..., 0], b[..., 0])).clamp(min=0)
    ih = (torch.minimum(a[..., 3], b[..., 3]) - torch.maximum(a[..., 1], b[..., 1])).clamp(min=0)
    inter = iw * ih
    area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
    area_b = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    union = area_a + area_b - inter
    return torch.where(union > 0, inter / union, torch.zeros_like(inter)).reshape(sa + sb)
'''

INDEX_ARRAY = '''def index_array(x, axes):
    """MXNet _contrib_index_array: each element's index along `axes` (all axes for None),
    int64, shape x.shape + (len(axes),)."""
    axes = tuple(range(x.dim())) if axes is None else axes
    grids = torch.meshgrid(*[torch.arange(n, device=x.device) for n in x.shape], indexing="ij")
    return torch.stack([grids[a] for a in axes], dim=-1)
'''


@op("_contrib_quadratic")
def _quadratic(a, attrs, node):
    """a * x ** 2 + b * x + c"""
    qa, qb, qc = (float(parse_attr(attrs.get(k), 0.0)) for k in ("a", "b", "c"))
    x = a[0].p()
    if not x.isidentifier():
        raise NeedsName()
    return Expr(f"{qa!r} * {x} * {x} + {qb!r} * {x} + {qc!r}", atomic=False)


@op("_contrib_gradientmultiplier")
def _grad_mult(a, attrs, node):
    """GradMultiplier.apply(x, scalar) (identity, gradient times scalar)"""
    return Expr(f"GradMultiplier.apply({a[0].text}, {float(parse_attr(attrs.get('scalar'), 1.0))!r})",
                helpers=(GRAD_MULT,))


def _ste(fn: str, helpers=()):
    """x + (fn(x) - x).detach(): the forward fn(x), the gradient passed straight through"""
    def f(a, attrs, node):
        x = a[0].p()
        if not x.isidentifier():
            raise NeedsName()
        return Expr(f"{x} + ({fn}({x}) - {x}).detach()", atomic=False, helpers=helpers)
    f.torch_form = f"x + ({fn}(x) - x).detach() (straight-through)"
    return f


op("_contrib_round_ste", "_sparse__contrib_round_ste")(_ste("round_half_away", (ROUND,)))
op("_contrib_sign_ste", "_sparse__contrib_sign_ste")(_ste("torch.sign"))


@op("_contrib_index_array")
def _index_array(a, attrs, node):
    """index_array(x, axes) (int64 indices)"""
    axes = parse_attr(attrs.get("axes"))
    if axes is not None:
        axes = (int(axes),) if isinstance(axes, int) else tuple(int(v) % ndim(node) for v in axes)
    return Expr(f"index_array({a[0].text}, {axes!r})", helpers=(INDEX_ARRAY,))


@op("_contrib_box_iou")
def _box_iou(a, attrs, node):
    """box_iou(a, b, center) (pairwise IoU, no gradient as MXNet)"""
    fmt = attrs.get("format", "corner")
    if fmt not in ("corner", "center"):
        raise unsupported(node, f"box_iou(format={fmt!r})")
    return Expr(f"box_iou({a[0].text}, {a[1].text}, {fmt == 'center'})", helpers=(BOX_IOU,))


MULTIBOX_PRIOR = '''def multibox_prior(x, sizes, ratios, steps, offsets, clip):
    """MXNet _contrib_MultiBoxPrior: anchors (1, H*W*(len(sizes)+len(ratios)-1), 4) for the feature map
    x (N, C, H, W), corner format in [0, 1], computed in float32 as MXNet does."""
    f = torch.float32
    h, w = x.shape[2], x.shape[3]
    sy = torch.tensor(steps[0], dtype=f) if steps[0] > 0 else 1 / torch.tensor(h, dtype=f)
    sx = torch.tensor(steps[1], dtype=f) if steps[1] > 0 else 1 / torch.tensor(w, dtype=f)
    cy = (torch.arange(h, dtype=f) + torch.tensor(offsets[0], dtype=f)) * sy
    cx = (torch.arange(w, dtype=f) + torch.tensor(offsets[1], dtype=f)) * sx
    cy, cx = torch.meshgrid(cy, cx, indexing="ij")
    halves = [(torch.tensor(s, dtype=f) * h / w / 2, torch.tensor(s, dtype=f) / 2) for s in sizes]
    for r in ratios[1:]:
        q = torch.sqrt(torch.tensor(r, dtype=f))
        s = torch.tensor(sizes[0], dtype=f)
        halves.append((s * h / w * q / 2, s / q / 2))
    boxes = [torch.stack([cx - hw, cy - hh, cx + hw, cy + hh], dim=-1) for hw, hh in halves]
    out = torch.stack(boxes, dim=2).reshape(1, -1, 4)
    return (out.clamp(0, 1) if clip else out).to(x.device)
'''


@op("_contrib_MultiBoxPrior", "_npx_multibox_prior", float32_only=True)
def _multibox_prior(a, attrs, node):
    """multibox_prior(x, sizes, ratios, steps, offsets, clip) (MXNet's float32 anchors, no gradient)"""
    def floats(key, default):
        v = parse_attr(attrs.get(key), default)
        return tuple(float(t) for t in ((v,) if isinstance(v, (int, float)) else v))
    sizes, ratios = floats("sizes", (1.0,)), floats("ratios", (1.0,))
    steps, offsets = floats("steps", (-1.0, -1.0)), floats("offsets", (0.5, 0.5))
    clip = bool(parse_attr(attrs.get("clip"), False))
    return Expr(f"multibox_prior({a[0].text}, {sizes!r}, {ratios!r}, {steps!r}, {offsets!r}, {clip})",
                helpers=(MULTIBOX_PRIOR,))
