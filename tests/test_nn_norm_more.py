"""Issue 34, the normalisation, linear and embedding families against torch.nn on torch, MXNet and
MXNet hybridized, beyond the parity rows (tests/parity_table/norm_linear_more.py): unbatched and
other-channel InstanceNorm input, one empty-batch refusal in every mode, BatchNorm's cumulative
average (momentum=None), float64 LayerNorm/RMSNorm/Bilinear exact, wrong inputs to hybridized layers
refused with dualdl's error (MXNet's shape inference raised its own, InstanceNorm reshaped silently,
Embedding clipped), torch's forward names."""
import warnings

import numpy as np
import pytest

import dualdl as dl
from dualdl.state import load_state_dict

torch = pytest.importorskip("torch")
mx = pytest.importorskip("mxnet")

CANDIDATES = [("torch", False), ("mxnet", False), ("mxnet", True)]
IDS = ["torch", "mxnet", "mxnet-hybridized"]


def _reference(name, args, kwargs, dtype):
    torch.manual_seed(0)
    return getattr(torch.nn, name)(*args, **kwargs).to(getattr(torch, dtype))


def _twin(backend, hybridize, ref, name, args, kwargs, dtype):
    """dualdl's layer on ``backend`` with the reference's parameters and buffers."""
    with dl.use(backend):
        m = getattr(dl.nn, name)(*args, **kwargs, dtype=dtype) if "dtype" in _params(name) else \
            getattr(dl.nn, name)(*args, **kwargs)
        load_state_dict(m, {k: v.detach().numpy().copy() for k, v in ref.state_dict().items()}, strict=False)
        if hybridize:
            m.hybridize()
    return m


def _params(name):
    return dl.nn.LAYERS[name].signature


def _forward(backend, m, xs, train, grad=True):
    """Outputs and input gradients (of sum(out * g), g fixed) as numpy."""
    m.train(train)
    g_rng = np.random.default_rng(1)
    if backend == "torch":
        ts = [torch.from_numpy(x.copy()).requires_grad_(grad) for x in xs]
        out = m(*ts)
        if grad:
            (out * torch.from_numpy(g_rng.standard_normal(out.shape).astype(xs[0].dtype))).sum().backward()
        return out.detach().numpy(), [t.grad.numpy() if grad else None for t in ts]
    ts = [mx.nd.array(x, dtype=x.dtype) for x in xs]
    for t in ts:
        t.attach_grad()
    with mx.autograd.record(train_mode=train):
        out = m(*ts)
    if grad:
        out.backward(mx.nd.array(g_rng.standard_normal(out.shape), dtype=out.dtype))
    return out.asnumpy(), [t.grad.asnumpy() if grad else None for t in ts]


def _compare(name, args, kwargs, shapes, dtype="float32", train=True, tol=None):
    """Every candidate's output and input gradients against torch.nn's; returns the worst difference."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s).astype(dtype) for s in shapes]
    ref = _reference(name, args, kwargs, dtype)
    want, want_g = _forward("torch", ref, xs, train)
    tol = tol or (1e-5 if dtype == "float32" else 1e-12)
    worst = 0.0
    for backend, hyb in CANDIDATES:
        got, got_g = _forward(backend, _twin(backend, hyb, ref, name, args, kwargs, dtype), xs, train)
        for a, b in [(got, want)] + list(zip(got_g, want_g)):
            assert a.shape == b.shape and a.dtype == b.dtype, (backend, hyb, a.shape, b.shape)
            d = float(np.abs(a.astype(np.float64) - b).max())
            assert d <= tol * max(1.0, float(np.abs(b).max())), (name, backend, hyb, d)
            worst = max(worst, d)
    return worst


@pytest.mark.parametrize("name,shape", [("InstanceNorm1d", (3, 15)), ("InstanceNorm2d", (3, 6, 6)),
                                        ("InstanceNorm3d", (3, 4, 3, 2))])
@pytest.mark.parametrize("kwargs", [{}, {"affine": True, "track_running_stats": True}], ids=["plain", "affine-stats"])
def test_unbatched_instance_norm_gives_torchs_numbers_eager_and_hybridized(name, shape, kwargs):
    """torch takes (C, *) as one sample; dualdl refused it eagerly and, hybridized, normalised it as
    a batch of C samples of one channel each: up to 4.75 off with no error."""
    for train in (True, False):
        _compare(name, (3,), dict(kwargs, eps=1e-3, momentum=0.3), [shape], train=train)


def _warned(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn()
    return [str(x.message) for x in w if "num_features" in str(x.message)]


def test_instance_norm_without_weight_takes_another_channel_count_with_torchs_warning():
    msg = ("input's size at dim=1 does not match num_features. You can silence this warning by not passing "
           "in num_features, which is not used because affine=False")
    _compare("InstanceNorm1d", (3,), {}, [(2, 4, 5)])
    x = np.random.default_rng(0).standard_normal((2, 4, 5)).astype(np.float32)
    for backend, hyb in CANDIDATES:
        m = _twin(backend, hyb, _reference("InstanceNorm1d", (3,), {}, "float32"), "InstanceNorm1d", (3,), {},
                  "float32")
        assert _warned(lambda: m(dl.from_numpy(x, backend=backend))) == [msg], (backend, hyb)


@pytest.mark.parametrize("kwargs", [{"affine": True}, {"track_running_stats": True}])
def test_instance_norm_refuses_another_channel_count_where_weights_need_it_hybridized_too(kwargs):
    x = np.ones((2, 4, 5), np.float32)
    for backend, hyb in CANDIDATES:
        m = _twin(backend, hyb, _reference("InstanceNorm1d", (3,), kwargs, "float32"), "InstanceNorm1d", (3,),
                  kwargs, "float32")
        with pytest.raises(ValueError) as e:
            m(dl.from_numpy(x, backend=backend))
        assert str(e.value) == "InstanceNorm1d(3): expected input of shape (3, L) or (N, 3, L), got (2, 4, 5)"


EMPTY = [("BatchNorm1d", (5,), [(0, 5, 3)], "BatchNorm1d(5)"),
         ("BatchNorm2d", (5,), [(0, 5, 2, 2)], "BatchNorm2d(5)"),
         ("LayerNorm", (5,), [(0, 5)], "LayerNorm((5,))"),
         ("RMSNorm", (5,), [(0, 5)], "RMSNorm((5,))"),
         ("InstanceNorm1d", (5,), [(0, 5, 3)], "InstanceNorm1d(5)"),
         ("GroupNorm", (1, 5), [(0, 5, 3)], "GroupNorm(1, 5)"),
         ("LocalResponseNorm", (2,), [(0, 5, 3)], "LocalResponseNorm(2)"),
         ("Bilinear", (2, 3, 4), [(0, 2), (0, 3)], "Bilinear(in1_features=2, in2_features=3, out_features=4)")]


@pytest.mark.parametrize("name,args,shapes,who", EMPTY, ids=[e[0] for e in EMPTY])
def test_an_empty_batch_gets_one_refusal_on_every_backend_and_mode(name, args, shapes, who):
    """torch returns an empty output; MXNet 1.x cannot run an operator on a 0 in the shape (BatchNorm
    raised MXNet's own error eagerly in eval mode, 'more than 1 value per channel' in train mode):
    dualdl's empty-batch refusal, the same on both backends, eager and hybridized, train and eval."""
    for backend, hyb in CANDIDATES:
        for train in (True, False):
            with dl.use(backend):
                m = getattr(dl.nn, name)(*args)
                if hyb:
                    m.hybridize()
                m.train(train)
                with pytest.raises(ValueError) as e:
                    m(*[dl.from_numpy(np.zeros(s, np.float32)) for s in shapes])
            shape = shapes[0]
            assert str(e.value) == (f"{who}: got an input with no elements (shape {shape}, e.g. a batch of 0 "
                                    f"samples); MXNet's operators cannot run on it, so dualdl refuses it on both "
                                    f"backends: skip empty batches before calling the layer or loss"), (backend, hyb)


def _stats(backend, m):
    if backend == "torch":
        return [m.running_mean.numpy().copy(), m.running_var.numpy().copy()]
    return [m.running_mean.data().asnumpy(), m.running_var.data().asnumpy()]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batchnorm_cumulative_average_is_torchs_eager_and_hybridized(dtype):
    """momentum=None: the running statistics are the plain average of the batches' (torch's
    1/num_batches_tracked); MXNet refused it. Batches of different sizes, then eval mode."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((n, 3, 4)).astype(dtype) * s + s for n, s in ((2, 1.0), (5, 3.0), (3, 0.5), (4, 2.0))]
    ref = _reference("BatchNorm1d", (3,), {"momentum": None}, dtype)
    tol = 1e-6 if dtype == "float32" else 1e-13
    models = {(b, h): _twin(b, h, ref, "BatchNorm1d", (3,), {"momentum": None}, dtype) for b, h in CANDIDATES[1:]}
    for x in xs:
        want, _ = _forward("torch", ref, [x], True)
        want_stats = _stats("torch", ref)
        for (b, h), m in models.items():
            got, _ = _forward(b, m, [x], True)
            np.testing.assert_allclose(got, want, rtol=0, atol=tol * 10)
            for a, w in zip(_stats(b, m), want_stats):
                np.testing.assert_allclose(a, w, rtol=tol, atol=0, err_msg=f"{b} hybridized={h}")
    assert int(ref.num_batches_tracked) == 4
    want, _ = _forward("torch", ref, [xs[0]], False)
    for (b, h), m in models.items():
        np.testing.assert_allclose(_forward(b, m, [xs[0]], False)[0], want, rtol=0, atol=tol * 10)


def test_instance_norm_momentum_none_keeps_the_running_statistics_as_torch():
    """torch's InstanceNorm passes momentum 0.0 for None (no batch count): nothing is averaged in."""
    x = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32) + 4
    kwargs = {"momentum": None, "track_running_stats": True}
    ref = _reference("InstanceNorm1d", (3,), kwargs, "float32")
    _forward("torch", ref, [x], True)
    for b, h in CANDIDATES:
        m = _twin(b, h, _reference("InstanceNorm1d", (3,), kwargs, "float32"), "InstanceNorm1d", (3,), kwargs,
                  "float32")
        _forward(b, m, [x], True)
        for a, w in zip(_stats(b, m), _stats("torch", ref)):
            np.testing.assert_array_equal(a, w)


def test_layer_norm_float64_is_exact_on_mxnet():
    """MXNet's fused LayerNorm op keeps float32 precision in float64 (1.2e-11 on module_db's
    input, 1.6e-8 on a (128, 5, 5) input with eps 1e-3): dualdl's float64 path is the two-pass formula."""
    worst = _compare("LayerNorm", ([5], 1e-3), {}, [(128, 5, 5)], dtype="float64")
    assert worst < 1e-13


def test_rmsnorm_eps_none_is_the_float64_epsilon_when_hybridized_without_weight():
    """eps=None is the input dtype's machine epsilon: a hybridized graph has no input dtype, so it
    takes the dtype of the layer's cast (float32's 1.2e-7 would be 1e-4 off on this input)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6)) * 1e-4
    want = torch.nn.RMSNorm(6, elementwise_affine=False)(torch.from_numpy(x)).numpy()
    with dl.use("mxnet"):
        for hyb in (False, True):
            m = dl.nn.RMSNorm(6, elementwise_affine=False)
            m.cast("float64")
            if hyb:
                m.hybridize()
            np.testing.assert_allclose(m(mx.nd.array(x, dtype="float64")).asnumpy(), want, rtol=1e-13, atol=0)


def test_bilinear_float64_is_exact_batched_3d_and_unbatched():
    for shapes in ([(8, 2), (8, 3)], [(2, 5, 2), (2, 5, 3)], [(2,), (3,)]):
        assert _compare("Bilinear", (2, 3, 4), {}, shapes, dtype="float64") < 1e-13


def test_bilinear_refuses_inputs_whose_leading_axes_differ_on_both_backends():
    errs = set()
    for backend, hyb in CANDIDATES:
        with dl.use(backend):
            m = dl.nn.Bilinear(2, 3, 4)
            if hyb:
                m.hybridize()
            with pytest.raises(ValueError) as e:
                m(dl.from_numpy(np.ones((8, 2), np.float32)), dl.from_numpy(np.ones((7, 3), np.float32)))
            errs.add(str(e.value))
    assert errs == {"Bilinear(in1_features=2, in2_features=3, out_features=4) input2: expected input of shape "
                    "(*, 3) with the leading axes of input1 (8, 2), got (7, 3)"}


WRONG = [(lambda nn: nn.GroupNorm(2, 4), (2, 6, 3), ValueError, "GroupNorm(2, 4): expected input of shape (N, 4, *)"),
         (lambda nn: nn.Linear(5, 3), (2, 4), ValueError, "Linear(in_features=5, out_features=3): expected input"),
         (lambda nn: nn.LayerNorm(5), (2, 4), ValueError, "LayerNorm((5,)): expected input of shape (*, 5)"),
         (lambda nn: nn.BatchNorm1d(5), (2, 4), ValueError, "BatchNorm1d(5): expected input of shape (N, 5)"),
         (lambda nn: nn.InstanceNorm2d(3, affine=True), (2, 4, 3, 3), ValueError, "InstanceNorm2d(3): expected"),
         (lambda nn: nn.LocalResponseNorm(2), (2, 5), ValueError, "LocalResponseNorm(2): expected input of shape"),
         (lambda nn: nn.Embedding(4, 3), np.array([[0, 7]]), IndexError, "Embedding(4, 3): index 7 is out of range")]


@pytest.mark.parametrize("make,x,err,start", WRONG, ids=["GroupNorm", "Linear", "LayerNorm", "BatchNorm1d",
                                                         "InstanceNorm2d", "LocalResponseNorm", "Embedding"])
def test_a_wrong_input_gets_dualdls_error_hybridized_as_eager(make, x, err, start):
    """Hybridized, these raised MXNet's shape-inference error (the Embedding clipped index 7 to 3
    silently): the check now runs on the NDArray at the call, before the cached graph."""
    x = x if isinstance(x, np.ndarray) else np.ones(x, np.float32)
    msgs = set()
    for backend, hyb in CANDIDATES:
        with dl.use(backend):
            m = make(dl.nn)
            if hyb:
                m.hybridize()
            with pytest.raises(err) as e:
                m(dl.from_numpy(x))
            msgs.add(str(e.value))
    assert len(msgs) == 1 and msgs.pop().startswith(start)


@pytest.mark.parametrize("backend,hyb", CANDIDATES, ids=IDS)
def test_torchs_forward_names(backend, hyb):
    rng = np.random.default_rng(0)
    cases = [(lambda nn: nn.Linear(3, 2), "input", (4, 3)), (lambda nn: nn.GroupNorm(1, 3), "input", (2, 3, 4)),
             (lambda nn: nn.BatchNorm1d(3), "input", (4, 3)), (lambda nn: nn.InstanceNorm3d(3), "input", (3, 2, 2, 2)),
             (lambda nn: nn.RMSNorm(3), "x", (2, 3)), (lambda nn: nn.LocalResponseNorm(2), "input", (2, 3, 4))]
    with dl.use(backend):
        for make, kw, shape in cases:
            m = make(dl.nn)
            if hyb:
                m.hybridize()
            x = dl.from_numpy(rng.standard_normal(shape).astype(np.float32))
            np.testing.assert_array_equal(dl.to_numpy(m(**{kw: x})), dl.to_numpy(m(x)))
        m = dl.nn.Embedding(5, 2)
        i = dl.from_numpy(np.array([[1, 4]]))
        np.testing.assert_array_equal(dl.to_numpy(m(input=i)), dl.to_numpy(m(i)))
        m = dl.nn.Bilinear(2, 3, 4)
        if hyb:
            m.hybridize()
        a, b = (dl.from_numpy(rng.standard_normal(s).astype(np.float32)) for s in ((5, 2), (5, 3)))
        np.testing.assert_array_equal(dl.to_numpy(m(input1=a, input2=b)), dl.to_numpy(m(a, b)))
