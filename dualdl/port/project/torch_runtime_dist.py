"""Gluon's multi-device data parallelism in a converted script, as torch.distributed processes.
Part of the project's ``gluon2torch.py`` (torch only).

Gluon: ``split_and_load(batch, [ctx0, ctx1])`` cuts the global batch into one slice per device,
each device runs its forward and its per-sample loss, ``backward`` leaves a gradient per device,
and ``trainer.step(batch_size)`` sums them (the kvstore's reduce) and divides by the global
batch size. Run as one process (the default) the converted script does the same on one device,
slice after slice. Launched as N processes (``WORLD_SIZE`` > 1: ``dualdl launch --nproc N
--backend torch train.py``, or torchrun), rank ``r`` keeps only its devices' slices, and
``trainer.step`` all-reduces (sums) the gradients before the update: the update of the whole
batch, as Gluon's. Every rank reads the same global batches (the same ``np.random`` order) and
starts from rank 0's weights. This is the all-reduce of the gradients that torch's
DistributedDataParallel makes, at Gluon's point (``trainer.step``): the DDP wrapper itself
needs the forward called through it, which the script does not do.
"""
from __future__ import annotations

import os
from typing import Any, List, Sequence

import torch

from .torch_runtime import array

_DIST: dict = {"on": None, "split": False}


def dist_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def dist_rank() -> int:
    return int(os.environ.get("RANK", "0") or 0)


def dist_on(ctx: Any = None) -> bool:
    """Whether this run is one of several processes; the process group is made at the first
    call (gloo, NCCL where the devices are CUDA)."""
    if _DIST["on"] is None:
        _DIST["on"] = dist_world_size() > 1
        if _DIST["on"] and not torch.distributed.is_initialized():
            first = ctx[0] if isinstance(ctx, (list, tuple)) and ctx else ctx
            cuda = isinstance(first, torch.device) and first.type == "cuda"
            torch.distributed.init_process_group("nccl" if cuda else "gloo")
            import atexit
            atexit.register(_leave)
    return bool(_DIST["on"])


def _leave() -> None:
    """At exit, the process group torn down: a live gloo group aborts the interpreter as it
    ends ("terminate called without an active exception", SIGABRT)."""
    if torch.distributed.is_initialized():
        try:
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()
        except RuntimeError:
            pass


def _mine(n: int) -> range:
    """The slices (of ``n``, one per device) this rank computes."""
    world = dist_world_size()
    if n % world:
        raise ValueError(f"split_and_load over {n} device(s) in {world} processes: give a "
                         f"multiple of {world} devices (each process computes as many slices)")
    k = n // world
    return range(dist_rank() * k, (dist_rank() + 1) * k)


def rank_device(ctx: Any) -> Any:
    """The device of this rank among a script's context list (its first slice's)."""
    if not isinstance(ctx, (list, tuple)):
        return ctx
    return ctx[_mine(len(ctx))[0]] if dist_on(ctx) else ctx[0]


def split_and_load(data: Any, ctx_list: Sequence[Any], batch_axis: int = 0,
                   even_split: bool = True) -> List[torch.Tensor]:
    """``gluon.utils.split_and_load``: Gluon's slices (the first ``size % n`` one longer); in a
    run of several processes only this rank's."""
    data = data if isinstance(data, torch.Tensor) else array(data)
    n = len(ctx_list)
    size = data.shape[batch_axis]
    if even_split and size % n:
        raise ValueError(f"data with shape {tuple(data.shape)} cannot be evenly split into {n} "
                         f"slices along axis {batch_axis}: use a batch size that is a multiple "
                         f"of {n} or even_split=False")
    parts = torch.tensor_split(data, n, batch_axis) if n > 1 else (data,)
    if not dist_on(ctx_list):
        return [p.to(c) for p, c in zip(parts, ctx_list)]
    _DIST["split"] = True
    return [parts[i].to(ctx_list[i]) for i in _mine(n)]


def broadcast_parameters(block: torch.nn.Module) -> None:
    """Every rank starts from rank 0's weights and statistics (one Gluon model on N devices)."""
    if dist_on():
        with torch.no_grad():
            for t in list(block.parameters()) + list(block.buffers()):
                torch.distributed.broadcast(t.data, 0)


def allreduce_grads(params: Sequence[torch.Tensor]) -> None:
    """Gluon's ``trainer.allreduce_grads()`` across the processes: each gradient summed over the
    ranks (a rank without one contributes zeros)."""
    if not dist_on():
        return
    if not _DIST["split"]:
        raise RuntimeError("this script runs in several processes but never splits its batch "
                           "with split_and_load: every process would train on the whole batch; "
                           "run it as one process")
    for p in params:
        if p.requires_grad:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            torch.distributed.all_reduce(p.grad)


def allreduce_sum(values: List[float]) -> List[float]:
    """Sums over the ranks (the proof's loss of the whole batch)."""
    if not dist_on():
        return values
    t = torch.tensor(values, dtype=torch.float64)
    torch.distributed.all_reduce(t)
    return t.tolist()
