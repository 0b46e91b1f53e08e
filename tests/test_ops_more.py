"""The ops of issue 14: what the parity table (tests/parity_table/ops_more.py: forward and input
gradients against native torch, float32 and float64, NDArrays and Symbols) does not check: the
clear errors where MXNet has no Symbol form or cannot honour an argument, bad input, special
values, in-place running statistics, dropout, MXNet's own bilinear default and its max-pool
backward in eval-mode recording."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import dualdl as dl
from dualdl import ops

R = np.random.default_rng(14)


def u(*shape, lo=-2.0, hi=2.0):
    return R.uniform(lo, hi, size=shape)


def idx(hi, *shape):
    return R.integers(0, hi, size=shape).astype(np.int64)


X = u(2, 3, 4)
IMG = u(2, 3, 5, 6)
Q = u(2, 3, 4, 8)


def _hybrid(fn):
    class OpNet(dl.nn.Module):
        def forward(self, *a):
            return fn(ops, *a)
    net = OpNet(backend="mxnet")
    net.hybridize()
    return net


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


def test_logsumexp_of_all_minus_inf_is_minus_inf(backend):
    a = np.array([[-np.inf, -np.inf], [0.0, 1.0]], dtype=np.float32)
    out = dl.to_numpy(ops.logsumexp(dl.from_numpy(a), 1))
    np.testing.assert_allclose(out, torch.logsumexp(torch.tensor(a), 1).numpy())


def test_creation_ops_default_to_float32(backend):
    """eye and linspace without a dtype give float32 on both backends (as torch's default dtype);
    their values against torch are in the parity table."""
    assert dl.to_numpy(ops.eye(3)).dtype == np.float32
    assert dl.to_numpy(ops.linspace(0, 1, 4)).dtype == np.float32
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
