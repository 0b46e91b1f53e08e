"""dualdl.ops on each backend against numpy references; on MXNet also inside a hybridized block
(Symbols) built from ops only."""
import math

import numpy as np
import pytest

import dualdl as dl
from dualdl import ops

R = np.random.default_rng(42)


def f32(*shape, lo=-2.0, hi=2.0):
    return R.uniform(lo, hi, size=shape).astype(np.float32)


_erf = np.vectorize(math.erf)


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def np_split(x, sizes, axis):
    idx = np.cumsum(sizes)[:-1]
    return tuple(np.split(x, idx, axis=axis))


X = f32(2, 3, 4)
POS = f32(2, 3, 4, lo=0.1, hi=3.0)
A34, B45 = f32(3, 4), f32(4, 5)
COND = R.uniform(size=(3, 1)) > 0.5
MASK = np.array([[True], [False], [True]])
IDX = np.array([[1, 0, 4], [2, 2, 3]], dtype=np.int64)
EMB = f32(5, 3)
X7 = f32(7, 2)

# (id, fn(ops, *tensors), numpy reference(*arrays), inputs, works on Symbols)
CASES = [
    ("relu", lambda o, x: o.relu(x), lambda x: np.maximum(x, 0), [X], True),
    ("sigmoid", lambda o, x: o.sigmoid(x), lambda x: 1 / (1 + np.exp(-x)), [X], True),
    ("tanh", lambda o, x: o.tanh(x), np.tanh, [X], True),
    ("gelu", lambda o, x: o.gelu(x), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), [X], True),
    ("gelu_tanh", lambda o, x: o.gelu(x, approximate="tanh"), np_gelu_tanh, [X], True),
    ("leaky_relu", lambda o, x: o.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x), [X], True),
    ("leaky_relu_default", lambda o, x: o.leaky_relu(x), lambda x: np.where(x > 0, x, 0.01 * x), [X], True),
    ("elu", lambda o, x: o.elu(x, 0.5), lambda x: np.where(x > 0, x, 0.5 * (np.exp(x) - 1)), [X], True),
    ("silu", lambda o, x: o.silu(x), lambda x: x / (1 + np.exp(-x)), [X], True),
    ("softmax_last", lambda o, x: o.softmax(x, dim=-1), lambda x: np_softmax(x, -1), [X], True),
    ("softmax_0", lambda o, x: o.softmax(x, 0), lambda x: np_softmax(x, 0), [X], True),
    ("log_softmax", lambda o, x: o.log_softmax(x, dim=1), lambda x: np.log(np_softmax(x, 1)), [X], True),
    ("matmul_2d", lambda o, a, b: o.matmul(a, b), np.matmul, [A34, B45], True),
    ("matmul_3d", lambda o, a, b: o.matmul(a, b), np.matmul, [f32(2, 3, 4), f32(2, 4, 5)], True),
    # Symbols: MXNet's np.matmul backward is wrong for a middle broadcast batch dim of `a` (documented)
    ("matmul_bcast", lambda o, a, b: o.matmul(a, b), np.matmul, [f32(5, 1, 3, 4), f32(2, 4, 6)], False),
    ("matmul_bcast_2", lambda o, a, b: o.matmul(a, b), np.matmul, [f32(2, 1, 3, 4), f32(1, 5, 4, 2)], False),
    ("matmul_bcast_lead", lambda o, a, b: o.matmul(a, b), np.matmul, [f32(1, 3, 4), f32(2, 4, 5)], True),
    ("matmul_bcast_rhs", lambda o, a, b: o.matmul(a, b), np.matmul, [f32(2, 5, 3, 4), f32(5, 4, 2)], True),
    ("matmul_4d", lambda o, a, b: o.matmul(a, b), np.matmul, [f32(2, 5, 3, 4), f32(2, 5, 4, 2)], True),
    ("matmul_vec_3d", lambda o, a, b: o.matmul(a, b), np.matmul, [f32(4), f32(2, 4, 5)], True),
    ("matmul_3d_vec", lambda o, a, b: o.matmul(a, b), np.matmul, [f32(2, 3, 4), f32(4)], True),
    ("matmul_nd_2d", lambda o, a, b: o.matmul(a, b), np.matmul, [f32(2, 3, 4), B45], True),
    ("matmul_vec_mat", lambda o, a, b: o.matmul(a, b), np.matmul, [f32(4), B45], True),
    ("matmul_mat_vec", lambda o, a, b: o.matmul(a, b), np.matmul, [A34, f32(4)], True),
    ("matmul_vec_vec", lambda o, a, b: o.matmul(a, b), np.matmul, [f32(4), f32(4)], False),
    ("linear", lambda o, x, w, b: o.linear(x, w, b), lambda x, w, b: x @ w.T + b, [X, f32(5, 4), f32(5)], True),
    ("linear_nobias", lambda o, x, w: o.linear(x, w), lambda x, w: x @ w.T, [X, f32(5, 4)], True),
    ("add_bcast", lambda o, a, b: o.add(a, b), np.add, [f32(3, 1), f32(1, 4)], True),
    ("sub_bcast", lambda o, a, b: o.sub(a, b), np.subtract, [f32(2, 3, 4), f32(4)], True),
    ("mul_bcast", lambda o, a, b: o.mul(a, b), np.multiply, [f32(3, 1), f32(2, 1, 4)], True),
    ("div_bcast", lambda o, a, b: o.div(a, b), np.divide, [X, f32(3, 1, lo=0.5, hi=2)], True),
    ("add_scalar", lambda o, a: o.add(a, 2.5), lambda a: a + np.float32(2.5), [X], True),
    ("rsub_scalar", lambda o, a: o.sub(1.0, a), lambda a: np.float32(1.0) - a, [X], True),
    ("rdiv_scalar", lambda o, a: o.div(1.0, a), lambda a: np.float32(1.0) / a, [POS], True),
    ("mul_scalar_left", lambda o, a: o.mul(3.0, a), lambda a: np.float32(3.0) * a, [X], True),
    ("div_int", lambda o, a: o.div(a, 2), lambda a: a / np.float32(2), [np.array([7, 4, -3], dtype=np.int32)], False),
    ("pow_scalar", lambda o, x: o.pow(x, 3), lambda x: x ** 3, [X], True),
    ("pow_tensor", lambda o, x, e: o.pow(x, e), np.power, [POS, f32(4, lo=0.5, hi=2)], True),
    ("exp", lambda o, x: o.exp(x), np.exp, [X], True),
    ("log", lambda o, x: o.log(x), np.log, [POS], True),
    ("sqrt", lambda o, x: o.sqrt(x), np.sqrt, [POS], True),
    ("abs", lambda o, x: o.abs(x), np.abs, [X], True),
    ("clamp_min", lambda o, x: o.clamp(x, min=-0.5), lambda x: np.maximum(x, -0.5), [X], True),
    ("clamp_max", lambda o, x: o.clamp(x, max=0.5), lambda x: np.minimum(x, 0.5), [X], True),
    ("clamp_both", lambda o, x: o.clamp(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), [X], True),
    ("zeros_like", lambda o, x: o.zeros_like(x), np.zeros_like, [X], True),
    ("ones_like", lambda o, x: o.ones_like(x), np.ones_like, [X], True),
    ("where_bcast", lambda o, c, a, b: o.where(c, a, b), np.where, [COND, f32(4), f32(3, 4)], True),
    ("where_float_cond", lambda o, c, a, b: o.where(c, a, b), lambda c, a, b: np.where(c != 0, a, b),
     [np.array([1.0, 0.0, 2.0], dtype=np.float32), f32(3), f32(3)], True),
    ("where_scalar", lambda o, c, b: o.where(c, -1.0, b), lambda c, b: np.where(c, np.float32(-1), b),
     [COND, f32(3, 4)], True),
    ("masked_fill", lambda o, x, m: o.masked_fill(x, m, -1e9), lambda x, m: np.where(m, np.float32(-1e9), x),
     [X, MASK], True),
    ("masked_fill_inf", lambda o, x, m: o.masked_fill(x, m, float("-inf")),
     lambda x, m: np.where(m, np.float32(-np.inf), x), [X, MASK], True),
    ("dropout_eval", lambda o, x: o.dropout(x, 0.5, training=False), lambda x: x, [X], True),
    ("dropout_p0", lambda o, x: o.dropout(x, 0.0), lambda x: x, [X], True),
    ("dropout_p1", lambda o, x: o.dropout(x, 1.0), np.zeros_like, [X], True),
    ("cat", lambda o, a, b: o.cat([a, b], dim=1), lambda a, b: np.concatenate([a, b], 1), [X, f32(2, 2, 4)], True),
    ("concat_neg", lambda o, a, b: o.concat((a, b), -1), lambda a, b: np.concatenate([a, b], -1), [X, X], True),
    ("stack", lambda o, a, b: o.stack([a, b]), lambda a, b: np.stack([a, b]), [X, X], True),
    ("stack_neg", lambda o, a, b: o.stack([a, b], dim=-1), lambda a, b: np.stack([a, b], -1), [X, X], True),
    ("split_size", lambda o, x: o.split(x, 3, dim=0), lambda x: np_split(x, [3, 3, 1], 0), [X7], False),
    ("split_sections", lambda o, x: o.split(x, [1, 2, 1], dim=-1), lambda x: np_split(x, [1, 2, 1], -1), [X], True),
    ("chunk_uneven", lambda o, x: o.chunk(x, 3), lambda x: np_split(x, [3, 3, 1], 0), [X7], False),
    ("chunk_fewer", lambda o, x: o.chunk(x, 4, dim=1), lambda x: np_split(x, [2, 2, 2], 1), [f32(2, 6)], False),
    ("chunk_even", lambda o, x: o.chunk(x, 2, dim=-1), lambda x: np_split(x, [2, 2], -1), [X], True),
    ("transpose", lambda o, x: o.transpose(x, 0, -1), lambda x: np.swapaxes(x, 0, -1), [X], True),
    ("permute", lambda o, x: o.permute(x, (2, 0, 1)), lambda x: np.transpose(x, (2, 0, 1)), [X], True),
    ("permute_neg", lambda o, x: o.permute(x, (-1, 0, 1)), lambda x: np.transpose(x, (2, 0, 1)), [X], False),
    ("reshape", lambda o, x: o.reshape(x, (4, -1)), lambda x: x.reshape(4, -1), [X], True),
    ("reshape_int", lambda o, x: o.reshape(x, -1), lambda x: x.reshape(-1), [X], True),
    ("flatten_all", lambda o, x: o.flatten(x), lambda x: x.reshape(-1), [X], True),
    ("flatten_1", lambda o, x: o.flatten(x, 1), lambda x: x.reshape(2, -1), [X], True),
    ("flatten_0_1", lambda o, x: o.flatten(x, 0, 1), lambda x: x.reshape(6, 4), [X], True),
    ("flatten_1_2_of_4d", lambda o, x: o.flatten(x, 1, 2), lambda x: x.reshape(2, 12, 5), [f32(2, 3, 4, 5)], True),
    ("flatten_neg", lambda o, x: o.flatten(x, -2, -1), lambda x: x.reshape(2, 12), [X], False),
    ("squeeze_dim", lambda o, x: o.squeeze(x, 1), lambda x: x.squeeze(1), [f32(2, 1, 3)], True),
    ("squeeze_noop", lambda o, x: o.squeeze(x, 0), lambda x: x, [f32(2, 1, 3)], False),
    ("squeeze_all", lambda o, x: o.squeeze(x), lambda x: x.squeeze(), [f32(1, 2, 1, 3)], True),
    ("unsqueeze_neg", lambda o, x: o.unsqueeze(x, -1), lambda x: x[..., None], [X], True),
    ("unsqueeze_1", lambda o, x: o.unsqueeze(x, 1), lambda x: x[:, None], [X], True),
    ("sum_all", lambda o, x: o.sum(x), lambda x: x.sum(), [X], True),
    ("sum_1d", lambda o, x: o.sum(x), lambda x: x.sum(), [f32(5)], True),
    ("sum_dim", lambda o, x: o.sum(x, dim=1), lambda x: x.sum(1), [X], True),
    ("sum_dims_keep", lambda o, x: o.sum(x, dim=(0, 2), keepdim=True), lambda x: x.sum((0, 2), keepdims=True), [X], True),
    ("sum_all_keep", lambda o, x: o.sum(x, keepdim=True), lambda x: x.sum(keepdims=True), [X], True),
    ("mean_all", lambda o, x: o.mean(x), lambda x: x.mean(), [X], True),
    ("mean_dim", lambda o, x: o.mean(x, -1, keepdim=True), lambda x: x.mean(-1, keepdims=True), [X], True),
    ("max_all", lambda o, x: o.max(x), lambda x: x.max(), [X], True),
    ("min_all", lambda o, x: o.min(x), lambda x: x.min(), [X], True),
    ("argmax_dim", lambda o, x: o.argmax(x, dim=1), lambda x: x.argmax(1), [X], True),
    ("argmax_keep", lambda o, x: o.argmax(x, dim=-1, keepdim=True), lambda x: x.argmax(-1)[..., None], [X], True),
    ("argmax_all", lambda o, x: o.argmax(x), lambda x: np.int64(x.argmax()), [X], True),
    ("argmin_dim", lambda o, x: o.argmin(x, 2), lambda x: x.argmin(2), [X], True),
    ("embedding", lambda o, i, w: o.embedding(i, w), lambda i, w: w[i], [IDX, EMB], True),
    ("one_hot", lambda o, i: o.one_hot(i, 6), lambda i: np.eye(6, dtype=np.int64)[i], [IDX], True),
    ("one_hot_infer", lambda o, i: o.one_hot(i), lambda i: np.eye(5, dtype=np.int64)[i], [IDX], False),
]

TUPLE_CASES = [  # ops returning (values, indices)
    ("max_dim", lambda o, x: o.max(x, dim=1), lambda x: (x.max(1), x.argmax(1)), [X], True),
    ("min_dim_keep", lambda o, x: o.min(x, dim=-1, keepdim=True),
     lambda x: (x.min(-1, keepdims=True), x.argmin(-1)[..., None]), [X], True),
]


def _np_out(out):
    if isinstance(out, (list, tuple)):
        return tuple(_np_out(o) for o in out)
    return dl.to_numpy(out)


def _check(out, ref, backend, name):
    if isinstance(ref, tuple):
        assert isinstance(out, tuple) and len(out) == len(ref), f"{name}: {len(out)} pieces"
        for o, r in zip(out, ref):
            _check(o, r, backend, name)
        return
    ref = np.asarray(ref)
    expected_shape = ref.shape
    if backend == "mxnet" and ref.shape == ():
        expected_shape = (1,)          # legacy NDArrays have no 0-d shape (documented)
    assert out.shape == expected_shape, f"{name}: shape {out.shape}, expected {expected_shape}"
    if ref.dtype.kind in "iub":
        assert out.dtype == ref.dtype, f"{name}: dtype {out.dtype}, expected {ref.dtype}"
        np.testing.assert_array_equal(out.reshape(ref.shape), ref, err_msg=name)
    else:
        np.testing.assert_allclose(out.reshape(ref.shape), ref, rtol=2e-6, atol=2e-6, err_msg=name)


def _tensor(a):
    return dl.from_numpy(a)


@pytest.mark.parametrize("case", CASES + TUPLE_CASES, ids=lambda c: c[0])
def test_op_matches_numpy(backend, case):
    name, fn, ref, inputs, _ = case
    out = fn(ops, *[_tensor(a) for a in inputs])
    _check(_np_out(out), ref(*inputs), backend, name)


def _hybrid_net(fn):
    import mxnet  # noqa: F401  (the mxnet backend is active)

    class OpNet(dl.nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, *xs):
            return fn(ops, *xs)

    net = OpNet(backend="mxnet")
    net.hybridize()
    return net


@pytest.mark.parametrize("case", [c for c in CASES + TUPLE_CASES if c[4]], ids=lambda c: c[0])
def test_op_hybridized_mxnet(case):
    name, fn, ref, inputs, _ = case
    with dl.use("mxnet"):
        net = _hybrid_net(fn)
        xs = [_tensor(a) for a in inputs]
        for _ in range(2):                      # first call builds the cached graph
            out = net(*xs)
        assert net._cached_graph, f"{name}: block did not run hybridized"
        _check(_np_out(out), ref(*inputs), "mxnet", name)


def test_dropout_training_scales_and_zeroes(backend):
    x = np.ones((200, 50), dtype=np.float32)
    out = dl.to_numpy(ops.dropout(_tensor(x), 0.3, training=True))
    kept = out != 0
    np.testing.assert_allclose(out[kept], 1 / 0.7, rtol=1e-6)
    assert 0.25 < 1 - kept.mean() < 0.35


def test_max_dim_returns_named_values_indices(backend):
    r = ops.max(_tensor(X), dim=2)
    np.testing.assert_allclose(dl.to_numpy(r.values), X.max(2))
    assert dl.to_numpy(r.indices).dtype == np.int64
    values, indices = r
    np.testing.assert_array_equal(dl.to_numpy(indices), X.argmax(2))


@pytest.mark.parametrize("shape", [(0, -1), (2, -2), (-3, 4), (-1, -1)])
def test_reshape_rejects_mxnet_codes(backend, shape):
    with pytest.raises(ValueError, match="invalid reshape target"):
        ops.reshape(_tensor(X), shape)


def test_split_sections_must_sum(backend):
    with pytest.raises(ValueError, match="do not sum"):
        ops.split(_tensor(X), [1, 1], dim=1)


def test_permute_wrong_rank(backend):
    with pytest.raises(ValueError, match="permute"):
        ops.permute(_tensor(X), (1, 0))


def test_mean_of_integers_raises(backend):
    with pytest.raises((TypeError, RuntimeError)):
        ops.mean(_tensor(np.arange(4)))


def test_gelu_bad_approximate(backend):
    with pytest.raises(ValueError, match="approximate"):
        ops.gelu(_tensor(X), approximate="fast")


def test_clamp_needs_a_bound(backend):
    with pytest.raises(ValueError, match="clamp"):
        ops.clamp(_tensor(X))


def test_non_tensor_raises_type_error():
    with pytest.raises(TypeError, match="native tensor"):
        ops.relu(np.ones(3))
    with pytest.raises(TypeError):
        ops.add(1.0, 2.0)


@pytest.mark.parametrize("call, what", [
    (lambda o, x: o.split(x, 2, dim=1), "list of section sizes"),
    (lambda o, x: o.permute(x, (-1, 0, 1)), "non-negative"),
    (lambda o, x: o.one_hot(x), "num_classes"),
    (lambda o, x: o.reshape(x, (0, -1)), "invalid reshape target"),
    (lambda o, x: o.flatten(x, -2, -1), "start_dim >= 0"),
])
def test_symbol_limits_raise_clear_errors(call, what):
    with dl.use("mxnet"):
        net = _hybrid_net(call)
        with pytest.raises(ValueError, match=what):
            net(_tensor(X))


def test_dispatch_uses_tensor_type_not_active_backend():
    import torch
    with dl.use("mxnet"):
        out = ops.relu(torch.tensor([-1.0, 2.0]))
    assert isinstance(out, torch.Tensor)
    np.testing.assert_array_equal(out.numpy(), [0.0, 2.0])
