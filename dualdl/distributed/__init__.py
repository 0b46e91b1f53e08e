"""Multi-process training on each framework's own engine, with one API and one batch-size rule.

Start N copies of a script with ``dualdl launch --nproc N [--backend torch|mxnet] script.py``;
in the script call :func:`init` once and read your shard with :func:`shard`. A ``dl.Trainer``
created after :func:`init` then combines gradients over the processes by itself (the same loop
as in one process). Hand-written loops use :func:`wrap_model` (PyTorch:
``DistributedDataParallel``) and :func:`kvstore` (MXNet: the ``dist_sync`` kvstore for
``gluon.Trainer``). Unlaunched, the same script runs as one process
(``world_size() == 1``) and every function here is a no-op or the identity.

Hides: DDP *averages* gradients over ranks while MXNet's parameter server *sums* them. The one
rule: the learning rate and batch size you pass are those of the *global* batch, and the update
equals a single-process step over the global batch. On PyTorch backprop the mean loss of the
local batch (equal shards); on MXNet backprop per-sample losses and call
``trainer.step(global_batch_size(local_batch))``.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional, TypeVar

import numpy as np

from .. import config
from ..atomic import atomic_write
from .env import (DistributedEnvError, check_mxnet_node_env, check_torch_env, int_env,
                  launched_backend)
from .lifeline import watch_launcher
from .sharding import shard_indices

__all__ = [
    "init", "is_initialized", "is_distributed", "backend", "rank", "world_size", "local_rank",
    "is_main", "barrier", "shutdown", "broadcast_parameters", "wrap_model", "kvstore",
    "trainer_kwargs", "step_scale", "gradient_reduction", "global_batch_size", "shard", "save_on_main", "atomic_write",
    "check_environment", "DistributedEnvError",
]

T = TypeVar("T")
_impl: Any = None          # the adapter module (dualdl_torch.distributed / dualdl_mx.distributed)
_backend: Optional[str] = None


def check_environment(backend: Optional[str] = None) -> None:
    """Fail with a clear error, instead of hanging, when the environment does not fit ``backend``.

    Checks that DMLC_* variables did not leak into a non-MXNet process, that an MXNet worker's
    scheduler answers, and that a process started by ``dualdl launch`` initialises the backend
    it was launched for.
    """
    from ..backend import _canonical, backend as active
    name = _canonical(backend) if backend is not None else active()
    launched = launched_backend()
    if launched is not None and launched != name:
        raise DistributedEnvError(
            f"this process was started by `dualdl launch --backend {launched}` but initialises "
            f"the {name!r} backend; pass --backend {name} to dualdl launch (or init({launched!r}))")
    if name == "mxnet":
        if check_mxnet_node_env() is False and launched == "mxnet":
            raise DistributedEnvError("started by `dualdl launch --backend mxnet` but DMLC_ROLE "
                                      "is not set; the MXNet environment was removed")
    else:
        check_torch_env()


def init(backend: Optional[str] = None, *, world_size: Optional[int] = None,
         timeout: Optional[float] = None) -> bool:
    """Join the job described by the environment; returns whether this is a multi-process run.

    ``backend``: "torch" or "mxnet" (default: the active dualdl backend, which ``dualdl launch``
    sets through ``DUALDL_BACKEND``). PyTorch: ``init_process_group`` (gloo on CPU, NCCL when
    CUDA is available) from ``MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE``; a loopback master binds
    its store to loopback only. MXNet: creates the ``dist_sync`` kvstore (ranks are assigned by
    the scheduler, not launch order). ``world_size``: the size you expect; a different one is an
    error. ``timeout`` (torch): seconds for rendezvous and collectives (default 1800).
    Without a launcher environment nothing is started and ``world_size()`` is 1.
    """
    global _impl, _backend
    from ..backend import _canonical, backend as active, get_backend
    name = _canonical(backend) if backend is not None else active()
    if _impl is not None:
        if name != _backend:
            raise DistributedEnvError(f"dualdl.distributed is already initialised for "
                                      f"{_backend!r}; cannot init {name!r} too")
        return _impl.is_distributed()
    if world_size is not None and (isinstance(world_size, bool) or int(world_size) < 1):
        raise ValueError(f"world_size must be a positive int, got {world_size!r}")
    check_environment(name)                 # before the framework is imported
    watch_launcher()                        # die with `dualdl launch` where PDEATHSIG is missing
    _check_expected_world(name, world_size)
    impl = get_backend(name).module("distributed")
    impl.init(world_size=world_size, timeout=timeout)
    _impl, _backend = impl, name
    return impl.is_distributed()


def _check_expected_world(name: str, expected: Optional[int]) -> None:
    """Compare the expected world size with the launcher's, before a slow framework import."""
    if expected is None:
        return
    var = "DMLC_NUM_WORKER" if name == "mxnet" else "WORLD_SIZE"
    if var == "DMLC_NUM_WORKER" and not config.get("DMLC_ROLE"):
        return
    actual = int_env(var, default=1, minimum=1)
    if actual != int(expected):
        raise DistributedEnvError(
            f"expected world size {expected} but this job has {actual} processes ({var}="
            f"{actual}); launch it with --nproc {expected} (times --nnodes)")


def is_initialized() -> bool:
    return _impl is not None


def _need_init(what: str) -> Any:
    if _impl is not None:
        return _impl
    if launched_backend() or config.get("DMLC_ROLE") or config.get("WORLD_SIZE"):
        raise RuntimeError(f"dualdl.distributed.{what}() needs dualdl.distributed.init() first in "
                           f"a launched process")
    return None


def is_distributed() -> bool:
    impl = _need_init("is_distributed")
    return bool(impl and impl.is_distributed())


def backend() -> Optional[str]:
    """The backend :func:`init` joined, or None before it."""
    return _backend


def rank() -> int:
    """This process's rank in [0, world_size) (MXNet: the kvstore's rank, not launch order)."""
    impl = _need_init("rank")
    return impl.rank() if impl else 0


def world_size() -> int:
    impl = _need_init("world_size")
    return impl.world_size() if impl else 1


def local_rank() -> int:
    """Index of this process among those on its host (for picking a GPU); from ``LOCAL_RANK``."""
    return int_env("LOCAL_RANK", default=0)


def is_main() -> bool:
    """True on rank 0: the process that writes checkpoints and logs."""
    return rank() == 0


def barrier() -> None:
    """Wait until every rank reaches this point (no-op in a single process)."""
    impl = _need_init("barrier")
    if impl:
        impl.barrier()


def shutdown() -> None:
    """Leave the job cleanly (torch: ``destroy_process_group``; MXNet: flush pending ops; the
    ps-lite node finalises at interpreter exit, which every worker must reach)."""
    global _impl, _backend
    if _impl is not None:
        _impl.shutdown()
    _impl, _backend = None, None


def broadcast_parameters(params: Any, src: int = 0) -> None:
    """Overwrite ``params`` on every rank with rank ``src``'s values, in place.

    ``params``: a torch ``Module``/Gluon ``Block``, a dict of tensors/Parameters or a list of them.
    ``DistributedDataParallel`` and the MXNet ``Trainer`` already broadcast at construction;
    use this for state they do not own. MXNet supports ``src=0`` only (kvstore init).
    """
    impl = _need_init("broadcast_parameters")
    if impl:
        impl.broadcast_parameters(params, src=src)


def wrap_model(model: T, **kwargs: Any) -> T:
    """PyTorch: ``DistributedDataParallel(model, **kwargs)`` (``device_ids=[local_rank]`` on
    CUDA); MXNet and single process: ``model`` itself (gradients travel through :func:`kvstore`)."""
    impl = _need_init("wrap_model")
    return impl.wrap_model(model, **kwargs) if impl else model


def kvstore() -> Any:
    """MXNet: the kvstore to pass to ``gluon.Trainer(kvstore=...)`` (``dist_sync`` when launched,
    ``"device"`` otherwise: never ``None``, which silently diverges over several contexts).
    PyTorch: None."""
    impl = _need_init("kvstore")
    if impl is None:
        from ..backend import backend as active
        return "device" if active() == "mxnet" else None
    return impl.kvstore()


def trainer_kwargs() -> dict:
    """MXNet: ``{"kvstore": kvstore()}`` to splat into ``gluon.Trainer``; PyTorch: ``{}``.

    Updates stay on the servers (MXNet's default for ``dist_sync``). Not
    ``update_on_kvstore=False``: measured on CPU with one context, workers then receive
    gradients that grow step after step in some runs (the push buffer aliases the gradient the
    pull writes into), so results differ run to run. See :func:`step_scale` for short batches.
    """
    impl = _need_init("trainer_kwargs")
    from ..backend import backend as active
    name = _backend if impl is not None else active()
    return {"kvstore": kvstore()} if name == "mxnet" else {}


def step_scale(local_batch_size: int, full_local_batch_size: int) -> "tuple[float, int]":
    """``(loss_scale, step_batch_size)`` for an MXNet ``trainer.step`` over a batch of
    ``local_batch_size`` samples per rank, when full batches hold ``full_local_batch_size``.

    A distributed ``Trainer`` updating on the servers refuses a new ``step(batch_size)`` (the
    servers keep the first ``1/batch_size``), so a short last batch keeps the full step size and
    scales its per-sample losses by ``full / local`` instead: the update is still the mean over
    the short global batch. Use it on every batch: ``(1.0, global full batch)`` for full ones.
    """
    for name, v in (("local_batch_size", local_batch_size),
                    ("full_local_batch_size", full_local_batch_size)):
        if isinstance(v, bool) or int(v) < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if local_batch_size > full_local_batch_size:
        raise ValueError(f"local_batch_size {local_batch_size} exceeds full_local_batch_size "
                         f"{full_local_batch_size}")
    return (full_local_batch_size / local_batch_size,
            global_batch_size(full_local_batch_size))


def gradient_reduction() -> str:
    """How the engine combines gradients over ranks: "mean" (DDP) or "sum" (MXNet server)."""
    impl = _need_init("gradient_reduction")
    return impl.gradient_reduction() if impl else "mean"


def global_batch_size(local_batch_size: int) -> int:
    """``local_batch_size * world_size()``: the batch size of the update (pass it to MXNet's
    ``trainer.step``). Assumes every rank has the same local batch, which :func:`shard`
    guarantees."""
    if isinstance(local_batch_size, bool) or int(local_batch_size) < 1:
        raise ValueError(f"local_batch_size must be a positive int, got {local_batch_size!r}")
    return int(local_batch_size) * world_size()


def shard(n_samples: int, *, shuffle: bool = False, seed: int = 0, epoch: int = 0,
          drop_last: bool = False) -> np.ndarray:
    """This rank's sample indices: ``perm[rank::world_size]`` of one permutation shared by all
    ranks, equal counts (padded by repetition unless ``drop_last``). Local batch ``i`` of all
    ranks together is global batch ``i`` of a single-process run over the same permutation.
    The same indices as ``dualdl.data.DistributedSampler(n_samples, world_size(), rank(),
    shuffle=shuffle, seed=seed, drop_last=drop_last)`` at epoch ``epoch``."""
    return shard_indices(n_samples, rank(), world_size(), shuffle=shuffle, seed=seed,
                         epoch=epoch, drop_last=drop_last)


def save_on_main(write_fn: Callable[[str], Any], path: "os.PathLike[str] | str") -> bool:
    """Write ``path`` once, on rank 0, atomically (temp file + ``os.replace``), then barrier.

    ``write_fn(tmp_path)`` writes the file (any format). Returns True on the rank that wrote.
    Every rank must call it (it is a collective); the others return after the file exists.
    """
    wrote = False
    if is_main():
        atomic_write(path, write_fn)
        wrote = True
    barrier()
    return wrote
