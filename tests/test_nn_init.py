"""dl.nn.init: torch.nn.init written once. torch's signatures, gains and fans; torch's errors and
warnings on both backends; in-place writes into Gluon Parameters (every context, outside autograd)
and clear refusals; a torchvision-style init loop gives identical models on both backends.
The numbers of every function against torch.nn.init are in tests/test_parity_init.py."""
import inspect
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest
import torch

import dualdl as dl
import dualdl.nn as nn

PUBLIC = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
          "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
          "orthogonal_", "sparse_"]
DEPRECATED = ["uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
              "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse"]

def _torch_ref(fn, shape, kw, seed):
    torch.manual_seed(seed)
    return getattr(torch.nn.init, fn)(torch.empty(shape), **kw).numpy()


def test_torch_s_functions_and_signatures():
    assert sorted(nn.init.__all__) == sorted(torch.nn.init.__all__)
    for name in PUBLIC:
        ours, theirs = inspect.signature(getattr(nn.init, name)), inspect.signature(getattr(torch.nn.init, name))
        assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
               [(p.name, p.kind, p.default) for p in theirs.parameters.values()], name
    t = torch.empty(3, 4)
    for name in DEPRECATED:
        with pytest.warns(FutureWarning, match=rf"`nn.init.{name}` is now deprecated in favor of `nn.init.{name}_`"):
            args = {"constant": (0.5,), "sparse": (0.5,)}.get(name, ())
            arr = mx.nd.zeros((2, 3, 3)) if name == "dirac" else mx.nd.zeros((3, 4))
            assert getattr(nn.init, name)(arr, *args) is arr
    assert nn.init.uniform_(t) is t


def test_gain_and_fans_are_torch_s():
    for nl in ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
               "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"]:
        for param in (None, 0.2, 3):
            assert nn.init.calculate_gain(nl, param) == torch.nn.init.calculate_gain(nl, param)
    for shape in [(3, 4), (5, 2, 3), (8, 3, 3, 3), (2, 6, 1, 2, 3), (0, 4)]:
        t = torch.empty(shape)
        want = torch.nn.init._calculate_fan_in_and_fan_out(t)
        for x in [t, np.empty(shape)] + ([mx.nd.zeros(shape)] if 0 not in shape else []):
            assert nn.init._calculate_fan_in_and_fan_out(x) == want
        for mode in ("fan_in", "fan_out", "FAN_OUT"):
            assert nn.init._calculate_correct_fan(t, mode) == torch.nn.init._calculate_correct_fan(t, mode)
    lin = nn.Linear(3, 5, backend="mxnet")
    assert nn.init._calculate_fan_in_and_fan_out(lin.weight) == (3, 5)     # a Gluon Parameter


def test_gluon_parameters_are_written_on_every_context_outside_autograd():
    conv = nn.Conv2d(3, 4, 3, backend="mxnet")
    conv.weight.reset_ctx([mx.cpu(0), mx.cpu(1)])
    x = mx.nd.ones((1, 3, 5, 5))
    dl.seed(0)
    with mx.autograd.record():
        assert nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu") is conv.weight
        nn.init.zeros_(conv.bias)
        y = conv(x)
    y.backward()
    want = _torch_ref("kaiming_normal_", (4, 3, 3, 3), dict(mode="fan_out", nonlinearity="relu"), 0)
    for arr in conv.weight.list_data():
        np.testing.assert_array_equal(arr.asnumpy(), want)
    assert not conv.bias.data().asnumpy().any()
    np.testing.assert_allclose(conv.weight.grad().asnumpy(), np.ones((4, 3, 3, 3)) * 9, rtol=0)


def test_the_same_errors_and_warnings_on_both():
    bad = [("kaiming_normal_", (3, 4), dict(mode="fan_avg")),
           ("kaiming_uniform_", (3,), dict(mode="fan_avg")),            # mode is checked first
           ("kaiming_uniform_", (3,), {}),
           ("kaiming_normal_", (3, 4), dict(nonlinearity="gelu")),
           ("kaiming_normal_", (3, 4), dict(a="x")),
           ("xavier_uniform_", (5,), {}),
           ("eye_", (2, 2, 2), {}),
           ("dirac_", (4, 3), {}),
           ("dirac_", (5, 3, 3), dict(groups=2)),
           ("orthogonal_", (4,), {}),
           ("sparse_", (3, 4, 5), dict(sparsity=0.1)),
           ("uniform_", (3,), dict(a=1.0, b=0.0)),
           ("uniform_", (3,), dict(a="0")),
           ("normal_", (3,), dict(std=-1.0)),
           ("sparse_", (4, 4), dict(sparsity=0.5, std=-2.0)),
           ("trunc_normal_", (3,), dict(std=0.0)),
           ("trunc_normal_", (3,), dict(a=2.0, b=-2.0))]
    for fn, shape, kw in bad:
        with pytest.raises(Exception) as want:
            getattr(torch.nn.init, fn)(torch.empty(shape), **kw)
        for x in (torch.empty(shape), mx.nd.zeros(shape)):
            with pytest.raises(want.type) as got:
                getattr(nn.init, fn)(x, **kw)
            assert str(got.value) == str(want.value), (fn, kw, type(x))
    for fn, shape, kw, msg in [("kaiming_uniform_", (0, 3), {}, "Initializing zero-element tensors is a no-op"),
                               ("trunc_normal_", (3,), dict(mean=9.0), "mean is more than 2 std from")]:
        with mx.util.np_shape(True):                                        # a zero-size NDArray
            x = mx.nd.zeros(shape)
        with pytest.warns(UserWarning, match=msg) as rec:
            getattr(nn.init, fn)(x, **kw)
        mine = [r for r in rec if msg in str(r.message)]
        assert len(mine) == 1 and mine[0].filename == __file__      # points at the caller, once


def test_what_holds_no_values_is_refused_clearly():
    with pytest.raises(TypeError, match="fills a tensor or parameter in place.*numpy.ndarray"):
        nn.init.zeros_(np.zeros(3))
    dense = mx.gluon.nn.Dense(4)
    dense.initialize()
    with pytest.raises(RuntimeError, match=r"kaiming_normal_: Parameter '.*weight' is not initialised yet \(deferred"):
        nn.init.kaiming_normal_(dense.weight)
    dense(mx.nd.ones((2, 3)))
    nn.init.xavier_uniform_(dense.weight)                                   # after the first forward
    assert dense.weight.data().shape == (4, 3)
    with pytest.raises(RuntimeError, match=r"Parameter 'w' is not initialised: call .initialize\(\)"):
        nn.init.ones_(mx.gluon.Parameter("w", shape=(2, 2)))
    with pytest.raises(TypeError, match="Symbol"):
        nn.init.ones_(mx.sym.var("x"))
    with pytest.raises(NotImplementedError, match="floating-point values; the tensor is int32"):
        nn.init.normal_(mx.nd.zeros((2, 2), dtype="int32"))
    i = mx.nd.zeros((2, 2), dtype="int32")
    assert nn.init.constant_(i, 3).asnumpy().tolist() == [[3, 3], [3, 3]]


class Block(dl.nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = dl.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = dl.nn.BatchNorm2d(cout)
        self.conv2 = dl.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = dl.nn.BatchNorm2d(cout)
        self.down = (dl.nn.Sequential(dl.nn.Conv2d(cin, cout, 1, stride, bias=False), dl.nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else None)

    def forward(self, x):
        y = dl.ops.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return dl.ops.relu(y + (x if self.down is None else self.down(x)))


class TinyResNet(dl.nn.Module):
    """torchvision's ResNet init loop, verbatim but for ``generator=``."""

    def __init__(self, generator=None, num_classes=5):
        super().__init__()
        self.conv1 = dl.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = dl.nn.BatchNorm2d(8)
        self.layer1 = Block(8, 8, 1)
        self.layer2 = Block(8, 16, 2)
        self.gn = dl.nn.GroupNorm(4, 16)
        self.pool, self.flat = dl.nn.AdaptiveAvgPool2d(1), dl.nn.Flatten()
        self.fc = dl.nn.Linear(16, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu", generator=generator)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01, generator=generator)
                nn.init.zeros_(m.bias)
        for m in self.modules():                                             # zero_init_residual
            if isinstance(m, Block):
                nn.init.constant_(m.bn2.weight, 0)

    def forward(self, x):
        x = self.layer2(self.layer1(dl.ops.relu(self.bn1(self.conv1(x)))))
        return self.fc(self.flat(self.pool(self.gn(x))))


def _weights(model):
    return {k: dl.to_numpy(v) for k, v in dl.state_dict(model).items()}


def test_a_torchvision_style_model_is_initialised_identically_on_both_backends():
    models = {b: TinyResNet(torch.Generator().manual_seed(0), backend=b) for b in ("torch", "mxnet")}
    w = {b: _weights(m) for b, m in models.items()}
    assert list(w["torch"]) == list(w["mxnet"]) and len(w["torch"]) >= 30
    for k in w["torch"]:
        np.testing.assert_array_equal(w["mxnet"][k], w["torch"][k], err_msg=k)
    assert w["torch"]["layer2.down.0.weight"].std() > 0.1 and not w["torch"]["layer1.bn2.weight"].any()

    def reinit(m):                                                           # model.apply, global generator
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(m.weight, gain=nn.init.calculate_gain("relu"))
    again = {}
    for b, m in models.items():
        dl.seed(11)
        m.apply(reinit)
        for name, p in m.named_parameters():                                 # and a named_parameters loop
            if name.endswith("bias"):
                nn.init.trunc_normal_(p, std=0.02)
        again[b] = _weights(m)
    for k in again["torch"]:
        np.testing.assert_array_equal(again["mxnet"][k], again["torch"][k], err_msg=k)
    assert not np.array_equal(again["torch"]["fc.weight"], w["torch"]["fc.weight"])
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype("float32")
    out = {b: dl.to_numpy(m(dl.from_numpy(x, backend=b))) for b, m in models.items()}
    np.testing.assert_allclose(out["mxnet"], out["torch"], rtol=1e-5, atol=1e-6)


def test_dl_nn_init_imports_no_framework_and_draws_after_a_lazy_torch_import():
    code = ("import sys, dualdl as dl, dualdl.nn as nn\n"
            "assert nn.init.calculate_gain('tanh') == 5 / 3\n"
            "assert not {'torch', 'mxnet'} & set(sys.modules)\n"
            "dl.seed(4)\n"
            "import mxnet as mx\n"
            "x = nn.init.xavier_normal_(mx.nd.zeros((3, 5)))\n"       # imports torch: seeded by dl.seed
            "import torch\n"
            "torch.manual_seed(4)\n"
            "assert (torch.nn.init.xavier_normal_(torch.empty(3, 5)).numpy() == x.asnumpy()).all()\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
