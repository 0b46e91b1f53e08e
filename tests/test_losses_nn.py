"""The losses as modules under ``dualdl.nn`` (torch's names): what torch-style code does with a
criterion (``self.criterion = nn.CrossEntropyLoss(weight=w)`` in a model, ``.to()``,
``train()``/``eval()``, state dicts, keyword calls) on both backends, the MXNet block inside a
hybridized model (Symbols), and torch's own module_db inputs of every loss entry against
``torch.nn`` (values and input gradients, float32 and float64, MXNet's (1,) for torch's () and
NaN where torch gives NaN)."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mx = pytest.importorskip("mxnet")
from mxnet import autograd, gluon, nd  # noqa: E402

import dualdl as dl  # noqa: E402
from dualdl import nn  # noqa: E402
from dualdl.losses import modules  # noqa: E402

TOL = {"float32": 1e-5, "float64": 1e-12}


def test_every_loss_is_under_dualdl_nn_with_torchs_signature():
    assert sorted(nn.LOSSES) == sorted(modules.LOSSES)
    assert set(nn.LOSSES) <= set(nn.__all__) and set(nn.LOSSES) <= set(dir(nn))
    for name in nn.LOSSES:
        ours = [(p.name, p.default, p.kind) for p in inspect.signature(getattr(nn, name)).parameters.values()]
        theirs = [(p.name, p.default, p.kind) for p in inspect.signature(getattr(torch.nn, name)).parameters.values()]
        if name == "CTCLoss":                        # dualdl's check_log_probs, last, keyword
            assert ours[-1][:2] == ("check_log_probs", True)
            ours = ours[:-1]
        assert ours == theirs, name


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
def test_native_modules_on_each_backend(backend):
    for name in nn.LOSSES:
        args = (5, 4) if name == "LinearCrossEntropyLoss" else ()
        m = getattr(nn, name)(*args, backend=backend)
        assert isinstance(m, getattr(nn, name))
        assert not isinstance(m, nn.L1Loss if name != "L1Loss" else nn.MSELoss)
        if backend == "torch":
            assert isinstance(m, getattr(torch.nn, name)), name
        else:
            assert isinstance(m, gluon.HybridBlock), name


def test_the_same_argument_errors_on_both_backends():
    for backend in ("torch", "mxnet"):
        with pytest.raises(ValueError, match="label_smoothing must be in"):
            nn.CrossEntropyLoss(label_smoothing=1.5, backend=backend)
        with pytest.raises(ValueError, match="deprecated"):
            nn.MSELoss(size_average=True, backend=backend)
        with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
            nn.MultiMarginLoss(p=3, backend=backend)
        with pytest.raises(TypeError, match=r"LinearCrossEntropyLoss.__init__\(\) missing 1 required positional "
                                            r"argument: 'num_classes'"):
            nn.LinearCrossEntropyLoss(3, backend=backend)
        with pytest.raises(RuntimeError, match=r"expected weight shape to be \(4,\), got \(3,\)"):
            nn.LinearCrossEntropyLoss(3, 4, weight=np.ones(3, np.float32), backend=backend)
        with pytest.raises(RuntimeError, match=r"expected label_smoothing to be in range \[0, 1\], got 2"):
            nn.LinearCrossEntropyLoss(3, 4, label_smoothing=2, backend=backend)
    with pytest.raises(RuntimeError, match=r"expected weight shape to be \(4,\), got \(3,\)"):
        torch.nn.LinearCrossEntropyLoss(3, 4, weight=torch.ones(3))          # torch's own wording


class _Net(nn.Module):
    """A write-once model that owns its criterion (torch style)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.criterion = nn.CrossEntropyLoss(weight=np.array([1.0, 2.0, 0.5], np.float32), label_smoothing=0.1)
        self.mse = nn.MSELoss(reduction="sum")

    def forward(self, x, y, z):
        out = self.fc(x)
        return self.criterion(out, y) + self.mse(out, z)


def test_criterion_inside_a_write_once_model_on_both_backends_and_hybridized():
    rng = np.random.default_rng(0)
    x, y, z = rng.normal(size=(6, 4)).astype(np.float32), rng.integers(0, 3, 6), rng.normal(size=(6, 3)).astype(np.float32)
    nt, nm = _Net(backend="torch"), _Net(backend="mxnet")
    assert list(dl.state_dict(nt)) == list(dl.state_dict(nm)) == ["fc.weight", "fc.bias", "criterion.weight"]
    dl.load_state_dict(nm, dl.state_dict(nt))
    nt.to("cpu").eval().train()
    nm.to("cpu").eval().train()
    lt = nt(torch.tensor(x), torch.tensor(y), torch.tensor(z))
    lt.backward()
    got = []
    for hybrid in (False, True):
        nm.hybridize(hybrid)            # hybridized: the criteria run on Symbols in the model's graph
        nm.zero_grad()
        with autograd.record():
            lm = nm(nd.array(x), nd.array(y.astype(np.float32)), nd.array(z))
        lm.backward()
        got.append((lm.asnumpy()[0], nm.fc.weight.grad().asnumpy()))
    for value, grad in got:
        assert abs(value - lt.item()) <= 1e-5 * max(1.0, abs(lt.item()))
        np.testing.assert_allclose(grad, nt.fc.weight.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_keyword_calls_and_hybridize_on_mxnet():
    x, t = nd.array(np.random.default_rng(1).normal(size=(4, 3))), nd.array([0.0, 2.0, 1.0, 1.0])
    m = nn.CrossEntropyLoss(backend="mxnet")
    want = m(x, t).asnumpy()
    assert np.array_equal(m(input=x, target=t).asnumpy(), want)
    assert np.array_equal(m(x, target=t).asnumpy(), want)
    m.hybridize()                        # nothing to add: the checked formula is one compiled graph already
    assert np.array_equal(m(x, t).asnumpy(), want)
    with pytest.raises(IndexError, match=r"lie in \[0, 3\)"):
        m(x, nd.array([0.0, 3.0, 1.0, 1.0]))
    with pytest.raises(TypeError, match="unexpected keyword argument 'targets'"):
        m(x, targets=t)
    ctc = nn.CTCLoss(backend="mxnet")
    with pytest.raises(TypeError, match=r"^CTCLoss.forward\(\) missing 2 required positional arguments: "
                                        r"'input_lengths' and 'target_lengths'$"):
        ctc(x, t)
    with pytest.raises(TypeError, match=r"CTCLoss.forward\(\) missing 2 required positional arguments: "
                                        r"'input_lengths' and 'target_lengths'"):
        torch.nn.CTCLoss()(torch.zeros(2, 1, 3), torch.zeros(1, 1))      # torch's own wording
    assert nn.CrossEntropyLoss(backend="torch")(input=torch.zeros(2, 3), target=torch.tensor([0, 1])).item() > 0


def test_zero_d_inputs_and_zero_d_weight_on_mxnet():
    """MXNet's operators cannot compute with 0-d arrays: dualdl computes them as shape (1,)."""
    a, b = nd.array(np.float32(1.5)), nd.array(np.float32(-0.5))
    assert a.shape == ()
    for name, want in (("MSELoss", 4.0), ("L1Loss", 2.0), ("SmoothL1Loss", 1.5), ("HingeEmbeddingLoss", 1.5),
                       ("SoftMarginLoss", float(np.log1p(np.exp(0.75))))):
        got = getattr(nn, name)(backend="mxnet")(a, b)
        assert got.shape == (1,) and abs(float(got.asnumpy()[0]) - want) < 1e-6, name
    m = nn.BCEWithLogitsLoss(weight=np.float32(2.0), backend="mxnet")
    assert m.weight.shape == (1,)                      # a 0-d weight is kept as (1,)
    x = np.array([[0.5, -1.0]], np.float32)
    want = torch.nn.BCEWithLogitsLoss(weight=torch.tensor(2.0))(torch.tensor(x), torch.ones(1, 2)).item()
    assert abs(float(m(nd.array(x), nd.ones((1, 2))).asnumpy()[0]) - want) < 1e-6


def test_linear_cross_entropy_module_on_both_backends():
    rng = np.random.default_rng(2)
    x, t = rng.normal(size=(6, 5)).astype(np.float32), rng.integers(0, 4, (6, 3, 2))
    kw = dict(out_features=(3, 2), bias=True, weight=np.linspace(0.5, 2, 4).astype(np.float32), label_smoothing=0.1)
    ref = torch.nn.LinearCrossEntropyLoss(5, 4, **dict(kw, weight=torch.tensor(kw["weight"])))
    outs = {}
    for backend in ("torch", "mxnet"):
        m = nn.LinearCrossEntropyLoss(5, 4, backend=backend, options=torch.nn.LinearCrossEntropyOptions(), **kw)
        assert list(dl.state_dict(m)) == ["linear.weight", "linear.bias", "weight"] or \
            sorted(dl.state_dict(m)) == ["linear.bias", "linear.weight", "weight"]
        dl.load_state_dict(m, {k: v.detach().numpy() for k, v in ref.state_dict().items()})
        if backend == "torch":
            out = m(torch.tensor(x), torch.tensor(t))
            out.backward()
            outs[backend] = (out.item(), m.linear.weight.grad.numpy())
        else:
            with autograd.record():
                out = m(nd.array(x), nd.array(t))
            out.backward()
            outs[backend] = (float(out.asnumpy()[0]), m.linear.weight.grad().asnumpy())
    want = ref(torch.tensor(x), torch.tensor(t))
    want.backward()
    for value, grad in outs.values():
        assert abs(value - want.item()) < 1e-5
        np.testing.assert_allclose(grad, ref.linear.weight.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_losses_on_symbols_inside_a_hybridized_model():
    """The formulas written once for NDArrays and Symbols: each loss block as a child of a
    hybridized write-once model, against the same block on NDArrays."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(4, 3)).astype(np.float32), rng.uniform(size=(4, 3)).astype(np.float32)
    idx = np.array([0.0, 2.0, 1.0, 2.0], np.float32)
    cases = {
        "MSELoss": ((), (x, y)), "L1Loss": ((), (x, y)), "SmoothL1Loss": ((), (x, y)), "HuberLoss": ((), (x, y)),
        "BCEWithLogitsLoss": ((np.ones(3, np.float32) * 0.5,), (x, y)), "KLDivLoss": ((), (x, y)),
        "SoftMarginLoss": ((), (x, np.sign(y - 0.5))), "HingeEmbeddingLoss": ((), (x, np.sign(y - 0.5))),
        "MultiLabelSoftMarginLoss": ((np.ones(3, np.float32),), (x, y)),
        "MultiMarginLoss": ((2, 0.5, np.array([1.0, 2.0, 0.5], np.float32)), (x, idx)),
        "CrossEntropyLoss": ((np.array([1.0, 2.0, 0.5], np.float32),), (x, idx)),
        "NLLLoss": ((), (x, idx)), "BCELoss": ((), (y, y[::-1].copy())),
        "PoissonNLLLoss": ((), (x, np.round(y * 3))),
    }
    for name, (args, inputs) in cases.items():
        class Holder(nn.Module):
            def __init__(self):
                super().__init__()
                self.loss = getattr(nn, name)(*args)

            def forward(self, a, b):
                return self.loss(a, b)

        m = Holder(backend="mxnet")
        got = []
        for hybrid in (False, True):
            m.hybridize(hybrid)
            a = nd.array(inputs[0])
            a.attach_grad()
            with autograd.record():
                out = m(a, nd.array(inputs[1]))
            out.backward()
            got.append((out.asnumpy(), a.grad.asnumpy()))
        np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-6, atol=1e-7, err_msg=name)
        np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-6, atol=1e-7, err_msg=name)


# ---- torch's own module tests (module_db) for every loss entry ------------------------------------
def _module_db_losses():
    from torch.testing._internal.common_modules import module_db
    return [i for i in module_db if i.module_cls.__name__.endswith("Loss")]


def _run(m, backend, leaves, grads, tmpl, gouts):
    from dualdl.testing.runners import adapter
    impl = adapter(backend)
    xs = [impl.tensor(a, g) if isinstance(a, np.ndarray) else a for a, g in zip(leaves, grads)]
    args = [xs[i] if isinstance(i, int) else i[0] for i in tmpl]
    with impl.recording(True):
        out = m(*args)
    if gouts is not None:
        impl.backward([out], [gouts])
    return impl.to_numpy(out), [impl.input_grad(x) if g else None for x, g in zip(xs, grads)]


def _close(got, want, tol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.size == want.size, (got.shape, want.shape)
    got = got.reshape(want.shape)                       # MXNet's (1,) for torch's ()
    assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)
    ok = ~np.isnan(want)
    if ok.any():
        assert np.abs(got[ok] - want[ok]).max() <= tol * max(1.0, np.abs(want[ok]).max())


# CTC in float32: MXNet's op and torch's kernel differ by up to 5.1e-5 relative in gradients (torch's
# float32 is itself 8e-5 from its float64, docs/losses.md): its float32 values only
_LIMITS = {"CTCLoss": {"float32": "values"}}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_module_db_loss_inputs_on_both_backends(dtype):
    """The first 4 inputs of each loss entry of torch's module_db (and every 40th of the 857 of
    LinearCrossEntropyLoss): dualdl.nn's module on torch (exactly torch.nn's numbers) and on MXNet,
    from torch's state dict; 0-d float inputs (which MXNet cannot hold with a gradient) on torch only."""
    checked = 0
    for info in _module_db_losses():
        name = info.module_cls.__name__
        limit = _LIMITS.get(name, {}).get(dtype, "all")
        torch.manual_seed(0)
        cases = list(info.module_inputs_func(info, device="cpu", dtype=getattr(torch, dtype), requires_grad=True,
                                             training=True))
        cases = cases[::40] if len(cases) > 200 else cases[:4]
        for mi in cases:
            fwd = mi.forward_input.args
            leaves, grads, tmpl = [], [], []
            for a in fwd:
                if isinstance(a, torch.Tensor):
                    leaves.append(a.detach().numpy().copy())
                    grads.append(bool(a.requires_grad and a.is_floating_point()))
                    tmpl.append(len(leaves) - 1)
                else:
                    tmpl.append((a,))
            ctor_kw = {k: (v.detach().numpy().copy() if isinstance(v, torch.Tensor) else v)
                       for k, v in mi.constructor_input.kwargs.items()}
            ref = info.module_cls(*mi.constructor_input.args, **mi.constructor_input.kwargs).to(getattr(torch, dtype))
            state = {k: v.detach().numpy().copy() for k, v in ref.state_dict().items()}
            want, want_g = _run(ref, "torch", leaves, grads, tmpl, None)
            gouts = np.random.default_rng(0).standard_normal(want.shape).astype(want.dtype)
            want, want_g = _run(ref, "torch", leaves, grads, tmpl, gouts)
            for backend in ("torch", "mxnet"):
                if limit is None and backend == "mxnet":
                    continue
                if backend == "mxnet" and any(l.ndim == 0 and g for l, g in zip(leaves, grads)):
                    continue
                m = getattr(nn, name)(*mi.constructor_input.args, backend=backend, **ctor_kw)
                dl.load_state_dict(m, state) if state and all(v.ndim for v in state.values()) else None
                m = m.to(getattr(torch, dtype)) if backend == "torch" else (m.cast(dtype) or m)
                got, got_g = _run(m, backend, leaves, grads, tmpl, gouts)
                tol = 0.0 if backend == "torch" else TOL[dtype]
                _close(got, want, tol)
                if limit == "values" and backend == "mxnet":
                    continue
                for g, w in zip(got_g, want_g):
                    if w is not None:
                        _close(g, w, tol)
                checked += 1
    assert checked > 100
