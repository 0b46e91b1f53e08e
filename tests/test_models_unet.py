"""A whole model written once: a small U-Net (Conv2d + GroupNorm + ReLU down blocks, MaxPool2d, a
bottleneck, nearest 2x upsampling written with dualdl.ops, skip concats with ops.cat), trained 3
Adam steps on torch and on MXNet (eager and hybridized) from the same weights and batches. Measured differences per step
are printed (``pytest -s``) and reported in docs/models.md ("Whole models")."""
import numpy as np
import pytest

import dualdl as dl
from dualdl import nn, ops
from dualdl.testing.parity import randomize_state

pytest.importorskip("torch")
pytest.importorskip("mxnet")

STEPS, LR = 3, 1e-2
TOL = 2e-5           # max |torch - MXNet| / max(1, max |torch|) per step, loss and every weight


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm = nn.GroupNorm(groups, cout)

    def forward(self, x):
        return ops.relu(self.norm(self.conv(x)))


def upsample_nearest2x(x):
    """Nearest-neighbour 2x upsampling of (N, C, H, W) from unsqueeze + cat + flatten (no
    interpolate op, no shape read: it hybridizes on MXNet)."""
    x = ops.flatten(ops.cat([ops.unsqueeze(x, -1)] * 2, dim=-1), 3, 4)          # (N, C, H, 2W)
    return ops.flatten(ops.cat([ops.unsqueeze(x, 3)] * 2, dim=3), 2, 3)          # (N, C, 2H, 2W)


class UNet(nn.Module):
    """(N, 3, H, W) -> (N, 2, H, W), H and W divisible by 4."""

    def __init__(self):
        super().__init__()
        self.enc1 = Block(3, 8, 2)
        self.enc2 = Block(8, 16, 4)
        self.pool = nn.MaxPool2d(2)
        self.bottleneck = Block(16, 16, 4)
        self.dec2 = Block(32, 8, 2)
        self.dec1 = Block(16, 8, 2)
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        b = self.bottleneck(self.pool(e2))
        d2 = self.dec2(ops.cat([upsample_nearest2x(b), e2], dim=1))
        d1 = self.dec1(ops.cat([upsample_nearest2x(d2), e1], dim=1))
        return self.head(d1)


def batch(step: int):
    rng = np.random.default_rng(100 + step)
    return (rng.standard_normal((4, 3, 16, 16)).astype(np.float32),
            rng.standard_normal((4, 2, 16, 16)).astype(np.float32))


def initial_weights():
    with dl.use("torch"):
        return randomize_state(UNet(), np.random.default_rng(0))


def train(candidate: str, init):
    """(losses, weights after each step, eval output) of 3 Adam steps through dl.Trainer;
    ``candidate``: torch, mxnet or mxnet:hybridized."""
    with dl.use(candidate.split(":")[0]):
        model = UNet()
        dl.load_state_dict(model, init)
        if candidate.endswith(":hybridized"):
            model.hybridize()
        opt = dl.optim.Adam(model.parameters(), lr=LR)
        tr = dl.Trainer(model, opt, dl.losses.MSELoss())
        losses, weights = [], []
        for s in range(STEPS):
            losses.append(tr.train_step(*batch(s)))
            weights.append({k: dl.to_numpy(v).astype(np.float64) for k, v in dl.state_dict(model).items()})
        model.eval()
        out = dl.to_numpy(model(dl.from_numpy(batch(STEPS)[0]))).astype(np.float64)
    return losses, weights, out


def test_upsampling_is_nearest():
    x = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3)
    with dl.use("torch"):
        import torch
        want = torch.nn.functional.interpolate(torch.from_numpy(x), scale_factor=2, mode="nearest").numpy()
    for be in ("torch", "mxnet"):
        with dl.use(be):
            np.testing.assert_array_equal(dl.to_numpy(upsample_nearest2x(dl.from_numpy(x))), want)


_RUNS = {}        # the torch reference, trained once for both candidates


@pytest.mark.parametrize("candidate", ["mxnet", "mxnet:hybridized"])
def test_unet_trains_to_the_same_weights_on_both_backends(candidate):
    init = initial_weights()
    assert any(k.endswith("norm.weight") for k in init)
    if "torch" not in _RUNS:
        _RUNS["torch"] = train("torch", init)
    lt, wt, ot = _RUNS["torch"]
    lm, wm, om = train(candidate, init)
    assert set(wt[0]) == set(wm[0])
    rows = []
    for s in range(STEPS):
        d_abs = max(float(np.abs(wt[s][k] - wm[s][k]).max()) for k in wt[s])
        d_rel = max(float(np.abs(wt[s][k] - wm[s][k]).max() / np.abs(wt[s][k]).max()) for k in wt[s])
        d_loss = abs(lt[s] - lm[s])
        rows.append((s + 1, lt[s], d_loss, d_abs, d_rel))
        assert d_loss <= TOL * max(1.0, abs(lt[s])) and d_abs <= TOL * max(1.0, max(
            float(np.abs(w).max()) for w in wt[s].values())), rows
        assert not np.allclose(wt[s]["head.weight"], init["head.weight"])     # it trained
    d_out = float(np.abs(ot - om).max())
    print(f"\ntorch vs {candidate}\n| step | torch loss | |d loss| | max abs d weights | max rel d weights |")
    for r in rows:
        print("| %d | %.6f | %.1e | %.1e | %.1e |" % r)
    print(f"eval output after {STEPS} steps: max abs {d_out:.1e} (rel {d_out / np.abs(ot).max():.1e})")
    assert d_out <= TOL * max(1.0, float(np.abs(ot).max()))
