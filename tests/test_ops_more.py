"""The ops of issue 14 against native torch: forward and input gradients, float32 and float64, on
torch (dualdl.ops on torch tensors) and on MXNet imperative (NDArrays) and hybridized (Symbols)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import dualdl as dl
from dualdl import ops

R = np.random.default_rng(14)


def u(*shape, lo=-2.0, hi=2.0):
    return R.uniform(lo, hi, size=shape)


def perm(*shape):                       # distinct values: sort/topk indices are unique
    return (R.permutation(int(np.prod(shape))).reshape(shape) / 7.0 - 1.0)


class Stat(np.ndarray):
    """An input that takes no gradient (running statistics)."""
    def __new__(cls, a):
        return np.asarray(a).view(cls)


def _grad(a):
    return a.dtype.kind == "f" and not isinstance(a, Stat)


def idx(hi, *shape):
    return R.integers(0, hi, size=shape).astype(np.int64)


X = u(2, 3, 4)
P = perm(2, 3, 5)
IMG = u(2, 3, 5, 6)
MASK_F = np.where(R.uniform(size=(4, 6)) > 0.3, 0.0, -1e9)
MASK_B = R.uniform(size=(4, 6)) > 0.3
MASK_B[:, 0] = True                     # no fully masked row (torch gives NaN there)
Q, K, V = u(2, 3, 4, 8), u(2, 3, 6, 8), u(2, 3, 6, 5)

# (id, dualdl call f(ops, *xs), native torch call g(torch, TF, *xs), inputs, works on Symbols)
CASES = [
    ("gather", lambda o, x, i: o.gather(x, 1, i), lambda t, F, x, i: t.gather(x, 1, i), [X, idx(3, 2, 5, 4)], True),
    ("gather_smaller", lambda o, x, i: o.gather(x, 2, i), lambda t, F, x, i: t.gather(x, 2, i), [X, idx(4, 1, 2, 6)], True),
    ("index_select", lambda o, x, i: o.index_select(x, -1, i), lambda t, F, x, i: t.index_select(x, -1, i), [X, np.array([3, 0, 3, 1])], True),
    ("take_along_dim", lambda o, x, i: o.take_along_dim(x, i, 1), lambda t, F, x, i: t.take_along_dim(x, i, 1), [X, idx(3, 2, 2, 4)], True),
    ("take_along_dim_bcast", lambda o, x, i: o.take_along_dim(x, i, 2), lambda t, F, x, i: t.take_along_dim(x, i, 2), [X, idx(4, 1, 3, 2)], False),
    ("take_along_dim_flat", lambda o, x, i: o.take_along_dim(x, i), lambda t, F, x, i: t.take_along_dim(x, i), [X, idx(24, 5)], True),
    ("topk", lambda o, x: tuple(o.topk(x, 3)), lambda t, F, x: tuple(t.topk(x, 3)), [P], True),
    ("topk_smallest_dim1", lambda o, x: tuple(o.topk(x, 2, dim=1, largest=False)), lambda t, F, x: tuple(t.topk(x, 2, dim=1, largest=False)), [P], True),
    ("sort", lambda o, x: tuple(o.sort(x)), lambda t, F, x: tuple(t.sort(x)), [P], True),
    ("sort_desc_dim0", lambda o, x: tuple(o.sort(x, 0, descending=True)), lambda t, F, x: tuple(t.sort(x, dim=0, descending=True)), [P], True),
    ("argsort", lambda o, x: o.argsort(x, dim=1), lambda t, F, x: t.argsort(x, dim=1), [P], True),
    ("sort_stable_ties", lambda o, x: tuple(o.sort(x, 1, stable=True)), lambda t, F, x: tuple(t.sort(x, dim=1, stable=True)), [np.round(u(3, 17))], False),
    ("argsort_stable_desc", lambda o, x: o.argsort(x, 0, descending=True, stable=True), lambda t, F, x: t.argsort(x, dim=0, descending=True, stable=True), [np.round(u(19, 2))], False),
    ("cumsum", lambda o, x: o.cumsum(x, 1), lambda t, F, x: t.cumsum(x, 1), [X], True),
    ("cumsum_neg", lambda o, x: o.cumsum(x, -1), lambda t, F, x: t.cumsum(x, -1), [X], False),
    ("cumprod", lambda o, x: o.cumprod(x, -1), lambda t, F, x: t.cumprod(x, -1), [np.where(X > 1.5, 0.0, X)], False),
    ("expand", lambda o, x: o.expand(x, 2, -1, 3), lambda t, F, x: x.expand(2, -1, 3), [u(4, 1)], False),
    ("expand_same_rank", lambda o, x: o.expand(x, 2, -1, 4), lambda t, F, x: x.expand(2, -1, 4), [u(2, 3, 1)], True),
    ("repeat", lambda o, x: o.repeat(x, 2, 1, 3), lambda t, F, x: x.repeat(2, 1, 3), [X], True),
    ("repeat_new_dims", lambda o, x: o.repeat(x, (2, 1, 2, 1)), lambda t, F, x: x.repeat(2, 1, 2, 1), [X], True),
    ("tile", lambda o, x: o.tile(x, (2, 2)), lambda t, F, x: t.tile(x, (2, 2)), [X], True),
    ("flip", lambda o, x: o.flip(x, (0, -1)), lambda t, F, x: t.flip(x, (0, -1)), [X], False),
    ("flip_pos", lambda o, x: o.flip(x, (0, 2)), lambda t, F, x: t.flip(x, (0, 2)), [X], True),
    ("roll", lambda o, x: o.roll(x, (1, -2), (0, -1)), lambda t, F, x: t.roll(x, (1, -2), (0, -1)), [X], True),
    ("roll_flat", lambda o, x: o.roll(x, 5), lambda t, F, x: t.roll(x, 5), [X], True),
    ("tril", lambda o, x: o.tril(x), lambda t, F, x: t.tril(x), [X], True),
    ("triu_1", lambda o, x: o.triu(x, 1), lambda t, F, x: t.triu(x, 1), [X], True),
    ("triu_m1", lambda o, x: o.triu(x, -1), lambda t, F, x: t.triu(x, -1), [u(5, 3)], True),
    ("norm_fro", lambda o, x: o.norm(x), lambda t, F, x: t.norm(x), [X], True),
    ("norm_1_dim", lambda o, x: o.norm(x, 1, dim=1), lambda t, F, x: t.norm(x, 1, dim=1), [X], True),
    ("norm_inf", lambda o, x: o.norm(x, float("inf"), dim=-1, keepdim=True), lambda t, F, x: t.norm(x, float("inf"), dim=-1, keepdim=True), [X], True),
    ("norm_3", lambda o, x: o.norm(x, 3, dim=(0, 2)), lambda t, F, x: t.norm(x, 3, dim=(0, 2)), [X], True),
    ("var", lambda o, x: o.var(x, 1), lambda t, F, x: t.var(x, 1), [X], True),
    ("var_all", lambda o, x: o.var(x), lambda t, F, x: t.var(x), [X], True),
    ("var_biased_keep", lambda o, x: o.var(x, (0, 2), correction=0, keepdim=True), lambda t, F, x: t.var(x, (0, 2), correction=0, keepdim=True), [X], True),
    ("std", lambda o, x: o.std(x, -1), lambda t, F, x: t.std(x, -1), [X], True),
    ("std_corr2", lambda o, x: o.std(x, 2, correction=2), lambda t, F, x: t.std(x, 2, correction=2), [X], True),
    ("logsumexp", lambda o, x: o.logsumexp(x, 1), lambda t, F, x: t.logsumexp(x, 1), [X * 30], True),
    ("logsumexp_keep_tuple", lambda o, x: o.logsumexp(x, (0, 2), keepdim=True), lambda t, F, x: t.logsumexp(x, (0, 2), keepdim=True), [X], True),
    ("erf", lambda o, x: o.erf(x), lambda t, F, x: t.erf(x), [X], True),
    ("clip", lambda o, x: o.clip(x, -0.5, 1.0), lambda t, F, x: t.clip(x, -0.5, 1.0), [X], True),
    ("clamp_min", lambda o, x: o.clamp(x, min=0.3), lambda t, F, x: t.clamp(x, min=0.3), [X], True),
    ("maximum", lambda o, a, b: o.maximum(a, b), lambda t, F, a, b: t.maximum(a, b), [X, u(3, 1)], True),
    ("minimum", lambda o, a, b: o.minimum(a, b), lambda t, F, a, b: t.minimum(a, b), [X, u(4)], True),
    ("einsum", lambda o, a, b: o.einsum("bij,bjk->bik", a, b), lambda t, F, a, b: t.einsum("bij,bjk->bik", a, b), [X, u(2, 4, 5)], True),
    ("einsum_list", lambda o, a: o.einsum("ijk->ki", [a]), lambda t, F, a: t.einsum("ijk->ki", [a]), [X], True),
    ("bmm", lambda o, a, b: o.bmm(a, b), lambda t, F, a, b: t.bmm(a, b), [X, u(2, 4, 5)], True),
    ("baddbmm", lambda o, c, a, b: o.baddbmm(c, a, b, beta=0.5, alpha=2.0), lambda t, F, c, a, b: t.baddbmm(c, a, b, beta=0.5, alpha=2.0), [u(3, 5), X, u(2, 4, 5)], True),
    ("baddbmm_default", lambda o, c, a, b: o.baddbmm(c, a, b), lambda t, F, c, a, b: t.baddbmm(c, a, b), [u(2, 3, 5), X, u(2, 4, 5)], True),
    ("outer", lambda o, a, b: o.outer(a, b), lambda t, F, a, b: t.outer(a, b), [u(3), u(5)], True),
    ("pad_constant", lambda o, x: o.pad(x, (1, 2, 0, 3), value=0.5), lambda t, F, x: F.pad(x, (1, 2, 0, 3), value=0.5), [X], True),
    ("pad_reflect", lambda o, x: o.pad(x, (2, 1, 1, 2), mode="reflect"), lambda t, F, x: F.pad(x, (2, 1, 1, 2), mode="reflect"), [IMG], True),
    ("pad_replicate", lambda o, x: o.pad(x, (3, 1), mode="replicate"), lambda t, F, x: F.pad(x, (3, 1), mode="replicate"), [X], True),
    ("pad_circular", lambda o, x: o.pad(x, (1, 2, 2, 0), mode="circular"), lambda t, F, x: F.pad(x, (1, 2, 2, 0), mode="circular"), [IMG], True),
    ("interp_nearest_x2", lambda o, x: o.interpolate(x, scale_factor=2), lambda t, F, x: F.interpolate(x, scale_factor=2), [IMG], True),
    ("interp_nearest_size", lambda o, x: o.interpolate(x, size=(7, 4)), lambda t, F, x: F.interpolate(x, size=(7, 4)), [IMG], False),
    ("interp_nearest_1_5", lambda o, x: o.interpolate(x, scale_factor=1.5), lambda t, F, x: F.interpolate(x, scale_factor=1.5), [IMG], False),
    ("interp_bilinear", lambda o, x: o.interpolate(x, size=(7, 9), mode="bilinear"), lambda t, F, x: F.interpolate(x, size=(7, 9), mode="bilinear"), [IMG], True),
    ("interp_bilinear_ac", lambda o, x: o.interpolate(x, size=(4, 9), mode="bilinear", align_corners=True), lambda t, F, x: F.interpolate(x, size=(4, 9), mode="bilinear", align_corners=True), [IMG], True),
    ("interp_bilinear_x2", lambda o, x: o.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False), lambda t, F, x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False), [IMG], True),
    ("conv2d", lambda o, x, w, b: o.conv2d(x, w, b, stride=2, padding=1), lambda t, F, x, w, b: F.conv2d(x, w, b, stride=2, padding=1), [IMG, u(4, 3, 3, 3), u(4)], False),
    ("conv2d_groups_dil", lambda o, x, w: o.conv2d(x, w, groups=3, dilation=(1, 2), padding="same"), lambda t, F, x, w: F.conv2d(x, w, groups=3, dilation=(1, 2), padding="same"), [IMG, u(6, 1, 3, 3)], False),
    ("max_pool2d", lambda o, x: o.max_pool2d(x, 2), lambda t, F, x: F.max_pool2d(x, 2), [IMG], True),
    ("max_pool2d_pad", lambda o, x: o.max_pool2d(x, 3, stride=2, padding=1), lambda t, F, x: F.max_pool2d(x, 3, stride=2, padding=1), [IMG], True),
    ("max_pool2d_ceil", lambda o, x: o.max_pool2d(x, 3, 2, 1, ceil_mode=True), lambda t, F, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), [u(2, 2, 8, 7)], True),
    ("avg_pool2d_ceil", lambda o, x: o.avg_pool2d(x, 3, 2, 1, ceil_mode=True), lambda t, F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), [u(2, 2, 8, 7)], True),
    ("avg_pool2d_ceil_excl", lambda o, x: o.avg_pool2d(x, 2, 2, 1, ceil_mode=True, count_include_pad=False), lambda t, F, x: F.avg_pool2d(x, 2, 2, 1, ceil_mode=True, count_include_pad=False), [u(2, 2, 7, 6)], True),
    ("avg_pool2d", lambda o, x: o.avg_pool2d(x, (2, 3), stride=1), lambda t, F, x: F.avg_pool2d(x, (2, 3), stride=1), [IMG], True),
    ("avg_pool2d_pad_excl", lambda o, x: o.avg_pool2d(x, 3, 2, 1, count_include_pad=False), lambda t, F, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), [IMG], True),
    ("batch_norm_eval", lambda o, x, m, v, w, b: o.batch_norm(x, m, v, w, b), lambda t, F, x, m, v, w, b: F.batch_norm(x, m, v, w, b), [IMG, Stat(u(3)), Stat(u(3, lo=0.5, hi=2)), u(3), u(3)], True),
    ("batch_norm_train", lambda o, x, w, b: o.batch_norm(x, None, None, w, b, training=True), lambda t, F, x, w, b: F.batch_norm(x, None, None, w, b, training=True), [IMG, u(3), u(3)], True),
    ("layer_norm", lambda o, x, w, b: o.layer_norm(x, (5, 6), w, b), lambda t, F, x, w, b: F.layer_norm(x, (5, 6), w, b), [IMG, u(5, 6), u(5, 6)], True),
    ("layer_norm_noaffine", lambda o, x: o.layer_norm(x, 4, eps=1e-3), lambda t, F, x: F.layer_norm(x, (4,), eps=1e-3), [X], True),
    ("group_norm", lambda o, x, w, b: o.group_norm(x, 2, w, b), lambda t, F, x, w, b: F.group_norm(x, 2, w, b), [u(2, 4, 3, 5), u(4), u(4)], True),
    ("group_norm_3d", lambda o, x: o.group_norm(x, 3), lambda t, F, x: F.group_norm(x, 3), [u(2, 6, 7)], True),
    ("sdpa", lambda o, q, k, v: o.scaled_dot_product_attention(q, k, v), lambda t, F, q, k, v: F.scaled_dot_product_attention(q, k, v), [Q, K, V], True),
    ("sdpa_causal_scale", lambda o, q, k, v: o.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3), lambda t, F, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3), [Q, K, V], True),
    ("sdpa_float_mask", lambda o, q, k, v, m: o.scaled_dot_product_attention(q, k, v, attn_mask=m), lambda t, F, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), [Q, K, V, MASK_F], True),
    ("sdpa_bool_mask", lambda o, q, k, v, m: o.scaled_dot_product_attention(q, k, v, attn_mask=m), lambda t, F, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), [Q, K, V, MASK_B], False),
    # odd shapes: size-1 dims, one element, k = size
    ("odd_gather_1", lambda o, x, i: o.gather(x, 0, i), lambda t, F, x, i: t.gather(x, 0, i), [u(1, 3), idx(1, 1, 2)], True),
    ("odd_sort_len1", lambda o, x: tuple(o.sort(x, 1)), lambda t, F, x: tuple(t.sort(x, dim=1)), [u(3, 1)], True),
    ("odd_topk_all", lambda o, x: tuple(o.topk(x, 5)), lambda t, F, x: tuple(t.topk(x, 5)), [P], True),
    ("odd_cumprod_len1", lambda o, x: o.cumprod(x, 0), lambda t, F, x: t.cumprod(x, 0), [u(1, 4)], False),
    ("odd_var_single", lambda o, x: o.var(x, 1, correction=0), lambda t, F, x: t.var(x, 1, correction=0), [u(3, 1)], True),
    ("odd_pad_1x1", lambda o, x: o.pad(x, (2, 2, 1, 1), mode="replicate"), lambda t, F, x: F.pad(x, (2, 2, 1, 1), mode="replicate"), [u(1, 1, 1, 1)], True),
    ("odd_interp_1x1", lambda o, x: o.interpolate(x, size=(3, 2), mode="bilinear"), lambda t, F, x: F.interpolate(x, size=(3, 2), mode="bilinear"), [u(1, 2, 1, 1)], True),
    ("odd_sdpa_one_key", lambda o, q, k, v: o.scaled_dot_product_attention(q, k, v), lambda t, F, q, k, v: F.scaled_dot_product_attention(q, k, v), [u(1, 3, 2), u(1, 1, 2), u(1, 1, 4)], True),
    ("odd_group_norm_1group", lambda o, x: o.group_norm(x, 1), lambda t, F, x: F.group_norm(x, 1), [u(3, 2, 4)], True),
]
DTYPES = ["float32", "float64"]
# MXNet computes these in float32 inside float64 ops (measured max abs differences to torch):
# erf's gradient 3.1e-8, BilinearResize2D's output 5.1e-7.
MX_F64_TOL = {"erf": 1e-7, "interp_bilinear": 1e-6, "interp_bilinear_ac": 1e-6, "interp_bilinear_x2": 1e-6}


def _inputs(arrays, dtype):
    return [(Stat(a.astype(dtype)) if isinstance(a, Stat) else a.astype(dtype)) if a.dtype.kind == "f" else a
            for a in arrays]


def _torch_run(fn, arrays):
    xs = [torch.tensor(np.asarray(a), requires_grad=_grad(a)) for a in arrays]
    out = fn(torch, TF, *xs)
    outs = out if isinstance(out, tuple) else (out,)
    cot = np.random.default_rng(0).uniform(-1, 1, size=tuple(outs[0].shape)).astype(arrays[0].dtype)
    grads = [None] * len(xs)
    if outs[0].dtype.is_floating_point and outs[0].requires_grad:
        outs[0].backward(torch.tensor(cot))
        grads = [x.grad.numpy() if x.grad is not None else None for x in xs]
    return [o.detach().numpy() for o in outs], grads, cot


def _hybrid(fn):
    class OpNet(dl.nn.Module):
        def forward(self, *a):
            return fn(ops, *a)
    net = OpNet(backend="mxnet")
    net.hybridize()
    return net


def _mx_run(fn, arrays, cot, hybridize):
    import mxnet as mx
    xs = [mx.nd.array(np.asarray(a), dtype=a.dtype) for a in arrays]
    for x, a in zip(xs, arrays):
        if _grad(a):
            x.attach_grad()
    call = _hybrid(fn) if hybridize else (lambda *a: fn(ops, *a))
    with mx.autograd.record():
        out = call(*xs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    grads = [None] * len(xs)
    if np.dtype(outs[0].dtype).kind == "f" and cot is not None:
        outs[0].backward(mx.nd.array(cot.reshape(outs[0].shape), dtype=outs[0].dtype))
        grads = [x.grad.asnumpy() if _grad(a) else None for x, a in zip(xs, arrays)]
    if hybridize:
        assert call._cached_graph, "block did not run hybridized"
    return [o.asnumpy() for o in outs], grads


def _close(got, want, dtype, what, tol=None):
    tol = tol or (1e-5 if dtype == "float32" else 1e-10)
    want = np.asarray(want)
    if want.shape == () and got.shape == (1,):
        got = got.reshape(())                      # legacy NDArrays have no 0-d shape (documented)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if want.dtype.kind in "iub":
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)


def _compare(outs, grads, ref_outs, ref_grads, dtype, tol=None):
    assert len(outs) == len(ref_outs)
    for i, (o, r) in enumerate(zip(outs, ref_outs)):
        _close(o, r, dtype, f"output {i}", tol)
    for i, (g, r) in enumerate(zip(grads, ref_grads)):
        if r is not None:
            _close(g, r, dtype, f"gradient of input {i}", tol)


def _mx_tol(name, dtype):
    return MX_F64_TOL.get(name) if dtype == "float64" else None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_torch_backend_is_native_torch(case, dtype):
    name, fn, ref, arrays, _ = case
    arrays = _inputs(arrays, dtype)
    ref_outs, ref_grads, _ = _torch_run(ref, arrays)
    outs, grads, _ = _torch_run(lambda t, F, *xs: fn(ops, *xs), arrays)
    _compare(outs, grads, ref_outs, ref_grads, dtype)


MX_RUNS = [pytest.param(c, False, id=f"{c[0]}-ndarray") for c in CASES] + \
    [pytest.param(c, True, id=f"{c[0]}-hybridized") for c in CASES if c[4]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case, hybridize", MX_RUNS)
def test_mxnet_matches_torch(case, hybridize, dtype):
    """NDArrays, and Symbols in a hybridized block where MXNet allows it (case[4])."""
    name, fn, ref, arrays, _ = case
    arrays = _inputs(arrays, dtype)
    ref_outs, ref_grads, cot = _torch_run(ref, arrays)
    outs, grads = _mx_run(fn, arrays, cot, hybridize)
    _compare(outs, grads, ref_outs, ref_grads, dtype, _mx_tol(name, dtype))

def _nd(a):
    import mxnet as mx
    return mx.nd.array(a, dtype=a.dtype)


@pytest.mark.parametrize("call, inputs, what", [
    (lambda o, x: o.cumprod(x, 1), [X], "cumprod: the size along dim"),
    (lambda o, x: o.cumsum(x, -1), [X], "cumsum: a negative dim"),
    (lambda o, x: o.flip(x, -1), [X], "flip: a negative dim"),
    (lambda o, x, i: o.gather(x, -1, i), [X, idx(4, 2, 3, 4)], "gather: a negative dim"),
    (lambda o, x: o.sort(x, 1, stable=True), [X], "stable=True"),
    (lambda o, x: o.interpolate(x, size=(7, 4)), [IMG], "pass one integer scale_factor"),
    (lambda o, x, w: o.conv2d(x, w), [IMG, u(4, 3, 3, 3)], "use dualdl.nn.Conv2d"),
    (lambda o, x, m, v: o.batch_norm(x, m, v, training=True), [IMG, u(3), u(3)], "in place"),
])
def test_symbol_limits_raise_clear_errors(call, inputs, what):
    net = _hybrid(call)
    with pytest.raises(ValueError, match=what):
        net(*[_nd(a.astype("float32") if a.dtype.kind == "f" else a) for a in inputs])


@pytest.mark.parametrize("call, what", [
    (lambda o, x: o.pad(x, (1, 1), mode="wrap"), "mode"),
    (lambda o, x: o.pad(x, (1,)), "divisible by 2"),
    (lambda o, x: o.pad(x, (4, 4), mode="reflect"), "reflect padding|Padding size"),
    (lambda o, x: o.gather(x, 1, dl.from_numpy(idx(2, 2, 3))), "dimensions"),
    (lambda o, x: o.index_select(x, 2, dl.from_numpy(np.array([0, 4]))), "out of range"),
    (lambda o, x: o.expand(x, 3, 4), "number of sizes"),
    (lambda o, x: o.repeat(x, 2, 2), "repeat"),
    (lambda o, x: o.interpolate(o.unsqueeze(x, 0), size=(3, 3), scale_factor=2), "scale_factor"),
    (lambda o, x: o.layer_norm(x, (3,)), "normalized_shape"),
    (lambda o, x: o.group_norm(x, 2), "divisible"),
    (lambda o, x: o.bmm(x, o.sum(x, 0)), "3-D|3D"),
])
def test_bad_input_raises_on_both(backend, call, what):
    x = dl.from_numpy(X.astype(np.float32))
    with pytest.raises((ValueError, RuntimeError, IndexError), match=what):
        call(ops, x)


@pytest.mark.parametrize("call, what", [
    (lambda o, x: o.gather(x, 1, dl.from_numpy(idx(2, 2, 3, 4)), sparse_grad=True), "sparse_grad"),
    (lambda o, x: o.pad(x, (-1, 1)), "negative padding"),
    (lambda o, x: o.norm(x, "nuc"), "nuc"),
    (lambda o, x: o.max_pool2d(o.unsqueeze(x, 0), 2, dilation=2), "dilation"),
    (lambda o, x: o.avg_pool2d(o.unsqueeze(x, 0), 2, divisor_override=3), "divisor_override"),
    (lambda o, x: o.interpolate(o.unsqueeze(x, 0), scale_factor=2, antialias=True), "antialias"),
    (lambda o, x: o.scaled_dot_product_attention(x, x, x, enable_gqa=True), "enable_gqa"),
])
def test_mxnet_refuses_what_it_cannot_honour(call, what):
    with dl.use("mxnet"):
        x = dl.from_numpy(X.astype(np.float32))
        with pytest.raises(ValueError, match=what):
            call(ops, x)


def test_isnan_isfinite_are_bool(backend):
    a = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], dtype=np.float32)
    x = dl.from_numpy(a)
    got_nan, got_fin = dl.to_numpy(ops.isnan(x)), dl.to_numpy(ops.isfinite(x))
    assert got_nan.dtype == np.bool_ and got_fin.dtype == np.bool_
    np.testing.assert_array_equal(got_nan, np.isnan(a))
    np.testing.assert_array_equal(got_fin, np.isfinite(a))


def test_isnan_hybridized():
    net = _hybrid(lambda o, x: o.isnan(x))
    a = np.array([1.0, np.nan, 2.0], dtype=np.float32)
    for _ in range(2):
        out = net(_nd(a)).asnumpy()
    np.testing.assert_array_equal(out, np.isnan(a))


def test_logsumexp_of_all_minus_inf_is_minus_inf(backend):
    a = np.array([[-np.inf, -np.inf], [0.0, 1.0]], dtype=np.float32)
    out = dl.to_numpy(ops.logsumexp(dl.from_numpy(a), 1))
    np.testing.assert_allclose(out, torch.logsumexp(torch.tensor(a), 1).numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("args", [(0.0, 1.0, 7), (-3.5, 2.25, 11), (1.0, 1.0, 1), (2.0, -1.0, 0), (0, 10, 6)])
def test_linspace_equals_torch(backend, args, dtype):
    got = dl.to_numpy(ops.linspace(*args, dtype=dtype))
    want = torch.linspace(*args, dtype=getattr(torch, dtype)).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    ulp = np.finfo(dtype).eps * 4             # torch's SIMD kernel picks its formula per chunk
    np.testing.assert_allclose(got, want, rtol=ulp, atol=ulp)


@pytest.mark.parametrize("n, m", [(3, None), (2, 4), (4, 1)])
def test_eye_equals_torch(backend, n, m):
    got = dl.to_numpy(ops.eye(n, m))
    want = torch.eye(n, n if m is None else m).numpy()
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    assert dl.to_numpy(ops.eye(2, dtype="float64")).dtype == np.float64


def test_batch_norm_training_updates_running_stats_as_torch(backend):
    x = IMG.astype(np.float32)
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    t_rm, t_rv = torch.tensor(rm), torch.tensor(rv)
    want = TF.batch_norm(torch.tensor(x), t_rm, t_rv, training=True, momentum=0.3).numpy()
    d_rm, d_rv = dl.from_numpy(rm.copy()), dl.from_numpy(rv.copy())
    with dl.autograd.record():                  # inside a recorded step, as in a training loop
        got = dl.to_numpy(ops.batch_norm(dl.from_numpy(x), d_rm, d_rv, training=True, momentum=0.3))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dl.to_numpy(d_rm), t_rm.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(dl.to_numpy(d_rv), t_rv.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mask_dtype", ["int64", "float64"])
def test_sdpa_refuses_integer_and_other_float_masks(backend, mask_dtype):
    q = dl.from_numpy(Q.astype(np.float32))
    mask = dl.from_numpy(np.ones((4, 4), dtype=mask_dtype))
    with pytest.raises((TypeError, RuntimeError), match="attn_mask"):
        ops.scaled_dot_product_attention(q, q, q, attn_mask=mask)


def test_sdpa_dropout_applies_when_p_positive(backend):
    q = dl.from_numpy(Q.astype(np.float32))
    out = dl.to_numpy(ops.scaled_dot_product_attention(q, q, q, dropout_p=1.0))
    np.testing.assert_array_equal(out, np.zeros_like(Q, dtype=np.float32))
    half = dl.to_numpy(ops.scaled_dot_product_attention(q, q, q, dropout_p=0.5))
    assert np.isfinite(half).all() and not np.allclose(half, 0)


def test_mxnet_bilinear_default_differs_from_torch_default():
    """The porting bug dualdl hides: MXNet's BilinearResize2D defaults to align_corners=True."""
    import mxnet as mx
    a = IMG.astype(np.float32)
    native_mx = mx.nd.contrib.BilinearResize2D(mx.nd.array(a), height=7, width=9).asnumpy()
    torch_default = TF.interpolate(torch.tensor(a), size=(7, 9), mode="bilinear").numpy()
    assert np.abs(native_mx - torch_default).max() > 0.05
    with dl.use("mxnet"):
        ours = dl.to_numpy(ops.interpolate(dl.from_numpy(a), size=(7, 9), mode="bilinear"))
    np.testing.assert_allclose(ours, torch_default, rtol=1e-5, atol=1e-5)


def test_max_pool2d_gradient_when_recording_in_eval_mode():
    """MKLDNN's max-pool backward under record(train_mode=False) is wrong; the layer's fix holds."""
    import mxnet as mx
    a = u(2, 3, 6, 6).astype(np.float32)
    x = mx.nd.array(a)
    x.attach_grad()
    with mx.autograd.record(train_mode=False):
        y = ops.max_pool2d(x, 2)
    y.backward(mx.nd.ones_like(y))
    t = torch.tensor(a, requires_grad=True)
    TF.max_pool2d(t, 2).sum().backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), t.grad.numpy())


def test_max_pool2d_ceil_mode(backend):
    x = u(1, 2, 7, 7).astype(np.float32)
    got = dl.to_numpy(ops.max_pool2d(dl.from_numpy(x), 3, stride=2, ceil_mode=True))
    want = TF.max_pool2d(torch.tensor(x), 3, stride=2, ceil_mode=True).numpy()
    np.testing.assert_allclose(got, want)
