"""The conv/pool layers and arguments added for torch's module tests (issue 34), beyond the parity
table: FractionalMaxPool with given samples against torch (values, indices, gradients; eager and
hybridized; output_ratio over two input sizes), without samples a valid fractional pooling; the lazy
convolutions (in_channels inferred, torch's class after the first call, weights loadable, inside a
hybridized parent); MaxPool's indices on ties; ConvTranspose's output_size on unbatched input; the
same errors on both backends."""
import numpy as np
import pytest

import dualdl as dl
from dualdl import nn

torch = pytest.importorskip("torch")
pytest.importorskip("mxnet")


def _run_mx(layer, x, hybridize, grad_out=None):
    """Outputs (and the input gradient for ``grad_out``) of an MXNet layer as numpy."""
    from mxnet import autograd
    if hybridize:
        layer.hybridize()
    xt = dl.from_numpy(x)
    xt.attach_grad()
    with autograd.record():
        out = layer(xt)
    outs = out if isinstance(out, tuple) else (out,)
    if grad_out is not None:
        outs[0].backward(dl.from_numpy(grad_out))
    return [o.asnumpy() for o in outs], (xt.grad.asnumpy() if grad_out is not None else None)


def _run_torch(layer, x, grad_out=None):
    xt = torch.from_numpy(x).requires_grad_(grad_out is not None)
    out = layer(xt)
    outs = out if isinstance(out, tuple) else (out,)
    if grad_out is not None:
        outs[0].backward(torch.from_numpy(grad_out))
    return [o.detach().numpy() for o in outs], (xt.grad.numpy() if grad_out is not None else None)


FRACTIONAL = [
    ("FractionalMaxPool2d", (2, 3, 7, 9), dict(kernel_size=(2, 3), output_size=(4, 3))),
    ("FractionalMaxPool2d", (3, 7, 6), dict(kernel_size=2, output_ratio=0.5, return_indices=True)),
    ("FractionalMaxPool3d", (2, 2, 9, 7, 8), dict(kernel_size=(3, 2, 2), output_size=(5, 3, 6), return_indices=True)),
    ("FractionalMaxPool3d", (2, 6, 5, 7), dict(kernel_size=2, output_ratio=(0.5, 0.4, 0.6))),
]


@pytest.mark.parametrize("name,shape,kw", FRACTIONAL)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fractional_max_pool_with_given_samples_is_torchs(name, shape, kw, dtype):
    rng = np.random.default_rng(0)
    n = 2 if name.endswith("2d") else 3
    x = rng.standard_normal(shape).astype(dtype)
    samples = rng.random((shape[0] if len(shape) == n + 2 else 1, shape[-n - 1], n)).astype(dtype)
    with dl.use("torch"):
        ref = getattr(nn, name)(**kw, _random_samples=torch.from_numpy(samples))
        want, _ = _run_torch(ref, x)
        g = rng.standard_normal(want[0].shape).astype(dtype)
        want, want_grad = _run_torch(ref, x, g)
    for hybridize in (False, True):
        with dl.use("mxnet"):
            got, grad = _run_mx(getattr(nn, name)(**kw, _random_samples=dl.from_numpy(samples)), x, hybridize, g)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)            # a max and an index: exact
        np.testing.assert_array_equal(grad, want_grad)     # the gradient reaches the chosen element


def test_fractional_max_pool_output_ratio_follows_the_input_size_hybridized():
    rng = np.random.default_rng(1)
    samples = rng.random((1, 2, 2)).astype(np.float32)
    with dl.use("mxnet"):
        m = nn.FractionalMaxPool2d(2, output_ratio=(0.5, 0.7), _random_samples=dl.from_numpy(samples))
        m.hybridize()
        for shape in ((1, 2, 8, 9), (1, 2, 11, 6), (1, 2, 8, 9)):
            x = rng.standard_normal(shape).astype(np.float32)
            ref = torch.nn.FractionalMaxPool2d(2, output_ratio=(0.5, 0.7), _random_samples=torch.from_numpy(samples))
            np.testing.assert_array_equal(m(dl.from_numpy(x)).asnumpy(), ref(torch.from_numpy(x)).detach().numpy())


def _starts(length, out, k, u):
    """torch's window starts for sample ``u`` (generate_intervals)."""
    alpha = (length - k) / (out - 1)
    return tuple(int((i + u) * alpha) - int(u * alpha) for i in range(out - 1)) + (length - k,)


def test_fractional_max_pool_without_samples_pools_fractional_windows():
    """MXNet's own samples: in every plane the outputs are the maxima of the windows of one pair of
    torch start sequences (found among all the samples could give), the indices name those
    elements, and two calls draw different samples."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 8, 10, 10)).astype(np.float32)
    seq_h = {_starts(10, 4, 2, u) for u in np.linspace(0, 1, 400, endpoint=False)}
    seq_w = {_starts(10, 3, 3, u) for u in np.linspace(0, 1, 400, endpoint=False)}
    assert len(seq_h) > 1 and len(seq_w) > 1
    with dl.use("mxnet"):
        m = nn.FractionalMaxPool2d((2, 3), output_size=(4, 3), return_indices=True)
        runs = [[t.asnumpy() for t in m(dl.from_numpy(x))] for _ in range(2)]
    chosen = []
    for out, idx in runs:
        assert out.shape == idx.shape == (4, 8, 4, 3) and idx.dtype == np.int64
        np.testing.assert_array_equal(np.take_along_axis(x.reshape(4, 8, -1), idx.reshape(4, 8, -1), 2)
                                      .reshape(out.shape), out)
        for b in range(4):
            for c in range(8):
                fits = [(sh, sw) for sh in seq_h for sw in seq_w
                        if all(out[b, c, i, j] == x[b, c, h:h + 2, w:w + 3].max()
                               and h <= idx[b, c, i, j] // 10 < h + 2 and w <= idx[b, c, i, j] % 10 < w + 3
                               for i, h in enumerate(sh) for j, w in enumerate(sw))]
                assert fits, (b, c)
                chosen.append(fits[0])
    assert chosen[:32] != chosen[32:]                       # fresh samples at each call


LAZY = [("LazyConv1d", "Conv1d", (2, 4, 7), dict(padding="same")),
        ("LazyConv2d", "Conv2d", (4, 5, 6), dict(groups=2, stride=2)),
        ("LazyConv3d", "Conv3d", (2, 3, 4, 5, 4), dict(padding=1, padding_mode="replicate")),
        ("LazyConvTranspose1d", "ConvTranspose1d", (3, 5), dict(stride=2, output_padding=1)),
        ("LazyConvTranspose2d", "ConvTranspose2d", (2, 4, 3, 4), dict(groups=2, dilation=2)),
        ("LazyConvTranspose3d", "ConvTranspose3d", (2, 2, 3, 4, 3), dict(stride=(1, 2, 2)))]


@pytest.mark.parametrize("name,becomes,shape,kw", LAZY)
def test_lazy_convolution_infers_in_channels_and_becomes_torchs_class(name, becomes, shape, kw):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    batched = len(shape) == int(name[-2]) + 2
    with dl.use("torch"):
        ref = getattr(nn, name)(4, 3, **kw)
        want = ref(torch.from_numpy(x)).detach().numpy()
        state = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
        assert type(ref).__name__ == becomes and isinstance(ref, getattr(nn, becomes))
    with dl.use("mxnet"):
        m = getattr(nn, name)(4, 3, **kw)
        assert isinstance(m, getattr(nn, name)) and m.in_channels == 0
        m(dl.from_numpy(x))
        assert type(m).__name__ == becomes and isinstance(m, getattr(nn, becomes))
        assert m.in_channels == shape[1 if batched else 0]
        assert {k: tuple(v.shape) for k, v in dl.state_dict(m).items()} == {k: v.shape for k, v in state.items()}
        w = dl.to_numpy(dl.state_dict(m)["weight"])
        fan_in = int(np.prod(w.shape[1:]))                 # torch's U(+-1/sqrt(fan_in)) init
        assert 0.6 / np.sqrt(fan_in) < np.abs(w).max() <= 1 / np.sqrt(fan_in)
        dl.load_state_dict(m, state)
        m.hybridize()
        np.testing.assert_allclose(m(dl.from_numpy(x)).asnumpy(), want, rtol=1e-5, atol=1e-5)


def test_lazy_convolution_inside_a_hybridized_parent():
    x = np.random.default_rng(4).standard_normal((2, 3, 6, 6)).astype(np.float32)
    with dl.use("mxnet"):
        seq = nn.Sequential(nn.LazyConv2d(4, 3), nn.ReLU(), nn.LazyConvTranspose2d(2, 2, stride=2))
        seq.hybridize()
        assert seq(dl.from_numpy(x)).shape == (2, 2, 8, 8)
        assert seq[0].in_channels == 3 and seq[2].in_channels == 4
        assert tuple(seq[2].weight.shape) == (4, 2, 2, 2)
        seq3 = nn.Sequential(nn.LazyConvTranspose3d(2, 2))
        seq3.hybridize()
        with pytest.raises(NotImplementedError, match="LazyConvTranspose3d: in_channels cannot be inferred"):
            seq3(dl.from_numpy(x[:, :, None]))


@pytest.mark.parametrize("make,shape", [
    (lambda: nn.LazyConv2d(4, 3, groups=2), (1, 3, 5, 5)),           # torch's ValueError
    (lambda: nn.LazyConv1d(4, 3), (2, 3, 4, 5)),                     # rank
    (lambda: nn.LazyConvTranspose2d(4, 3), (0, 3, 5, 5)),            # empty
    (lambda: nn.Conv2d(3, 4, 3), (2, 8, 8)),                         # unbatched, wrong channels
    (lambda: nn.ConvTranspose3d(2, 4, 3), (3, 4, 4, 4)),
    (lambda: nn.LPPool2d(2, 3), (3, 2, 5)),                          # too small
    (lambda: nn.AdaptiveAvgPool3d(2), (3, 4)),
    (lambda: nn.FractionalMaxPool2d(3, output_size=(3, 3)), (1, 2, 4, 4)),
    (lambda: nn.FractionalMaxPool3d(2, output_size=(4, 3, 3)), (1, 2, 5, 5, 5)),   # 3-d: output + k - 1 < L
])
def test_bad_inputs_fail_alike_on_both_backends(make, shape):
    a = np.ones(shape, np.float32)
    errs = []
    for be, tensor in (("torch", torch.from_numpy), ("mxnet", dl.from_numpy)):
        with dl.use(be):
            with pytest.raises((ValueError, RuntimeError)) as e:
                make()(tensor(a))
        errs.append((e.type, str(e.value)))
    assert errs[0] == errs[1] and errs[0][0] is ValueError, errs


def test_max_pool_indices_take_the_first_maximum_as_torch():
    """Integer inputs: many ties; torch's index is the first maximum of the window (scan order)."""
    x = np.random.default_rng(5).integers(0, 3, (2, 3, 7, 8)).astype(np.float32)
    ref = torch.nn.MaxPool2d(3, 2, 1, return_indices=True, ceil_mode=True)(torch.from_numpy(x))
    for hybridize in (False, True):
        with dl.use("mxnet"):
            m = nn.MaxPool2d(3, 2, 1, return_indices=True, ceil_mode=True)
            if hybridize:
                m.hybridize()
            out, idx = m(input=dl.from_numpy(x))
        np.testing.assert_array_equal(out.asnumpy(), ref[0].numpy())
        np.testing.assert_array_equal(idx.asnumpy(), ref[1].numpy())


def test_conv_transpose_output_size_on_unbatched_input():
    x = np.random.default_rng(6).standard_normal((2, 3, 4)).astype(np.float32)
    for size in ((6, 8), (3, 6, 8)):                            # spatial, or (C, H, W) of the output
        with dl.use("torch"):
            ref = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
            want = ref(input=torch.from_numpy(x), output_size=size).detach().numpy()
            state = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
        with dl.use("mxnet"):
            m = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
            dl.load_state_dict(m, state)
            got = m(input=dl.from_numpy(x), output_size=size).asnumpy()
        assert want.shape == (3, 6, 8)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
