"""Random tensor functions (dualdl.random, torch's names) drawn from ``dl.seed``: on torch, on MXNet
eager and inside a hybridized write-once forward. The same seed reproduces the same numbers on each
backend (exactly); torch and MXNet draw different numbers, so the distributions are checked
statistically with a fixed seed (deterministic: the bounds are 6 or more standard deviations of the
statistic, and the draws never change)."""
import numpy as np
import pytest

import dualdl as dl
from dualdl import nn

pytest.importorskip("torch")
pytest.importorskip("mxnet")

BACKENDS = ["torch", "mxnet"]


def _draws(backend):
    x = dl.from_numpy(np.full((3, 4), 0.3, "float32"), backend=backend)
    w = dl.from_numpy(np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 0.0, 1.0]], "float32"), backend=backend)
    with dl.use(backend):
        made = [dl.rand(2, 3), dl.randn((2, 3)), dl.randint(7, (5,)), dl.randint(-3, 3, (2, 2), dtype="int32"),
                dl.normal(1.0, 2.0, (3,)), dl.randn(2, dtype="float64")]
    return made + [dl.rand_like(x), dl.randn_like(x), dl.randint_like(x, 5), dl.bernoulli(x), dl.bernoulli(x, 0.9),
                   dl.multinomial(w, 2), dl.multinomial(w, 3, replacement=True), dl.normal(x, x)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_seed_same_numbers(backend):
    dl.seed(123)
    a = [dl.to_numpy(t) for t in _draws(backend)]
    dl.seed(123)
    b = [dl.to_numpy(t) for t in _draws(backend)]
    dl.seed(124)
    c = [dl.to_numpy(t) for t in _draws(backend)]
    for u, v in zip(a, b):
        assert u.dtype == v.dtype and np.array_equal(u, v)
    assert not np.array_equal(a[1], c[1])
    kinds = [u.dtype.name for u in a]
    assert kinds == ["float32", "float32", "int64", "int32", "float32", "float64", "float32", "float32", "float32",
                     "float32", "float32", "int64", "int64", "float32"], kinds
    assert [u.shape for u in a[-3:]] == [(2, 2), (2, 3), (3, 4)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_distributions(backend):
    dl.seed(7)
    n = 40000
    with dl.use(backend):
        u = dl.to_numpy(dl.rand(n))
        z = dl.to_numpy(dl.randn(n, dtype="float64"))
        k = dl.to_numpy(dl.randint(2, 6, (n,)))
    assert 0.0 <= u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01          # sd of the mean 0.0014
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1.0) < 0.03                       # sds 0.005, 0.0035
    assert set(np.unique(k)) == {2, 3, 4, 5} and np.abs(np.bincount(k)[2:] / n - 0.25).max() < 0.015
    p = np.linspace(0.05, 0.95, 10).astype("float32")
    ones = dl.from_numpy(np.tile(p, (4000, 1)), backend=backend)
    b = dl.to_numpy(dl.bernoulli(ones))
    assert set(np.unique(b)) <= {0.0, 1.0} and np.abs(b.mean(axis=0) - p).max() < 0.05   # sd <= 0.008
    w = np.array([1.0, 2.0, 3.0, 4.0], "float32")
    rows = dl.from_numpy(np.tile(w, (5000, 1)), backend=backend)
    first = dl.to_numpy(dl.multinomial(rows, 1))[:, 0]
    assert np.abs(np.bincount(first, minlength=4) / 5000 - w / w.sum()).max() < 0.04     # sd <= 0.007
    no_repeat = dl.to_numpy(dl.multinomial(rows, 4))
    assert (np.sort(no_repeat, axis=1) == np.arange(4)).all()                           # each index once per row
    rep = dl.to_numpy(dl.multinomial(dl.from_numpy(w, backend=backend), 20000, replacement=True))
    assert np.abs(np.bincount(rep, minlength=4) / 20000 - w / w.sum()).max() < 0.02      # sd <= 0.0035


@pytest.mark.parametrize("backend", BACKENDS)
def test_normal_and_uniform_fill_in_place(backend):
    dl.seed(3)
    with dl.use(backend):
        lin = nn.Linear(200, 100)
    weight = dict(lin.named_parameters())["weight"]
    out = dl.random.normal_(weight, 2.0, 0.5)
    assert out is weight
    v = dl.to_numpy(dl.state_dict(lin)["weight"])
    assert abs(v.mean() - 2.0) < 0.01 and abs(v.std() - 0.5) < 0.01                  # 20,000 draws
    dl.random.uniform_(weight, -1.0, 3.0)
    v = dl.to_numpy(dl.state_dict(lin)["weight"])
    assert -1.0 <= v.min() and v.max() < 3.0 and abs(v.mean() - 1.0) < 0.03


class Noisy(nn.Module):
    """A VAE's reparametrisation and sampled noise, as real forwards write them."""

    def forward(self, mu, logvar):
        std = dl.ops.exp(dl.ops.mul(logvar, 0.5))
        eps = dl.randn_like(std)
        keep = dl.bernoulli(dl.ops.mul(dl.ops.ones_like(mu), 0.5))
        extra = dl.rand(2, 3)                                     # made from nothing inside the forward
        return dl.ops.add(mu, dl.ops.mul(eps, std)), keep, extra


def test_sampling_inside_a_hybridized_mxnet_forward():
    mu = np.zeros((2, 3), "float32")
    logvar = np.log(np.full((2, 3), 4.0, "float32"))
    runs = {}
    for hyb in (False, True):
        with dl.use("mxnet"):
            m = Noisy()
        if hyb:
            m.hybridize()
        dl.seed(5)
        from mxnet import autograd
        a, b = dl.from_numpy(mu, backend="mxnet"), dl.from_numpy(logvar, backend="mxnet")
        a.attach_grad()
        b.attach_grad()
        with autograd.record():
            z, keep, extra = m(a, b)
        z.backward()
        first = [dl.to_numpy(t) for t in (z, keep, extra)]
        second = [dl.to_numpy(t) for t in m(a, b)]
        assert not np.array_equal(first[0], second[0]) and not np.array_equal(first[2], second[2])   # drawn anew
        np.testing.assert_allclose(dl.to_numpy(a.grad), 1.0)
        eps = first[0] / 2.0                                           # z = eps * std, std = 2
        np.testing.assert_allclose(dl.to_numpy(b.grad), eps * 2.0 * 0.5, rtol=1e-6)   # dz/dlogvar = eps std / 2
        assert set(np.unique(first[1])) <= {0.0, 1.0} and first[2].shape == (2, 3)
        assert 0.0 <= first[2].min() and first[2].max() < 1.0
        dl.seed(5)
        again = [dl.to_numpy(t) for t in m(a, b)]
        assert all(np.array_equal(u, v) for u, v in zip(first, again))     # reproducible from the seed
        runs[hyb] = first
    assert runs[True][0].shape == runs[False][0].shape


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ValueError, match="low < high"):
        dl.randint(5, 5, (2,), backend="mxnet")
    with pytest.raises(TypeError, match=r"\(high, size\)"):
        dl.randint(5, backend="torch")
    with pytest.raises(ValueError, match="non-negative ints"):
        dl.randn(2, -1, backend="torch")
    w = dl.from_numpy(np.ones((2, 3), "float32"), backend="mxnet")
    with pytest.raises(ValueError, match="without replacement"):
        dl.multinomial(w, 4)
    with pytest.raises(ValueError, match="pass size="):
        dl.normal(0.0, 1.0)
