"""The write-once Module mechanism itself: native classes, keyword arguments, parameters, modes."""
import numpy as np
import pytest

import dualdl as dl
from dualdl import nn, ops


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.scale = nn.Parameter(np.full((2,), 2.0, np.float32))
        self.register_buffer("offset", np.ones(2, np.float32))

    def forward(self, x, bias=None, extra=None):
        y = ops.mul(self.fc(x), self.scale)
        y = ops.add(y, self.offset)
        if bias is not None:
            y = ops.add(y, bias)
        return y


def test_instances_are_native_and_of_the_user_class(backend):
    m = Scaled()
    assert isinstance(m, Scaled) and isinstance(m, nn.Module)
    if backend == "torch":
        import torch
        assert isinstance(m, torch.nn.Module)
    else:
        import mxnet as mx
        assert isinstance(m, mx.gluon.HybridBlock)
    assert type(m) is type(Scaled())                 # the native class is built once and cached
    assert [n for n, _ in m.named_parameters()] == ["scale", "fc.weight", "fc.bias"]
    assert [n for n, _ in m.named_buffers()] == ["offset"]
    assert list(dl.state_dict(m)) == ["scale", "offset", "fc.weight", "fc.bias"] or \
        list(dl.state_dict(m)) == ["scale", "fc.weight", "fc.bias", "offset"]


def test_keyword_arguments_work_on_both_and_when_hybridized(backend):
    m = Scaled()
    x = dl.from_numpy(np.ones((4, 3), np.float32))
    b = dl.from_numpy(np.full((4, 2), 10.0, np.float32))
    ref = dl.to_numpy(m(x, b))
    np.testing.assert_allclose(dl.to_numpy(m(x, bias=b)), ref)
    np.testing.assert_allclose(dl.to_numpy(m(x=x, bias=b)), ref)
    if backend == "mxnet":
        m.hybridize()
        np.testing.assert_allclose(dl.to_numpy(m(x, bias=b)), ref, rtol=1e-6)


def test_backend_keyword_overrides_active_backend():
    with dl.use("mxnet"):
        m = Scaled(backend="torch")
    import torch
    assert isinstance(m, torch.nn.Module)
    assert isinstance(m.fc, torch.nn.Linear)         # children follow the parent's backend


def test_same_weights_same_outputs_across_backends():
    mt, mm = Scaled(backend="torch"), Scaled(backend="mxnet")
    dl.load_state_dict(mm, dl.state_dict(mt))
    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    a = dl.to_numpy(mt(dl.from_numpy(x, backend="torch")))
    b = dl.to_numpy(mm(dl.from_numpy(x, backend="mxnet")))
    assert np.abs(a - b).max() < 1e-6


def test_module_without_forward_is_rejected_on_mxnet():
    class NoForward(nn.Module):
        def __init__(self):
            super().__init__()

    with pytest.raises(TypeError, match="must define forward"):
        NoForward(backend="mxnet")


def test_train_eval_flags_propagate(backend):
    m = Scaled()
    m.eval()
    assert all(not getattr(c, "training", False) for c in m.modules())
    m.train()
    assert all(c.training for c in m.modules())
