"""A whole model written once: an InsightFace-style ResNet (IR blocks BN-Conv-BN-PReLU-Conv-BN plus
shortcut, an embedding head Linear + BatchNorm1d, a softmax classifier) trained 3 steps with
SGD(momentum, weight_decay) on torch and on MXNet (eager and hybridized) from the same weights and
batches. The per-step max differences (loss, logits, every weight and running stat after the
step) are asserted here and reported in docs/models.md ("Whole models")."""
from __future__ import annotations

import functools
from typing import Dict, List

import numpy as np
import pytest

import dualdl as dl
import dualdl.autograd  # noqa: F401
from dualdl import nn

pytest.importorskip("torch")
pytest.importorskip("mxnet")

STEPS, BATCH, CLASSES, EMBEDDING = 3, 6, 10, 16


class IRBlock(nn.Module):
    """InsightFace's IBasicBlock: BN - Conv3x3 - BN - PReLU - Conv3x3(stride) - BN, plus the
    shortcut (1x1 conv + BN when the shape changes)."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(c_in)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.prelu = nn.PReLU(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, stride, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        y = self.bn3(self.conv2(self.prelu(self.bn2(self.conv1(self.bn1(x))))))
        return y + (x if self.downsample is None else self.downsample(x))


class IResNet(nn.Module):
    """(N, 3, 32, 32) -> (embedding (N, 16), logits (N, 10))."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.prelu = nn.PReLU(8)
        self.layers = nn.Sequential(IRBlock(8, 16, 2), IRBlock(16, 16, 1), IRBlock(16, 32, 2), IRBlock(32, 32, 1))
        self.bn2 = nn.BatchNorm2d(32)
        self.dropout = nn.Dropout(0.0)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(32 * 8 * 8, EMBEDDING)
        self.features = nn.BatchNorm1d(EMBEDDING)
        self.head = nn.Linear(EMBEDDING, CLASSES)

    def forward(self, x):
        h = self.layers(self.prelu(self.bn1(self.conv1(x))))
        emb = self.features(self.fc(self.flatten(self.dropout(self.bn2(h)))))
        return emb, self.head(emb)


def _batches():
    rng = np.random.default_rng(7)
    return [(rng.standard_normal((BATCH, 3, 32, 32)).astype("float32"), rng.integers(0, CLASSES, BATCH))
            for _ in range(STEPS)]


@functools.lru_cache(maxsize=1)
def _initial_weights() -> Dict[str, np.ndarray]:
    """torch's default init (made once), then norm scales/shifts, PReLU slopes and running stats
    randomised."""
    rng = np.random.default_rng(3)
    dl.seed(3)          # torch's default init draws from its global generator: fixed, not test-order dependent
    with dl.use("torch"):
        sd = {k: dl.to_numpy(v) for k, v in dl.state_dict(IResNet()).items()}
    for k, a in sd.items():
        if k.endswith("running_var"):
            sd[k] = (0.5 + rng.random(a.shape)).astype(a.dtype)
        elif k.endswith(("running_mean", "bias")) or ("bn" in k or "features" in k) and k.endswith("weight"):
            sd[k] = (0.2 * rng.standard_normal(a.shape) + (1.0 if k.endswith("weight") else 0.0)).astype(a.dtype)
        elif "prelu" in k:
            sd[k] = rng.uniform(0.05, 0.5, a.shape).astype(a.dtype)
    return sd


def _train(backend: str, hybridize: bool = False) -> List[Dict[str, np.ndarray]]:
    """Per step: the loss, the logits and every weight/buffer after the optimizer step."""
    out = []
    with dl.use(backend):
        model = IResNet()
        dl.load_state_dict(model, _initial_weights())
        if hybridize:
            model.hybridize()
        model.train()
        opt = dl.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
        criterion = dl.losses.CrossEntropyLoss()
        for x, y in _batches():
            opt.zero_grad()
            with dl.autograd.record(model):
                _, logits = model(dl.from_numpy(x))
                loss = criterion(logits, dl.from_numpy(y))
            dl.autograd.backward(loss)
            opt.step()
            step = {k: dl.to_numpy(v) for k, v in dl.state_dict(model).items()}
            step.update(loss=np.asarray(dl.to_numpy(loss)), logits=dl.to_numpy(logits))
            out.append(step)
    return out


def _diff(ref: Dict[str, np.ndarray], got: Dict[str, np.ndarray]):
    """(max abs, max rel to the largest reference value of that tensor), over all tensors."""
    assert set(ref) == set(got)
    d = [(float(np.abs(ref[k].astype("float64") - got[k]).max()),
          float(np.abs(ref[k].astype("float64") - got[k]).max() / max(np.abs(ref[k]).max(), 1e-12))) for k in ref]
    return max(a for a, _ in d), max(r for _, r in d)


@pytest.fixture(scope="module")
def torch_run():
    return _train("torch")


@pytest.mark.parametrize("hybridize", [False, True], ids=["mxnet", "mxnet:hybridized"])
def test_insightface_resnet_trains_the_same_on_both_backends(torch_run, hybridize):
    mx_run = _train("mxnet", hybridize)
    init = _initial_weights()
    moved = {k: float(np.abs(torch_run[-1][k] - init[k]).max()) for k in init}
    assert moved["prelu.weight"] > 1e-3 and moved["layers.0.prelu.weight"] > 1e-3, moved   # PReLU trains
    small = {k: v for k, v in moved.items() if v <= 1e-5}
    assert not small, f"weights or running stats that did not change: {small}"
    for step, (t, m) in enumerate(zip(torch_run, mx_run), 1):
        d_abs, d_rel = _diff(t, m)
        print(f"\nstep {step} {'hybridized' if hybridize else 'eager'}: loss torch {float(t['loss']):.6f} "
              f"mxnet {float(m['loss']):.6f}; max abs {d_abs:.1e}, max rel {d_rel:.1e}")
        assert d_abs <= 2e-5 and d_rel <= 2e-5, f"step {step}: max abs {d_abs:.2e}, max rel {d_rel:.2e}"
