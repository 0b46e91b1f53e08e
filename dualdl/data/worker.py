"""Worker processes and per-sample randomness.

Workers only index the dataset and collate numpy batches; they never create tensors, so they
import no framework and a forked worker never runs MXNet's engine or torch's thread pools (MXNet
plus fork is unsafe once the child uses MXNet). Results go back pickled by the worker itself
(an unpicklable batch becomes a reported error, not a lost message and a hang).
"""
from __future__ import annotations

import pickle
import queue
import random
import threading
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import numpy as np

from ._seed import SAMPLE, WORKER, generator

__all__ = ["WorkerInfo", "get_worker_info", "sample_rng", "DataLoaderWorkerError"]


@dataclass(frozen=True)
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    epoch: int
    dataset: Any


_worker_info: Optional[WorkerInfo] = None
_local = threading.local()     # .sample: (seed, epoch, index) being loaded; .rng: its Generator


def get_worker_info() -> Optional[WorkerInfo]:
    """In a DataLoader worker: its id, the worker count, seed, epoch and dataset copy; else None."""
    return _worker_info


def sample_rng() -> np.random.Generator:
    """A numpy Generator for the sample being loaded, derived from (loader seed, epoch, sample
    index): random augmentations drawn from it are the same with or without workers, on both
    backends, whatever the framework RNG state. Only valid inside ``dataset[i]``/transforms called
    by a DataLoader."""
    sample = getattr(_local, "sample", None)
    if sample is None:
        raise RuntimeError("dualdl.data.sample_rng() is only available while a DataLoader loads a sample")
    if _local.rng is None:
        _local.rng = generator(sample[0], sample[1], SAMPLE, sample[2])
    return _local.rng


def set_sample(seed: Optional[int], epoch: int, index: Optional[int]) -> None:
    """Per thread: the sample whose ``sample_rng()`` is handed out (``index=None``: none)."""
    _local.sample = None if index is None else (seed, epoch, int(index))
    _local.rng = None


def fetch(dataset: Any, indices, collate_fn: Callable, seed: int, epoch: int, where: Dict) -> Any:
    """``collate_fn([dataset[i] for i in indices])``, recording the index being loaded in ``where``."""
    samples = []
    try:
        for i in indices:
            where["index"] = i
            set_sample(seed, epoch, i)
            samples.append(dataset[i])
        set_sample(None, 0, None)
        where["index"] = None
        return collate_fn(samples)
    finally:
        set_sample(None, 0, None)


class DataLoaderWorkerError(RuntimeError):
    """A worker failed: carries the sample index, the original error's type name, message and the
    worker's traceback text."""

    def __init__(self, worker_id: int, batch_index: int, sample_index: Optional[int], exc_type: str,
                 exc_message: str, worker_traceback: str, indices=None):
        self.worker_id, self.batch_index, self.sample_index = worker_id, batch_index, sample_index
        self.exc_type, self.exc_message, self.worker_traceback = exc_type, exc_message, worker_traceback
        where = (f"loading sample index {sample_index}" if sample_index is not None
                 else f"collating batch {batch_index} (sample indices {list(indices or [])[:16]})")
        super().__init__(f"DataLoader worker {worker_id} failed while {where} (batch {batch_index}): "
                         f"{exc_type}: {exc_message}\n\nOriginal traceback in the worker:\n{worker_traceback}")

    def __reduce__(self):
        return (type(self), (self.worker_id, self.batch_index, self.sample_index, self.exc_type,
                             self.exc_message, self.worker_traceback))


def _error(exc: BaseException, worker_id: int, batch_index: int, sample_index: Optional[int], indices) -> Dict:
    return {"worker_id": worker_id, "batch_index": batch_index, "sample_index": sample_index,
            "exc_type": f"{type(exc).__module__}.{type(exc).__qualname__}".replace("builtins.", ""),
            "exc_message": str(exc), "worker_traceback": traceback.format_exc(), "indices": list(indices)}


def worker_loop(dataset: Any, collate_fn: Callable, index_queue: Any, result_queue: Any, worker_id: int,
                num_workers: int, seed: int, epoch: int, worker_init_fn: Optional[Callable]) -> None:
    """Runs in the child: take ``(batch_index, indices)`` tasks until ``None``; put
    ``(batch_index, pickled batch, None)`` or ``(batch_index, None, error dict)``."""
    global _worker_info
    import multiprocessing as mp
    _worker_info = WorkerInfo(worker_id, num_workers, seed, epoch, dataset)
    # the global RNGs a transform might use: seeded per (seed, epoch, worker); prefer sample_rng()
    ws = int(generator(seed, epoch, WORKER, worker_id).integers(2 ** 32))
    random.seed(ws)
    np.random.seed(ws)
    if worker_init_fn is not None:
        try:
            worker_init_fn(worker_id)
        except Exception as e:  # noqa: BLE001 - reported to the main process
            result_queue.put((-1, None, _error(e, worker_id, -1, None, [])))
            return
    parent = mp.parent_process()
    while True:
        try:
            task = index_queue.get(timeout=1.0)
        except queue.Empty:
            if parent is not None and not parent.is_alive():
                result_queue.cancel_join_thread()
                return
            continue
        if task is None:              # shutdown: don't wait to flush results nobody will read
            result_queue.cancel_join_thread()
            return
        batch_index, indices = task
        where: Dict[str, Any] = {"index": None}
        try:
            batch = fetch(dataset, indices, collate_fn, seed, epoch, where)
            payload = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001 - reported to the main process
            result_queue.put((batch_index, None, _error(e, worker_id, batch_index, where["index"], indices)))
            continue
        result_queue.put((batch_index, payload, None))
