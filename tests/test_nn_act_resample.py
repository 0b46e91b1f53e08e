"""Behaviour the parity table cannot compare element-wise (random masks) and the errors of the
activations, channel dropouts and resampling/padding layers: the same on both backends."""
from __future__ import annotations

import numpy as np
import pytest

import dualdl as dl
from dualdl import nn

BACKENDS = ["torch", "mxnet"]


def _run(layer, x, hybridize=False):
    if hybridize:
        layer.hybridize()
    return dl.to_numpy(layer(dl.from_numpy(x)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, shape", [("Dropout1d", (8, 16, 5)), ("Dropout1d", (16, 5)),
                                         ("Dropout2d", (8, 16, 3, 4)), ("Dropout2d", (8, 16, 5))])
def test_channel_dropout_zeroes_whole_channels_and_scales_the_rest(backend, name, shape):
    x = np.random.default_rng(0).uniform(1.0, 2.0, shape).astype("float32")
    with dl.use(backend):
        dl.seed(0)                  # 16 channels unbatched: a share outside (0.2, 0.8) has 2% odds unseeded
        layer = getattr(nn, name)(0.5).train()
        y = _run(layer, x)
        # one value per (sample, channel) over the dims after the channel dim
        lead = 1 if len(shape) == 2 else 2
        per_channel = (y != 0).reshape(shape[:lead] + (-1,))
        assert (per_channel.all(-1) | ~per_channel.any(-1)).all(), "a channel was partly dropped"
        kept = per_channel.all(-1)
        assert 0.2 < kept.mean() < 0.8, kept.mean()
        np.testing.assert_allclose(y[y != 0], 2 * x[y != 0], rtol=1e-6)        # 1 / (1 - p)
        assert np.array_equal(_run(layer.eval(), x), x)                          # eval: identity
        assert not _run(getattr(nn, name)(1.0).train(), x).any()                 # p = 1: zeros, no NaN


def test_channel_dropout_hybridized_zeroes_whole_channels():
    x = np.ones((8, 16, 3, 4), "float32")
    with dl.use("mxnet"):
        y = _run(nn.Dropout2d(0.5).train(), x, hybridize=True).reshape(8, 16, -1)
    assert set(np.unique(y)) == {0.0, 2.0} and ((y == 0).all(-1) | (y == 2).all(-1)).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make, shape, pattern", [
    (lambda: nn.Dropout1d(0.5), (2, 3, 4, 5), r"Dropout1d: expected input of shape \(N, C, L\) or \(C, L\), got \(2, 3, 4, 5\)"),
    (lambda: nn.Dropout2d(0.5), (2, 3), r"Dropout2d: expected input of shape \(N, C, H, W\)"),
    (lambda: nn.PReLU(3), (2, 4, 5), r"PReLU\(num_parameters=3\): expected input of shape \(N, 3, \*\), got \(2, 4, 5\)"),
    (lambda: nn.PixelShuffle(2), (2, 3, 4, 5), r"channel dim \(3\) must be divisible by upscale_factor \*\* 2 = 4"),
    (lambda: nn.ReflectionPad2d(3), (1, 1, 3, 3), r"reflect padding must be smaller than the input's height"),
    (lambda: nn.ZeroPad2d(1), (5,), r"ZeroPad2d: expected input of shape \(\*, H, W\), got \(5,\)"),
    (lambda: nn.Unflatten(1, (2, 4)), (2, 7), r"do not multiply up to the size 7 of dim 1"),
])
def test_bad_inputs_get_the_same_dualdl_error(backend, make, shape, pattern):
    with dl.use(backend):
        layer = make()
        with pytest.raises(ValueError, match=pattern):
            layer(dl.from_numpy(np.ones(shape, "float32")))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make, pattern", [
    (lambda: nn.Upsample(scale_factor=2, mode="cubic"), "unknown mode 'cubic'"),
    (lambda: nn.Upsample(), "exactly one of size and scale_factor"),
    (lambda: nn.Upsample(size=4, align_corners=True), "align_corners option can only be set with the interpolating"),
    (lambda: nn.ZeroPad2d((1, 2)), r"padding must be an int or \(left, right, top, bottom\)"),
    (lambda: nn.Unflatten(1, (-1, -1)), "at most one -1"),
    (lambda: nn.Dropout2d(1.5), "probability has to be between 0 and 1"),
])
def test_bad_arguments_are_refused_at_construction_on_both(backend, make, pattern):
    with dl.use(backend):
        with pytest.raises(ValueError, match=pattern):
            make()


@pytest.mark.parametrize("backend", BACKENDS)
def test_prelu_parameter_name_shape_and_init_are_torchs(backend):
    with dl.use(backend):
        layer = nn.PReLU(5, init=0.1)
        params = dict(layer.named_parameters())
        assert list(params) == ["weight"]
        assert np.array_equal(dl.to_numpy(dl.state_dict(layer)["weight"]), np.full(5, 0.1, "float32"))
        x = np.array([[-2.0, 1.0, -1.0, 3.0, -4.0]], "float32")
        np.testing.assert_allclose(_run(layer, x), [[-0.2, 1.0, -0.1, 3.0, -0.4]], rtol=1e-6)


def test_upsample_nearest_to_a_size_hybridized_says_what_to_do():
    with dl.use("mxnet"):
        layer = nn.Upsample(size=(5, 7))
        layer.hybridize()
        with pytest.raises(Exception, match="integer scale_factor"):
            layer(dl.from_numpy(np.ones((1, 1, 2, 3), "float32")))
