"""dualdl.nn.functional beyond the parity rows (tests/test_nn_functional.py): torch's signatures on the
neutral functions and on both adapters (the table dualdl/functional_spec.py is the contract of the
adapters' ``ops_functional`` modules), torch's own functions on torch, the refusals MXNet needs, the
softmax family's neutral ``dtype=``, and the losses under their torch names."""
import inspect

import numpy as np
import pytest

import dualdl as dl
from dualdl.contract import signature_mismatch, stub
from dualdl.functional_spec import FUNCTIONAL, NOT_WRITTEN
from dualdl.nn import functional as F

torch = pytest.importorskip("torch")
mx = pytest.importorskip("mxnet")
TF = torch.nn.functional


def _plain(sig):
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def test_neutral_functions_have_torch_s_signatures():
    checked = 0
    for name in FUNCTIONAL:
        ours = inspect.signature(getattr(F, name))
        try:
            theirs = inspect.signature(getattr(TF, name))
        except ValueError:                       # a torch builtin: no signature to read
            continue
        if [p.kind for p in theirs.parameters.values()] == [inspect.Parameter.VAR_POSITIONAL,
                                                           inspect.Parameter.VAR_KEYWORD]:
            continue                             # torch's boolean dispatchers (max_pool2d): (*args, **kwargs)
        assert _plain(ours) == _plain(theirs), (name, ours, theirs)
        checked += 1
    assert checked >= 40, checked


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
def test_every_adapter_provides_the_table(backend):
    mod = dl.get_backend(backend).module("ops_functional")
    problems = []
    for name, (sig, _) in FUNCTIONAL.items():
        obj = getattr(mod, name, None)
        if obj is None:
            problems.append(f"{name}: missing")
            continue
        try:
            actual = inspect.signature(obj)
        except ValueError:
            continue
        why = signature_mismatch(inspect.signature(stub(sig)), actual)
        if why and list(actual.parameters) != ["args", "kwargs"]:
            problems.append(f"{name}{actual}: {why}")
    assert problems == []


def test_torch_runs_torch_s_own_functions():
    mod = dl.get_backend("torch").module("ops_functional")
    own = [n for n in FUNCTIONAL if getattr(mod, n) is getattr(TF, n)]
    assert len(own) >= len(FUNCTIONAL) - 3, sorted(set(FUNCTIONAL) - set(own))   # the softmax family converts dtype=


def test_not_written_names_say_what_to_use():
    with pytest.raises(AttributeError, match="dualdl.nn.EmbeddingBag"):
        F.embedding_bag
    with pytest.raises(AttributeError, match="no attribute"):
        F.no_such_function
    assert set(NOT_WRITTEN) <= set(dir(TF)), set(NOT_WRITTEN) - set(dir(TF))


def test_losses_keep_their_torch_names():
    x = np.random.default_rng(0).standard_normal((4, 5)).astype("float32")
    y = np.array([0, 3, 1, 4])
    want = TF.cross_entropy(torch.from_numpy(x), torch.from_numpy(y)).item()
    for be in ("torch", "mxnet"):
        got = dl.item(F.cross_entropy(dl.from_numpy(x, backend=be), dl.from_numpy(y, backend=be)))
        assert abs(got - want) <= 1e-6 * abs(want)


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
def test_softmax_dtype_takes_a_neutral_dtype(backend):
    x = np.random.default_rng(1).standard_normal((3, 4)).astype("float32")
    want = TF.softmax(torch.from_numpy(x), 1, dtype=torch.float64).numpy()
    got = dl.to_numpy(F.softmax(dl.from_numpy(x, backend=backend), 1, dtype="float64"))
    assert got.dtype == np.float64 and np.abs(got - want).max() < 1e-15


def _hybrid(fn, *xs):
    class Apply(dl.nn.Module):
        def forward(self, *a):
            return fn(*a)
    with dl.use("mxnet"):
        m = Apply()
    m.hybridize()
    return m(*[dl.from_numpy(x, backend="mxnet") for x in xs])


def test_what_a_symbol_cannot_do_is_refused_with_what_to_write():
    img = np.random.default_rng(2).standard_normal((1, 2, 5, 5)).astype("float32")
    w = np.random.default_rng(3).standard_normal((3, 2, 3, 3)).astype("float32")
    with pytest.raises(ValueError, match="pass size="):
        _hybrid(lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear"), img)
    with pytest.raises(ValueError, match="use dualdl.nn.Conv2d"):
        _hybrid(lambda x, k: F.conv2d(x, k), img, w)
    with pytest.raises(ValueError, match="pass dim"):
        _hybrid(lambda x: F.softmax(x), img)
    with pytest.raises(ValueError, match="return_indices"):
        F.max_pool2d(dl.from_numpy(img, backend="mxnet"), 2, return_indices=True)
    with pytest.raises(ValueError, match="scale_grad_by_freq"):
        F.embedding(dl.from_numpy(np.array([1]), backend="mxnet"), dl.from_numpy(w[0, 0], backend="mxnet"),
                    scale_grad_by_freq=True)


def test_embedding_max_norm_renormalises_as_torch():
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((6, 3)) * 3).astype("float32")
    i = np.array([[0, 2, 2], [5, 1, 0]])
    wt = torch.from_numpy(w.copy())
    want = TF.embedding(torch.from_numpy(i), wt, max_norm=1.5).numpy()
    wm = dl.from_numpy(w.copy(), backend="mxnet")
    got = dl.to_numpy(F.embedding(dl.from_numpy(i, backend="mxnet"), wm, max_norm=1.5))
    assert np.abs(got - want).max() < 1e-6
    assert np.abs(dl.to_numpy(wm) - wt.numpy()).max() < 1e-6          # renormalised in place, as torch


def test_inplace_on_mxnet_returns_the_result():
    x = dl.from_numpy(np.array([-1.0, 2.0], "float32"), backend="mxnet")
    assert dl.to_numpy(F.relu(x, inplace=True)).tolist() == [0.0, 2.0]


def test_dropout_keeps_torch_s_scale_and_rejects_bad_p():
    x = np.ones((200, 50), "float32")
    for be in ("torch", "mxnet"):
        y = dl.to_numpy(F.dropout(dl.from_numpy(x, backend=be), 0.25, True))
        assert set(np.unique(y).tolist()) <= {0.0, np.float32(1 / 0.75)}
        assert abs((y == 0).mean() - 0.25) < 0.02             # 10,000 draws: 7 standard deviations
        with pytest.raises(ValueError, match="between 0 and 1"):
            F.dropout(dl.from_numpy(x, backend=be), 1.5)
        z = dl.to_numpy(F.dropout2d(dl.from_numpy(np.ones((4, 50, 3, 3), "float32"), backend=be), 0.5, True))
        per_channel = z.reshape(4, 50, 9)
        assert (per_channel.min(axis=2) == per_channel.max(axis=2)).all()   # one mask value per channel


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
def test_training_mode_randomness_keeps_torch_s_law(backend):
    dl.seed(11)
    z = np.random.default_rng(12).standard_normal((400, 100)).astype("float32")
    x = dl.from_numpy(z, backend=backend)
    y = dl.to_numpy(F.rrelu(x, 0.1, 0.3, training=True))
    neg = z < 0
    slope = y[neg] / z[neg]
    assert np.array_equal(y[~neg], z[~neg]) and slope.min() >= 0.1 - 1e-6 and slope.max() <= 0.3 + 1e-6
    assert abs(slope.mean() - 0.2) < 0.005                                   # 20,000 slopes: sd 0.0004
    a = dl.to_numpy(F.alpha_dropout(x, 0.2, training=True))                 # keeps mean 0, variance 1
    assert abs(a.mean()) < 0.03 and abs(a.std() - 1.0) < 0.03              # sds 0.005 and 0.004
    alpha, p = 1.7580993408473766, 0.2
    scale = 1 / np.sqrt((alpha ** 2 * p + 1) * (1 - p))
    dropped = np.isclose(a, alpha * scale * (p - 1), atol=1e-5)             # a dropped element's value, torch's
    assert abs(dropped.mean() - p) < 0.01                                    # 40,000 draws: sd 0.002


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
def test_gumbel_softmax_samples_the_softmax(backend):
    dl.seed(13)
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4], "float32"))
    x = dl.from_numpy(np.tile(logits, (20000, 1)), backend=backend)
    soft = dl.to_numpy(F.gumbel_softmax(x, tau=0.5))
    hard = dl.to_numpy(F.gumbel_softmax(x, hard=True))
    assert np.allclose(soft.sum(axis=1), 1.0, atol=1e-5) and set(np.unique(hard)) <= {0.0, 1.0}
    assert (hard.sum(axis=1) == 1).all()
    freq = hard.mean(axis=0)                      # P(argmax = i) = softmax(logits)_i: 20,000 draws, sd <= 0.0035
    assert np.abs(freq - np.exp(logits)).max() < 0.02, freq
