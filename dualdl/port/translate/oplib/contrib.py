"""MXNet ops real Gluon projects use beyond arithmetic (gluoncv's SE/ResNeSt/PSPNet/FCN heads,
gluonnlp's attention cells, YOLOv3, style transfer...) -> torch, each measured against MXNet.

Where MXNet computes differently from the obvious torch call, the generated code says so:
``BilinearResize2D`` computes its sampling coordinates and weights in float32 even on float64
data (``F.interpolate`` differs by up to 2e-6 in float64), attributes MXNet stores as float32 (eps, slope) are written as the float32 value it computes
with (L2Normalization with eps 1e-3 otherwise differs by 8e-9), ``depth_to_space`` orders channels
as (block, block, C) where ``F.pixel_shuffle`` takes (C, block, block), ``L2Normalization``
adds eps inside the square root (``F.normalize`` clamps the norm), ``topk`` returns indices as
float32 by default. Ops that cannot be written exactly are refused with what to do.
"""
from __future__ import annotations

from .base import DEVICE, Expr, NeedsName, f32, ndim, num, op, parse_attr, refuse, unsupported

__all__ = ["BILINEAR", "SPACE_DEPTH"]


def _adaptive_avg(a, attrs, node):
    size = parse_attr(attrs.get("output_size"), ()) or ()
    size = (size, size) if isinstance(size, int) else tuple(size)
    if not size:
        size = (1, 1)                       # MXNet: an empty output_size means 1x1
    elif len(size) == 1:
        size = (size[0], size[0])
    # MXNet's bins are torch's: [floor(i*H/h), ceil((i+1)*H/h)) (measured equal to 6e-17)
    return Expr(f"F.adaptive_avg_pool2d({a[0].text}, {size if size[0] != size[1] else size[0]})")


BILINEAR = '''def bilinear_resize(x, height, width, align_corners):
    """MXNet _contrib_BilinearResize2D: the sampling coordinates and their weights are computed in
    float32 as MXNet does, also on float64 data (F.interpolate would differ by up to 2e-6)."""
    in_h, in_w = x.shape[2], x.shape[3]
    if (in_h, in_w) == (height, width):
        return x

    def axis(n_in, n_out):
        one = torch.ones((), dtype=torch.float32)
        if n_out > 1:
            scale = (one * (n_in - 1)) / (n_out - 1) if align_corners else (one * n_in) / n_out
        else:
            scale = one * 0
        dst = torch.arange(n_out, dtype=torch.float32)
        if align_corners:
            src = scale * dst
        else:   # computed in double, stored as float, negative positions clamped to 0
            src = (scale.double() * (dst.double() + 0.5) - 0.5).float().clamp(min=0)
        lo = src.long()
        hi = torch.where(lo < n_in - 1, lo + 1, lo)
        w1 = (src - lo.float()).to(x.dtype)
        return lo.to(x.device), hi.to(x.device), (1 - w1).to(x.device), w1.to(x.device)

    h0, h1, a0, a1 = axis(in_h, height)
    w0, w1, b0, b1 = axis(in_w, width)
    top, bottom = x[:, :, h0], x[:, :, h1]
    a0, a1 = a0[:, None], a1[:, None]
    return a0 * (b0 * top[..., w0] + b1 * top[..., w1]) + a1 * (b0 * bottom[..., w0] + b1 * bottom[..., w1])


def resize_scaled(n, scale):
    """MXNet's output size for a scale: int(float32(scale) * n), the product in float32."""
    return int(torch.tensor(scale, dtype=torch.float32) * n)


def resize_odd_scaled(n, scale):
    """MXNet's mode 'odd_scale': an odd size n becomes (n - 1) * scale + 1."""
    return resize_scaled(n, scale) if n % 2 == 0 else resize_scaled(n - 1, scale) + 1
'''


def _bilinear(a, attrs, node):
    mode = attrs.get("mode", "size")
    align = bool(parse_attr(attrs.get("align_corners"), True))
    x = a[0].p()
    sh, sw = parse_attr(attrs.get("scale_height")), parse_attr(attrs.get("scale_width"))
    if mode == "like":
        like = a[1].p()
        if not like.isidentifier():
            raise NeedsName()
        size = f"{like}.shape[2], {like}.shape[3]"
    elif mode == "size":
        if sh is not None:     # MXNet 1.9.1 tests scale_height for both axes
            if sw is None:
                raise unsupported(node, "_contrib_BilinearResize2D(scale_height=..., no scale_width)")
            if not x.isidentifier():
                raise NeedsName()
            size = f"resize_scaled({x}.shape[2], {float(sh)!r}), resize_scaled({x}.shape[3], {float(sw)!r})"
        else:
            size = f"{int(attrs.get('height', 1))}, {int(attrs.get('width', 1))}"
    elif mode == "odd_scale":
        if sh is None or sw is None:
            raise unsupported(node, "_contrib_BilinearResize2D(mode='odd_scale') without both scales")
        if not x.isidentifier():
            raise NeedsName()
        size = f"resize_odd_scaled({x}.shape[2], {float(sh)!r}), resize_odd_scaled({x}.shape[3], {float(sw)!r})"
    elif mode in ("to_even_down", "to_even_up", "to_odd_down", "to_odd_up"):
        if not x.isidentifier():
            raise NeedsName()
        even = mode.startswith("to_even")
        delta = "- 1" if mode.endswith("down") else "+ 1"
        keep = "== 0" if even else "== 1"
        size = ", ".join(f"{x}.shape[{i}] if {x}.shape[{i}] % 2 {keep} else {x}.shape[{i}] {delta}" for i in (2, 3))
    else:
        raise unsupported(node, f"_contrib_BilinearResize2D(mode={mode!r})")
    return Expr(f"bilinear_resize({a[0].text}, {size}, align_corners={align})", helpers=(BILINEAR,))


def _div_sqrt_dim(a, attrs, node):
    x = a[0].p()
    if not x.isidentifier():
        raise NeedsName()
    # MXNet divides by DType(sqrt(double(d))); torch casts the Python scalar to the tensor's dtype
    return Expr(f"{x} / {x}.shape[-1] ** 0.5", atomic=False)


def _reshape_like(a, attrs, node):
    lb, le = parse_attr(attrs.get("lhs_begin")), parse_attr(attrs.get("lhs_end"))
    rb, re_ = parse_attr(attrs.get("rhs_begin")), parse_attr(attrs.get("rhs_end"))
    x, y = a[0].p(), a[1].p()
    if lb is None and le is None and rb is None and re_ is None:
        return Expr(f"{x}.reshape({y}.shape)")
    if not x.isidentifier():
        raise NeedsName()

    def sl(b, e):
        return f"{'' if b is None else b}:{'' if e is None else e}"
    parts = []
    if lb not in (None, 0):
        parts.append(f"*{x}.shape[:{lb}]")
    parts.append(f"*{y}.shape[{sl(rb, re_)}]")
    if le is not None:
        parts.append(f"*{x}.shape[{le}:]")
    return Expr(f"{x}.reshape({', '.join(parts)})")


def _pad(a, attrs, node):
    mode = attrs.get("mode", "constant")
    pw = [int(v) for v in parse_attr(attrs.get("pad_width"), ())]
    if len(pw) < 4 or any(pw[:4]):
        raise unsupported(node, f"Pad(pad_width={tuple(pw)}) padding the batch or channel axis")
    # MXNet: (before, after) per axis from the first; torch: from the last axis backwards
    pairs = [(pw[i], pw[i + 1]) for i in range(4, len(pw), 2)]
    order = tuple(v for b, e in reversed(pairs) for v in (b, e))
    if mode == "constant":
        value = float(parse_attr(attrs.get("constant_value"), 0.0))
        return Expr(f"F.pad({a[0].text}, {order}" + (f", value={num(repr(value))})" if value else ")"))
    torch_mode = {"edge": "replicate", "reflect": "reflect"}.get(mode)
    if torch_mode is None:
        raise unsupported(node, f"Pad(mode={mode!r})")
    return Expr(f"F.pad({a[0].text}, {order}, mode={torch_mode!r})")


def _arange(a, attrs, node):
    if parse_attr(attrs.get("infer_range"), False):
        raise unsupported(node, "_arange(infer_range=True)")
    start, step = float(parse_attr(attrs.get("start"), 0.0)), float(parse_attr(attrs.get("step"), 1.0))
    if parse_attr(attrs.get("stop")) is None:     # arange(6): MXNet's start is then the stop
        start = 0.0
    repeat = int(parse_attr(attrs.get("repeat"), 1))
    dtype = attrs.get("dtype", "float32")
    out = node.out_shapes[0] if node.out_shapes else None
    if not out:
        raise unsupported(node, "_arange of unknown length")
    n = out[0] // repeat
    # MXNet: DType(start) + i * DType(step), in the op's dtype (torch.arange accumulates in double)
    body = f"torch.arange({n}, dtype=torch.{dtype}, device={DEVICE})"
    if step != 1.0:
        body = f"{body} * {num(repr(step))}"
    if start != 0.0:
        body = f"{body} + {num(repr(start))}"
    if repeat != 1:
        body = f"({body}).repeat_interleave({repeat})"
    return Expr(body, atomic=step == 1.0 and start == 0.0)


def _instance_norm(a, attrs, node):
    eps = f32(attrs.get("eps", "0.001"))     # a float32 attribute in MXNet
    return Expr(f"F.instance_norm({a[0].text}, weight={a[1].text}, bias={a[2].text}, eps={eps})")


SPACE_DEPTH = '''def depth_to_space(x, b):
    """MXNet depth_to_space: channels split as (b, b, C) (F.pixel_shuffle takes (C, b, b))."""
    n, c, h, w = x.shape
    return x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2).reshape(n, c // (b * b), h * b, w * b)


def space_to_depth(x, b):
    """MXNet space_to_depth: output channels ordered (b, b, C) (F.pixel_unshuffle gives (C, b, b))."""
    n, c, h, w = x.shape
    return x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4).reshape(n, c * b * b, h // b, w // b)
'''


def _space_depth(name):
    def fn(a, attrs, node):
        return Expr(f"{name}({a[0].text}, {int(attrs['block_size'])})", helpers=(SPACE_DEPTH,))
    return fn


def _shape_array(a, attrs, node):
    x = a[0].p()
    if not x.isidentifier():
        raise NeedsName()
    return Expr(f"torch.tensor({x}.shape, dtype=torch.int64, device={x}.device)")


def _size_array(a, attrs, node):
    x = a[0].p()
    if not x.isidentifier():
        raise NeedsName()
    return Expr(f"torch.tensor([{x}.numel()], dtype=torch.int64, device={x}.device)")


TOPK_BOTH = '''def topk_both(x, k, dim, largest, dtype):
    """MXNet topk(ret_typ='both'): [values, indices], the indices in `dtype` (float32 by default)."""
    values, indices = torch.topk(x, k, dim=dim, largest=largest)
    return values, indices.to(dtype)
'''


def _topk(a, attrs, node):
    axis = parse_attr(attrs.get("axis"), -1)
    k = int(parse_attr(attrs.get("k"), 1))
    ret = attrs.get("ret_typ", "indices")
    asc = bool(parse_attr(attrs.get("is_ascend"), False))
    dtype = attrs.get("dtype", "float32")
    x = a[0].text
    if k < 1:     # MXNet: k < 1 sorts the whole axis
        shape = node.in_shapes[0] if node.in_shapes else None
        if not shape:
            raise unsupported(node, "topk(k < 1) on an input of unknown shape")
        k = _prod(shape) if axis is None else shape[int(axis)]
    if axis is None:
        x, axis = f"{a[0].p()}.reshape(-1)", 0
    call = f"torch.topk({x}, {k}, dim={int(axis)}, largest={not asc})"
    if ret == "value":
        return Expr(f"{call}[0]")
    if ret == "indices":   # MXNet returns indices in `dtype`, float32 unless asked otherwise
        return Expr(f"{call}[1].to(torch.{dtype})")
    if ret == "both":
        return Expr(f"topk_both({x}, {k}, {int(axis)}, {not asc}, torch.{dtype})", helpers=(TOPK_BOTH,))
    if ret == "mask":
        if parse_attr(attrs.get("axis"), -1) is None:
            raise unsupported(node, "topk(ret_typ='mask', axis=None)")
        src = a[0].p()
        if not src.isidentifier():
            raise NeedsName()
        return Expr(f"torch.zeros_like({src}).scatter({int(axis)}, {call}[1], 1.0)")
    raise unsupported(node, f"topk(ret_typ={ret!r})")


def _prod(shape) -> int:
    out = 1
    for v in shape:
        out *= int(v)
    return out


def _l2_normalization(a, attrs, node):
    mode = attrs.get("mode", "instance")
    eps = f32(attrs.get("eps", "1e-10"))     # a float32 attribute in MXNet: 1e-3 -> 0.0010000000474974513
    x = a[0].p()
    if not x.isidentifier():
        raise NeedsName()
    nd = ndim(node)
    dims = {"instance": tuple(range(1, nd)), "channel": (1,), "spatial": tuple(range(2, nd))}.get(mode)
    if dims is None:
        raise unsupported(node, f"L2Normalization(mode={mode!r})")
    # MXNet: x / sqrt(sum(x^2) + eps), eps inside the root (F.normalize clamps the norm at eps)
    return Expr(f"{x} / torch.sqrt(({x} * {x}).sum(dim={dims}, keepdim=True) + {eps})", atomic=False)


SEQUENCE_REVERSE = '''def sequence_reverse(x, length):
    """MXNet SequenceReverse with use_sequence_length: x (T, N, ...); the first length[n] steps of
    each sequence n reversed, the steps after them left in place."""
    t = torch.arange(x.shape[0], device=x.device)[:, None]             # (T, 1)
    n = length.to(torch.int64).reshape(1, -1)                           # (1, N)
    index = torch.where(t < n, n - 1 - t, t)                            # (T, N)
    index = index.reshape(index.shape + (1,) * (x.dim() - 2)).expand_as(x)
    return torch.gather(x, 0, index)
'''


def _sequence_reverse(a, attrs, node):
    if int(parse_attr(attrs.get("axis"), 0)) != 0:
        raise unsupported(node, "SequenceReverse(axis != 0)")
    if not parse_attr(attrs.get("use_sequence_length"), False):
        return Expr(f"torch.flip({a[0].text}, [0])")
    return Expr(f"sequence_reverse({a[0].text}, {a[1].text})", helpers=(SEQUENCE_REVERSE,))


def _slice_like(a, attrs, node):
    axes = parse_attr(attrs.get("axes"), ()) or ()
    axes = [axes] if isinstance(axes, int) else list(axes)
    y = a[1].p()
    if not y.isidentifier():
        raise NeedsName()
    nd = ndim(node)
    axes = sorted({ax % nd for ax in axes}) if axes else list(range(nd))
    parts = [f":{y}.shape[{i}]" if i in axes else ":" for i in range(max(axes) + 1)]
    return Expr(f"{a[0].p()}[{', '.join(parts)}]")


def _broadcast_like(a, attrs, node):
    la, ra = parse_attr(attrs.get("lhs_axes")), parse_attr(attrs.get("rhs_axes"))
    x, y = a[0].p(), a[1].p()
    if la is None and ra is None:
        return Expr(f"{x}.expand_as({y})")
    la = [la] if isinstance(la, int) else list(la or ())
    ra = [ra] if isinstance(ra, int) else list(ra or ())
    if len(la) != len(ra):
        raise unsupported(node, f"broadcast_like(lhs_axes={tuple(la)}, rhs_axes={tuple(ra)})")
    if not y.isidentifier():
        raise NeedsName()
    nd = ndim(node)
    target = {l % nd: f"{y}.shape[{r}]" for l, r in zip(la, ra)}
    return Expr(f"{x}.expand({', '.join(target.get(i, '-1') for i in range(nd))})")


def _upsampling(a, attrs, node):
    kind, n = attrs.get("sample_type", "nearest"), int(parse_attr(attrs.get("num_args"), 1))
    if kind != "nearest" or n != 1 or len(a) != 1:
        raise unsupported(node, f"UpSampling(sample_type={kind!r}, num_args={n})")
    s = int(attrs["scale"])
    # MXNet repeats each pixel s x s times: the same as torch's nearest for an integer scale, written exactly
    return Expr(f"{a[0].p()}.repeat_interleave({s}, dim=2).repeat_interleave({s}, dim=3)")


_FOREACH = ("its body is a subgraph of the symbol (contrib.foreach / while_loop / cond) that the "
            "translator does not unroll; write the loop in the block's forward as a Python loop over "
            "the time axis (it then traces op by op), or register a translation")
refuse(_FOREACH, "_foreach", "_while_loop", "_cond")

op("_contrib_AdaptiveAvgPooling2D", torch="F.adaptive_avg_pool2d(x, output_size)")(_adaptive_avg)
op("_contrib_BilinearResize2D", torch="bilinear_resize(x, h, w, align_corners) (MXNet's float32 coordinates)")(_bilinear)
op("_contrib_div_sqrt_dim", torch="x / x.shape[-1] ** 0.5")(_div_sqrt_dim)
op("reshape_like", "_npx_reshape_like", torch="x.reshape(y.shape[...])")(_reshape_like)
op("Pad", "pad", torch="F.pad(x, pads, mode) (constant, replicate, reflect)")(_pad)
op("_arange", torch="torch.arange(n, dtype) * step + start")(_arange)
op("InstanceNorm", float32_only=True, torch="F.instance_norm(x, weight, bias, eps)")(_instance_norm)
op("depth_to_space", torch="depth_to_space(x, b) (MXNet's (b, b, C) channel order)")(_space_depth("depth_to_space"))
op("space_to_depth", torch="space_to_depth(x, b) (MXNet's (b, b, C) channel order)")(_space_depth("space_to_depth"))
op("shape_array", "_npx_shape_array", torch="torch.tensor(x.shape, dtype=torch.int64)")(_shape_array)
op("size_array", torch="torch.tensor([x.numel()], dtype=torch.int64)")(_size_array)
op("topk", "_npx_topk", torch="torch.topk(x, k, dim, largest) (indices in dtype, float32 by default)",
   n_outputs=lambda attrs: 2 if attrs.get("ret_typ") == "both" else 1)(_topk)
op("L2Normalization", torch="x / torch.sqrt(sum(x * x) + eps)")(_l2_normalization)
op("SequenceReverse", torch="torch.flip(x, [0]) / sequence_reverse(x, length)")(_sequence_reverse)
op("slice_like", torch="x[:y.shape[0], ...]")(_slice_like)
op("broadcast_like", torch="x.expand_as(y) / x.expand(sizes of y)")(_broadcast_like)
op("UpSampling", torch="x.repeat_interleave(s, 2).repeat_interleave(s, 3) (nearest)")(_upsampling)
