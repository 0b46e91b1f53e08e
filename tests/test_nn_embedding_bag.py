"""EmbeddingBag beyond the parity table (tests/parity_table/embedding_bag.py): the same error, word for
word, from the real layer on both backends; torch's parameter, init and constructor arguments; the
arguments MXNet cannot honour refused by name; a Symbol input inside a hybridized write-once model
(2-D bags work, 1-D + offsets is refused with the reason); the gluon way (Embedding + mean) it replaces."""
import numpy as np
import pytest

import dualdl as dl
from dualdl.state import load_state_dict, state_dict

pytest.importorskip("torch")
pytest.importorskip("mxnet")

ERRORS = (ValueError, TypeError, IndexError, NotImplementedError)


def _ints(a, dtype=np.int64):
    return dl.from_numpy(np.asarray(a, dtype=dtype))


def _error(backend, kwargs, args):
    with dl.use(backend):
        bag = dl.nn.EmbeddingBag(10, 3, **kwargs)
        xs = [None if a is None else dl.from_numpy(np.asarray(a)) for a in args]
        with pytest.raises(ERRORS) as e:
            bag(*xs)
    return e.type, str(e.value)


I64 = np.int64
BAD_INPUTS = [
    ({}, [np.array([[1.0, 2.0]], np.float32)], TypeError, "indices must be an integer tensor"),
    ({}, [np.array([[1, 10]], I64)], IndexError, r"index 10 is out of range \[0, 10\)"),
    ({}, [np.array([[-1, 2]], I64)], IndexError, "index -1 is out of range"),
    ({}, [np.array([[1, 2]], I64), np.array([0], I64)], ValueError, "2-D input .* takes no offsets"),
    ({}, [np.array([1, 2], I64)], ValueError, r"1-D input \(L,\) needs 1-D offsets of shape \(B,\)"),
    ({}, [np.array([1, 2], I64), np.array([[0]], I64)], ValueError, "needs 1-D offsets"),
    ({}, [np.zeros((1, 2, 2), I64)], ValueError, r"expected input of shape \(B, N\), or \(L,\) with offsets"),
    ({}, [np.zeros((0, 4), I64)], ValueError, "no elements"),
    ({}, [np.array([1, 2], I64), np.array([], I64)], ValueError, "give no bags"),
    ({"include_last_offset": True}, [np.array([1, 2], I64), np.array([0], I64)], ValueError, "give no bags"),
    ({}, [np.array([1, 2], I64), np.array([0.0, 1.0], np.float32)], TypeError, "offsets must be an integer"),
    ({}, [np.array([1, 2, 3], I64), np.array([1, 2], I64)], ValueError, r"offsets\[0\] must be 0"),
    ({}, [np.array([1, 2, 3], I64), np.array([0, 2, 1], I64)], ValueError, "must be non-decreasing"),
    ({}, [np.array([1, 2, 3], I64), np.array([0, 4], I64)], ValueError, r"offsets\[-1\] \(4\) is past"),
    ({"include_last_offset": True}, [np.array([1, 2, 3], I64), np.array([0, 2], I64)], ValueError,
     r"offsets\[-1\] must be the input's length 3"),
    ({"mode": "mean"}, [np.array([[1, 2]], I64), None, np.ones((1, 2), np.float32)], NotImplementedError,
     "per_sample_weights is only supported for mode='sum'"),
    ({"mode": "sum"}, [np.array([[1, 2]], I64), None, np.ones((2,), np.float32)], ValueError,
     r"per_sample_weights must have the shape of the input \(1, 2\), got \(2,\)"),
    ({"mode": "sum"}, [np.array([[1, 2]], I64), None, np.ones((1, 2), np.float64)], TypeError,
     "per_sample_weights must have the weight's dtype float32, got float64"),
]


@pytest.mark.parametrize("kwargs,args,etype,pattern", BAD_INPUTS)
def test_bad_inputs_get_the_same_dualdl_error_on_both_backends(kwargs, args, etype, pattern):
    t, m = _error("torch", kwargs, args), _error("mxnet", kwargs, args)
    assert t == m, (t, m)
    assert t[0] is etype and "EmbeddingBag(10, 3, mode=" in t[1]
    assert __import__("re").search(pattern, t[1]), t[1]


@pytest.mark.parametrize("kwargs,pattern", [
    ({"mode": "median"}, "mode must be one of"),
    ({"padding_idx": 10}, r"^padding_idx must be within num_embeddings$"),          # torch's AssertionError
])
def test_bad_arguments_are_refused_at_construction_on_both(kwargs, pattern):
    msgs = []
    for be in ("torch", "mxnet"):
        with pytest.raises((ValueError, AssertionError), match=pattern) as e:
            dl.nn.EmbeddingBag(10, 3, backend=be, **kwargs)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("kwargs,name", [({"scale_grad_by_freq": True}, "scale_grad_by_freq=True"),
                                         ({"sparse": True}, "sparse=True")])
def test_what_mxnet_cannot_honour_is_refused_by_name(kwargs, name):
    with pytest.raises(NotImplementedError, match=rf"^EmbeddingBag\({name}\) cannot be honoured on the mxnet backend"):
        dl.nn.EmbeddingBag(10, 3, backend="mxnet", **kwargs)
    assert dl.nn.EmbeddingBag(10, 3, backend="torch", **kwargs) is not None      # torch honours them


def test_max_norm_renormalises_the_looked_up_rows_in_place_as_torch():
    """Only the rows looked up (padding included, as torch) are scaled to max_norm, before the lookup;
    the other rows keep their values; eager and hybridized; a Symbol input is refused with the reason."""
    t, m = _same_weights(lambda be: dl.nn.EmbeddingBag(6, 4, max_norm=0.5, mode="sum", padding_idx=5, backend=be))
    w0 = state_dict(t)["weight"].detach().numpy().copy()
    x, o = np.array([1, 5, 1, 3], np.int64), np.array([0, 2], np.int64)
    with dl.use("torch"):
        want = dl.to_numpy(t(_ints(x), _ints(o)))
    with dl.use("mxnet"):
        m.hybridize()
        got = dl.to_numpy(m(_ints(x), _ints(o)))
    wt, wm = state_dict(t)["weight"].detach().numpy(), state_dict(m)["weight"].asnumpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    np.testing.assert_allclose(wm, wt, rtol=0, atol=1e-7)
    assert np.allclose(np.linalg.norm(wm[[1, 3]], axis=1), 0.5, atol=1e-6)      # renormed (norms ~2 before)
    np.testing.assert_array_equal(wm[[0, 2, 4]], w0[[0, 2, 4]])                 # not looked up: untouched

    class Net(dl.nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = dl.nn.EmbeddingBag(6, 4, max_norm=0.5)

        def forward(self, x):
            return self.bag(x)

    net = Net(backend="mxnet")
    net.hybridize()
    with dl.use("mxnet"), pytest.raises(NotImplementedError, match="max_norm renormalises weight rows in place"):
        net(_ints([[1, 2]]))


def test_parameters_init_and_arguments_as_torch():
    import torch
    for be in ("torch", "mxnet"):
        bag = dl.nn.EmbeddingBag(2000, 8, padding_idx=-1, backend=be)
        assert isinstance(bag, dl.nn.EmbeddingBag) and bag.mode == "mean" and bag.padding_idx == 1999
        (name, p), = list(bag.named_parameters())
        w = state_dict(bag)["weight"]
        w = w.detach().numpy() if be == "torch" else w.asnumpy()
        assert name == "weight" and w.shape == (2000, 8) and w.dtype == np.float32
        assert np.all(w[1999] == 0)                                   # the padding row starts at zero
        assert abs(w[:-1].mean()) < 0.03 and abs(w[:-1].std() - 1.0) < 0.03      # N(0, 1), Gluon U(+-0.07)
    given = np.arange(12, dtype=np.float32).reshape(4, 3)
    for be, native in (("torch", torch.from_numpy(given)), ("mxnet", dl.from_numpy(given, backend="mxnet"))):
        bag = dl.nn.EmbeddingBag(4, 3, mode="sum", _weight=native, backend=be)
        with dl.use(be):
            out = dl.to_numpy(bag(_ints([[0, 3]])))
        np.testing.assert_array_equal(out, given[[0]] + given[[3]])
    for be in ("torch", "mxnet"):                                   # dtype as a name on both
        bag = dl.nn.EmbeddingBag(4, 3, dtype="float64", device="cpu", backend=be)
        assert "float64" in str(state_dict(bag)["weight"].dtype)
    with pytest.raises(AssertionError, match="^Shape of weight does not match num_embeddings and embedding_dim$"):
        dl.nn.EmbeddingBag(4, 3, _weight=np.zeros((3, 3), np.float32), backend="mxnet")     # torch's error


def _same_weights(make):
    t, m = make("torch"), make("mxnet")
    load_state_dict(m, {k: v.detach().numpy() for k, v in state_dict(t).items()})
    return t, m


def test_2d_bags_run_as_symbols_inside_a_hybridized_model_and_match_torch():
    """A write-once model with EmbeddingBags over (B, N) bags (sum with per_sample_weights, max),
    hybridized (the layers see Symbols), against torch: forward and gradients."""
    class Net(dl.nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = dl.nn.EmbeddingBag(7, 4, mode="sum", padding_idx=0)
            self.top = dl.nn.EmbeddingBag(7, 4, mode="max", padding_idx=0)
            self.out = dl.nn.Linear(4, 2)

        def forward(self, x, w):
            return self.out(self.bag(x, None, w) + self.top(x))

    rng = np.random.default_rng(0)
    x = rng.integers(0, 7, (5, 3)).astype(np.int64)
    x[0] = 0                                                        # a padding-only bag
    w = rng.standard_normal((5, 3)).astype(np.float32)
    t, m = _same_weights(lambda be: Net(backend=be))
    m.hybridize()
    from dualdl.testing.runners import run_step
    ref = run_step("torch", t, [x, w], grad_outputs=[np.ones((5, 2), np.float32)])
    got = run_step("mxnet", m, [x, w], grad_outputs=[np.ones((5, 2), np.float32)])
    np.testing.assert_allclose(got.outputs[0], ref.outputs[0], rtol=0, atol=1e-6)
    for k, g in ref.grads.items():
        np.testing.assert_allclose(got.grads[k], g, rtol=0, atol=1e-5, err_msg=k)
    np.testing.assert_allclose(got.input_grads[1], ref.input_grads[1], rtol=0, atol=1e-6)
    assert np.all(ref.grads["bag.weight"][0] == 0) and np.all(got.grads["top.weight"][0] == 0)   # padding row


def test_1d_offsets_on_symbols_are_refused_with_the_reason_ndarrays_hybridize():
    class Net(dl.nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = dl.nn.EmbeddingBag(7, 4)

        def forward(self, x, offsets):
            return self.bag(x, offsets)

    x, o = np.array([1, 2, 3, 4], np.int64), np.array([0, 1, 1], np.int64)
    net = Net(backend="mxnet")
    net.hybridize()
    with dl.use("mxnet"), pytest.raises(NotImplementedError, match=r"offsets cannot run as a Symbol \(the bags' "
                                                                    "lengths are data"):
        net(_ints(x), _ints(o))
    with dl.use("mxnet"):
        bag = dl.nn.EmbeddingBag(7, 4)                              # the layer itself, hybridized: NDArrays
        eager = dl.to_numpy(bag(_ints(x, np.int32), _ints(o)))
        bag.hybridize()
        for _ in range(2):                                          # a second shape: the cached graph follows
            np.testing.assert_array_equal(dl.to_numpy(bag(_ints(x, np.int32), _ints(o))), eager)
            out = dl.to_numpy(bag(_ints([5, 6]), _ints([0])))
            assert out.shape == (1, 4)
    assert np.all(eager[1] == 0)                                   # the empty bag


def test_it_replaces_gluons_embedding_plus_mean():
    """The Gluon idiom: Embedding then mean over the bag axis (pads included in the mean: Gluon has
    no padding_idx); EmbeddingBag(mode='mean') gives the same numbers without pads, on MXNet."""
    import mxnet as mx
    rng = np.random.default_rng(1)
    x = rng.integers(1, 9, (4, 5))
    bag = dl.nn.EmbeddingBag(9, 3, backend="mxnet")
    emb = mx.gluon.nn.Embedding(9, 3)
    emb.initialize()
    emb.weight.set_data(bag.weight.data())
    want = emb(mx.nd.array(x)).mean(axis=1).asnumpy()
    np.testing.assert_allclose(dl.to_numpy(bag(dl.from_numpy(x, backend="mxnet"))), want, rtol=0, atol=1e-6)
