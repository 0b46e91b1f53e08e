"""Shared by tests/test_losses.py and tests/test_losses_gluon.py: run a loss on torch and on MXNet
(value and the input gradient of ``sum(out * cot)``), compare two runs, and collect the measured
max abs diffs in MEASURED (printed at the end of each module with ``pytest -s``).

Import it after ``pytest.importorskip("torch")`` and ``("mxnet")``.
"""
from __future__ import annotations

import numpy as np
import torch
from mxnet import autograd, nd

MEASURED: dict = {}


def print_measured() -> None:
    """Print the max diffs collected since the last call, then forget them (one module's)."""
    if MEASURED:
        width = max(map(len, MEASURED))
        print("\nmax |diff| (value, input gradient):")
        for k, (v, g) in sorted(MEASURED.items()):
            print(f"  {k:<{width}}  {v:.2e}  {g:.2e}")
    MEASURED.clear()


def _record(key, v, g):
    pv, pg = MEASURED.get(key, (0.0, 0.0))
    MEASURED[key] = (max(pv, float(v)), max(pg, float(g)))


# ---- runners: value and d(sum(out * cot))/d(first input) -----------------------------------------
def _cot(shape, seed=1):
    return np.random.default_rng(seed).uniform(0.5, 1.5, shape).astype(np.float32)


def run_torch(fn, x, *rest):
    xt = torch.tensor(x, requires_grad=True)
    out = fn(xt, *[torch.tensor(r) if isinstance(r, np.ndarray) else r for r in rest])
    out.backward(torch.tensor(_cot(tuple(out.shape))))
    return out.detach().numpy(), xt.grad.numpy()


def run_mx(fn, x, *rest):
    xm = nd.array(x, dtype=x.dtype)
    xm.attach_grad()
    rest = [nd.array(r, dtype=r.dtype) if isinstance(r, np.ndarray) else r for r in rest]
    with autograd.record():
        out = fn(xm, *rest)
    shape = tuple(out.shape)
    out.backward(nd.array(_cot(() if shape == (1,) else shape).reshape(shape)))
    return out.asnumpy(), xm.grad.asnumpy()


def compare(key, ref, got, vtol=1e-5, gtol=2e-6):
    """``ref``/``got``: (value, grad) pairs. Values within vtol relative (torch () == MXNet (1,))."""
    (rv, rg), (gv, gg) = ref, got
    assert rv.size == gv.size, f"{key}: shapes {rv.shape} vs {gv.shape}"
    rv, gv = rv.reshape(-1), gv.reshape(-1)
    finite = np.isfinite(rv)
    assert np.array_equal(finite, np.isfinite(gv)) and np.array_equal(rv[~finite], gv[~finite]), (key, rv, gv)
    dv = float(np.abs(rv[finite] - gv[finite]).max(initial=0.0))
    dg = float(np.abs(rg - gg).max(initial=0.0))
    _record(key, dv, dg)
    assert dv <= vtol * max(1.0, float(np.abs(rv[finite]).max(initial=0.0))), f"{key}: value diff {dv}"
    assert dg <= gtol * max(1.0, float(np.abs(rg).max(initial=0.0))), f"{key}: grad diff {dg}"
    return dv, dg


def check_both(key, ours, reference, x, *rest, **tol):
    """dualdl's loss on torch and on MXNet against the native torch.nn reference."""
    ref = run_torch(reference, x, *rest)
    compare(key + " [torch]", ref, run_torch(ours, x, *rest), **tol)
    compare(key + " [mxnet]", ref, run_mx(ours, x, *rest), **tol)
