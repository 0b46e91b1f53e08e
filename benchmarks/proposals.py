"""Prototypes of fixes for the overheads the benchmarks found, measured next to the current code.

They live here, not in dualdl, because the files they would change belong to other work; each
case shows what the change buys and checks it computes the same numbers:

* ``FusedSGD``: dualdl's MXNet SGD (torch's formula) on MXNet's fused ``sgd_mom_update`` with
  the state kept as ``mom = -lr * buf`` (rescaled when lr changes) and one ``reset_arrays`` for
  ``zero_grad``, instead of ~5 NDArray ops per parameter (dualdl_mx/optim.py ``SGD._update``).
* ``cross_entropy_device_pick``: dualdl's MXNet cross-entropy keeping the host range check of the
  targets but picking with the target NDArray itself, instead of copying the checked indices and
  a validity mask back to the device every call (dualdl_mx/losses.py ``_nll_parts``).
* ``save_streaming`` / ``load_readinto``: safetensors written and read one tensor at a time
  (dualdl/checkpoint.py ``save``, dualdl/formats.py ``write_safetensors``/``_read_safetensors``),
  instead of a numpy copy of every tensor plus the whole file built in memory twice.
"""
from __future__ import annotations

import json
import os
import struct
from typing import Any, Dict, List

import numpy as np

import dualdl as dl

from . import models
from .harness import Config, Row, case, compare

_ST_DTYPES = {"float32": "F32", "float64": "F64", "float16": "F16", "int64": "I64", "int32": "I32",
              "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}
_NP_DTYPES = {v: np.dtype(k) for k, v in _ST_DTYPES.items()}


# ---- checkpoints ----------------------------------------------------------------------------------
def _host_view(v: Any) -> np.ndarray:
    """A numpy view (torch CPU: no copy) or a one-tensor copy (MXNet asnumpy)."""
    if type(v).__module__.startswith("torch"):
        return v.detach().cpu().numpy()
    return v.asnumpy()


def _np_dtype(v: Any) -> np.dtype:
    if type(v).__module__.startswith("torch"):
        return np.dtype(str(v.dtype).replace("torch.", ""))
    return np.dtype(v.dtype)


def save_streaming(model: Any, path: str, metadata: Dict[str, str] = None) -> None:
    """dl.save's file (same tensors, same metadata), written one tensor at a time, atomically."""
    sd = dl.state_dict(model)
    header: Dict[str, Any] = {}
    off = 0
    for k, v in sd.items():
        dt = _np_dtype(v)
        n = int(np.prod(tuple(v.shape), dtype=np.int64)) * dt.itemsize
        header[k] = {"dtype": _ST_DTYPES[dt.name], "shape": [int(s) for s in v.shape], "data_offsets": [off, off + n]}
        off += n
    if metadata:
        header["__metadata__"] = dict(metadata)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(h)))
            f.write(h)
            for v in sd.values():
                a = np.ascontiguousarray(_host_view(v))
                f.write(memoryview(a.reshape(-1)).cast("B"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_readinto(model: Any, path: str):
    """Read each tensor straight into a fresh numpy array (``readinto``), then load all-or-nothing."""
    out = {}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        for k, h in header.items():
            if k == "__metadata__":
                continue
            a = np.empty(h["shape"], _NP_DTYPES[h["dtype"]])
            f.seek(base + h["data_offsets"][0])
            if f.readinto(memoryview(a.reshape(-1)).cast("B")) != a.nbytes:
                raise ValueError(f"{path}: truncated tensor {k!r}")
            out[k] = a
    return dl.load_state_dict(model, out)


# ---- MXNet optimizer and loss ---------------------------------------------------------------------
def fused_sgd_class():
    from mxnet import nd
    from dualdl_mx import optim as mxo

    class FusedSGD(mxo.SGD):
        """torch's SGD formula on MXNet's fused update: state ``mom = -lr * buf``."""

        def zero_grad(self, set_to_none: bool = True) -> None:
            ps = [p for g in self.param_groups for p in g["params"] if p.grad_req != "null"]
            grads = [gr for p in ps for gr in p.list_grad()]
            if grads:
                nd.reset_arrays(*grads, num_arrays=len(grads))
            for p in ps:
                for d in p.list_data():
                    d._fresh_grad = False

        def step(self, closure=None, batch_size=None):
            for group in self.param_groups:
                if group["nesterov"] or group["dampening"] or group["maximize"]:
                    return super().step(closure, batch_size)
            rescale = 1.0 / batch_size if batch_size else 1.0
            for group in self.param_groups:
                lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
                for p in group["params"]:
                    if not mxo._fresh(p):
                        continue
                    w, g = p.list_data()[0], p.list_grad()[0]
                    if mu:
                        st = self.state.setdefault(p, {})
                        mom = st.get("mom")
                        if mom is None:
                            mom = st["mom"] = nd.zeros_like(w)
                            st["lr"] = lr
                        elif st["lr"] != lr:          # keep mom = -lr * buf exact across lr changes
                            mom *= lr / st["lr"]
                            st["lr"] = lr
                        nd.sgd_mom_update(w, g, mom, lr=lr, momentum=mu, wd=wd, rescale_grad=rescale, out=w)
                    else:
                        nd.sgd_update(w, g, lr=lr, wd=wd, rescale_grad=rescale, out=w)
                    for d in p.list_data()[1:]:
                        w.copyto(d)
    return FusedSGD


def cross_entropy_device_pick(x, t):
    """Mean cross-entropy (no weight / ignore_index / smoothing) as dualdl computes it on MXNet,
    with the targets checked on the host but picked on the device from the input NDArray."""
    from mxnet import nd
    from dualdl.losses import _checks as ck
    ck.check_class_indices("CrossEntropyLoss", t.asnumpy(), x.shape[1], -100)
    xs = nd.broadcast_sub(x, nd.max(x, axis=1, keepdims=True))
    logp = nd.broadcast_sub(xs, nd.log(nd.sum(nd.exp(xs), axis=1, keepdims=True)))
    return -nd.pick(logp, t, axis=1).mean()


@case("proposals", "mxnet_optim_loss")
def mxnet_optim_loss(cfg: Config) -> List[Row]:
    """MXNet MLP/LeNet step: current dl.optim / dl.losses vs the fused-SGD and device-pick prototypes."""
    from mxnet import autograd, gluon, nd
    from dualdl_mx import optim as mxo
    FusedSGD = fused_sgd_class()
    rows: List[Row] = []
    for kind in ("mlp", "lenet"):
        s = models.sizes(cfg.quick)[kind]
        x_np, y_np = models.batch(kind, s)
        with dl.use("mxnet"):
            dx, dy = dl.from_numpy(x_np), dl.from_numpy(y_np)

        def build(opt_cls, lr=1e-3):
            with dl.use("mxnet"):
                dl.seed(0)
                m = models.dl_model(kind, s)
            return m, opt_cls(m.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)

        # same numbers: 5 steps with an lr change, current SGD vs fused prototype
        (ma, oa), (mb, ob) = build(mxo.SGD, 1e-2), build(FusedSGD, 1e-2)
        loss = dl.losses.CrossEntropyLoss()
        for i in range(5):
            for m, o in ((ma, oa), (mb, ob)):
                if i == 3:
                    o.param_groups[0]["lr"] = 3e-3
                o.zero_grad()
                with autograd.record():
                    out = loss(m(dx), dy)
                out.backward()
                o.step()
        wdiff = max(float(np.abs(a.data().asnumpy() - b.data().asnumpy()).max())
                    for a, b in zip(ma.parameters(), mb.parameters()))
        out = ma(dx)
        ldiff = abs(float((cross_entropy_device_pick(out, dy) - loss(out, dy)).asscalar()))

        g = models.gluon_model(kind, s)
        gtr = gluon.Trainer(g.collect_params(), "sgd", {"learning_rate": 1e-3, "momentum": 0.9})
        gloss = models.gluon_loss(kind)
        gx, gy = nd.array(x_np), nd.array(y_np, dtype="float32")

        def native():
            with autograd.record():
                v = gloss(g(gx), gy)
            v.backward()
            gtr.step(s["batch"])
            nd.waitall()

        def step_of(m, o, lossfn):
            def f():
                o.zero_grad()
                with autograd.record():
                    v = lossfn(m(dx), dy)
                v.backward()
                o.step()
                nd.waitall()
            return f
        (m1, o1), (m2, o2), (m3, o3) = build(mxo.SGD), build(FusedSGD), build(FusedSGD)
        fns = {"native": native, "current": step_of(m1, o1, loss), "fused SGD": step_of(m2, o2, loss),
               "fused SGD + device pick": step_of(m3, o3, cross_entropy_device_pick)}
        rows += compare("proposals", fns, "native", cfg,
                        names={k: f"{kind} / mxnet / dualdl step, {k}" for k in fns},
                        targets={k: 1.03 for k in fns},
                        note=f"max |w| diff fused vs current after 5 steps (lr change): {wdiff:.1e}; "
                             f"loss diff {ldiff:.1e}", model=kind, weight_diff=wdiff, loss_diff=ldiff)
    return rows


# ---- torch loss and optimizer ---------------------------------------------------------------------
def unwrapped_sgd_class():
    import torch
    from dualdl_torch import optim as to

    class UnwrappedSGD(to.SGD):
        """dl.optim.SGD whose ``step`` override calls torch's step once, not through a second
        profiling/hook wrapper (torch wraps the step of every Optimizer subclass)."""

        def step(self, closure=None, batch_size=None):
            if batch_size is not None:
                with torch.no_grad():
                    for g in self.param_groups:
                        for p in g["params"]:
                            if p.grad is not None:
                                p.grad.div_(batch_size)
            return torch.optim.SGD.step.__wrapped__(self, closure)
    return UnwrappedSGD


def cross_entropy_torch_device_check(x, t):
    """torch cross-entropy without the numpy copy of the targets: on CPU torch's own kernel raises
    ``IndexError: Target 7 is out of bounds``; elsewhere the range check runs as torch ops (one
    sync, instead of a device-to-host copy of the targets)."""
    import torch
    if t.device.type != "cpu":
        C = x.shape[1]
        bad = (t < 0) | (t >= C)
        if bool(bad.any()):
            raise IndexError(f"CrossEntropyLoss: target class indices must lie in [0, {C}); found "
                             f"{t[bad].unique()[:5].tolist()}")
    return torch.nn.functional.cross_entropy(x, t)


@case("proposals", "torch_optim_loss")
def torch_optim_loss(cfg: Config) -> List[Row]:
    """torch MLP/LeNet step: current dl.optim / dl.losses vs the unwrapped-step and device-check prototypes."""
    import torch
    Unwrapped = unwrapped_sgd_class()
    rows: List[Row] = []
    for kind in ("mlp", "lenet"):
        s = models.sizes(cfg.quick)[kind]
        x_np, y_np = models.batch(kind, s)
        x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)

        def make(dl_model, opt_cls, loss):
            with dl.use("torch"):
                dl.seed(0)
                m = models.dl_model(kind, s) if dl_model else models.torch_model(kind, s)
            o = opt_cls(m.parameters(), lr=1e-3, momentum=0.9)

            def f():
                o.zero_grad()
                loss(m(x), y).backward()
                o.step()
            return f
        fns = {"native": make(False, torch.optim.SGD, torch.nn.functional.cross_entropy),
               "current": make(True, dl.optim.SGD, dl.losses.CrossEntropyLoss()),
               "unwrapped step + no host copy of targets": make(True, Unwrapped, cross_entropy_torch_device_check)}
        rows += compare("proposals", fns, "native", cfg, names={k: f"{kind} / torch / dualdl step, {k}" for k in fns},
                        targets={k: 1.03 for k in fns}, note="benchmarks/proposals.py", model=kind)
    return rows
