"""The conv/pool family beyond the parity table: the real torch layers raise the neutral checks'
message (the MXNet one, word for word), ConvTranspose's forward ``output_size=`` on both backends
(eager and hybridized) against torch, torch's default initialisation and parameter layout, and the
arguments MXNet cannot honour refused by name."""
import numpy as np
import pytest

import dualdl as dl
from dualdl import nn

torch = pytest.importorskip("torch")
pytest.importorskip("mxnet")

BAD = [
    (lambda: nn.Conv2d(3, 4, 3), (8, 8)),                                # neither batched nor unbatched
    (lambda: nn.Conv2d(3, 4, 5), (1, 3, 3, 3)),                          # smaller than the kernel
    (lambda: nn.Conv1d(3, 4, 3), (0, 3, 8)),                             # empty batch
    (lambda: nn.Conv3d(2, 4, 3), (1, 3, 5, 5, 5)),                       # channels
    (lambda: nn.Conv3d(2, 4, 3), (1, 2, 5, 2, 5)),
    (lambda: nn.ConvTranspose2d(2, 4, 3), (5, 5)),                       # neither batched nor unbatched
    (lambda: nn.ConvTranspose1d(2, 4, 3), (1, 3, 5)),                    # channels
    (lambda: nn.ConvTranspose2d(2, 4, 3, padding=3), (1, 2, 2, 2)),      # no output
    (lambda: nn.ConvTranspose2d(2, 4, 3), (0, 2, 5, 5)),                 # empty batch
    (lambda: nn.MaxPool2d(2), (8, 8)),
    (lambda: nn.MaxPool3d(3), (1, 1, 2, 5, 5)),
    (lambda: nn.AvgPool3d(2), (5, 5, 5)),
    (lambda: nn.AvgPool1d(3, stride=2), (2, 3, 2)),
    (lambda: nn.AdaptiveAvgPool2d(1), (3, 4)),
    (lambda: nn.AdaptiveAvgPool1d(2), (2, 3, 4, 4)),
    (lambda: nn.AdaptiveMaxPool1d(2), (4,)),
    (lambda: nn.AdaptiveMaxPool2d((2, 3)), (0, 3, 4, 4)),
]


@pytest.mark.parametrize("make,shape", BAD)
def test_the_torch_layer_raises_the_mxnet_message(make, shape):
    a = np.ones(shape, np.float32)
    with dl.use("mxnet"):
        with pytest.raises(ValueError) as mx_err:
            make()(dl.from_numpy(a))
    with dl.use("torch"):
        with pytest.raises(ValueError) as t_err:
            make()(torch.from_numpy(a))
    assert str(t_err.value) == str(mx_err.value)


@pytest.mark.parametrize("make", [
    lambda: nn.ConvTranspose2d(2, 4, 3, stride=2, output_padding=2),     # >= max(stride, dilation)
    lambda: nn.ConvTranspose1d(2, 4, 3, groups=3),
    lambda: nn.ConvTranspose2d(2, 4, 3, padding_mode="reflect"),
    lambda: nn.MaxPool3d(2, padding=2),
    lambda: nn.ConvTranspose2d(2, 3, 3, padding="same"),                # torch would fail in forward only
    lambda: nn.Conv3d(2, 3, (3, 3)),
    lambda: nn.AvgPool3d((2, 2)),
    lambda: nn.AdaptiveMaxPool2d((2, 2, 2)),
    lambda: nn.AdaptiveAvgPool1d(0),
])
def test_bad_arguments_are_refused_alike(make):
    errs = []
    for be in ("torch", "mxnet"):
        with dl.use(be):
            with pytest.raises(ValueError) as e:
                make()
            errs.append(str(e.value))
    assert errs[0] == errs[1]


def _same_weights(cls, args, kw):
    with dl.use("torch"):
        ref = cls(*args, **kw)
    sd = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    with dl.use("mxnet"):
        m = cls(*args, **kw)
        dl.load_state_dict(m, sd)
    return ref, m


@pytest.mark.parametrize("hybridize", [False, True])
def test_conv_transpose_output_size_as_torch(hybridize):
    """Every size torch accepts gives torch's output (the layer's own padding via the cached graph,
    another one imperatively); a size outside the range raises torch's range in dualdl's words."""
    ref, m = _same_weights(nn.ConvTranspose2d, (3, 2, 3), dict(stride=(2, 3), padding=1, groups=1))
    if hybridize:
        m.hybridize()
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    from mxnet import nd
    from mxnet import autograd
    for size in [(7, 13), (8, 15), (7, 14), [2, 2, 8, 13]]:
        ref.zero_grad()
        want = ref(torch.from_numpy(x), output_size=size)
        want.sum().backward()
        m.zero_grad()
        with autograd.record():
            got = m(nd.array(x), output_size=size)
        got.backward(nd.ones_like(got))
        assert got.shape == want.shape and np.abs(got.asnumpy() - want.detach().numpy()).max() < 1e-5, size
        assert np.abs(m.weight.grad().asnumpy() - ref.weight.grad.numpy()).max() < 1e-5, size
    errs = []
    for layer, t in ((ref, torch.from_numpy(x)), (m, nd.array(x))):
        with pytest.raises(ValueError, match="valid sizes range from") as e:
            layer(t, output_size=(9, 13))
        errs.append(str(e.value))
    assert errs[0] == errs[1] and "(7, 13) to (8, 15)" in errs[0]


@pytest.mark.parametrize("cls,args,w_shape,fan_in", [
    (nn.ConvTranspose2d, (6, 4, 3), (6, 2, 3, 3), 2 * 9),      # groups 2: (in, out/groups, k, k)
    (nn.ConvTranspose1d, (3, 8, 5), (3, 8, 5), 8 * 5),
    (nn.Conv3d, (2, 4, (3, 2, 2)), (4, 2, 3, 2, 2), 2 * 12),
])
def test_layout_names_and_default_init_are_torchs(cls, args, w_shape, fan_in):
    kw = {"groups": 2} if w_shape == (6, 2, 3, 3) else {}
    bound = 1 / np.sqrt(fan_in)
    names = []
    for be in ("torch", "mxnet"):
        with dl.use(be):
            dl.seed(0)
            m = cls(*args, **kw)
            params = [(k, dl.to_numpy(v if be == "torch" else v.data())) for k, v in m.named_parameters()]
        names.append([k for k, _ in params])
        (_, w), (_, b) = params
        out_channels = w_shape[1] * kw.get("groups", 1) if "Transpose" in cls.__name__ else w_shape[0]
        assert w.shape == w_shape and b.shape == (out_channels,)
        # U(-bound, bound) with torch's fan_in, spread over the range (the weight has >= 72 values)
        assert np.abs(b).max() <= bound and bound >= np.abs(w).max() > 0.9 * bound, be
    assert names[0] == names[1] == ["weight", "bias"]


def test_what_mxnet_cannot_honour_is_refused_by_name():
    with dl.use("mxnet"):
        with pytest.raises(NotImplementedError, match="return_indices"):
            nn.AdaptiveMaxPool2d(2, return_indices=True)


def test_adaptive_max_pool_bins_are_torchs_over_a_grid():
    """ROIPooling on MXNet picks torch's bins for every size up to 9 and every output size up to 6,
    forward and gradient (non-divisible and upsampling cases included)."""
    from mxnet import autograd, nd
    rng = np.random.default_rng(1)
    for h in range(1, 10):
        for oh in range(1, 7):
            x = rng.standard_normal((1, 2, h, 10 - h)).astype(np.float32)
            t = torch.from_numpy(x).requires_grad_()
            want = torch.nn.functional.adaptive_max_pool2d(t, (oh, 3))
            (want * torch.arange(want.numel()).reshape(want.shape)).sum().backward()
            with dl.use("mxnet"):
                X = nd.array(x)
                X.attach_grad()
                with autograd.record():
                    y = nn.AdaptiveMaxPool2d((oh, 3))(X)
                y.backward(nd.array(np.arange(y.size, dtype=np.float32).reshape(y.shape)))
            assert np.array_equal(y.asnumpy(), want.detach().numpy()), (h, oh)
            assert np.array_equal(X.grad.asnumpy(), t.grad.numpy()), (h, oh)


@pytest.mark.parametrize("fast", ["1", "0"])
@pytest.mark.parametrize("make", [
    lambda nn: nn.Sequential(nn.BatchNorm2d(3), nn.ReLU(), nn.MaxPool2d(2, dilation=2)),
    lambda nn: nn.Sequential(nn.BatchNorm2d(3), nn.ReLU(), nn.MaxPool2d(2, return_indices=True)),
    lambda nn: nn.Sequential(nn.ReLU(), nn.MaxPool2d(2, dilation=2)),
    lambda nn: nn.Sequential(nn.ReLU(), nn.MaxPool2d(2, return_indices=True)),
], ids=["bn relu dilated", "bn relu indices", "relu dilated", "relu indices"])
def test_a_max_pool_with_dilation_or_indices_after_relu_in_a_sequential_is_torchs(make, fast, monkeypatch):
    """MXNet's fast Sequential forms (BatchNorm+ReLU+MaxPool fused, ReLU into max pooling) take only
    pools MXNet's Pooling computes: a dilated or index-returning MaxPool keeps its window form (NaN
    kept, as torch), with or without DUALDL_MX_FAST."""
    monkeypatch.setenv("DUALDL_MX_FAST", fast)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    x[0, 0, 0, 0] = x[1, 2, 1, 1] = np.nan
    want = make(torch.nn).eval()(torch.from_numpy(x))
    with dl.use("mxnet"):
        m = make(nn)
        m.eval()
        got = m(dl.from_numpy(x))
    for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
        np.testing.assert_array_equal(dl.to_numpy(g), w.detach().numpy())
