"""MXNet's CPU speed code, behind one seam: optional implementations of the same numbers as the
precise forms that the MXNet layers, losses and optimizers read as their default path.

Why it exists: MXNet 1.9 on CPU pays ~25 us of Python, ctypes and engine dispatch per eager
operator, waits for its engine at every host read, and has no float32 operator that sums a batch
as precisely as torch at MKLDNN's speed. Written only in their precise forms, dualdl's MXNet
training steps ran up to 1.45x native Gluon (the CRNN); with this package, up to 1.1x.

What is here (each module says which MXNet difference it hides):

- ``kernels/``: three C++ operators built with g++ on first use (``dl_batch_norm``,
  ``dl_log_softmax``, ``dl_guarded_sgd_mom``) and their verified cache;
- ``guarded_step``: dl.Trainer's optimizer step queued behind its own finite check;
- ``compiled``: a multi-op NDArray formula run as one cached graph call;
- ``invoke``: prepared operator calls (C arguments built once);
- ``grad_state``: MXNet's fresh-gradient flags read on the handles;
- ``host``: host data into NDArrays without waiting for the engine.

The one switch is ``DUALDL_MX_FAST`` (:func:`enabled`; default on). ``DUALDL_MX_FAST=0`` runs
every layer, loss and step in its precise form: the same numbers to float32 rounding (tested
equal, tests/test_mx_fast_seam.py), slower.
"""
from __future__ import annotations

from dualdl import config

__all__ = ["enabled"]


def enabled() -> bool:
    """Whether the fast forms may run (``DUALDL_MX_FAST`` is not ``0``; read at each call, so a
    test or a user can switch it inside one process)."""
    return config.mx_fast()
