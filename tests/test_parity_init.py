"""The parity table of dl.nn.init: every function against torch.nn.init itself.

Exact rows: from the same ``dl.seed``/``torch.manual_seed`` (or the same ``generator=``), dualdl on a
torch Parameter, on an MXNet NDArray (float32 and float64) and on a dualdl layer's Gluon Parameter
must equal torch's values bit for bit (max abs difference 0). MXNet-only rows (torch not importable,
a subprocess): MXNet's RNG with torch's algorithms; the draws must have torch's distribution, judged
by a two-sample Kolmogorov-Smirnov test against torch's own draws (D below the 0.1% critical value)
and by mean, std and bounds. ``pytest -s`` prints the table (docs/init.md shows it).
"""
import inspect
import math
import os
import subprocess
import sys
import tempfile

import mxnet as mx
import numpy as np
import pytest
import torch

import dualdl as dl
import dualdl.nn as nn

RELU = math.sqrt(2.0)
# (function, shape, kwargs): every function, both fan modes, gains, both trunc_normal_ samplers
CASES = [
    ("uniform_", (5, 7), dict(a=-0.3, b=0.8)),
    ("normal_", (33,), dict(mean=1.5, std=0.2)),
    ("trunc_normal_", (40, 30), dict(std=0.02)),
    ("trunc_normal_", (40, 30), dict(mean=0.0, std=1.0, a=1.5, b=3.0)),      # the uniform-proposal sampler
    ("constant_", (3, 4), dict(val=0.25)),
    ("ones_", (6,), {}),
    ("zeros_", (2, 3), {}),
    ("eye_", (3, 5), {}),
    ("dirac_", (6, 2, 3, 3), dict(groups=3)),
    ("dirac_", (4, 4, 5), {}),
    ("xavier_uniform_", (16, 8, 3, 3), dict(gain=RELU)),
    ("xavier_normal_", (10, 20), {}),
    ("kaiming_uniform_", (16, 8, 3, 3), dict(a=5 ** 0.5)),
    ("kaiming_normal_", (16, 8, 3, 3), dict(mode="fan_out", nonlinearity="relu")),
    ("kaiming_normal_", (12, 9), dict(a=0.2, mode="fan_in", nonlinearity="leaky_relu")),
    ("orthogonal_", (6, 4, 2), dict(gain=2.0)),
    ("orthogonal_", (9, 5), {}),
    ("sparse_", (20, 6), dict(sparsity=0.35, std=0.5)),
]
IDS = [f"{f}{s}" for f, s, _ in CASES]

# MXNet-only rows: large draws, so that the distribution checks have power
BIG = [
    ("uniform_", (400, 500), dict(a=-1.0, b=3.0)),
    ("normal_", (400, 500), dict(mean=2.0, std=0.5)),
    ("trunc_normal_", (400, 500), dict(std=0.02)),
    ("trunc_normal_", (400, 500), dict(std=1.0, a=-1.0, b=2.0)),
    ("trunc_normal_", (400, 500), dict(a=2.0, b=3.0)),
    ("xavier_uniform_", (256, 128, 3, 3), dict(gain=RELU)),
    ("xavier_normal_", (500, 400), {}),
    ("kaiming_uniform_", (256, 128, 3, 3), dict(a=5 ** 0.5)),
    ("kaiming_normal_", (256, 128, 3, 3), dict(mode="fan_out", nonlinearity="relu")),
    ("orthogonal_", (40, 60), dict(gain=2.0)),
    ("orthogonal_", (64, 8, 2, 2), {}),
    ("sparse_", (50, 400), dict(sparsity=0.3, std=0.1)),
    ("constant_", (3, 4), dict(val=0.25)),
    ("ones_", (6,), {}),
    ("zeros_", (2, 3), {}),
    ("eye_", (3, 5), {}),
    ("dirac_", (6, 2, 3, 3), dict(groups=3)),
]
KS_C = math.sqrt(-math.log(0.001 / 2) / 2)       # two-sample KS critical coefficient at alpha = 0.1%
TABLE = {}


def _torch_ref(fn, shape, kw, seed, dtype=torch.float32, generator=None):
    torch.manual_seed(seed)
    t = torch.empty(shape, dtype=dtype)
    getattr(torch.nn.init, fn)(t, **kw, **({} if generator is None else {"generator": generator}))
    return t.numpy()


def _max_abs(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max()) if np.size(b) else 0.0


@pytest.mark.parametrize("fn,shape,kw", CASES, ids=IDS)
def test_torch_s_numbers_on_torch_and_on_mxnet(fn, shape, kw):
    row = TABLE.setdefault((fn, shape, str(kw)), {})
    p = torch.nn.Parameter(torch.empty(shape))          # requires grad: the write is under no_grad
    dl.seed(3)
    assert getattr(nn.init, fn)(p, **kw) is p and p.grad_fn is None
    row["torch"] = _max_abs(p.detach().numpy(), _torch_ref(fn, shape, kw, 3))
    for dtype, tdtype in (("float32", torch.float32), ("float64", torch.float64)):
        x = mx.nd.full(shape, 7.0, dtype=dtype)
        dl.seed(5)
        assert getattr(nn.init, fn)(x, **kw) is x and x.dtype == np.dtype(dtype)
        row[f"mxnet {dtype}"] = _max_abs(x.asnumpy(), _torch_ref(fn, shape, kw, 5, tdtype))
    if "generator" in inspect.signature(getattr(nn.init, fn)).parameters:       # generator= as well
        x = mx.nd.zeros(shape)
        dl.seed(5)                                       # sparse_'s randperm ignores generator=, as torch's
        getattr(nn.init, fn)(x, **kw, generator=torch.Generator().manual_seed(6))
        row["generator="] = _max_abs(x.asnumpy(), _torch_ref(fn, shape, kw, 5, generator=torch.Generator().manual_seed(6)))
    assert all(v == 0.0 for v in row.values()), row


def test_a_dualdl_layer_s_parameters_get_torch_s_numbers():
    for b in ("torch", "mxnet"):
        conv, lin = nn.Conv2d(4, 6, 3, backend=b), nn.Linear(5, 3, backend=b)
        dl.seed(9)
        nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu")
        nn.init.orthogonal_(lin.weight)
        nn.init.trunc_normal_(lin.bias, std=0.02)
        torch.manual_seed(9)
        want = [torch.nn.init.kaiming_normal_(torch.empty(6, 4, 3, 3), mode="fan_out", nonlinearity="relu"),
                torch.nn.init.orthogonal_(torch.empty(3, 5)), torch.nn.init.trunc_normal_(torch.empty(3), std=0.02)]
        got = [dl.to_numpy(dl.state_dict(m)[k]) for m, k in ((conv, "weight"), (lin, "weight"), (lin, "bias"))]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w.numpy())


FALLBACK = r"""
import importlib.abc, sys
class NoTorch(importlib.abc.MetaPathFinder):      # an MXNet-only install: `import torch` fails
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "torch":
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
sys.meta_path.insert(0, NoTorch())
import ast, numpy as np, mxnet as mx, dualdl as dl, dualdl.nn as nn
from dualdl_mx.init import torch_draws
assert not torch_draws()
out = {}
for i, (fn, shape, kw) in enumerate(ast.literal_eval(sys.argv[2])):
    for seed in (0, 0, 1):
        dl.seed(seed)
        x = mx.nd.zeros(shape)
        assert getattr(nn.init, fn)(x, **kw) is x
        out.setdefault(f"{i}", []).append(x.asnumpy())
try:
    nn.init.normal_(mx.nd.zeros(3), generator=object())
    raise SystemExit("generator= without torch was accepted")
except TypeError as e:
    assert "torch.Generator, and torch is not installed" in str(e), e
assert "torch" not in sys.modules
np.savez(sys.argv[1], **{k: np.stack(v) for k, v in out.items()})
"""


def _ks(a, b):
    """Two-sample Kolmogorov-Smirnov statistic D and its 0.1% critical value."""
    a, b = np.sort(a.ravel()), np.sort(b.ravel())
    grid = np.concatenate([a, b])
    d = np.abs(np.searchsorted(a, grid, "right") / a.size - np.searchsorted(b, grid, "right") / b.size).max()
    return float(d), KS_C * math.sqrt((a.size + b.size) / (a.size * b.size))


def test_an_mxnet_only_install_draws_torch_s_distributions_from_mxnet_s_rng():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "draws.npz")
        r = subprocess.run([sys.executable, "-c", FALLBACK, path, repr(BIG)], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        draws = dict(np.load(path))
    for i, (fn, shape, kw) in enumerate(BIG):
        first, again, other = draws[str(i)].astype(np.float64)
        ref = _torch_ref(fn, shape, kw, 0).astype(np.float64)
        row = TABLE.setdefault(("mxnet-only", fn, shape, str(kw)), {})
        np.testing.assert_array_equal(first, again)                        # the same seed: the same draws
        if fn in ("constant_", "ones_", "zeros_", "eye_", "dirac_"):       # nothing drawn: exact
            row["max abs"] = _max_abs(first, ref)
            assert row["max abs"] == 0.0, (fn, row)
            continue
        assert not np.array_equal(first, other), fn                         # another seed: other draws
        d, crit = _ks(first, ref)
        row.update(KS=f"{d:.4f} < {crit:.4f}", mean=f"{first.mean():+.4g} ({ref.mean():+.4g})",
                   std=f"{first.std():.4g} ({ref.std():.4g})",
                   range=f"[{first.min():.3g}, {first.max():.3g}] ([{ref.min():.3g}, {ref.max():.3g}])")
        assert d < crit, (fn, kw, d, crit)
        assert abs(first.std() / ref.std() - 1) < 0.02, (fn, first.std(), ref.std())
        if fn in ("uniform_", "trunc_normal_", "xavier_uniform_", "kaiming_uniform_"):
            lo, hi = {"uniform_": (kw.get("a"), kw.get("b")), "trunc_normal_": (kw.get("a", -2.0), kw.get("b", 2.0))
                      }.get(fn, (-np.abs(ref).max() * 1.001, np.abs(ref).max() * 1.001))
            assert lo <= first.min() and first.max() <= hi, (fn, first.min(), first.max())
        if fn == "orthogonal_":
            flat = first.reshape(shape[0], -1)
            gram = flat @ flat.T if flat.shape[0] <= flat.shape[1] else flat.T @ flat
            row["orthogonality"] = float(np.abs(gram - kw.get("gain", 1) ** 2 * np.eye(len(gram))).max())
            assert row["orthogonality"] < 1e-4, row
        if fn == "sparse_":
            zeros = (first == 0).sum(axis=0)
            assert (zeros == math.ceil(kw["sparsity"] * shape[0])).all(), zeros


def test_print_the_table():
    """The measured table (``pytest -s``); runs last in this file."""
    print("\nfunction, shape, kwargs | max abs difference to torch.nn.init (torch / MXNet f32 / f64 / generator=)")
    for key, row in TABLE.items():
        if key[0] != "mxnet-only":
            print(f"{key[0]:17s} {str(key[1]):14s} {key[2]:60s} " + "  ".join(f"{k}: {v:g}" for k, v in row.items()))
    print("\nMXNet only (MXNet's RNG): two-sample KS D vs torch's draws (< 0.1% critical), ours (torch's)")
    for key, row in TABLE.items():
        if key[0] == "mxnet-only":
            print(f"{key[1]:17s} {str(key[2]):16s} {key[3]:48s} " + "  ".join(f"{k}: {v}" for k, v in row.items()))
    assert TABLE
