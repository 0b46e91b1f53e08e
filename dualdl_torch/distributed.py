"""PyTorch side of ``dualdl.distributed``: ``torch.distributed`` (gloo on CPU, NCCL on CUDA) + DDP.

Same function names as ``dualdl_mx.distributed``. Hides: torch's TCPStore listens on every
interface even for ``MASTER_ADDR=127.0.0.1`` (here a loopback master binds loopback only),
env:// never checks that ranks agree on ``WORLD_SIZE``, and ``destroy_process_group`` is not a
collective: each rank tears its gloo threads and sockets down whenever it gets there, and rank 0,
which hosts the store, may exit while its peers are still leaving.
"""
from __future__ import annotations

import datetime
import errno
import os
import socket
import sys
import warnings
from typing import Any, List, Optional

import torch
import torch.distributed as dist

from dualdl import config
from dualdl.distributed.env import DistributedEnvError, int_env, is_loopback

__all__ = ["init", "is_distributed", "rank", "world_size", "barrier", "shutdown",
           "broadcast_parameters", "wrap_model", "kvstore", "gradient_reduction"]

_state: dict = {"owned": False, "distributed": False, "store": None}
DEFAULT_TIMEOUT = 1800.0
DEPART_TIMEOUT = 60.0
_LEFT = "dualdl/left/{}"


def _agent_store() -> bool:
    """Whether torchrun's agent hosts the store (not rank 0)."""
    return config.get("TORCHELASTIC_USE_AGENT_STORE") == "True"


def _store(addr: str, port: int, rank_: int, world: int, timeout: datetime.timedelta):
    """The rendezvous store; rank 0 hosts it, bound to loopback when the master is loopback."""
    if _agent_store():
        return dist.TCPStore(addr, port, world, False, timeout=timeout)
    if rank_ != 0 or not is_loopback(addr):
        return dist.TCPStore(addr, port, world, rank_ == 0, timeout=timeout)
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((addr if addr != "localhost" else "127.0.0.1", port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise DistributedEnvError(
                f"MASTER_PORT {port} on {addr} is already in use (EADDRINUSE): another process "
                f"holds it; choose another port (dualdl launch picks a free one unless --port is "
                f"given)") from None
        raise
    try:
        return dist.TCPStore(addr, port, world, True, timeout=timeout,
                             master_listen_fd=sock.detach())
    except Exception:
        sock.close()
        raise


def init(*, world_size: Optional[int] = None, timeout: Optional[float] = None) -> None:
    env = os.environ
    if dist.is_available() and dist.is_initialized():      # the user already did it
        _state.update(owned=False, distributed=True)
        _check_world(dist.get_world_size(), world_size)
        return
    if "WORLD_SIZE" not in env and "RANK" not in env:
        _check_world(1, world_size)
        _state.update(owned=False, distributed=False)
        return
    world = int_env("WORLD_SIZE", minimum=1)
    rank_ = int_env("RANK")
    if rank_ >= world:
        raise DistributedEnvError(f"RANK={rank_} is not below WORLD_SIZE={world}")
    local = int_env("LOCAL_RANK", default=0)
    local_world = int_env("LOCAL_WORLD_SIZE", default=world, minimum=1)
    if local >= local_world:
        raise DistributedEnvError(f"LOCAL_RANK={local} is not below LOCAL_WORLD_SIZE={local_world}")
    _check_world(world, world_size)
    addr = config.get("MASTER_ADDR", env)
    if not addr:
        raise DistributedEnvError("MASTER_ADDR is not set; start the job with `dualdl launch`")
    port = int_env("MASTER_PORT", minimum=1)
    td = datetime.timedelta(seconds=float(timeout) if timeout else DEFAULT_TIMEOUT)
    pg_backend = config.torch_dist_backend(env) or (
        "nccl" if torch.cuda.is_available() and torch.cuda.device_count() > 0 else "gloo")
    if pg_backend not in ("gloo", "nccl"):
        raise DistributedEnvError(f"DUALDL_TORCH_DIST_BACKEND={pg_backend!r}; expected gloo or nccl")
    if pg_backend == "nccl":
        torch.cuda.set_device(local % torch.cuda.device_count())
    store = _store(addr, port, rank_, world, td)
    _check_same_world(store, rank_, world)
    dist.init_process_group(pg_backend, store=store, rank=rank_,
                            world_size=world, timeout=td)
    _state.update(owned=True, distributed=True, store=None if _agent_store() else store)


def _check_same_world(store: Any, rank_: int, world: int) -> None:
    """Every rank publishes its WORLD_SIZE; rank 0 and each other rank compare. Without this,
    ranks that disagree wait in the rendezvous until the timeout (30 min by default)."""
    store.set(f"dualdl/world_size/{rank_}", str(world))
    if rank_ == 0:
        keys = [f"dualdl/world_size/{r}" for r in range(1, world)]
        if keys:
            store.wait(keys)
        views = {r: int(store.get(k)) for r, k in enumerate(keys, start=1)}
        bad = {r: w for r, w in views.items() if w != world}
    else:
        theirs = int(store.get("dualdl/world_size/0"))
        bad = {0: theirs} if theirs != world else {}
    if bad:
        others = ", ".join(f"rank {r} with WORLD_SIZE={w}" for r, w in sorted(bad.items()))
        raise DistributedEnvError(
            f"rank {rank_} was started with WORLD_SIZE={world} but {others}: every node must "
            f"pass the same --nnodes and --nproc")


def _check_world(actual: int, expected: Optional[int]) -> None:
    if expected is not None and int(expected) != actual:
        raise DistributedEnvError(f"expected world size {expected} but this job has {actual} "
                                  f"processes (WORLD_SIZE={actual}); launch it with --nproc "
                                  f"{expected} (times --nnodes)")


def is_distributed() -> bool:
    return _state["distributed"]


def rank() -> int:
    return dist.get_rank() if _state["distributed"] else 0


def world_size() -> int:
    return dist.get_world_size() if _state["distributed"] else 1


def barrier() -> None:
    if _state["distributed"]:
        dist.barrier()


def shutdown() -> None:
    """Leave the job in order: a barrier (no rank tears down while a peer is still in a
    collective), ``destroy_process_group``, then rank 0, the store's host, waits until every
    other rank has left before it may exit and take the store with it (each wait at most
    ``DEPART_TIMEOUT`` s, then a warning). Called while an exception propagates (a ``finally``
    after a failure), it only destroys the group: the peers may be stuck in a collective this
    rank will never join."""
    if _state["distributed"] and _state["owned"] and dist.is_initialized():
        orderly = sys.exc_info()[0] is None
        world, rank_ = dist.get_world_size(), dist.get_rank()
        if orderly:
            orderly = _leaving_barrier()
        dist.destroy_process_group()
        if orderly and _state["store"] is not None and world > 1:
            _depart(_state["store"], rank_, world)
    _state.update(owned=False, distributed=False, store=None)


def _leaving_barrier() -> bool:
    """The barrier before the teardown, bounded: a peer that never calls shutdown() (or died)
    costs ``DEPART_TIMEOUT`` s and a warning, not the process group's timeout (30 min)."""
    try:
        dist.barrier(timeout=datetime.timedelta(seconds=DEPART_TIMEOUT))
        return True
    except Exception as e:      # noqa: BLE001 - gloo raises RuntimeError or its own types
        warnings.warn(f"dualdl.distributed.shutdown: not every rank reached shutdown() (waited "
                      f"at most {DEPART_TIMEOUT:.0f} s); leaving without them ({e})", stacklevel=3)
        return False


def _depart(store: Any, rank_: int, world: int) -> None:
    """Each rank > 0 says it has left; rank 0 waits for all of them, bounded."""
    if rank_ != 0:
        store.set(_LEFT.format(rank_), "1")
        return
    try:
        store.wait([_LEFT.format(r) for r in range(1, world)],
                   datetime.timedelta(seconds=DEPART_TIMEOUT))
    except Exception as e:      # a peer died after the barrier: the launcher reports it
        warnings.warn(f"dualdl.distributed.shutdown: rank 0 waited {DEPART_TIMEOUT:.0f} s for "
                      f"the other ranks to leave and goes on without them ({e})", stacklevel=3)


def _tensors(params: Any) -> List[torch.Tensor]:
    if isinstance(params, torch.nn.Module):
        return list(params.parameters()) + list(params.buffers())
    if isinstance(params, torch.Tensor):
        return [params]
    if isinstance(params, dict):
        params = list(params.values())
    out = list(params)
    bad = [type(t).__name__ for t in out if not isinstance(t, torch.Tensor)]
    if bad:
        raise TypeError(f"broadcast_parameters expects torch tensors/Parameters or a Module, got {bad[:3]}")
    return out


def broadcast_parameters(params: Any, src: int = 0) -> None:
    tensors = _tensors(params)
    if not _state["distributed"]:
        return
    if not 0 <= src < world_size():
        raise ValueError(f"src={src} is not a rank of this job (world size {world_size()})")
    with torch.no_grad():
        for t in tensors:
            dist.broadcast(t.data, src)


def wrap_model(model: Any, **kwargs: Any) -> Any:
    if not _state["distributed"]:
        return model
    from torch.nn.parallel import DistributedDataParallel
    if "device_ids" not in kwargs:
        p = next(iter(model.parameters()), None)
        if p is not None and p.is_cuda:
            kwargs["device_ids"] = [p.device.index]
    return DistributedDataParallel(model, **kwargs)


def kvstore() -> None:
    return None


def gradient_reduction() -> str:
    return "mean"
