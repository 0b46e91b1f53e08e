"""Whole models written once, trained a few steps on both backends from identical weights and
batches; the max abs/rel differences per step are printed (``pytest -s``) and reported in
docs/models.md ("Whole models"). Each model keeps its own test functions."""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import pytest

import dualdl as dl
import dualdl.autograd  # noqa: F401
from dualdl import nn, ops
from dualdl.testing.runners import adapter

pytest.importorskip("torch")
pytest.importorskip("mxnet")


def _maxdiff(a: Dict[str, np.ndarray], b: Dict[str, np.ndarray]):
    """(max abs difference, max of abs difference / max |reference|) over the tensors of two dicts."""
    assert set(a) == set(b), sorted(set(a) ^ set(b))
    d_abs = d_rel = 0.0
    for k in a:
        ref, got = a[k].astype("float64"), b[k].astype("float64")
        d = float(np.abs(ref - got).max()) if ref.size else 0.0
        d_abs, d_rel = max(d_abs, d), max(d_rel, d / max(float(np.abs(ref).max()), 1e-30))
    return d_abs, d_rel


# ---- DCGAN (Radford et al. 2016; PyTorch's examples/dcgan at 16x16) ------------------------------
NZ, NGF, NDF, NC, BATCH = 8, 4, 4, 3, 6


class DCGANGenerator(nn.Module):
    """z (N, nz, 1, 1) -> image (N, nc, 16, 16): ConvTranspose2d + BatchNorm2d + ReLU, Tanh out."""

    def __init__(self, nz: int = NZ, ngf: int = NGF, nc: int = NC):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(),     # 4x4
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(),  # 8x8
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False), nn.Tanh())                             # 16x16

    def forward(self, z):
        return self.main(z)


class DCGANDiscriminator(nn.Module):
    """image (N, nc, 16, 16) -> probability (N,): Conv2d + BatchNorm2d + LeakyReLU(0.2), Sigmoid out."""

    def __init__(self, nc: int = NC, ndf: int = NDF):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2),                                # 8x8
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2),  # 4x4
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())                                  # 1x1

    def forward(self, x):
        return ops.flatten(self.main(x))             # (N, 1, 1, 1) -> (N,)


def _dcgan_init(model, seed: int) -> Dict[str, np.ndarray]:
    """DCGAN's weights_init on a state dict: conv weights N(0, 0.02), BatchNorm weight N(1, 0.02),
    bias 0 (buffers as they are)."""
    rng = np.random.default_rng(seed)
    sd = {}
    for k, v in dl.state_dict(model).items():
        a = dl.to_numpy(v)
        if k.endswith("weight") and a.ndim == 4:
            a = rng.normal(0.0, 0.02, a.shape)
        elif k.endswith("weight"):
            a = rng.normal(1.0, 0.02, a.shape)
        elif k.endswith("bias"):
            a = np.zeros(a.shape)
        sd[k] = a.astype(dl.to_numpy(v).dtype)
    return sd


def _dcgan_batches(steps: int, dtype: str = "float32"):
    rng = np.random.default_rng(7)
    return [(np.tanh(rng.standard_normal((BATCH, NC, 16, 16))).astype(dtype),
             rng.standard_normal((BATCH, NZ, 1, 1)).astype(dtype)) for _ in range(steps)]


def _is_buffer(key: str) -> bool:
    return key.rsplit(".", 1)[-1] in ("running_mean", "running_var", "num_batches_tracked")


def train_dcgan(backend: str, steps: int = 3, hybridize: bool = False,
                dtype: str = "float32") -> List[Dict[str, Dict[str, np.ndarray]]]:
    """DCGAN's alternating loop (D on real + fake.detach(), then G through D with real labels),
    Adam(lr 2e-4, betas (0.5, 0.999)), BCELoss; per step the losses, the gradients of D's and G's
    step and the weights (with BatchNorm running stats) after it."""
    with dl.use(backend):
        G, D = DCGANGenerator(), DCGANDiscriminator()
        dl.load_state_dict(G, _dcgan_init(G, 1))
        dl.load_state_dict(D, _dcgan_init(D, 2))
        if dtype != "float32":
            G, D = (adapter(backend).cast_model(m, np.dtype(dtype)) for m in (G, D))
        if hybridize:
            G.hybridize()
            D.hybridize()
        opt_g = dl.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
        opt_d = dl.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
        bce = dl.losses.BCELoss()
        grads = adapter(backend).param_grads
        ones, zeros = (dl.from_numpy(np.full((BATCH,), v, dtype)) for v in (1, 0))
        out = []
        for real, noise in _dcgan_batches(steps, dtype):
            real, noise = dl.from_numpy(real), dl.from_numpy(noise)
            opt_d.zero_grad()
            with dl.autograd.record(D):
                fake = G(noise)
                loss_d = bce(D(real), ones) + bce(D(fake.detach()), zeros)
            # fake's graph is used again by G's step (PyTorch's example): MXNet frees the recorded
            # graph at backward unless retained (else "The any container is empty" at G's backward)
            dl.autograd.backward(loss_d, retain_graph=True)
            g_d = {f"D.{k}": v for k, v in grads(D).items()}
            opt_d.step()
            opt_g.zero_grad()
            with dl.autograd.record(G):
                loss_g = bce(D(fake), ones)
            dl.autograd.backward(loss_g)
            g_g = {f"G.{k}": v for k, v in grads(G).items()}
            opt_g.step()
            state = {f"{n}.{k}": dl.to_numpy(v) for n, m in (("G", G), ("D", D)) for k, v in dl.state_dict(m).items()}
            out.append({"loss": {"D": np.array([dl.item(loss_d)]), "G": np.array([dl.item(loss_g)])},
                        "grad": {**g_d, **g_g},
                        "weight": {k: v for k, v in state.items() if not _is_buffer(k)},
                        "buffer": {k: v for k, v in state.items() if _is_buffer(k)}})
        return out


@pytest.mark.parametrize("hybridize", [False, True], ids=["mxnet", "mxnet:hybridized"])
def test_dcgan_trains_the_same_on_both_backends(hybridize):
    ref, got = train_dcgan("torch"), train_dcgan("mxnet", hybridize=hybridize)
    rows = []
    for step, (r, g) in enumerate(zip(ref, got), 1):
        diffs = {what: _maxdiff(r[what], g[what]) for what in ("loss", "grad", "weight", "buffer")}
        rows.append(f"step {step}: " + ", ".join(f"{w} {a:.1e} ({rel:.1e})" for w, (a, rel) in diffs.items()))
        assert diffs["loss"][0] <= 1e-6 and diffs["grad"][0] <= 1e-6 and diffs["weight"][0] <= 1e-6, rows[-1]
        assert diffs["buffer"][0] <= 1e-6, rows[-1]
    print(f"\nDCGAN torch vs {'mxnet:hybridized' if hybridize else 'mxnet'}: max abs (rel)\n  " + "\n  ".join(rows))


def test_dcgan_in_float64_is_exact():
    """float64 on both: the same three steps to rounding (measured <= 2.8e-16, docs/models.md).
    dualdl's MXNet LeakyReLU computes its formula on float64 NDArrays: MXNet's LeakyReLU operator
    keeps float32 precision in float64 and left 4.4e-9 in the gradients here."""
    ref, got = train_dcgan("torch", dtype="float64"), train_dcgan("mxnet", dtype="float64")
    rows = []
    for step, (r, g) in enumerate(zip(ref, got), 1):
        assert g["weight"]["G.main.0.weight"].dtype == np.float64
        diffs = {what: _maxdiff(r[what], g[what]) for what in ("loss", "grad", "weight", "buffer")}
        rows.append(f"step {step}: " + ", ".join(f"{w} {a:.1e} ({rel:.1e})" for w, (a, rel) in diffs.items()))
        assert max(a for a, _ in diffs.values()) <= 1e-14, rows[-1]
    print("\nDCGAN torch vs mxnet, float64: max abs (rel)\n  " + "\n  ".join(rows))


def test_dcgan_generator_shapes_and_the_step_moves_the_weights():
    """The proof compares something: G maps (N, nz, 1, 1) to (N, 3, 16, 16) in [-1, 1], D to (N,)
    probabilities, and every weight moves in 3 steps on both backends."""
    for be in ("torch", "mxnet"):
        with dl.use(be):
            G, D = DCGANGenerator(), DCGANDiscriminator()
            img = G(dl.from_numpy(_dcgan_batches(1)[0][1]))
            p = dl.to_numpy(D(img))
            assert tuple(img.shape) == (BATCH, NC, 16, 16) and np.abs(dl.to_numpy(img)).max() <= 1
            assert p.shape == (BATCH,) and ((p > 0) & (p < 1)).all()
        hist = train_dcgan(be, steps=3)
        start = {**{f"G.{k}": v for k, v in _dcgan_init(G, 1).items()},
                 **{f"D.{k}": v for k, v in _dcgan_init(D, 2).items()}}
        still = [k for k, v in hist[-1]["weight"].items() if k.endswith("weight") and np.array_equal(v, start[k])]
        assert not still, f"{be}: weights that did not move: {still}"


@pytest.mark.parametrize("calls", [1, 2, 3])
@pytest.mark.parametrize("backward", [True, False], ids=["backward", "forward-only"])
def test_hybridized_batchnorm_called_k_times_in_one_graph_updates_as_torch(calls, backward):
    """A BatchNorm2d called 1-3 times before one backward (DCGAN's D on real, then fake), or in
    train mode with no backward: hybridized, dualdl copies each call's new running statistics in
    after the call, in call order, as torch updates them in forward (MXNet's fused op updated them
    at backward, in reverse call order: 2.4e-2 off for two calls, and not at all without one)."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 3, 2, 2)) + 2 * i for i in range(calls)]

    def stats(be, hybridize):
        with dl.use(be):
            m = nn.BatchNorm2d(3)
            if hybridize:
                m.hybridize()
            with dl.autograd.record(m):
                loss = ops.sum(m(dl.from_numpy(xs[0].astype("float32"))))
                for x in xs[1:]:
                    loss = loss + ops.sum(m(dl.from_numpy(x.astype("float32"))) * dl.from_numpy(x.astype("float32")))
            if backward:
                dl.autograd.backward(loss)
            sd = dl.state_dict(m)
            return np.concatenate([dl.to_numpy(sd["running_mean"]), dl.to_numpy(sd["running_var"])])

    want = stats("torch", False)
    for hybridize in (False, True):
        err = np.abs(stats("mxnet", hybridize) - want).max()
        assert err <= 1e-6, f"hybridize={hybridize}: running statistics {err:.1e} from torch's"
