"""torch vs MXNet parity of composed models (MLP, LeNet, CNN with BatchNorm and a residual
write-once block) and of layer behaviour the parity table (tests/parity_table/, which holds every
single layer) does not cover: several steps, pooling sweeps, hybridized BatchNorm statistics.

Every parameter and buffer is randomised on the torch build and copied to two MXNet builds (one
hybridized) through ``dl.state_dict``/``dl.load_state_dict``; the same random inputs run in train
mode (3 steps, BatchNorm statistics update) then eval mode. Compared: outputs, input gradients,
parameter gradients, running statistics. Measured maxima are printed as a table (``pytest -s``).
"""
import itertools

import numpy as np
import pytest

import dualdl as dl
from dualdl import nn
from dualdl.testing.parity import randomize_state
from dualdl.testing.runners import run_step

torch = pytest.importorskip("torch")
mx = pytest.importorskip("mxnet")
from mxnet import autograd, nd  # noqa: E402

RESULTS = {}          # case -> {quantity: max abs diff}


@pytest.fixture(scope="module", autouse=True)
def _print_table():
    yield
    cols = ["out", "dx", "dparam", "stats", "hyb out", "hyb dx", "hyb dparam", "hyb stats"]
    print("\n\nmax abs diff: torch vs MXNet (out, dx, dparam, stats = running mean/var), MXNet hybridized "
          "vs not (hyb out/dx/dparam), hybridized running stats vs torch (hyb stats)")
    print(f"{'case':28s}" + "".join(f"{c:>11s}" for c in cols))
    for case, r in RESULTS.items():
        print(f"{case:28s}" + "".join(f"{r[c]:11.1e}" if c in r else f"{'-':>11s}" for c in cols))


def build(factory):
    with dl.use("torch"):
        t = factory()
    with dl.use("mxnet"):
        m, h = factory(), factory()
    h.hybridize()
    return t, m, h


def copy_to(t, *mx_models):
    sd = dl.state_dict(t)
    for m in mx_models:
        dl.load_state_dict(m, sd)


def run_torch(t, x, rng):
    """Forward, then backward of a random output gradient (returned for the MXNet runs)."""
    mode = t.training
    with torch.no_grad():                   # output shape only: eval mode updates no statistics
        shape = tuple(t.eval()(torch.from_numpy(x)).shape)
    t.train(mode)
    g = rng.standard_normal(shape).astype(np.float32)
    r = run_step("torch", t, [x], grad_outputs=[g], train=None)
    return (r.outputs[0], r.input_grads[0], {k: v for k, v in r.grads.items() if v is not None}), g


def run_mx(m, x, g):
    r = run_step("mxnet", m, [x], grad_outputs=[g], train=None)      # record() in the model's own mode
    return r.outputs[0], r.input_grads[0], {k: v for k, v in r.grads.items() if v is not None}


def maxdiff(a, b):
    if a is None and b is None:
        return 0.0
    assert a.shape == b.shape, f"shape {a.shape} vs {b.shape}"
    return float(np.abs(a.astype(np.float64) - b).max()) if a.size else 0.0


def tol(ref):
    return 1e-5 * max(1.0, float(np.abs(ref).max()) if ref is not None and ref.size else 1.0)


def stats(model):
    return {k: dl.to_numpy(v) for k, v in dl.state_dict(model).items() if "running" in k}


def compare(case, factory, make_input, steps=3, seed=0):
    """Run ``steps`` train-mode steps then one eval step on torch, MXNet and hybridized MXNet."""
    rng = np.random.default_rng(seed)
    t, m, h = build(factory)
    randomize_state(t, rng)
    copy_to(t, m, h)
    r = {}

    def upd(key, v):
        r[key] = max(r.get(key, 0.0), v)

    for step in range(steps + 1):
        train = step < steps
        for mod in (t, m, h):
            mod.train(train)
        x = make_input(rng)
        (yt, dxt, gt), g = run_torch(t, x, rng)
        (ym, dxm, gm), (yh, dxh, gh) = run_mx(m, x, g), run_mx(h, x, g)
        assert set(gt) == set(gm), f"{case}: parameter gradients {sorted(gt)} vs {sorted(gm)}"
        checks = [("out", yt, ym), ("dx", dxt, dxm), ("hyb out", ym, yh), ("hyb dx", dxm, dxh)]
        st, sm, sh = stats(t), stats(m), stats(h)
        checks += [("stats", st[k], sm[k]) for k in st] + [("hyb stats", st[k], sh[k]) for k in st]
        for key, a, b in checks:
            d = maxdiff(a, b)
            upd(key, d)
            assert d <= tol(a), f"{case} step {step} ({'train' if train else 'eval'}): {key} {d:.2e}"
        # parameter gradients: relative to the largest one (a gradient that is 0 in exact arithmetic,
        # e.g. a bias followed by BatchNorm, carries rounding noise of the size of the summed terms)
        scale = tol(np.concatenate([v.ravel() for v in gt.values()])) if gt else 0.0
        for key, ga, gb in (("dparam", gt, gm), ("hyb dparam", gm, gh)):
            for k in ga:
                d = maxdiff(ga[k], gb[k])
                upd(key, d)
                assert d <= scale, f"{case} step {step}: {key} {k} {d:.2e} (largest gradient {scale * 1e5:.2f})"
    RESULTS[case] = r
    return t, m, h


def randn(*shape):
    return lambda rng: rng.standard_normal(shape).astype(np.float32)


def test_embedding_padding_row_gets_no_gradient():
    t, m, h = compare("Embedding padding_idx (grad)", lambda: nn.Embedding(6, 3, padding_idx=1),
                      lambda rng: np.array([[1, 2, 1, 5]]), steps=1)
    assert np.all(m.weight.grad().asnumpy()[1] == 0) and np.all(t.weight.grad.numpy()[1] == 0)
    assert np.any(m.weight.grad().asnumpy()[2] != 0)


# ---- composed models ---------------------------------------------------------------------------
def mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.0), nn.Linear(32, 16), nn.Tanh(),
                         nn.Linear(16, 5), nn.LogSoftmax(dim=1))


def lenet():
    """Seed 004's LeNet for 1x28x28 input."""
    return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 4 * 4, 120), nn.ReLU(),
                         nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


class ResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.act = nn.ReLU()

    def forward(self, x):
        out = self.act(self.bn1(self.conv1(x)))
        return self.act(self.bn2(self.conv2(out)) + x)


class BNNet(nn.Module):
    """CNN with BatchNorm, a residual block, ModuleList heads and global pooling."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1, ceil_mode=True))
        self.blocks = nn.ModuleList([ResBlock(8)])
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.flatten = nn.Flatten()
        self.head = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.GELU(), nn.Dropout(0.0),
                                  nn.Linear(16, 4))

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.flatten(self.pool(x)))


MODELS = {
    "MLP": (mlp, randn(8, 20)),
    "LeNet (seed 004)": (lenet, randn(4, 1, 28, 28)),
    "CNN+BN+residual": (BNNet, randn(4, 3, 11, 11)),
}


@pytest.mark.parametrize("case", list(MODELS))
def test_model_parity(case):
    factory, make_input = MODELS[case]
    t, m, h = compare(case, factory, make_input)
    assert list(dl.state_dict(t)) == list(dl.state_dict(m))


def test_hybridized_batchnorm_running_stats_update_in_forward():
    """Hybridized, the running statistics are torch's values (unbiased variance), updated in
    forward as torch's: by a forward alone (no record) and once more by a recorded step."""
    rng = np.random.default_rng(3)
    t, m, h = build(lambda: nn.BatchNorm2d(3, momentum=0.1))
    x = (rng.standard_normal((2, 3, 2, 2)) * 2 + 1).astype(np.float32)
    before = stats(h)
    _, g = run_torch(t, x, rng)
    h(nd.array(x)).wait_to_read()                # forward alone, no record: one update
    st, sh = stats(t), stats(h)
    assert np.abs(st["running_var"] - before["running_var"]).min() > 0.05     # it moved...
    d = max(maxdiff(st[k], sh[k]) for k in st)
    run_torch(t, x, rng)
    run_mx(h, x, g)                               # a recorded step: the second update
    st, sh = stats(t), stats(h)
    d = max([d] + [maxdiff(st[k], sh[k]) for k in st])
    assert d <= 1e-6                                                          # ...to torch's values
    RESULTS["BN hybridized stats (n=8)"] = {"hyb stats": d}


def test_pooling_sweep_matches_torch_shapes_values_and_gradients():
    """The reference's 432-configuration sweep (04e) on 2-D pooling plus a 1-D sweep: same output
    shape, values and input gradients on torch and MXNet, and hybridized MXNet == not (ceil_mode
    configurations with H <= 6)."""
    rng = np.random.default_rng(4)
    worst, worst_dx, n = 0.0, 0.0, 0
    for dims, H, k, s, p, ceil, kind in itertools.product((2, 1), range(4, 10), [2, 3], [1, 2, 3], [0, 1],
                                                          [False, True], ["max", "avg", "avg_nopad"]):
        if p > k // 2 or (dims == 1 and H not in (5, 8)):
            continue
        if kind == "max":
            cls, kw = ("MaxPool2d" if dims == 2 else "MaxPool1d"), {}
        else:
            cls, kw = ("AvgPool2d" if dims == 2 else "AvgPool1d"), {"count_include_pad": kind == "avg"}

        def factory():
            return getattr(nn, cls)(k, s, p, ceil_mode=ceil, **kw)

        shape = (1, 2, H, H + 1) if dims == 2 else (2, 3, H)
        x = rng.standard_normal(shape).astype(np.float32)
        with dl.use("torch"):
            (yt, dxt, _), g = run_torch(factory(), x, rng)
        with dl.use("mxnet"):
            ym, dxm, _ = run_mx(factory(), x, g)
            if ceil and H <= 6:
                hb = factory()
                hb.hybridize()
                yh, dxh, _ = run_mx(hb, x, g)
                assert maxdiff(ym, yh) == 0.0 and maxdiff(dxm, dxh) <= 1e-6, (cls, H, k, s, p, ceil, kind)
        d, ddx = maxdiff(yt, ym), maxdiff(dxt, dxm)
        assert d <= 1e-6 and ddx <= 1e-6, (cls, H, k, s, p, ceil, kind, d, ddx)
        worst, worst_dx, n = max(worst, d), max(worst_dx, ddx), n + 1
    RESULTS[f"pool sweep ({n} configs)"] = {"out": worst, "dx": worst_dx}


@pytest.mark.parametrize("ceil", [False, True])
def test_maxpool_gradient_under_record_without_train_mode(ceil):
    """MKLDNN's float32 max-pooling backward is wrong under autograd.record(train_mode=False)
    (what an eval-mode gradient uses); dualdl's MaxPool2d matches torch there too."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    with dl.use("torch"):
        (yt, dxt, _), g = run_torch(nn.MaxPool2d(3, 2, 1, ceil_mode=ceil).eval(), x, rng)
    with dl.use("mxnet"):
        m = nn.MaxPool2d(3, 2, 1, ceil_mode=ceil).eval()
    xm = nd.array(x)
    xm.attach_grad()
    with autograd.record(train_mode=False):
        y = m(xm)
    y.backward(nd.array(g))
    d = maxdiff(dxt, xm.grad.asnumpy())
    assert maxdiff(yt, y.asnumpy()) == 0.0 and d <= 1e-6, d          # MXNet's own op: 3.9 off
    RESULTS[f"MaxPool2d record(train_mode=False){' ceil' if ceil else ''}"] = {"out": 0.0, "dx": d}
