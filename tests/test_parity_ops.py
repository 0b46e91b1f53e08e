"""dualdl.ops: torch vs MXNet on the same inputs, forward values and input gradients, MXNet both
imperative and hybridized (Symbols). Cases are the ones of test_ops.py; measured max abs diffs
go to MAX_DIFFS and into failure messages."""
import numpy as np
import pytest

import dualdl as dl
from dualdl import ops

from test_ops import CASES, TUPLE_CASES

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

TOL = 1e-5
MAX_DIFFS = {}
NON_DIFF = {"argmax_dim", "argmax_keep", "argmax_all", "argmin_dim", "one_hot", "one_hot_infer",
            "dropout_p1", "div_int", "zeros_like", "ones_like"}


def _flat(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _is_float(a):
    return np.asarray(a).dtype.kind == "f"


def _torch_run(fn, inputs, gouts):
    xs = [torch.from_numpy(np.array(a)) for a in inputs]
    for x in xs:
        if x.is_floating_point():
            x.requires_grad_()
    outs = _flat(fn(ops, *xs))
    pairs = [(o, torch.from_numpy(g.reshape(tuple(o.shape)))) for o, g in zip(outs, gouts)
             if g is not None and o.requires_grad]
    if pairs:
        torch.autograd.backward([p[0] for p in pairs], [p[1] for p in pairs])
    grads = [(x.grad.numpy() if x.grad is not None else np.zeros(x.shape, np.float32))
             if x.is_floating_point() else None for x in xs]
    return [o.detach().numpy() for o in outs], grads


def _mx_run(fn, inputs, gouts, net=None):
    xs = [dl.from_numpy(a, backend="mxnet") for a in inputs]
    for x, a in zip(xs, inputs):
        if _is_float(a):
            x.attach_grad()
    with mx.autograd.record():
        outs = _flat(net(*xs) if net is not None else fn(ops, *xs))
    pairs = [(o, mx.nd.array(g.reshape(o.shape))) for o, g in zip(outs, gouts)
             if g is not None and np.dtype(o.dtype).kind == "f"]
    if pairs:
        mx.autograd.backward([p[0] for p in pairs], [p[1] for p in pairs])
    grads = [x.grad.asnumpy() if _is_float(a) else None for x, a in zip(xs, inputs)]
    return [o.asnumpy() for o in outs], grads


def _hybrid(fn):
    class OpNet(dl.nn.Module):
        def forward(self, *xs):
            return fn(ops, *xs)

    net = OpNet(backend="mxnet")
    net.hybridize()
    return net


@pytest.mark.parametrize("case", CASES + TUPLE_CASES, ids=lambda c: c[0])
def test_op_parity_with_gradients(case):
    name, fn, _, inputs, symbol_ok = case
    rng = np.random.default_rng(0)
    t_outs, t_grads = _torch_run(fn, inputs, [None] * 8)
    gouts = [rng.normal(size=o.shape).astype(np.float32) if o.dtype.kind == "f" and name not in NON_DIFF
             else None for o in t_outs]
    t_outs, t_grads = _torch_run(fn, inputs, gouts)
    runs = [("imperative", None)] + ([("hybridized", _hybrid(fn))] if symbol_ok else [])
    for mode, net in runs:
        if net is not None:
            _mx_run(fn, inputs, gouts, net)            # builds the cached graph
        m_outs, m_grads = _mx_run(fn, inputs, gouts, net)
        d_out = max(float(np.abs(t.astype(np.float64) - m.reshape(t.shape)).max()) if t.size else 0.0
                    for t, m in zip(t_outs, m_outs) if np.isfinite(t).all()) if any(np.isfinite(t).all() for t in t_outs) else 0.0
        inf_ok = all(np.array_equal(t, m.reshape(t.shape)) for t, m in zip(t_outs, m_outs)
                     if not np.isfinite(t).all())
        d_grad = max([float(np.abs(t - m).max()) for t, m in zip(t_grads, m_grads) if t is not None],
                     default=0.0)
        MAX_DIFFS[f"{name} {mode}"] = {"output": d_out, "grad": d_grad}
        print(f"{name} {mode}: output {d_out:.2e} grad {d_grad:.2e}")
        assert inf_ok, f"{name} {mode}: non-finite outputs differ"
        assert d_out <= TOL and d_grad <= TOL, f"{name} {mode}: output diff {d_out:.2e}, grad diff {d_grad:.2e}"
