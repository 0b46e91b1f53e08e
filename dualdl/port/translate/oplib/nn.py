"""Neural-network ops a block computes itself in ``hybrid_forward`` (activations, softmax, dense,
pooling, dropout, embedding, sequence masks, gluonnlp's interleaved attention) -> torch.functional.

Conventions that differ: attributes MXNet keeps as C++ floats (slope, eps) are written as the
float32 value it computes with; ``softmax(use_length=True)`` leaves out positions past the length
(output 0); ``Dropout(axes=...)`` shares one mask along those axes; MXNet's LeakyReLU computes in
float32 even on float64 data (``float32_internal``: the proof judges it by float32 rounding)."""
from __future__ import annotations

from ..conventions import ACTIVATIONS, full_pool_problem
from ..gate import probability
from ..safe import literal
from .base import Expr, NeedsName, f32, ndim, num, op, parse_attr, refuse, unsupported

__all__ = ["INTERLEAVED"]


_ACT = {k: call.replace("{x}", "{}") for k, (_, call) in ACTIVATIONS.items()}   # one table with the layers'


def _activation(a, attrs, node):
    t = attrs.get("act_type", "relu")
    if t not in _ACT:
        raise unsupported(node, f"Activation(act_type={t!r})")
    return Expr(_ACT[t].format(a[0].text))


def _leaky(a, attrs, node):
    t = attrs.get("act_type", "leaky")
    slope = attrs.get("slope", "0.25")   # a float32 attribute: MXNet's elu with 0.7 computes with 0.699999988
    if t == "leaky":
        return Expr(f"F.leaky_relu({a[0].text}, {f32(slope)})")
    if t == "elu":
        return Expr(f"F.elu({a[0].text}, {f32(slope)})")
    if t == "gelu":
        return Expr(f"F.gelu({a[0].text})")
    if t == "prelu":
        return Expr(f"F.prelu({a[0].text}, {a[1].text})")
    if t == "selu":   # measured: 0.161 where the true derivative is 0.238 (x = -2)
        raise unsupported(node, "LeakyReLU(act_type='selu') (MXNet 1.9.1's selu gradient is scale*(y+alpha) "
                           "for x < 0 where y already holds the scale; torch's is scale*alpha*exp(x))")
    raise unsupported(node, f"LeakyReLU(act_type={t!r})")


def _clip(a, attrs, node):
    lo, hi = float(attrs["a_min"]), float(attrs["a_max"])
    if lo == 0 and hi == 6:
        return Expr(f"F.relu6({a[0].text})")
    if lo == float("-inf") and hi == float("inf"):
        return a[0]
    return Expr(f"torch.clamp({a[0].text}, {num(attrs['a_min'])}, {num(attrs['a_max'])})")


INTERLEAVED = '''def interleaved_qk(qkv, heads):
    """MXNet _contrib_interleaved_matmul_selfatt_qk: qkv (T, N, heads*3*D) interleaved per head
    -> scores (N*heads, T, T) = (q / sqrt(D)) @ k^T."""
    t, n, _ = qkv.shape
    qkv = qkv.reshape(t, n, heads, 3, -1)
    d = qkv.shape[-1]
    q = qkv[:, :, :, 0].permute(1, 2, 0, 3).reshape(n * heads, t, d)
    k = qkv[:, :, :, 1].permute(1, 2, 0, 3).reshape(n * heads, t, d)
    return torch.matmul(q / d ** 0.5, k.transpose(1, 2))


def interleaved_valatt(qkv, att, heads):
    """MXNet _contrib_interleaved_matmul_selfatt_valatt: attention (N*heads, T, T) applied to the
    values of qkv -> (T, N, heads*D)."""
    t, n, _ = qkv.shape
    v = qkv.reshape(t, n, heads, 3, -1)[:, :, :, 2]
    d = v.shape[-1]
    out = torch.matmul(att, v.permute(1, 2, 0, 3).reshape(n * heads, t, d))
    return out.reshape(n, heads, t, d).permute(2, 0, 1, 3).reshape(t, n, heads * d)
'''


ENCDEC = '''def encdec_qk(q, kv, heads):
    """MXNet _contrib_interleaved_matmul_encdec_qk: queries (Tq, N, heads*D), keys_values (Tk, N,
    heads*2*D) interleaved per head (k, v) -> scores (N*heads, Tq, Tk) = (q / sqrt(D)) @ k^T."""
    tq, n, _ = q.shape
    tk = kv.shape[0]
    q = q.reshape(tq, n, heads, -1)
    d = q.shape[-1]
    k = kv.reshape(tk, n, heads, 2, -1)[:, :, :, 0]
    q = q.permute(1, 2, 0, 3).reshape(n * heads, tq, d)
    k = k.permute(1, 2, 0, 3).reshape(n * heads, tk, d)
    return torch.matmul(q / d ** 0.5, k.transpose(1, 2))


def encdec_valatt(kv, att, heads):
    """MXNet _contrib_interleaved_matmul_encdec_valatt: attention (N*heads, Tq, Tk) applied to the
    values of keys_values (Tk, N, heads*2*D) -> (Tq, N, heads*D)."""
    tk, n, _ = kv.shape
    v = kv.reshape(tk, n, heads, 2, -1)[:, :, :, 1]
    d = v.shape[-1]
    out = torch.matmul(att, v.permute(1, 2, 0, 3).reshape(n * heads, tk, d))
    tq = att.shape[1]
    return out.reshape(n, heads, tq, d).permute(2, 0, 1, 3).reshape(tq, n, heads * d)
'''


def _encdec_qk(a, attrs, node):
    return Expr(f"encdec_qk({a[0].text}, {a[1].text}, {int(attrs['heads'])})", helpers=(ENCDEC,))


def _encdec_valatt(a, attrs, node):
    return Expr(f"encdec_valatt({a[0].text}, {a[1].text}, {int(attrs['heads'])})", helpers=(ENCDEC,))


def _interleaved_qk(a, attrs, node):
    return Expr(f"interleaved_qk({a[0].text}, {int(attrs['heads'])})", helpers=(INTERLEAVED,))


def _interleaved_valatt(a, attrs, node):
    return Expr(f"interleaved_valatt({a[0].text}, {a[1].text}, {int(attrs['heads'])})", helpers=(INTERLEAVED,))


def _arange_like(a, attrs, node):
    axis = parse_attr(attrs.get("axis"))
    start, step = parse_attr(attrs.get("start"), 0.0), parse_attr(attrs.get("step"), 1.0)
    if axis is None or parse_attr(attrs.get("repeat"), 1) != 1:
        raise unsupported(node, "_contrib_arange_like without axis or with repeat")
    x = a[0].p()
    if not x.isidentifier():
        raise NeedsName()
    n = f"{x}.shape[{int(axis)}]"
    body = f"torch.arange({n}, dtype={x}.dtype, device={x}.device)"
    if float(step) != 1.0:
        body = f"{body} * {float(step)!r}"
    if float(start) != 0.0:
        body = f"{body} + {float(start)!r}"
    return Expr(body, atomic=float(step) == 1.0 and float(start) == 0.0)


SEQUENCE_MASK = '''def sequence_mask(x, length, axis, value):
    """MXNet SequenceMask: entries at time positions >= length along `axis` (0 or 1) set to value."""
    keep = torch.arange(x.shape[axis], device=x.device)[None, :] < length.reshape(-1, 1)   # (N, T)
    if axis == 0:
        keep = keep.t()
    keep = keep.reshape(keep.shape + (1,) * (x.dim() - 2))
    return torch.where(keep, x, torch.full_like(x, value))
'''


def _sequence_mask(a, attrs, node):
    if not parse_attr(attrs.get("use_sequence_length"), False):
        return a[0]
    return Expr(f"sequence_mask({a[0].text}, {a[1].text}, {int(parse_attr(attrs.get('axis'), 0))}, "
                f"{float(parse_attr(attrs.get('value'), 0.0))!r})", helpers=(SEQUENCE_MASK,))


LENGTH_SOFTMAX = '''def length_softmax(x, length, dim):
    """MXNet softmax(use_length=True): positions >= length along `dim` are left out (output 0)."""
    dim = dim % x.dim()
    shape = [1] * x.dim()
    shape[dim] = -1
    keep = torch.arange(x.shape[dim], device=x.device).reshape(shape) < length.unsqueeze(dim)
    return torch.softmax(x.masked_fill(~keep, float("-inf")), dim=dim).masked_fill(~keep, 0.0)
'''


def _softmax(name: str):
    def fn(a, attrs, node):
        t = parse_attr(attrs.get("temperature"))
        if attrs.get("dtype") not in (None, "None"):
            raise unsupported(node, f"{node.op}(dtype=...)")
        axis = int(parse_attr(attrs.get("axis"), -1))
        if t not in (None, 1, 1.0):
            if parse_attr(attrs.get("use_length"), False):
                raise unsupported(node, f"{node.op}(temperature=..., use_length=True)")
            return Expr(f"torch.{name}({a[0].p()} / {float(t)!r}, dim={axis})")
        if parse_attr(attrs.get("use_length"), False):
            if name != "softmax":
                raise unsupported(node, f"{node.op}(use_length=True)")
            return Expr(f"length_softmax({a[0].text}, {a[1].text}, {axis})", helpers=(LENGTH_SOFTMAX,))
        return Expr(f"torch.{name}({a[0].text}, dim={axis})")
    return fn


def _dot(a, attrs, node):
    x, y = a[0].p(), a[1].p()
    if parse_attr(attrs.get("transpose_a"), False):
        x = f"{x}.transpose(-1, -2)" if node.op == "batch_dot" else f"{x}.t()"
    if parse_attr(attrs.get("transpose_b"), False):
        y = f"{y}.transpose(-1, -2)" if node.op == "batch_dot" else f"{y}.t()"
    return Expr(f"torch.matmul({x}, {y})")


def _fully_connected(a, attrs, node):
    x = a[0].text
    if parse_attr(attrs.get("flatten"), True) and ndim(node) > 2:
        x = f"torch.flatten({x}, 1)"
    bias = "None" if parse_attr(attrs.get("no_bias"), False) else a[2].text
    return Expr(f"F.linear({x}, {a[1].text}, {bias})")


def _pooling(a, attrs, node):
    kernel = parse_attr(attrs.get("kernel"), ())
    pool = attrs.get("pool_type", "max")
    nd = len(kernel) if kernel else ndim(node) - 2
    if pool not in ("max", "avg"):
        raise unsupported(node, f"Pooling(pool_type={pool!r})")
    if parse_attr(attrs.get("global_pool"), False):
        return Expr(f"F.adaptive_{pool}_pool{nd}d({a[0].text}, 1)")
    stride = parse_attr(attrs.get("stride"), ()) or (1,) * nd       # MXNet's default stride is 1, not the kernel
    pad = parse_attr(attrs.get("pad"), (0,) * nd) or (0,) * nd
    conv = attrs.get("pooling_convention", "valid")
    if conv not in ("valid", "full"):
        raise unsupported(node, f"Pooling(pooling_convention={conv!r})")
    shapes = node.in_shapes[:1] + node.out_shapes[:1]
    known = len(shapes) == 2 and None not in shapes
    problem = conv == "full" and full_pool_problem(kernel, stride, pad, shapes[0][2:] if known else None,
                                                   shapes[1][2:] if known else None)
    if problem:            # a last window starting in the padding: MXNet keeps it, torch's ceil_mode drops it
        raise unsupported(node, f"Pooling({problem})")
    extra = ", ceil_mode=True" if conv == "full" else ""
    if pool == "avg" and parse_attr(attrs.get("count_include_pad"), True) is False:
        extra += ", count_include_pad=False"
    return Expr(f"F.{pool}_pool{nd}d({a[0].text}, {tuple(kernel)}, {tuple(stride)}, {tuple(pad)}{extra})")


SHARED_DROPOUT_FN = '''def shared_dropout(x, p, axes, training):
    """MXNet Dropout(axes=...): one mask shared along `axes` (every time step of gluonnlp's
    StandardRNN), scaled by 1 / (1 - p) as F.dropout does."""
    shape = [1 if i in axes else s for i, s in enumerate(x.shape)]
    return x * F.dropout(torch.ones(shape, dtype=x.dtype, device=x.device), p, training)
'''


def _dropout(a, attrs, node):
    axes = parse_attr(attrs.get("axes"), ()) or ()
    p = literal(probability(attrs.get("p", "0.5"), f"MXNet Dropout node {node.name!r}"))
    if attrs.get("mode", "training") == "always":
        raise unsupported(node, "Dropout(mode='always') as an op")
    if axes:
        axes = (axes,) if isinstance(axes, int) else tuple(int(v) % ndim(node) for v in axes)
        return Expr(f"shared_dropout({a[0].text}, {p}, {axes}, self.training)", helpers=(SHARED_DROPOUT_FN,))
    return Expr(f"F.dropout({a[0].text}, {p}, self.training)")





def _softmin(a, attrs, node):
    """torch.softmax(-x / temperature, dim)"""
    axis = int(parse_attr(attrs.get("axis"), -1))
    t = parse_attr(attrs.get("temperature"))
    x = f"-{a[0].p()}" if t in (None, 1, 1.0) else f"-{a[0].p()} / {float(t)!r}"
    return Expr(f"torch.softmax({x}, dim={axis})")


def _embedding(a, attrs, node):
    """F.embedding(ids.long(), weight)"""
    return Expr(f"F.embedding({a[0].p()}.long(), {a[1].text})")


def _smooth_l1(a, attrs, node):
    """torch.where(|x| < 1/s^2, 0.5 (s x)^2, |x| - 0.5/s^2)"""
    s = float(parse_attr(attrs.get("scalar"), 1.0))
    s2 = float(f32(repr(s))) ** 2
    x = a[0].p()
    if not x.isidentifier():
        raise NeedsName()
    return Expr(f"torch.where({x}.abs() < {1.0 / s2!r}, 0.5 * {s2!r} * {x} * {x}, {x}.abs() - {0.5 / s2!r})")


def _lrn(a, attrs, node):
    """F.local_response_norm(x, nsize, alpha, beta, knorm)"""
    n = int(attrs["nsize"])
    alpha, beta, k = (f32(attrs.get(k, d)) for k, d in (("alpha", "0.0001"), ("beta", "0.75"), ("knorm", "2")))
    return Expr(f"F.local_response_norm({a[0].text}, {n}, {alpha}, {beta}, {k})")


def _conv_args(attrs, nd):
    def tup(key, default):
        v = parse_attr(attrs.get(key), ())
        v = (v,) * nd if isinstance(v, int) else tuple(v)
        return v or (default,) * nd
    return tup("stride", 1), tup("pad", 0), tup("dilate", 1), int(parse_attr(attrs.get("num_group"), 1))


def _convolution(a, attrs, node):
    """F.conv{1,2,3}d(x, weight, bias, stride, pad, dilate, num_group)"""
    kernel = parse_attr(attrs.get("kernel"), ())
    nd = len(kernel) if isinstance(kernel, tuple) else 1
    if attrs.get("layout") not in (None, "None", "NCW", "NCHW", "NCDHW"):
        raise unsupported(node, f"Convolution(layout={attrs['layout']!r})")
    stride, pad, dilate, groups = _conv_args(attrs, nd)
    bias = "None" if parse_attr(attrs.get("no_bias"), False) else a[2].text
    return Expr(f"F.conv{nd}d({a[0].text}, {a[1].text}, {bias}, {stride}, {pad}, {dilate}, {groups})")


def _deconvolution(a, attrs, node):
    """F.conv_transpose{1,2,3}d(x, weight, bias, stride, pad, adj, num_group, dilate)"""
    kernel = parse_attr(attrs.get("kernel"), ())
    nd = len(kernel) if isinstance(kernel, tuple) else 1
    if attrs.get("layout") not in (None, "None", "NCW", "NCHW", "NCDHW"):
        raise unsupported(node, f"Deconvolution(layout={attrs['layout']!r})")
    if parse_attr(attrs.get("target_shape"), ()) not in ((), None):
        raise unsupported(node, "Deconvolution(target_shape=...) (give pad and adj instead)")
    stride, pad, dilate, groups = _conv_args(attrs, nd)
    adj = parse_attr(attrs.get("adj"), ()) or (0,) * nd
    adj = (adj,) * nd if isinstance(adj, int) else tuple(adj)
    bias = "None" if parse_attr(attrs.get("no_bias"), True) else a[2].text
    return Expr(f"F.conv_transpose{nd}d({a[0].text}, {a[1].text}, {bias}, {stride}, {pad}, {adj}, {groups}, {dilate})")


def _sequence_last(a, attrs, node):
    """x[length - 1, arange(N)] (each sequence's last valid step)"""
    axis = int(parse_attr(attrs.get("axis"), 0))
    x = a[0].p()
    if not parse_attr(attrs.get("use_sequence_length"), False):   # measured: MXNet 1.9.1's backward
        raise unsupported(node, "SequenceLast(use_sequence_length=False) (MXNet 1.9.1's gradient of it is zero "
                                "in float32 and its float64 backward crashes: torch's x[-1] would train differently; "
                                "write x[-1] (slice_axis) in the Gluon code)")
    if axis != 0:
        raise unsupported(node, "SequenceLast(axis != 0, use_sequence_length=True)")
    if not x.isidentifier():
        raise NeedsName()
    n = a[1].p()
    return Expr(f"{x}[({n}.long() - 1).clamp(min=0), torch.arange({x}.shape[1], device={x}.device)]")


op("Activation", "_npx_activation", torch="torch.relu / sigmoid / tanh / F.softplus / F.softsign")(_activation)
op("LeakyReLU", "_npx_leaky_relu", float32_internal=True,
   float32_note="leaky 1.0e-7, prelu 3.7e-7, gelu 5.7e-7 off on float64 data; elu's slope float32",
   torch="F.leaky_relu / F.elu / F.gelu / F.prelu (MXNet computes in float32)")(_leaky)
op("clip", "_npi_clip", "_sparse_clip", torch="torch.clamp(x, a_min, a_max) (F.relu6 for 0, 6)")(_clip)
op("_contrib_interleaved_matmul_selfatt_qk", float32_only=True, torch="interleaved_qk(qkv, heads)")(_interleaved_qk)
op("_contrib_interleaved_matmul_selfatt_valatt", float32_only=True,
   torch="interleaved_valatt(qkv, att, heads)")(_interleaved_valatt)
op("_contrib_interleaved_matmul_encdec_qk", float32_only=True, torch="encdec_qk(queries, keys_values, heads)")(
    _encdec_qk)
op("_contrib_interleaved_matmul_encdec_valatt", float32_only=True,
   torch="encdec_valatt(keys_values, att, heads)")(_encdec_valatt)
op("_contrib_arange_like", "_npx_arange_like", torch="torch.arange(x.shape[axis]) * step + start")(_arange_like)
op("SequenceMask", "_npx_sequence_mask", torch="sequence_mask(x, length, axis, value)")(_sequence_mask)
op("SequenceLast")(_sequence_last)
op("softmax", "_npx_softmax", torch="torch.softmax(x / temperature, dim) (length_softmax with use_length)")(
    _softmax("softmax"))
op("log_softmax", "_npx_log_softmax", torch="torch.log_softmax(x / temperature, dim)")(_softmax("log_softmax"))
op("softmin")(_softmin)
op("dot", "_sparse_dot", torch="torch.matmul(a, b) (transpose_a/b)")(_dot)
op("batch_dot", "_npx_batch_dot", torch="torch.matmul(a, b) (transpose_a/b)")(_dot)
op("FullyConnected", "_npx_fully_connected", "_sparse_FullyConnected", torch="F.linear(x, weight, bias)")(
    _fully_connected)
op("Pooling", "_npx_pooling", torch="F.max_pool / F.avg_pool / F.adaptive_*_pool")(_pooling)
op("Pooling_v1", float32_internal=True, float32_note="its float64 average is 4.8e-9 off",
   torch="F.max_pool / F.avg_pool (MXNet 0.x Pooling)")(_pooling)
op("Dropout", "_npx_dropout", torch="F.dropout(x, p, self.training) (shared_dropout with axes)")(_dropout)
op("Embedding", "_npx_embedding", "_sparse_Embedding")(_embedding)
op("smooth_l1", "_npx_smooth_l1")(_smooth_l1)
op("LRN", float32_only=True)(_lrn)
op("Convolution", "_npx_convolution", "Convolution_v1")(_convolution)
op("Deconvolution", "_npx_deconvolution")(_deconvolution)
refuse("deprecated (use softmax), and MXNet 1.9.1's backward of it is not the gradient of its forward (measured "
       "0.43 off on a (2, 3, 4) input), so a torch translation would train differently", "SoftmaxActivation")


@op("softmax_cross_entropy")
def _softmax_ce(a, attrs, node):
    """-(log_softmax(x, 1) picked at label).sum() (shape (1,))"""
    return Expr(f"-torch.gather(torch.log_softmax({a[0].text}, dim=1), 1, {a[1].p()}.long().reshape(-1, 1)).sum()"
                f".reshape(1)", atomic=False)


CTC = '''def ctc_loss_mx(data, label, data_lengths, label_lengths, blank_first):
    """MXNet CTCLoss: data (T, N, C) unnormalised scores, softmax over C; blank 0 with labels padded
    by 0 ('first'), or blank C - 1 with labels padded by -1 ('last'); the loss per sequence (N,)."""
    t, n, c = data.shape
    pad = 0 if blank_first else -1
    if label_lengths is None:
        label_lengths = (label != pad).sum(1)
    if data_lengths is None:
        data_lengths = torch.full((n,), t, dtype=torch.long, device=data.device)
    return F.ctc_loss(torch.log_softmax(data, 2), label.clamp(min=0).long(), data_lengths.long(),
                      label_lengths.long(), blank=0 if blank_first else c - 1, reduction="none")
'''


@op("CTCLoss", "_contrib_CTCLoss", "_contrib_ctc_loss", "ctc_loss", float32_only=True)
def _ctc(a, attrs, node):
    """ctc_loss_mx(data, label, data_lengths, label_lengths, blank_first) (F.ctc_loss on log_softmax)"""
    use_d, use_l = (bool(parse_attr(attrs.get(k), False)) for k in ("use_data_lengths", "use_label_lengths"))
    rest = list(a[2:])
    dl = rest.pop(0).text if use_d else "None"
    ll = rest.pop(0).text if use_l else "None"
    first = attrs.get("blank_label", "first") == "first"
    return Expr(f"ctc_loss_mx({a[0].text}, {a[1].text}, {dl}, {ll}, {first})", helpers=(CTC,))
