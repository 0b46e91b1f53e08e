"""gluoncv CenterNet's decoder (gluoncv.nn.coder.CenterNetDecoder, the real class) translated with
the float64 proof (issue 41: it was float32 only). Gluon's own float64 run returns float32 classes
and boxes (its code casts them) and float64 scores: the proof's loss sums them in float64 where
MXNet refuses float32 + float64. The proof then found a real difference: the decoder divides int64
indices (class = index / (h * w), y = index / w) and MXNet's legacy division truncates integers
toward zero where torch's ``/`` gives floats: classes were 0.92 off, boxes 3.3."""

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

from dualdl import port  # noqa: E402
from dualdl.port.translate.oplib import Expr, OpNode, translate_op  # noqa: E402
from dualdl.port.translate.proof_torch import load_generated  # noqa: E402

rng = np.random.default_rng(5)


def _torch_of(name, attrs, xs):
    node = OpNode(name, "n", dict(attrs), in_shapes=[x.shape for x in xs])
    e = translate_op(node, [Expr(f"x{i}") for i in range(len(xs))])
    env = {"torch": torch, **{f"x{i}": torch.from_numpy(x) for i, x in enumerate(xs)}}
    for h in e.helpers:
        exec(h, env)
    return eval(e.text, env).numpy()


@pytest.mark.parametrize("dt", ["int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("name, attrs, shapes", [
    ("broadcast_div", {}, [(3, 4), (1, 4)]), ("elemwise_div", {}, [(3, 4), (3, 4)]), ("_div", {}, [(3, 4), (3, 4)]),
    ("_div_scalar", {"scalar": "2.5"}, [(3, 4)]), ("_div_scalar", {"scalar": "-2.7"}, [(3, 4)]),
    ("_rdiv_scalar", {"scalar": "20.5"}, [(3, 4)])])
def test_legacy_division_as_mxnet(name, attrs, shapes, dt):
    """Integers: truncated toward zero, the scalar taken as an integer (-7 / 2 is -3, 7 / 2.5 is 3); floats:
    torch's / (exactly MXNet's). Divisors nonzero: MXNet's integer division by zero is a SIGFPE."""
    xs = [(rng.integers(1, 9, s) * rng.choice([-1, 1], s)).astype(dt) for s in shapes]
    if dt.startswith("float"):
        xs = [x + rng.uniform(-0.5, 0.5, x.shape).astype(dt) for x in xs]
    fn = getattr(mx.nd, name, None) or getattr(mx.nd._internal, name)
    want = fn(*[mx.nd.array(x, dtype=dt) for x in xs], **attrs).asnumpy()
    got = _torch_of(name, attrs, xs)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    if dt.startswith("float"):
        assert np.abs(got - want).max() <= 2 * np.finfo(dt).eps * np.abs(want).max()     # torch's / as before
        return
    assert np.array_equal(got, want), (got, want)
    s = int(float(attrs.get("scalar", 0)))
    a, b = xs if len(xs) == 2 else ((xs[0], s) if name == "_div_scalar" else (s, xs[0]))
    q = np.asarray(a, float) / np.asarray(b, float)
    assert np.any(np.trunc(q) != np.floor(q))        # the inputs tell truncation from floor division


def test_gluoncv_centernet_decoder_is_proven_in_float64(tmp_path):
    port.import_gluoncv()
    from gluoncv.nn.coder import CenterNetDecoder
    heat = rng.uniform(0, 1, (2, 3, 4, 6)).astype(np.float32)
    wh = rng.uniform(1, 5, (2, 2, 4, 6)).astype(np.float32)
    reg = rng.uniform(0, 1, (2, 2, 4, 6)).astype(np.float32)
    r = port.translate(CenterNetDecoder(topk=5, scale=4.0), [heat, wh, reg], str(tmp_path))
    assert r.ok and r.dtype == "float64", r.summary()
    src = open(r.source_path).read()
    assert "mx_div(" in src and "torch.remainder(" in src
    cls = load_generated(r.source_path, r.class_name)
    dec = CenterNetDecoder(topk=5, scale=4.0)
    for dt in ("float64", "float32"):
        g = [o.asnumpy() for o in dec(*[mx.nd.array(a, dtype=dt) for a in (heat, wh, reg)])]
        t = [o.numpy() for o in cls()(*[torch.from_numpy(a.astype(dt)) for a in (heat, wh, reg)])]
        assert [a.dtype for a in g] == [b.dtype for b in t], (dt, [a.dtype for a in g], [b.dtype for b in t])
        # float64: classes float32, scores float64, boxes float32, as Gluon's own float64 run; all exact
        for a, b in zip(g, t):
            assert np.array_equal(a, b), (dt, np.abs(a.astype(float) - b.astype(float)).max())
        assert set(np.unique(g[0])) <= {0.0, 1.0, 2.0}     # class indices, not fractions
