"""The small things torch code does with methods Gluon's classes lack, written once (dualdl.params):
casting a model's dtype, a parameter's numel/dim/requires_grad, freezing, its gradient and the manual
update ``p.data.add_(p.grad, alpha=-lr)`` (pytorch/examples word_language_model's train loop), and
``dl.backend_of`` as docs/concepts.md writes it. Each checked against torch from the same weights."""
import numpy as np
import pytest

import dualdl as dl
from dualdl import nn, ops
from dualdl.nn import functional as F

torch = pytest.importorskip("torch")
pytest.importorskip("mxnet")


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 4)
        self.bn = nn.BatchNorm1d(4)
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        return self.out(F.relu(self.bn(self.fc(x))))


def _pair():
    dl.seed(0)
    with dl.use("torch"):
        t = Tiny()
    with dl.use("mxnet"):
        m = Tiny()
    dl.load_state_dict(m, dl.state_dict(t))
    return t, m


def _params(model):
    return [p for _, p in dl.named_parameters(model)]


def _step(model, x, y, lr):
    """One manual SGD step as word_language_model's train() writes it."""
    with dl.record(model):
        loss = F.mse_loss(model(dl.from_numpy(x, backend=dl.backend_of(model).name)),
                          dl.from_numpy(y, backend=dl.backend_of(model).name))
    dl.backward(loss)
    with dl.no_grad(model):
        for p in _params(model):
            if dl.grad(p) is not None:
                dl.add_(p, dl.grad(p), alpha=-lr)
    return dl.item(loss)


def test_to_dtype_casts_parameters_and_buffers_and_keeps_parity():
    t, m = _pair()
    assert dl.to_dtype(t, "float64") is t and dl.to_dtype(m, np.float64) is m
    for sd in (dl.state_dict(t), dl.state_dict(m)):
        assert {dl.to_numpy(v).dtype.name for k, v in sd.items() if "num_batches" not in k} == {"float64"}
    x = np.random.default_rng(1).standard_normal((6, 5))
    t.eval()
    m.eval()
    yt = dl.to_numpy(t(dl.from_numpy(x, backend="torch")))
    ym = dl.to_numpy(m(dl.from_numpy(x, backend="mxnet")))
    assert yt.dtype == ym.dtype == np.float64 and np.abs(yt - ym).max() < 1e-14
    dl.to_dtype(m, torch.float32)                                        # a torch dtype object works too
    assert dl.to_numpy(dl.state_dict(m)["fc.weight"]).dtype == np.float32


def test_numel_dim_requires_grad_on_both():
    t, m = _pair()
    for model in (t, m):
        ps = dict(dl.named_parameters(model))
        assert dl.numel(ps["fc.weight"]) == 20 and dl.dim(ps["fc.weight"]) == 2 and dl.dim(ps["fc.bias"]) == 1
        assert sum(dl.numel(p) for p in ps.values()) == 20 + 4 + 4 + 4 + 8 + 2
        assert all(dl.requires_grad(p) for p in ps.values())
        dl.requires_grad_(ps["fc.weight"], False)
        assert not dl.requires_grad(ps["fc.weight"])


def test_manual_sgd_update_matches_torch_and_frozen_parameters_stay():
    t, m = _pair()
    dl.to_dtype(t, "float64")
    dl.to_dtype(m, "float64")
    for model in (t, m):
        dl.requires_grad_(dict(dl.named_parameters(model))["out.bias"], False)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((8, 5)), rng.standard_normal((8, 2))
    before = dl.to_numpy(dl.state_dict(t)["out.bias"]).copy()
    for _ in range(3):
        lt, lm = _step(t, x, y, 0.1), _step(m, x, y, 0.1)
        assert abs(lt - lm) < 1e-12
    st, sm = dl.state_dict(t), dl.state_dict(m)
    for k in st:
        if "num_batches" in k:
            continue
        assert np.abs(dl.to_numpy(st[k]) - dl.to_numpy(sm[k])).max() < 1e-12, k
    assert np.array_equal(dl.to_numpy(st["out.bias"]), before)          # frozen: no gradient, no update
    assert dl.grad(dict(dl.named_parameters(m))["out.bias"]) is None
    assert not np.array_equal(dl.to_numpy(st["fc.weight"]), dl.to_numpy(_pair()[0].fc.weight.detach()))


def test_add_refuses_a_bad_alpha():
    t, _ = _pair()
    with pytest.raises(ValueError, match="alpha must be a finite number"):
        dl.add_(t.fc.weight, t.fc.weight, alpha=float("nan"))


def test_backend_of_as_the_docs_write_it():
    t, m = _pair()
    assert dl.backend_of(t).name == "torch" and dl.backend_of(m).name == "mxnet"
    assert dl.backend_of(dl.from_numpy(np.zeros(2), backend="mxnet")).name == "mxnet"


# ---- torch's module_db precision items (issue 43) ----------------------------------------------
def _mx_run(model, x, hybridize):
    from mxnet import autograd
    if hybridize:
        model.hybridize()
    xm = dl.from_numpy(x, backend="mxnet")
    xm.attach_grad()
    with autograd.record():
        y = model(xm)
    y.backward(dl.from_numpy(np.linspace(-1, 1, y.size).reshape(y.shape), backend="mxnet"))
    return dl.to_numpy(y), dl.to_numpy(xm.grad)


def _torch_run(model, x):
    xt = torch.from_numpy(x).requires_grad_()
    y = model(xt)
    y.backward(torch.from_numpy(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape))))
    return y.detach().numpy(), xt.grad.numpy()


@pytest.mark.parametrize("hybridize", [False, True])
def test_prelu_is_float64_precise(hybridize):
    x = np.random.default_rng(5).standard_normal((2, 3, 4, 5))
    with dl.use("torch"):
        t = nn.PReLU(3, 0.1)
    with dl.use("mxnet"):
        m = nn.PReLU(3, 0.1)
    with torch.no_grad():
        t.weight.copy_(torch.tensor([0.1, -0.3, 0.7]))
    dl.to_dtype(t, "float64")
    dl.to_dtype(m, "float64")
    dl.load_state_dict(m, dl.state_dict(t))
    for a, b in zip(_torch_run(t, x), _mx_run(m, x, hybridize)):
        assert np.abs(a - b).max() <= 1e-15 * np.abs(a).max()          # was 3.4e-7 (MXNet's prelu op)


def test_hybridized_instance_norm_running_stats_are_float64_precise():
    x = np.random.default_rng(6).standard_normal((3, 4, 5)) * 3 + 1
    with dl.use("torch"):
        t = nn.InstanceNorm1d(4, affine=True, track_running_stats=True)
    with dl.use("mxnet"):
        m = nn.InstanceNorm1d(4, affine=True, track_running_stats=True)
    dl.to_dtype(t, "float64")
    dl.to_dtype(m, "float64")
    dl.load_state_dict(m, dl.state_dict(t))
    for _ in range(2):
        _torch_run(t, x)
        _mx_run(m, x, True)
    st, sm = dl.state_dict(t), dl.state_dict(m)
    for k in ("running_mean", "running_var"):
        assert np.abs(dl.to_numpy(st[k]) - dl.to_numpy(sm[k])).max() < 1e-15, k     # was 1e-8


def test_a_0d_loss_weight_goes_back_to_torch():
    with dl.use("torch"):
        t = nn.BCEWithLogitsLoss(weight=torch.tensor(0.5))
    with dl.use("mxnet"):
        m = nn.BCEWithLogitsLoss(weight=np.array(0.7, "float32"))
    dl.load_state_dict(t, dl.state_dict(m))          # MXNet 1.x keeps the 0-d buffer as (1,)
    assert tuple(t.weight.shape) == () and abs(float(t.weight) - 0.7) < 1e-7


@pytest.mark.parametrize("log_input", [True, False])
def test_poisson_nll_full_target_gradient_is_torch_s(log_input):
    from mxnet import autograd
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 4))
    x = x if log_input else np.abs(x)
    t = np.abs(rng.standard_normal((3, 4))) * 2
    t[0, 0], t[0, 1], t[1, 1] = 0.0, 1.0, 0.5
    xt, tt = torch.from_numpy(x).requires_grad_(), torch.from_numpy(t).requires_grad_()
    torch.nn.functional.poisson_nll_loss(xt, tt, log_input=log_input, full=True).backward()
    xm, tm = dl.from_numpy(x, backend="mxnet"), dl.from_numpy(t, backend="mxnet")
    xm.attach_grad()
    tm.attach_grad()
    with autograd.record():
        loss = F.poisson_nll_loss(xm, tm, log_input=log_input, full=True)
    loss.backward()
    want, got = tt.grad.numpy(), dl.to_numpy(tm.grad)
    assert np.array_equal(np.isnan(want), np.isnan(got)) and np.isnan(got[0, 0])     # t = 0: NaN, as torch
    fin = ~np.isnan(want)
    assert np.abs(want[fin] - got[fin]).max() < 1e-15
    assert np.abs(xt.grad.numpy() - dl.to_numpy(xm.grad)).max() < 1e-15


class _TwiceNormed(nn.Module):
    """One InstanceNorm called twice in a forward (its running statistics updated twice, in order)."""

    def __init__(self):
        super().__init__()
        self.n = nn.InstanceNorm1d(4, track_running_stats=True, affine=True, momentum=0.3)

    def forward(self, x):
        return self.n(ops.mul(self.n(x), 2.0))


@pytest.mark.parametrize("hybridize", [False, True])
def test_instance_norm_running_stats_follow_torch_s_calls(hybridize):
    """torch updates the running statistics in forward, at each call: a forward without backward, and a
    layer called twice in one forward (a hybridized graph used to leave that to the fused op's backward)."""
    from mxnet import autograd
    x = np.random.default_rng(8).standard_normal((3, 4, 5)) * 2 + 1
    with dl.use("torch"):
        t = _TwiceNormed()
    with dl.use("mxnet"):
        m = _TwiceNormed()
    dl.to_dtype(t, "float64")
    dl.to_dtype(m, "float64")
    dl.load_state_dict(m, dl.state_dict(t))
    if hybridize:
        m.hybridize()
    t(torch.from_numpy(x))                                     # forward only
    m(dl.from_numpy(x, backend="mxnet"))
    xm = dl.from_numpy(x, backend="mxnet")
    with autograd.record():
        y = m(xm)
    y.backward()
    t(torch.from_numpy(x)).sum().backward()
    st, sm = dl.state_dict(t), dl.state_dict(m)
    for k in ("n.running_mean", "n.running_var"):
        assert np.abs(dl.to_numpy(st[k]) - dl.to_numpy(sm[k])).max() < 1e-14, k
