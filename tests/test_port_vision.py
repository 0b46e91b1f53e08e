"""Porting real Gluon model-zoo CNNs (pretrained=False) onto independent hand-written PyTorch
implementations, and back; negative controls show the verification catches what pairing cannot."""

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
from mxnet.gluon.model_zoo import vision  # noqa: E402
from torch import nn  # noqa: E402

import dualdl as dl  # noqa: E402
from dualdl.port import Mapping, PortWarning  # noqa: E402

F32_TOL = 1e-5  # relative to the output scale: fp32 rounding through ~20 layers


# ---------------------------------------------------------------- independent torch models
def _bn(c, affine=True):
    return nn.BatchNorm2d(c, affine=affine)


class BasicV1(nn.Module):
    def __init__(self, cin, cout, stride, shortcut_first=False):
        super().__init__()
        # the shortcut is *defined* before the main branch: definition order != execution order
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), _bn(cout))
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), _bn(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), _bn(cout)
        self.shortcut_first = shortcut_first

    def forward(self, x):
        r = x
        if self.shortcut is not None and self.shortcut_first:
            r = self.shortcut(x)
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        if self.shortcut is not None and not self.shortcut_first:
            r = self.shortcut(x)
        return torch.relu(y + r)


class ResNet18V1(nn.Module):
    def __init__(self, classes=10, shortcut_first=False):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), _bn(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            blocks += [BasicV1(cin, cout, stride, shortcut_first), BasicV1(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


class BasicV2(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.bn1, self.conv1 = _bn(cin), nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2, self.conv2 = _bn(cout), nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride, bias=False) if cin != cout else None

    def forward(self, x):
        out = torch.relu(self.bn1(x))
        r = self.shortcut(out) if self.shortcut is not None else x
        out = self.conv2(torch.relu(self.bn2(self.conv1(out))))
        return out + r


class ResNet18V2(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.data_bn = _bn(3, affine=False)   # Gluon: BatchNorm(scale=False, center=False)
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), _bn(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            blocks += [BasicV2(cin, cout, stride), BasicV2(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.post_bn = _bn(512)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.blocks(self.stem(self.data_bn(x)))
        return self.fc(torch.relu(self.post_bn(x)).mean((2, 3)))


def _cbr(cin, cout, k, s, p, groups=1):
    return [nn.Conv2d(cin, cout, k, s, p, groups=groups, bias=False), _bn(cout), nn.ReLU()]


class MobileNetV1(nn.Module):
    def __init__(self, multiplier=0.25, classes=10):
        super().__init__()
        m = lambda c: int(c * multiplier)  # noqa: E731
        dw = [m(c) for c in [32, 64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024]]
        out = [m(c) for c in [64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024] * 2]
        strides = [1, 2] * 3 + [1] * 5 + [2, 1]
        layers = _cbr(3, m(32), 3, 2, 1)
        for d, c, s in zip(dw, out, strides):
            layers += _cbr(d, d, 3, s, 1, groups=d) + _cbr(d, c, 1, 1, 0)
        self.features = nn.Sequential(*layers)
        self.output = nn.Linear(out[-1], classes)

    def forward(self, x):
        return self.output(self.features(x).mean((2, 3)))


class VGG11BN(nn.Module):
    """Convs without bias (Gluon's have one): exercises the fold-conv-bias rule."""
    def __init__(self, classes=10, size=32):
        super().__init__()
        layers, cin = [], 3
        for n, c in zip([1, 1, 2, 2, 2], [64, 128, 256, 512, 512]):
            for _ in range(n):
                layers += _cbr(cin, c, 3, 1, 1)
                cin = c
            layers.append(nn.MaxPool2d(2, 2))
        self.features = nn.Sequential(*layers)
        flat = 512 * (size // 32) ** 2
        self.classifier = nn.Sequential(nn.Linear(flat, 4096), nn.ReLU(), nn.Dropout(0.5),
                                        nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(0.5),
                                        nn.Linear(4096, classes))

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def _gluon(name, **kw):
    mx.random.seed(0)
    net = vision.get_model(name, pretrained=False, classes=10, **kw)
    net.initialize(mx.init.Xavier())
    return net


def _x(size, n=2, seed=0):
    return np.random.default_rng(seed).standard_normal((n, 3, size, size)).astype(np.float32)


def _sd(m):
    return {k: v.clone() for k, v in m.state_dict().items()}


def _run_gluon(net, x):
    return net(mx.nd.array(x)).asnumpy()


def _run_torch(m, x):
    m.eval()
    with torch.no_grad():
        return m(torch.from_numpy(x)).numpy()


# ---------------------------------------------------------------- gluon -> torch
@pytest.mark.parametrize("name,torch_cls,size", [
    ("resnet18_v1", ResNet18V1, 64),
    ("resnet18_v2", ResNet18V2, 64),
    ("mobilenet0.25", MobileNetV1, 32),
    pytest.param("vgg11_bn", VGG11BN, 32, marks=pytest.mark.slow),  # two 4096-wide Dense layers
])
def test_gluon_model_zoo_to_torch(name, torch_cls, size):
    torch.manual_seed(0)
    g, t = _gluon(name), torch_cls()
    x = _x(size)
    report = dl.port.port_gluon_to_torch(g, t, x)
    print(name, report.summary().splitlines()[0], report.checks)
    assert report.ok, report.summary()
    assert report.complete and report.loaded
    assert report.max_rel_diff < F32_TOL
    # independent check on a fresh input, outside the port machinery
    x2 = _x(size, n=3, seed=1)
    ref, out = _run_gluon(g, x2), _run_torch(t, x2)
    assert np.abs(ref - out).max() <= 1e-5 * max(1.0, np.abs(ref).max())
    if name == "vgg11_bn":
        assert any("fold_conv_bias" in n for n in report.notes)
        assert sum(e.transform == "fold_bias" for e in report.mapping.entries) == 8
    if name == "resnet18_v2":
        assert any("fix_gamma" in n for n in report.notes)


def test_shortcut_executed_first_is_caught_by_verification():
    """Control: a torch ResNet whose shortcut runs before the main branch is a different
    execution order; same-shaped BatchNorms pair wrongly and the verification says so."""
    torch.manual_seed(0)
    g, t = _gluon("resnet18_v1"), ResNet18V1(shortcut_first=True)
    before = _sd(t)
    with pytest.warns(UserWarning, match="verification failed"):
        report = dl.port.port_gluon_to_torch(g, t, _x(64))
    assert report.complete and not report.ok and not report.loaded
    assert report.max_rel_diff > 1e-2, report.summary()
    assert report.checks[0].name.startswith("randomised") and not report.checks[0].passed
    assert "paired with the wrong tensor" in report.message
    assert all(torch.equal(before[k], v) for k, v in t.state_dict().items())  # target untouched


def test_non_corresponding_models_load_nothing():
    torch.manual_seed(0)
    g, t = _gluon("resnet18_v1"), MobileNetV1()
    before = _sd(t)
    report = dl.port.port_gluon_to_torch(g, t, _x(32))
    assert not report.ok and not report.loaded and not report.checks
    assert report.unpaired["source"] and report.unpaired["target"]
    assert "nothing loaded" in report.message
    assert all(torch.equal(before[k], v) for k, v in t.state_dict().items())
    text = report.summary()
    assert "unpaired source" in text and "unpaired target" in text


def test_partial_port_loads_what_paired():
    torch.manual_seed(0)
    g, t = _gluon("resnet18_v1"), ResNet18V1(classes=7)  # the head differs
    report = dl.port.port_gluon_to_torch(g, t, _x(64), allow_partial=True, verify=False)
    assert report.loaded and not report.complete and not report.ok
    assert set(report.unpaired["target"]) == {"fc.weight", "fc.bias"}
    assert np.array_equal(t.stem[0].weight.detach().numpy(), g.features[0].weight.data().asnumpy())


def test_hybridized_block_warns_and_stays_hybridized():
    torch.manual_seed(0)
    g, t = _gluon("mobilenet0.25"), MobileNetV1()
    g.hybridize()
    g(mx.nd.array(_x(32)))
    with pytest.warns(PortWarning, match="hybridized"):
        report = dl.port.port_gluon_to_torch(g, t, _x(32))
    assert report.ok, report.summary()
    assert any("hybridized" in n for n in report.notes)
    assert g._active and g.features._active


# ---------------------------------------------------------------- torch -> gluon
@pytest.mark.parametrize("name,torch_cls,size", [
    ("resnet18_v2", ResNet18V2, 64),     # Gluon's fixed gamma/beta are filled with 1/0
    pytest.param("vgg11_bn", VGG11BN, 32, marks=pytest.mark.slow),  # conv biases filled with 0
])
def test_torch_to_gluon(name, torch_cls, size):
    torch.manual_seed(1)
    t = torch_cls()
    with torch.no_grad():  # non-trivial running stats so the port has something to carry
        for m in t.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 1.5)
    g = _gluon(name)
    g(mx.nd.array(_x(size)))
    report = dl.port.port_torch_to_gluon(t, g, _x(size))
    assert report.ok, report.summary()
    assert report.max_rel_diff < F32_TOL
    x2 = _x(size, n=3, seed=2)
    assert np.abs(_run_gluon(g, x2) - _run_torch(t, x2)).max() <= 1e-5 * max(1, np.abs(_run_gluon(g, x2)).max())
    if name == "vgg11_bn":
        assert any("zero_missing_bias" in n for n in report.notes)
        assert np.all(g.features[0].bias.data().asnumpy() == 0)


# ---------------------------------------------------------------- mapping reuse
def test_mapping_saved_and_reapplied_to_checkpoint_files(tmp_path):
    torch.manual_seed(0)
    g, t = _gluon("resnet18_v1"), ResNet18V1()
    report = dl.port.port_gluon_to_torch(g, t, _x(64))
    assert report.ok
    report.save(tmp_path / "report.json")
    report.mapping.save(tmp_path / "map.json")
    g.save_parameters(str(tmp_path / "net.params"))
    for path in ("report.json", "map.json"):
        fresh = ResNet18V1()
        tensors = Mapping.load(tmp_path / path).apply(str(tmp_path / "net.params"), target=fresh)
        assert set(tensors) == {k for k in fresh.state_dict() if not k.endswith("num_batches_tracked")}
        x = _x(64, seed=3)
        assert np.abs(_run_torch(fresh, x) - _run_gluon(g, x)).max() < 1e-4
    with pytest.raises(ValueError, match="not a valid port mapping|cannot read"):
        (tmp_path / "bad.json").write_text("{\"format\": \"dualdl-port-mapping\"}")
        Mapping.load(tmp_path / "bad.json")
