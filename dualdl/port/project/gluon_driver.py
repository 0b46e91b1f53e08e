"""Runs a Gluon training script unmodified and records its first updates, for
:func:`dualdl.port.project.proof.prove_scripts` (``python -m dualdl.port.project.gluon_driver
SCRIPT ARGS...`` with ``DUALDL_PROOF_RECORD=path.npz``, ``DUALDL_PROOF_STEPS=N``,
``DUALDL_PROOF_SEED=s``).

Hides where a Gluon script's run can be observed without editing it: ``DataLoader`` iteration
(the batches), ``NDArray.backward`` (the loss), ``Trainer.step``/``update`` (the learning rate,
each gradient as the update uses it, ``grad / batch_size``, and each weight after it, under the
block's ``save_parameters`` keys); the dataset downloads are served from the local files
(``download`` returns the file when it is there: the proof's synthetic MNIST has no sha1 of the
real one); the domain files' hooks (:data:`dualdl.port.project.proof_data.GLUON_HOOKS`) patch
the rest. ``<record>.init.npz`` gets the weights before the first update: the converted script
starts from them (``GLUON2TORCH_LOAD``).
"""
from __future__ import annotations

import gc
import os
import runpy
import sys

import numpy as np


def main() -> None:
    path = os.environ["DUALDL_PROOF_RECORD"]
    limit = int(os.environ.get("DUALDL_PROOF_STEPS", "4"))
    import mxnet as mx
    from mxnet import gluon
    from mxnet.gluon.data import dataloader
    from mxnet.gluon.data.vision import datasets

    real_download = datasets.download

    def local_download(url, path=None, overwrite=False, sha1_hash=None, **kw):
        fname = os.path.join(path or ".", url.split("/")[-1])
        return fname if os.path.exists(fname) else real_download(url, path, overwrite, sha1_hash, **kw)
    datasets.download = local_download

    rec: dict = {}
    state = {"n": 0, "batch": None, "names": None, "path": path}
    real_iter = dataloader.DataLoader.__iter__

    def recorded_iter(self):
        for b in real_iter(self):
            state["batch"] = b
            yield b
    dataloader.DataLoader.__iter__ = recorded_iter
    real_backward, real_autograd_backward = mx.nd.NDArray.backward, mx.autograd.backward
    losses = [0.0, 0]       # this update's per-sample loss sum and count, over every backward

    def note_loss(x) -> None:
        v = x.asnumpy().astype(np.float64)
        losses[0] += float(v.sum())
        losses[1] += v.size

    def recorded_backward(self, *a, **kw):
        note_loss(self)
        return real_backward(self, *a, **kw)
    mx.nd.NDArray.backward = recorded_backward

    def recorded_autograd_backward(heads, *a, **kw):       # autograd.backward([l0, l1])
        for h in (heads if isinstance(heads, (list, tuple)) else [heads]):
            note_loss(h)
        return real_autograd_backward(heads, *a, **kw)
    mx.autograd.backward = recorded_autograd_backward

    def names(trainer) -> dict:
        if state["names"] is None:
            ids = {id(p) for p in trainer._params}
            best: dict = {}
            for obj in gc.get_objects():
                if isinstance(obj, gluon.Block):
                    keys = obj._collect_params_with_prefix()
                    if {id(p) for p in keys.values()} == ids and len(keys) >= len(best):
                        best = keys
            state["names"] = best or {p.name: p for p in trainer._params}
        return state["names"]

    def wrap(real):
        def step(self, batch_size, ignore_stale_grad=False):
            s, named = state["n"], names(self)
            if s == 0:
                np.savez(path + ".init.npz", **{k: p.data().asnumpy() for k, p in named.items()})
            b = state["batch"]            # None: no gluon DataLoader batch since the last update
            for i, a in enumerate([] if b is None else b if isinstance(b, (list, tuple)) else [b]):
                rec[f"{s}/batch/{i}"] = a.asnumpy() if hasattr(a, "asnumpy") else np.asarray(a)
            state["batch"] = None
            if losses[1]:
                rec[f"{s}/loss"] = np.float64(losses[0] / losses[1])
            losses[:] = [0.0, 0]
            rec[f"{s}/lr"] = np.float64(self.learning_rate)
            for k, p in named.items():
                if p.grad_req != "null":        # as the update uses it: summed over devices
                    rec[f"{s}/grad/{k}"] = sum(g.asnumpy().astype(np.float64)
                                               for g in p.list_grad()).astype(
                        p.grad().dtype) / batch_size
            real(self, batch_size, ignore_stale_grad)
            for k, p in named.items():
                rec[f"{s}/param/{k}"] = p.data().asnumpy()
            state["n"] += 1
            if state["n"] >= limit:
                np.savez(path, **rec)
                raise SystemExit(0)
        return step
    gluon.Trainer.step = wrap(gluon.Trainer.step)
    gluon.Trainer.update = wrap(gluon.Trainer.update)
    from .proof_data import gluon_hooks
    if os.environ.get("DUALDL_PROOF_DTYPE") == "float64":
        _float64_run(gluon, dataloader)
    for hook in gluon_hooks():          # the domain files' patches (proof_data.register_gluon_hook)
        hook(rec, state)
    if os.environ.get("DUALDL_PROOF_SEED"):
        import random
        seed = int(os.environ["DUALDL_PROOF_SEED"])
        random.seed(seed)               # gluoncv's RandomCrop draws with Python's random
        np.random.seed(seed)
        mx.random.seed(seed)
    script = sys.argv[1]
    sys.argv = [script] + sys.argv[2:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (0, None):
            raise
        return
    np.savez(path, **rec)           # the script ended before the limit


def _float64(x):
    """A batch's floating-point NDArrays in float64 (labels keep their type)."""
    if isinstance(x, (list, tuple)):
        return type(x)(_float64(v) for v in x)
    dtype = getattr(x, "dtype", None)
    if hasattr(x, "asnumpy") and dtype is not None and np.dtype(dtype).kind == "f" and \
            np.dtype(dtype) != np.float64:
        return x.astype("float64")
    return x


def _float64_run(gluon, dataloader) -> None:
    """The proof's float64 Gluon run (``DUALDL_PROOF_DTYPE=float64``; a script has no float64
    switch): every parameter cast to float64 right after MXNet initialises it (its values are the
    float32 run's draws, the same RNG stream, exactly), every floating-point array of a
    ``DataLoader`` batch cast too (the float32 run's values). A script that makes float32 arrays
    of its own that meet them (``mx.nd.array(...)``) fails in MXNet: the proof keeps its float32
    verdict."""
    real_init = gluon.Parameter._init_impl

    def init_then_cast(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        if np.dtype(self.dtype).kind == "f" and np.dtype(self.dtype) != np.float64:
            self.cast("float64")
    gluon.Parameter._init_impl = init_then_cast
    real_iter = dataloader.DataLoader.__iter__

    def float64_batches(self):
        for b in real_iter(self):
            yield _float64(b)
    dataloader.DataLoader.__iter__ = float64_batches


if __name__ == "__main__":
    main()
