"""Issue 14's listed divergences, each on both backends: Embedding(max_norm=) renormalises the
looked-up rows in place as torch, ``recurse=False`` lists a module's own parameters/buffers only."""
import numpy as np
import pytest

import dualdl as dl
from dualdl import nn, ops

W = np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32) * 2
X = np.array([[1, 2, 2], [7, 1, 0]], np.int64)


def _embedding_run(backend, hybridize=False, **kw):
    with dl.use(backend):
        e = nn.Embedding(8, 3, max_norm=1.0, **kw)
        dl.load_state_dict(e, {"weight": W})
        if hybridize:
            e.hybridize()
        x = dl.from_numpy(X)
        out = dl.to_numpy(e(x))
        return out, dl.to_numpy(dl.state_dict(e)["weight"])


@pytest.mark.parametrize("kw", [{}, {"norm_type": 1.0}, {"norm_type": 3.0, "padding_idx": 2}])
def test_embedding_max_norm_renormalises_looked_up_rows_in_place_as_torch(kw):
    import torch
    ref = torch.nn.Embedding(8, 3, max_norm=1.0, **kw)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(W))
    want_out = ref(torch.from_numpy(X)).detach().numpy()
    want_w = ref.weight.detach().numpy()
    assert not np.allclose(want_w, W)                                 # rows were renormalised
    np.testing.assert_array_equal(want_w[[3, 4, 5, 6]], W[[3, 4, 5, 6]])  # the others untouched
    for backend, hyb in (("torch", False), ("mxnet", False), ("mxnet", True)):
        out, w = _embedding_run(backend, hyb, **kw)
        np.testing.assert_allclose(out, want_out, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(w, want_w, rtol=1e-6, atol=1e-6)


def test_embedding_max_norm_renorm_is_outside_autograd_on_mxnet():
    """The gradient is the plain lookup's (rows counted per use), not through the renorm."""
    grads = {}
    for backend in ("torch", "mxnet"):
        with dl.use(backend):
            e = nn.Embedding(8, 3, max_norm=1.0)
            dl.load_state_dict(e, {"weight": W})
            with dl.autograd.record():
                loss = ops.sum(e(dl.from_numpy(X)))
            dl.autograd.backward(loss)
            p = next(iter(e.parameters()))
            grads[backend] = dl.to_numpy(p.grad) if backend == "torch" else p.grad().asnumpy()
    want = np.zeros((8, 3), np.float32)
    np.add.at(want, X.ravel(), 1.0)
    np.testing.assert_array_equal(grads["torch"], want)
    np.testing.assert_array_equal(grads["mxnet"], want)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.own = nn.Parameter(np.ones(2, np.float32))
        self.register_buffer("count", np.zeros(1, np.float32))
        self.fc = nn.Linear(2, 2)
        self.bn = nn.BatchNorm1d(2)

    def forward(self, x):
        return self.bn(self.fc(x * self.own))


def test_recurse_false_lists_the_modules_own_tensors_only(backend):
    m = Net()
    assert [n for n, _ in m.named_parameters(recurse=False)] == ["own"]
    assert len(list(m.parameters(recurse=False))) == 1
    assert [n for n, _ in m.named_buffers(recurse=False)] == ["count"]
    assert len(list(m.buffers(recurse=False))) == 1
    assert [n for n, _ in m.fc.named_parameters(prefix="fc", recurse=False)] == ["fc.weight", "fc.bias"]
    assert sorted(n for n, _ in m.bn.named_buffers(recurse=False)) == \
        sorted(["running_mean", "running_var"] + (["num_batches_tracked"] if backend == "torch" else []))
    assert len(list(m.parameters())) == 5                             # recurse=True: all of them


def test_embedding_weight_and_freeze_as_torch(backend):
    """``_weight=`` (a numpy array on MXNet, a tensor on torch, as torch takes) sets the table;
    ``_freeze=True`` makes it non-trainable."""
    w = dl.from_numpy(W)
    e = nn.Embedding(8, 3, _weight=w, _freeze=True)
    np.testing.assert_array_equal(dl.to_numpy(e(dl.from_numpy(X))), W[X])
    p = next(iter(e.parameters()))
    assert (not p.requires_grad) if backend == "torch" else p.grad_req == "null"
    with pytest.raises(AssertionError, match="^Shape of weight does not match num_embeddings and embedding_dim$"):
        nn.Embedding(8, 4, _weight=w)                                   # torch's error on both


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8, 3, max_norm=1.0)
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(self.emb(x))


def test_embedding_max_norm_in_a_hybridized_parent_is_refused_not_skipped():
    """A cached graph of the parent would skip the in-place renorm silently: refused clearly."""
    with dl.use("mxnet"):
        m = Tagger()
        m(dl.from_numpy(X))                                           # eager: fine
        m.hybridize()
        with pytest.raises(NotImplementedError, match=r"Embedding\(8, 3, max_norm=1.0\) inside a "
                                                      r"hybridized block"):
            m(dl.from_numpy(X))
