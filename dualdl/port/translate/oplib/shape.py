"""Shape ops (legacy ``Reshape`` codes, ``transpose``, slicing, ``split``, ``concat``, broadcasting,
``Cast``, copies) -> torch tensor methods.

Conventions that differ: MXNet ``Reshape`` codes (0 copies a dimension, -2 the rest, -3 merges two,
-4 splits one), ``Flatten`` keeps axis 0, ``transpose()`` without axes reverses them, ``split`` with
one output returns the part itself, ``SliceChannel(squeeze_axis=True)`` drops the split axis."""
from __future__ import annotations

from .arith import func
from .base import Expr, NeedsName, ndim, op, parse_attr, unsupported

__all__ = ["reshape_codes", "LEGACY_CODES", "NPX_CODES"]


def _concat(a, attrs, node):
    dim = int(attrs.get("dim", 1))
    return Expr(f"torch.cat([{', '.join(e.text for e in a)}], dim={dim})")


def _stack(a, attrs, node):
    return Expr(f"torch.stack([{', '.join(e.text for e in a)}], dim={int(attrs.get('axis', 0))})")


def _broadcast_axis(a, attrs, node):
    axes, sizes = parse_attr(attrs.get("axis"), ()), parse_attr(attrs.get("size"), ())
    axes = [axes] if isinstance(axes, int) else list(axes)
    sizes = [sizes] if isinstance(sizes, int) else list(sizes)
    nd = ndim(node)
    target = {ax % nd: sz for ax, sz in zip(axes, sizes)}
    return Expr(f"{a[0].p()}.expand({', '.join(str(target.get(i, -1)) for i in range(nd))})")


def _flatten(a, attrs, node):
    return Expr(f"torch.flatten({a[0].text}, 1)")


#: MXNet's reshape codes by meaning: legacy Reshape, and npx.reshape (whose codes differ)
LEGACY_CODES = {0: "copy", -2: "rest", -3: "merge", -4: "split"}
NPX_CODES = {-2: "copy", -3: "drop", -4: "rest", -5: "merge", -6: "split"}


def reshape_codes(x: str, codes, nd: int, meaning, node) -> list:
    """The torch sizes of an MXNet reshape of ``x`` (rank ``nd``): ``codes`` resolved by ``meaning``
    (copy a dimension, the rest, merge two, split one, drop a size-1 axis); -1 and sizes as they are."""
    out, i, j = [], 0, 0
    while j < len(codes):
        c = codes[j]
        what = "size" if c > 0 or c == -1 or (c == 0 and 0 not in meaning) else meaning.get(c)
        if what == "size":
            out.append(str(c)); i += 1
        elif what == "copy":
            out.append(f"{x}.shape[{i}]"); i += 1
        elif what == "drop":
            i += 1
        elif what == "rest":
            out.append(f"*{x}.shape[{i}:]"); i = nd
        elif what == "merge":
            out.append(f"{x}.shape[{i}] * {x}.shape[{i + 1}]"); i += 2
        elif what == "split":
            d1, d2 = codes[j + 1], codes[j + 2]
            out += [str(d1) if d1 != -1 else f"{x}.shape[{i}] // {d2}",
                    str(d2) if d2 != -1 else f"{x}.shape[{i}] // {d1}"]
            i += 1; j += 2
        else:
            raise unsupported(node, f"{node.op} code {c}")
        j += 1
    return out


def _reshape(a, attrs, node):
    codes = parse_attr(attrs.get("shape"), ())
    codes = [codes] if isinstance(codes, int) else list(codes)
    x = a[0].p()
    if parse_attr(attrs.get("reverse"), False):   # codes matched from the right
        if any(c < -1 for c in codes):
            raise unsupported(node, f"Reshape(shape={tuple(codes)}, reverse=True)")
        nd = ndim(node)
        if 0 in codes and not x.isidentifier():
            raise NeedsName()
        k = len(codes)
        out = [f"{x}.shape[{nd - k + i}]" if c == 0 else str(c) for i, c in enumerate(codes)]
        return Expr(f"{x}.reshape({', '.join(out)})")
    k = next((i for i, c in enumerate(codes) if c != 0), len(codes))
    if codes[k:] == [-1] and k > 0:          # (0, ..., 0, -1): keep k axes, merge the rest
        return Expr(f"{x}.flatten({k})")
    in_ndim = ndim(node)
    if any(c in (0, -2, -3, -4) for c in codes) and not x.isidentifier():
        raise NeedsName()
    return Expr(f"{x}.reshape({', '.join(reshape_codes(x, codes, in_ndim, LEGACY_CODES, node))})")


def _transpose(a, attrs, node):
    axes = parse_attr(attrs.get("axes"), ())
    if not axes:
        axes = tuple(reversed(range(ndim(node))))
    return Expr(f"{a[0].p()}.permute({', '.join(str(int(v)) for v in axes)})")


def _swap(a, attrs, node):
    return Expr(f"{a[0].p()}.transpose({int(attrs.get('dim1', 0))}, {int(attrs.get('dim2', 0))})")


def _expand(a, attrs, node):
    return Expr(f"{a[0].p()}.unsqueeze({int(attrs['axis'])})")


def _squeeze(a, attrs, node):
    axis = parse_attr(attrs.get("axis"))
    if axis is None:
        return Expr(f"{a[0].p()}.squeeze()")
    return Expr(f"{a[0].p()}.squeeze({axis})")


def _index(node, axis, sl):
    nd = ndim(node)
    axis = axis % nd
    return "[" + ", ".join([":"] * axis + [sl]) + "]"


def _slice_axis(a, attrs, node):
    begin, end = parse_attr(attrs.get("begin")), parse_attr(attrs.get("end"))
    sl = f"{'' if begin in (None, 0) else begin}:{'' if end is None else end}"
    return Expr(f"{a[0].p()}{_index(node, int(attrs['axis']), sl)}")


def _seq(v) -> list:
    """A slice attribute as a list: MXNet's numpy symbol ``y[:1]`` stores end=1, step=None."""
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _slice(a, attrs, node):
    begin, end = _seq(parse_attr(attrs.get("begin"))), _seq(parse_attr(attrs.get("end")))
    step = _seq(parse_attr(attrs.get("step"), ()) or ())
    parts = []
    for k, (b, e) in enumerate(zip(begin, end)):
        s = step[k] if k < len(step) else None
        parts.append(f"{'' if b in (None, 0) else b}:{'' if e is None else e}" + ("" if s in (None, 1) else f":{s}"))
    return Expr(f"{a[0].p()}[{', '.join(parts)}]")


def _split(a, attrs, node):
    n, axis = int(attrs["num_outputs"]), int(attrs.get("axis", 1))
    if n == 1:      # MXNet returns the one part itself, not a list (gluoncv Faster R-CNN at batch 1)
        squeeze = parse_attr(attrs.get("squeeze_axis"), False)
        return Expr(f"{a[0].p()}.squeeze({axis})" if squeeze else a[0].text, atomic=not squeeze or a[0].atomic)
    if parse_attr(attrs.get("squeeze_axis"), False):
        return Expr(f"torch.unbind({a[0].text}, dim={axis})")
    return Expr(f"torch.chunk({a[0].text}, {n}, dim={axis})")


def _cast(a, attrs, node):
    return Expr(f"{a[0].p()}.to(torch.{attrs['dtype']})")


def _broadcast_to(a, attrs, node):
    """x.expand(shape) (legacy: 0 keeps the input's size)"""
    shape = parse_attr(attrs.get("shape"), ())
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return Expr(f"{a[0].p()}.expand({', '.join(str(int(s)) if s != 0 else '-1' for s in shape)})")


def _tile(a, attrs, node):
    """x.tile(reps)"""
    reps = parse_attr(attrs.get("reps"), ())
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    return Expr(f"{a[0].p()}.tile({tuple(int(r) for r in reps)!r})")


def _repeat(a, attrs, node):
    """torch.repeat_interleave(x, repeats, dim) (flattened first without an axis)"""
    r = int(parse_attr(attrs.get("repeats")))
    axis = parse_attr(attrs.get("axis"))
    if axis is None:
        return Expr(f"torch.repeat_interleave({a[0].p()}.flatten(), {r})")
    return Expr(f"torch.repeat_interleave({a[0].text}, {r}, dim={int(axis)})")


def _reverse(a, attrs, node):
    """torch.flip(x, axes)"""
    axis = parse_attr(attrs.get("axis"), 0)
    axes = [axis] if isinstance(axis, int) else [int(v) for v in axis]
    return Expr(f"torch.flip({a[0].text}, {axes})")


def _add_n(a, attrs, node):
    """x0 + x1 + ... (MXNet ElementWiseSum / add_n)"""
    return Expr(" + ".join(e.p() for e in a), atomic=len(a) == 1)


def _where(a, attrs, node):
    """torch.where(cond, x, y) (a 1-d condition selects rows, as MXNet's legacy where)"""
    c = a[0].p()
    cs = node.in_shapes[0] if node.in_shapes else None
    xs = node.in_shapes[1] if len(node.in_shapes) > 1 else None
    if cs is not None and xs is not None and len(cs) == 1 and len(xs) > 1:
        c = f"{c}.reshape(-1{', 1' * (len(xs) - 1)})"
    return Expr(f"torch.where({c}.bool(), {a[1].text}, {a[2].text})")


TAKE = '''def take(x, idx, axis, wrap):
    """MXNet take: indices (floats allowed) clipped into range, or wrapped (mode='wrap');
    the result has shape x.shape[:axis] + idx.shape + x.shape[axis + 1:]."""
    n = x.shape[axis]
    i = idx.long()
    i = torch.remainder(i, n) if wrap else i.clamp(0, n - 1)
    out = torch.index_select(x, axis, i.reshape(-1))
    return out.reshape(x.shape[:axis] + idx.shape + x.shape[axis + 1:])
'''


def _take(a, attrs, node):
    """take(x, idx, axis, wrap) (torch.index_select with MXNet's clip/wrap of the indices)"""
    mode = attrs.get("mode", "clip")
    if mode not in ("clip", "wrap"):
        raise unsupported(node, f"take(mode={mode!r}) (an out-of-range index raises in MXNet)")
    axis = int(parse_attr(attrs.get("axis"), 0)) % ndim(node)
    return Expr(f"take({a[0].text}, {a[1].text}, {axis}, {mode == 'wrap'})", helpers=(TAKE,))


PICK = '''def pick(x, idx, axis, keepdims, wrap):
    """MXNet pick: x's element at index idx along `axis` (indices clipped, or wrapped)."""
    n = x.shape[axis]
    i = idx.long()
    i = torch.remainder(i, n) if wrap else i.clamp(0, n - 1)
    out = torch.gather(x, axis, i.reshape(x.shape[:axis] + (1,) + x.shape[axis + 1:]))
    return out if keepdims else out.squeeze(axis)
'''


def _pick(a, attrs, node):
    """pick(x, idx, axis, keepdims, wrap) (torch.gather)"""
    axis = parse_attr(attrs.get("axis"), -1)
    if axis is None:
        raise unsupported(node, "pick(axis=None)")
    mode = attrs.get("mode", "clip")
    if mode not in ("clip", "wrap"):
        raise unsupported(node, f"pick(mode={mode!r})")
    keep = bool(parse_attr(attrs.get("keepdims"), False))
    return Expr(f"pick({a[0].text}, {a[1].text}, {int(axis) % ndim(node)}, {keep}, {mode == 'wrap'})", helpers=(PICK,))


def _batch_take(a, attrs, node):
    """x[arange(N), idx] (indices clipped)"""
    x = a[0].p()
    return Expr(f"torch.gather({x}, 1, {a[1].p()}.long().clamp(0, {x}.shape[1] - 1).reshape(-1, 1)).reshape(-1)")


def _diag(a, attrs, node):
    """torch.diagonal(x, k, axis1, axis2) (2-d and more), torch.diag(x, k) for a vector"""
    k = int(parse_attr(attrs.get("k"), 0))
    if ndim(node) == 1:
        return Expr(f"torch.diag({a[0].text}, {k})")
    a1, a2 = int(parse_attr(attrs.get("axis1"), 0)), int(parse_attr(attrs.get("axis2"), 1))
    return Expr(f"torch.diagonal({a[0].text}, {k}, {a1}, {a2})")


def _like(fill: str):
    def fn(a, attrs, node):
        return Expr(f"torch.{fill}_like({a[0].text})")
    fn.torch_form = f"torch.{fill}_like(x)"
    return fn


op("Concat", "concat", "_sparse_concat", torch="torch.cat(xs, dim)")(_concat)
op("stack", "_npi_stack", torch="torch.stack(xs, dim)")(_stack)
op("broadcast_axis", "broadcast_axes", torch="x.expand(sizes)")(_broadcast_axis)
op("broadcast_to")(_broadcast_to)
op("Flatten", "flatten", "_npx_batch_flatten", torch="torch.flatten(x, 1)")(_flatten)
op("Reshape", "reshape", torch="x.reshape(MXNet's codes resolved)")(_reshape)
op("transpose", "_np_transpose", torch="x.permute(axes)")(_transpose)
op("SwapAxis", "swapaxes", "_npi_swapaxes", torch="x.transpose(dim1, dim2)")(_swap)
op("expand_dims", "_npi_expand_dims", torch="x.unsqueeze(axis)")(_expand)
op("squeeze", "_np_squeeze", torch="x.squeeze(axis)")(_squeeze)
op("slice_axis", torch="x[..., begin:end]")(_slice_axis)
op("slice", "crop", "_npi_slice", "_npx_slice", "_sparse_slice", torch="x[begin:end:step, ...]")(_slice)
op("SliceChannel", "split", torch="torch.chunk(x, n, dim) / torch.unbind",
   n_outputs=lambda attrs: int(attrs["num_outputs"]))(_split)
op("Cast", "cast", "_npi_cast", "_npx_cast", torch="x.to(dtype)")(_cast)
op("amp_cast", float32_only=True, torch="x.to(dtype)")(_cast)   # MKLDNN refuses float64 input
op("tile", "_npi_tile")(_tile)
op("repeat", "_np_repeat")(_repeat)
op("reverse", "flip")(_reverse)
op("_npi_flip")(_reverse)
op("ElementWiseSum", "add_n", "_sparse_ElementWiseSum", "_sparse_add_n")(_add_n)
op("where", "_sparse_where")(_where)
op("take", "_npi_take")(_take)
op("pick", "_npx_pick", "choose_element_0index")(_pick)
op("batch_take")(_batch_take)
op("diag", "_np_diag")(_diag)
op("zeros_like", "_sparse_zeros_like")(_like("zeros"))
op("ones_like")(_like("ones"))
op("_copy", "identity", "_np_copy", torch="x (a copy: the same tensor)")(func("{}"))
op("BlockGrad", "stop_gradient", "_sparse_stop_gradient")(func("{}.detach()"))


@op("Crop", float32_only=True)
def _crop(a, attrs, node):
    """x[:, :, y:y + h, x:x + w] (h_w, or the second input's size; offset, or centred)"""
    if int(parse_attr(attrs.get("num_args"), 1)) == 2:
        like = node.in_shapes[1] if len(node.in_shapes) > 1 else None
        if like is None:
            raise unsupported(node, "Crop like an input of unknown shape")
        h, w = like[2], like[3]
    else:
        h, w = parse_attr(attrs.get("h_w"))
    shape = node.in_shapes[0] if node.in_shapes else None
    if shape is None:
        raise unsupported(node, "Crop of an input of unknown shape")
    if parse_attr(attrs.get("center_crop"), False):
        oy, ox = (shape[2] - h) // 2, (shape[3] - w) // 2
    else:
        oy, ox = parse_attr(attrs.get("offset"), (0, 0))
    return Expr(f"{a[0].p()}[:, :, {int(oy)}:{int(oy) + int(h)}, {int(ox)}:{int(ox) + int(w)}]")


@op("fill_element_0index", float32_only=True)
def _fill_element(a, attrs, node):
    """lhs.scatter(1, rhs[:, None], mhs[:, None]) (lhs[i, rhs[i]] = mhs[i])"""
    return Expr(f"{a[0].p()}.scatter(1, {a[2].p()}.long().reshape(-1, 1), {a[1].p()}.reshape(-1, 1))")


@op("_onehot_encode", float32_only=True)
def _onehot_encode(a, attrs, node):
    """F.one_hot(indices.long(), out.shape[1]).to(out.dtype)"""
    out = a[1].p()
    return Expr(f"F.one_hot({a[0].p()}.long(), {out}.shape[1]).to({out}.dtype)")


@op("_contrib_allclose")
def _allclose(a, attrs, node):
    """torch.isclose(a, b, rtol, atol, equal_nan).all() as uint8"""
    rtol, atol = float(parse_attr(attrs.get("rtol"), 1e-5)), float(parse_attr(attrs.get("atol"), 1e-8))
    nan = bool(parse_attr(attrs.get("equal_nan"), True))
    return Expr(f"torch.isclose({a[0].text}, {a[1].text}, {rtol!r}, {atol!r}, {nan}).all().to(torch.uint8)")
