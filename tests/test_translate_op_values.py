"""Every op the registry translates, measured against MXNet 1.9.1's own op: each sample case of
tests/_op_cases.py runs the op in MXNet (imperatively, by name, with autograd) and its generated
torch expression on the same inputs, in float64 and float32, comparing the outputs (values, shapes,
dtypes) and the gradients of every differentiable input for one random cotangent. float64: within
the case's tol64 of the output scale (1e-12 unless the case says why; ops whose registry entry says
``float32_internal`` by float32 rounding);
float32: judged by measured rounding, within ROUNDING_FACTOR x (torch's float32 vs float64 +
MXNet's float32 vs float64), never tighter than RTOL_FLOOR of the scale."""
import ctypes
import os
import sys
import types
import zlib

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

from dualdl.port.translate.oplib import OpNode, lookup, translate_op  # noqa: E402
from dualdl.port.translate.oplib.base import DEVICE, Expr  # noqa: E402
from dualdl.port.verify import RTOL_FLOOR, ROUNDING_FACTOR  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _op_cases import CASES  # noqa: E402

NO_GRAD = ("z", "i", "I", "L", "N", "P", "x")      # kinds (by first letter) that take no gradient
NO_GRAD_KINDS = ("ctcf", "ctcl", "rois", "samp")


def _no_grad(kind: str) -> bool:
    return kind in NO_GRAD_KINDS or kind[0] in NO_GRAD


def _values(name, shape, kind, rng):
    if kind == "n":
        return rng.standard_normal(shape)
    if kind == "n3":
        return rng.standard_normal(shape) * 3
    if kind == "p":
        return rng.uniform(0.3, 3.0, shape)
    if kind == "u":
        return rng.uniform(-0.9, 0.9, shape)
    if kind == "g":
        return rng.uniform(1.1, 3.0, shape)
    if kind == "z":
        return rng.integers(-1, 2, shape).astype(np.float64)
    if kind[0] in "iI":
        return rng.integers(0, int(kind[1:]), shape).astype(np.float64)
    if kind[0] == "L":
        return rng.integers(1, int(kind[1:]) + 1, shape).astype(np.float64)
    if kind == "h":     # exact halves (where rounding conventions differ) and values away from them
        v = rng.integers(-3, 4, shape) + rng.choice([0.5, 0.2, 0.7, -0.5, 0.35], shape)
        return v.astype(np.float64)
    if kind == "m":
        return np.where(rng.random(shape) < 0.5, rng.uniform(0.3, 3.0, shape), rng.uniform(-0.9, -0.1, shape))
    if kind in ("N", "P"):    # no gradient (MXNet's auxiliary states: BatchNorm's moving mean / var)
        return rng.standard_normal(shape) if kind == "N" else rng.uniform(0.3, 3.0, shape)
    if kind == "x2":         # scatter_nd's indices: distinct points
        return np.array([[0.0, 1.0], [1.0, 2.0]])
    if kind == "x1":
        return np.array([3.0, 1.0])
    if kind == "lo":
        return rng.uniform(-2.0, -1.0, shape)
    if kind == "hi":
        return rng.uniform(1.0, 2.0, shape)
    if kind == "q":
        return rng.uniform(0.1, 0.9, shape)
    if kind == "simplex":
        v = rng.uniform(0.2, 1.0, shape)
        return v / v.sum(-1, keepdims=True)
    if kind == "chol":
        m = rng.standard_normal(shape)
        return np.linalg.cholesky(m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1]))
    if kind in ("ctcf", "ctcl"):    # CTC labels: 1..C-1 padded by 0 (blank first), 0..C-2 padded by -1 (last)
        n, length = shape
        out = np.full(shape, 0.0 if kind == "ctcf" else -1.0)
        for i in range(n):
            k = rng.integers(1, length + 1)
            out[i, :k] = rng.integers(1, 5, k) if kind == "ctcf" else rng.integers(0, 4, k)
        return out
    if kind == "rois":    # (R, 5) = (batch index, x1, y1, x2, y2) in pixels of a 16 x 16 image, batch of 2
        lo, size = rng.uniform(0, 9, (shape[0], 2)), rng.uniform(2, 7, (shape[0], 2))
        return np.concatenate([rng.integers(0, 2, (shape[0], 1)), lo, lo + size], axis=1)
    if kind == "samp":     # box_encode's samples: 1 (positive), 0 or -1
        return rng.integers(-1, 2, shape).astype(np.float64)
    if kind == "box":    # corner boxes x1 < x2, y1 < y2 (center boxes: positive w, h)
        lo, size = rng.uniform(0, 5, shape[:-1] + (2,)), rng.uniform(0.5, 3, shape[:-1] + (2,))
        return np.concatenate([lo, lo + size], axis=-1)
    if kind == "s":
        m = rng.standard_normal(shape)
        return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])
    raise ValueError(kind)


def _handle(name):
    from mxnet.base import _LIB, OpHandle, c_str, check_call
    h = OpHandle()
    check_call(_LIB.NNGetOpHandle(c_str(name), ctypes.byref(h)))
    return h.value


def _is_np(name):
    return name.startswith(("_np_", "_npi_", "_npx_"))


def _mxnet(name, case, arrays, dt):
    """MXNet's outputs and input gradients (None where MXNet defines none) for cotangents ``cots``."""
    from mxnet._ctypes.ndarray import _imperative_invoke
    np_op = _is_np(name)
    with mx.util.np_shape(np_op), mx.util.np_array(np_op):
        xs = []
        for (shape, kind), a in zip(case.inputs, arrays):
            x = mx.nd.array(a, dtype="int32" if kind[0] == "I" else dt)
            x = x.as_np_ndarray() if np_op else x
            if not _no_grad(kind):
                x.attach_grad()
            xs.append(x)
        keys, vals = list(case.attrs), list(case.attrs.values())
        try:
            with mx.autograd.record(train_mode=False):
                out = _imperative_invoke(_handle(name), xs, keys, vals, None, int(np_op), False)
        except mx.base.MXNetError:    # MXNet cannot record its backward (np.copysign with a scalar): values only
            out = _imperative_invoke(_handle(name), xs, keys, vals, None, int(np_op), False)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        res = [o.asnumpy() for o in outs]
        return xs, outs, res


def _mx_grads(name, xs, outs, cots, case):
    np_op = _is_np(name)
    diff = [(o, c) for o, c in zip(outs, cots) if c is not None]
    if not diff or all(_no_grad(k) for _, k in case.inputs):
        return None
    with mx.util.np_shape(np_op), mx.util.np_array(np_op):
        heads = [mx.nd.array(c, dtype=o.dtype) for o, c in diff]
        heads = [h.as_np_ndarray() for h in heads] if np_op else heads
        try:
            mx.autograd.backward([o for o, _ in diff], head_grads=heads)
            mx.nd.waitall()
            return [x.grad.asnumpy() if not _no_grad(k) else None for x, (_, k) in zip(xs, case.inputs)]
        except mx.base.MXNetError:    # MXNet has no (working) gradient for it: values only
            return None


def _torch(name, case, arrays, dt, in_shapes, out_shapes, cots):
    node = OpNode(name, "node", dict(case.attrs), in_shapes=list(in_shapes), out_shapes=list(out_shapes))
    args = [Expr(f"x{i}") for i in range(len(arrays))]
    e = translate_op(node, args)
    env = {"torch": torch, "F": torch.nn.functional, "self": types.SimpleNamespace(training=False),
           "dev": torch.device("cpu")}
    for h in e.helpers:
        exec(h, env)
    xs = []
    for i, ((shape, kind), a) in enumerate(zip(case.inputs, arrays)):
        t = torch.tensor(a, dtype=torch.int32 if kind[0] == "I" else getattr(torch, dt))
        if not _no_grad(kind):
            t.requires_grad_(True)
        env[f"x{i}"] = t
        xs.append(t)
    with torch.random.fork_rng():
        out = eval(e.text.replace(DEVICE, "dev"), env)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    diff = [(o, torch.tensor(c, dtype=o.dtype)) for o, c in zip(outs, cots)
            if c is not None and o.dtype.is_floating_point and o.requires_grad]
    grads = None
    if any(not _no_grad(k) for _, k in case.inputs):
        if diff:
            gs = torch.autograd.grad([o for o, _ in diff], [x for x in xs if x.requires_grad],
                                     [c for _, c in diff], allow_unused=True)
        else:
            gs = [None] * sum(x.requires_grad for x in xs)
        it = iter(gs)
        grads = []
        for x in xs:
            if x.requires_grad:
                g = next(it)
                grads.append(np.zeros(x.shape) if g is None else g.numpy())
            else:
                grads.append(None)
    return e, [o.detach().numpy() for o in outs], grads


def _run(name, case, dt, arrays):
    xs, outs, res = _mxnet(name, case, arrays, dt)
    rng = np.random.default_rng(1)
    cots = [rng.standard_normal(r.shape) if r.dtype.kind == "f" else None for r in res]
    in_shapes = [tuple(a.shape) for a in arrays]
    e, t_res, t_grads = _torch(name, case, arrays, dt, in_shapes, [r.shape for r in res], cots)
    g = _mx_grads(name, xs, outs, cots, case)
    return e, res, t_res, g, t_grads


def _scale(a):
    a = np.asarray(a, dtype=np.float64)
    return float(np.abs(a).max()) if a.size else 0.0


def _diff(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max()) if a.size else 0.0


SAMPLED = sorted(n for n in CASES if lookup(n) is not None and lookup(n).status == "translated")


@pytest.mark.parametrize("name", SAMPLED)
def test_op_value_and_gradient(name):
    check_op(name, CASES[name])


def check_op(name, cases):
    """MXNet's op ``name`` against its registry translation on each of ``cases`` (see the docstring)."""
    entry = lookup(name)
    assert entry is not None and entry.status == "translated", (name, entry)
    for k, case in enumerate(cases):
        rng = np.random.default_rng(zlib.crc32(f"{name}/{k}".encode()))
        arrays = [_values(name, s, kind, rng) for s, kind in case.inputs]
        runs = {}
        for dt in (("float32",) if entry.float32_only else ("float64", "float32")):
            runs[dt] = _run(name, case, dt, [a.astype(dt) for a in arrays])
        e32, m32, t32, mg32, tg32 = runs["float32"]
        for i, (m, t) in enumerate(zip(m32, t32)):
            assert m.shape == t.shape and m.dtype == t.dtype, (name, k, i, e32, m.shape, t.shape, m.dtype, t.dtype)
        pairs = [("out", m32, t32)] + ([("grad", mg32, tg32)] if mg32 is not None and tg32 is not None else [])
        if "float64" in runs:
            e64, m64, t64, mg64, tg64 = runs["float64"]
            for what, ms, ts in [("out", m64, t64)] + ([("grad", mg64, tg64)] if mg64 is not None else []):
                for i, (m, t) in enumerate(zip(ms, ts)):
                    if m is None:
                        continue
                    d, sc = _diff(m, t), _scale(t)
                    if entry.float32_internal:
                        ref = runs["float32"][1 if what == "out" else 3][i]
                        rounding = _diff(runs["float32"][2 if what == "out" else 4][i], t)
                        tol = max(ROUNDING_FACTOR * rounding, RTOL_FLOOR * sc)
                    else:
                        tol = case.tol64 * max(sc, 1.0)
                    assert d <= tol, f"{name} case {k} float64 {what}[{i}]: {d:.3g} > {tol:.3g} ({e64})"
        if "float64" not in runs:   # MXNet refuses float64: torch's own float32 rounding is the measure
            cots = [np.random.default_rng(1).standard_normal(r.shape) if r.dtype.kind == "f" else None for r in m32]
            _, t64, tg64 = _torch(name, case, [a.astype("float64") for a in arrays], "float64",
                                  [tuple(a.shape) for a in arrays], [r.shape for r in m32], cots)
            runs["float64"] = (None, [None] * len(m32), t64, None if mg32 is None else [None] * len(mg32), tg64)
        for what, ms, ts in pairs:
            for i, (m, t) in enumerate(zip(ms, ts)):
                if m is None:
                    continue
                m_ref = runs["float64"][1 if what == "out" else 3][i]
                t_ref = runs["float64"][2 if what == "out" else 4][i]
                d = _diff(m, t)
                rounding = _diff(t, t_ref) + (_diff(m, m_ref) if m_ref is not None else 0.0)
                tol = max(ROUNDING_FACTOR * rounding, RTOL_FLOOR * _scale(t_ref)) if m.dtype.kind == "f" else 0.0
                assert d <= tol, f"{name} case {k} float32 {what}[{i}]: {d:.3g} > {tol:.3g} ({e32})"
