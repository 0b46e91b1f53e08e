"""MXNet side of ``dualdl.distributed``: the ps-lite ``dist_sync`` kvstore.

Same function names as ``dualdl_torch.distributed``. Hides: the server *sums* worker gradients
(so ``trainer.step`` takes the global batch), ranks come from the scheduler and are not launch
order, and MXNet has no public barrier (``kv._barrier``) nor broadcast (kvstore init from rank 0).
"""
from __future__ import annotations

import atexit
import ctypes
import os
import sys
from typing import Any, List, Optional

import mxnet as mx

from dualdl import config
from dualdl.distributed.env import RANK_FILE, DistributedEnvError, int_env

__all__ = ["init", "is_distributed", "rank", "world_size", "barrier", "shutdown",
           "broadcast_parameters", "wrap_model", "kvstore", "gradient_reduction"]

_state: dict = {"kv": None}
_BCAST_KEY0 = 1 << 28          # far above gluon.Trainer's keys (0..n_params-1)
_bcast_next = [_BCAST_KEY0]


def init(*, world_size: Optional[int] = None, timeout: Optional[float] = None) -> None:
    role = config.get("DMLC_ROLE")
    if not role:
        if world_size is not None and int(world_size) != 1:
            raise DistributedEnvError(f"expected world size {world_size} but this is a single "
                                      f"process (no DMLC_ROLE); start it with `dualdl launch "
                                      f"--backend mxnet --nproc {world_size}`")
        _state["kv"] = None
        return
    if role != "worker":   # scheduler/server never get here: `import mxnet` ran them and exited
        raise DistributedEnvError(f"DMLC_ROLE={role!r}: only workers can init()")
    expected_env = int_env("DMLC_NUM_WORKER", minimum=1)
    if world_size is not None and int(world_size) != expected_env:
        raise DistributedEnvError(f"expected world size {world_size} but this job has "
                                  f"DMLC_NUM_WORKER={expected_env} workers; launch it with "
                                  f"--nproc {world_size} (times --nnodes)")
    kv_type = config.mx_kvstore()
    if kv_type not in ("dist_sync", "dist_sync_device"):
        raise DistributedEnvError(f"DUALDL_MX_KVSTORE={kv_type!r}; expected dist_sync or "
                                  f"dist_sync_device (dist_async does not give the "
                                  f"single-process update)")
    kv = mx.kv.create(kv_type)         # blocks until every node has registered
    if kv.num_workers != expected_env:
        raise DistributedEnvError(f"the scheduler reports {kv.num_workers} workers but "
                                  f"DMLC_NUM_WORKER={expected_env}")
    _state["kv"] = kv
    _exit_at_once_on_uncaught_exception()
    _release_at_exit()
    path = config.get(RANK_FILE)
    if path:   # tells `dualdl launch` which kvstore rank this launch slot received
        try:
            with open(path, "w") as f:
                f.write(str(kv.rank))
        except OSError:
            pass


def _exit_at_once_on_uncaught_exception() -> None:
    """An uncaught exception would run ps-lite's exit-time finalize, a barrier with the other
    workers that never comes: the crashed worker would hang instead of dying. Print the
    traceback, then ``os._exit(1)`` so that the launcher sees the failure and stops the job."""
    previous = sys.excepthook
    if getattr(previous, "_dualdl_exit_at_once", False):
        return

    def hook(exc_type, exc, tb):
        try:
            previous(exc_type, exc, tb)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(1)

    hook._dualdl_exit_at_once = True       # type: ignore[attr-defined]
    sys.excepthook = hook


def _release_at_exit() -> None:
    """A worker that ends without :func:`shutdown` (``sys.exit(3)``, the end of the script) would
    keep its kvstore until C++ static destruction, where ps-lite's still-running threads make
    ``std::terminate`` abort the process: the launcher would see SIGABRT instead of the exit code.
    At interpreter exit, free a kvstore still held here, without the final barrier (the peers may
    be gone or busy, which would hang this process), so that the process exits with its own code.
    """
    if _state.get("atexit"):
        return
    _state["atexit"] = True

    def release() -> None:
        kv = _state["kv"]
        if kv is None or getattr(kv, "handle", None) is None:
            return                                  # shutdown() ran: the normal teardown
        _state["kv"] = None
        try:
            mx.nd.waitall()
        except Exception:                           # noqa: BLE001 - exiting anyway
            pass
        lib = mx.base._LIB
        lib.MXKVStoreSetBarrierBeforeExit(kv.handle, ctypes.c_int(0))
        lib.MXKVStoreFree(kv.handle)
        kv.handle = None        # KVStore.__del__ then frees NULL, a no-op
        print("dualdl.distributed: this MXNet worker exits without dualdl.distributed.shutdown(); "
              "it left the job without the final barrier", file=sys.stderr, flush=True)

    atexit.register(release)


def is_distributed() -> bool:
    return _state["kv"] is not None


def rank() -> int:
    kv = _state["kv"]
    return kv.rank if kv is not None else 0


def world_size() -> int:
    kv = _state["kv"]
    return kv.num_workers if kv is not None else 1


def barrier() -> None:
    kv = _state["kv"]
    if kv is not None:
        mx.nd.waitall()
        kv._barrier()


def shutdown() -> None:
    mx.nd.waitall()
    _state["kv"] = None


def _arrays(params: Any) -> List[List[mx.nd.NDArray]]:
    """One list of per-context copies for each parameter."""
    if isinstance(params, mx.gluon.Block):
        params = params.collect_params()
    if hasattr(params, "values") and callable(params.values):
        params = list(params.values())
    elif isinstance(params, (mx.gluon.Parameter, mx.nd.NDArray)):
        params = [params]
    out = []
    for p in params:
        if isinstance(p, mx.gluon.Parameter):
            out.append(p.list_data())
        elif isinstance(p, mx.nd.NDArray):
            out.append([p])
        else:
            raise TypeError(f"broadcast_parameters expects Gluon Parameters/NDArrays or a Block, "
                            f"got {type(p).__name__}")
    return out


def broadcast_parameters(params: Any, src: int = 0) -> None:
    arrays = _arrays(params)
    kv = _state["kv"]
    if kv is None or not arrays:
        return
    if src != 0:
        raise ValueError("MXNet's kvstore initialises keys from worker 0 only: src must be 0")
    keys = list(range(_bcast_next[0], _bcast_next[0] + len(arrays)))
    _bcast_next[0] += len(arrays)
    kv.init(keys, [a[0] for a in arrays])       # rank 0 pushes, then a barrier
    kv.pull(keys, out=arrays)
    mx.nd.waitall()


def wrap_model(model: Any, **kwargs: Any) -> Any:
    if kwargs:
        raise TypeError(f"wrap_model takes no options on MXNet (got {sorted(kwargs)}); gradients "
                        f"are combined by the kvstore passed to gluon.Trainer")
    return model


def kvstore() -> Any:
    kv = _state["kv"]
    return kv if kv is not None else "device"


def gradient_reduction() -> str:
    return "sum"
