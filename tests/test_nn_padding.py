"""The padding layers (``{Constant,Zero,Reflection,Replication,Circular}Pad{1,2,3}d``) against torch's
own ``F.pad`` semantics, beyond the parity rows: every (left, right) of one dim from -6 to 6 in every
mode (cropping included) gives torch's numbers on MXNet eager and hybridized, or the same dualdl
error on both backends where torch fails; constant pads take any rank; the wrong ranks, arguments
and printing are torch's; the first forward argument is called ``input`` as in torch."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import dualdl as dl
from dualdl.nn.resample_checks import PAD_LAYERS, check_pad_input
from dualdl.testing.runners import adapter

CANDIDATES = [("torch", False), ("mxnet", False), ("mxnet", True)]
FAMILY = {"constant": "ConstantPad1d", "reflect": "ReflectionPad1d", "replicate": "ReplicationPad1d",
          "circular": "CircularPad1d"}


def _make(name: str, padding, value: float = 1.5):
    return getattr(dl.nn, name)(padding, *((value,) if name.startswith("Constant") else ()))


def _forward_backward(backend: str, hybridize: bool, layer, x: np.ndarray, g: np.ndarray):
    impl = adapter(backend)
    if hybridize:
        layer.hybridize()
    t = impl.tensor(x, True)
    with impl.recording(True):
        y = layer(t)
    impl.backward([y], [g])
    return impl.to_numpy(y), impl.input_grad(t)


def _torch_pad(x: np.ndarray, padding, mode: str, value: float = 1.5):
    return torch.nn.functional.pad(torch.from_numpy(x), padding, mode=mode,
                                   **({"value": value} if mode == "constant" else {})).numpy()


@pytest.mark.parametrize("mode", sorted(FAMILY))
def test_every_padding_of_one_dim_is_torchs_or_the_same_refusal(mode):
    """All (left, right) in [-6, 6]^2 on a dim of 5: where torch gives a non-empty result, MXNet eager
    and hybridized give the same numbers (float64, exactly); where torch fails, the neutral check
    (which both backends run first) refuses. The only results of torch refused are an empty
    output and a circular pad wrapping around a cropped dim more than once, where torch's kernel
    reads uninitialised memory (printed numbers such as 4.6e-41) or fails inside."""
    name, x = FAMILY[mode], np.arange(10, dtype="float64").reshape(2, 5)
    compared = 0
    for left, right in itertools.product(range(-6, 7), repeat=2):
        try:
            ref = _torch_pad(x, (left, right), mode)
        except (RuntimeError, ValueError, IndexError):
            ref = None
        try:
            check_pad_input(name, (left, right), x.shape)
            refused = None
        except ValueError as e:
            refused = str(e)
        if ref is None or refused is not None:
            kept = 5 + min(left, 0) + min(right, 0)
            wraps_twice = mode == "circular" and (kept < 1 or max(left, right) > kept)
            assert refused is not None and (ref is None or ref.size == 0 or wraps_twice), (left, right, ref)
            assert refused.startswith(f"{name}(padding={(left, right)}): "), refused
            continue
        for backend in ("mxnet", "mxnet:hybridized"):
            with dl.use("mxnet"):
                layer = _make(name, (left, right))
                if backend.endswith("hybridized"):
                    layer.hybridize()
                got = dl.to_numpy(layer(dl.from_numpy(x)))
            assert got.shape == ref.shape and np.array_equal(got, ref), (backend, left, right, got, ref)
        compared += 1
    assert compared >= {"constant": 120, "reflect": 70, "replicate": 110, "circular": 70}[mode], compared


@pytest.mark.parametrize("backend,hybridize", CANDIDATES)
@pytest.mark.parametrize("name,shape,padding", [
    ("ConstantPad1d", (7,), (2, -3)), ("ConstantPad1d", (2, 1, 2, 3, 4), (1, 2)),
    ("ZeroPad2d", (4, 5), (1, -1, 2, 0)), ("ZeroPad2d", (2, 1, 3, 4, 5), (0, 2, 1, 1)),
    ("ConstantPad3d", (3, 4, 5), (1, 0, 2, -1, 0, 1)), ("ZeroPad3d", (2, 1, 2, 3, 4, 5), 1),
    ("ReflectionPad2d", (3, 4, 5), (3, 2, -1, 3)), ("ReplicationPad3d", (2, 3, 4, 5), (2, -1, 0, 3, 1, 1)),
    ("CircularPad3d", (1, 2, 3, 4, 5), (-1, 4, 2, 1, 3, 0)), ("ReflectionPad1d", (2, 3, 6), (5, -2)),
])
def test_ranks_torch_takes_run_with_torchs_numbers_and_gradients(backend, hybridize, name, shape, padding):
    """Constant pads at any rank with the padded dims (1-D to 6-D), the others batched and
    unbatched, float64 output and input gradient equal to torch.nn's."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    ref_layer = getattr(torch.nn, name)(padding, *((1.5,) if name.startswith("Constant") else ()))
    t = torch.from_numpy(x).requires_grad_()
    ref = ref_layer(t)
    g = rng.standard_normal(ref.shape)
    ref.backward(torch.from_numpy(g))
    with dl.use(backend):
        got, grad = _forward_backward(backend, hybridize, _make(name, padding), x, g)
    assert got.dtype == np.float64 and np.array_equal(got, ref.detach().numpy())
    np.testing.assert_allclose(grad, t.grad.numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("backend,hybridize", CANDIDATES)
@pytest.mark.parametrize("name,shape,pattern", [
    ("ReflectionPad1d", (1, 2, 3, 5), r"ReflectionPad1d: expected input of shape \(N, C, W\) or \(C, W\), got \(1, 2, 3, 5\)"),
    ("ReplicationPad3d", (4, 5, 6), r"ReplicationPad3d: expected input of shape \(N, C, D, H, W\) or \(C, D, H, W\), "
                                    r"got \(4, 5, 6\)"),
    ("CircularPad2d", (5, 6), r"CircularPad2d: expected input of shape \(N, C, H, W\) or \(C, H, W\), got \(5, 6\)"),
    ("ConstantPad3d", (5, 6), r"ConstantPad3d: expected input of shape \(\*, D, H, W\), got \(5, 6\)"),
    ("ZeroPad2d", (5,), r"ZeroPad2d: expected input of shape \(\*, H, W\), got \(5,\)"),
    ("ReflectionPad3d", (1, 3, 3, 3), r"reflect padding must be smaller than the input's depth, height and width"),
    ("CircularPad1d", (2, 2), r"circular padding wraps around more than once"),
    ("ZeroPad1d", (2, 0, 4), r"got an input with no elements"),
])
def test_inputs_torch_fails_on_get_one_dualdl_error_on_every_backend(backend, hybridize, name, shape, pattern):
    with dl.use(backend):
        layer = _make(name, 3)
        if hybridize:
            layer.hybridize()
        with pytest.raises(ValueError, match=pattern):
            layer(dl.from_numpy(np.ones(shape, "float32")))


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
def test_a_crop_to_nothing_is_refused_on_both_backends(backend):
    """torch returns an empty tensor; MXNet 1.x cannot produce one, so dualdl refuses it on both."""
    assert _torch_pad(np.ones((2, 4)), (-2, -2), "constant").shape == (2, 0)
    with dl.use(backend), pytest.raises(ValueError, match=r"ZeroPad1d\(padding=\(-2, -2\)\): the output of "
                                                            r"shape \(2, 0\) would have no elements"):
        dl.nn.ZeroPad1d((-2, -2))(dl.from_numpy(np.ones((2, 4), "float32")))


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
@pytest.mark.parametrize("make,error,pattern", [
    (lambda nn: nn.ReflectionPad3d((1, 2)), ValueError,
     r"ReflectionPad3d: padding must be an int or \(left, right, top, bottom, front, back\), got \(1, 2\)"),
    (lambda nn: nn.CircularPad1d((1, 2, 3)), ValueError, r"padding must be an int or \(left, right\), got"),
    (lambda nn: nn.ConstantPad1d(1.5, 0.0), TypeError, r"ConstantPad1d: padding must be an int or \(left, right\)"),
    (lambda nn: nn.ReplicationPad2d((1, 2, 3, 0.5)), TypeError, r"of ints, got \(1, 2, 3, 0.5\)"),
    (lambda nn: nn.ConstantPad2d(1, "zero"), TypeError, r"ConstantPad2d: value must be a real number, got 'zero'"),
])
def test_arguments_torch_fails_on_in_forward_are_refused_at_construction(backend, make, error, pattern):
    make(torch.nn)                                    # torch.nn builds them and fails only in forward
    with dl.use(backend), pytest.raises(error, match=pattern):
        make(dl.nn)


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
def test_attributes_and_printing_are_torchs(backend):
    for name, (n, mode) in PAD_LAYERS.items():
        args = ([1, -2] * n, 2) if name.startswith("Constant") else ([1, -2] * n,)
        ref = getattr(torch.nn, name)(*args)
        with dl.use(backend):
            mine = getattr(dl.nn, name)(*args)
        assert repr(mine) == repr(ref) and mine.padding == ref.padding == (1, -2) * n, (repr(mine), repr(ref))
        assert getattr(mine, "value", None) == getattr(ref, "value", None), name


@pytest.mark.parametrize("backend,hybridize", CANDIDATES)
def test_the_first_forward_argument_is_called_input(backend, hybridize):
    x = np.arange(24, dtype="float32").reshape(1, 4, 2, 3)
    with dl.use(backend):
        for layer, ref in [(dl.nn.CircularPad2d(1), torch.nn.CircularPad2d(1)),
                           (dl.nn.ConstantPad3d(1, 2.0), torch.nn.ConstantPad3d(1, 2.0)),
                           (dl.nn.PixelShuffle(2), torch.nn.PixelShuffle(2)),
                           (dl.nn.Unflatten(1, (2, 2)), torch.nn.Unflatten(1, (2, 2)))]:
            if hybridize:
                layer.hybridize()
            got = dl.to_numpy(layer(input=dl.from_numpy(x)))
            assert np.array_equal(got, ref(input=torch.from_numpy(x)).numpy()), layer


def test_hybridized_graphs_follow_the_rank_of_each_call():
    """A hybridized pad called with another rank rebuilds its graph (constant pads take any rank;
    the graph pads 4-D/5-D data directly); inside a hybridized parent the pads get Symbols of
    unknown rank and pad rank-free: the same numbers as torch.nn for every rank in turn."""
    rng = np.random.default_rng(1)
    make = lambda nn: nn.Sequential(nn.ReflectionPad1d((2, 1)), nn.ConstantPad2d((1, -1, 2, 0), 0.5),  # noqa: E731
                                    nn.CircularPad1d(1), nn.ReplicationPad1d((0, 2)))
    alone = lambda nn: nn.ConstantPad2d((1, -1, 2, 0), 0.5)                                          # noqa: E731
    with dl.use("mxnet"):
        for make_one, shapes in ((make, ((3, 5), (2, 3, 5), (3, 5), (4, 3, 6))),
                                 (alone, ((2, 1, 3, 6), (3, 5), (2, 3, 5), (2, 2, 1, 3, 6), (2, 1, 3, 6)))):
            ref, mine = make_one(torch.nn), make_one(dl.nn)
            mine.hybridize()
            for shape in shapes:
                x = rng.standard_normal(shape)
                got = dl.to_numpy(mine(dl.from_numpy(x)))
                assert np.array_equal(got, ref(torch.from_numpy(x)).numpy()), (make_one, shape)
