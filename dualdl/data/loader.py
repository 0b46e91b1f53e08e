"""``DataLoader``: the same batches, in the same order, as native tensors of either backend.

Own implementation rather than ``torch.utils.data.DataLoader`` / ``gluon.data.DataLoader``:
the two differ in the RNG behind shuffling (torch's generator vs numpy's global RNG), in worker
seeding, in their collate dtype rules and in how workers build tensors (Gluon's workers create
NDArrays in shared memory, which ties forked children to MXNet's engine). Building on either would
make one backend's batches depend on the other framework. Here indices come from dualdl's seeded
samplers, batches are collated in numpy (workers stay framework-free), and the main process turns
each numpy batch into tensors with ``dualdl.from_numpy`` (copy, exact dtype).
"""
from __future__ import annotations

import math
import multiprocessing as mp
import pickle
import queue
import sys
import time
from typing import Any, Callable, Dict, Iterator, Optional

from ._seed import check_epoch, check_seed, default_seed
from .collate import default_collate, to_tensors
from .sampler import BatchSampler, RandomSampler, SequentialSampler, _check_batch_size
from .worker import DataLoaderWorkerError, set_sample, fetch, worker_loop

__all__ = ["DataLoader"]


class _Run:
    __slots__ = ("epoch", "batches")

    def __init__(self, epoch: int, batches: int):
        self.epoch, self.batches = epoch, batches


def _unseeded(sampler: Any) -> bool:
    """Whether a (batch) sampler with seeds was created without one."""
    if isinstance(sampler, BatchSampler):
        sampler = sampler.sampler
    return hasattr(sampler, "set_seed") and getattr(sampler, "_seed", 0) is None


def _is_map_style(ds: Any) -> bool:
    return hasattr(ds, "__getitem__") and hasattr(ds, "__len__")


class DataLoader:
    """Iterate ``dataset`` in batches of native tensors of ``backend`` (default: the backend active
    when iteration starts; ``"numpy"`` gives numpy batches) on ``device`` (default CPU).

    Arguments follow ``torch.utils.data.DataLoader``: ``batch_size``, ``shuffle``, ``sampler``,
    ``batch_sampler``, ``num_workers``, ``collate_fn`` (returns numpy; default
    :func:`~dualdl.data.default_collate`), ``drop_last``, ``timeout``, ``worker_init_fn``,
    ``multiprocessing_context`` (default ``"fork"`` on Linux, else ``"spawn"``), ``prefetch_factor``. Added:

    - ``seed``: the shuffle seed (default ``dualdl.random.initial_seed()``, else fresh entropy),
      also given to a sampler passed without its own seed; ``dl.seed(n)`` sets it and every
      sampler's. The order of epoch ``e`` depends only on (seed, e).
    - ``float_dtype``: cast floating arrays (e.g. ``"float32"`` for float64 numpy data).
    - ``state_dict()`` / ``load_state_dict()``: ``{"epoch", "batches", "seed", "sampler_seed"}``;
      a loaded state continues the epoch after the last batch handed out.

    Epochs: an iteration that runs to its end advances the epoch; one cut short (``break``,
    ``next(iter(dl))``) restarts the same epoch next time; ``set_epoch(e)`` picks one. Workers
    give exactly the batches of ``num_workers=0``, in the same order.
    """

    def __init__(self, dataset: Any, batch_size: int = 1, shuffle: bool = False, sampler: Any = None,
                 batch_sampler: Any = None, num_workers: int = 0, collate_fn: Optional[Callable] = None,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Optional[Callable] = None,
                 multiprocessing_context: Any = None, prefetch_factor: int = 2,
                 seed: Optional[int] = None, backend: Optional[str] = None, device: Any = None,
                 float_dtype: Any = None):
        self.dataset = dataset
        self._iterable = not _is_map_style(dataset)
        if self._iterable and not hasattr(dataset, "__iter__"):
            raise TypeError(f"dataset must be map-style (__getitem__ and __len__) or iterable (__iter__), "
                            f"got {type(dataset).__name__}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"num_workers must be an int >= 0, got {num_workers!r}")
        if not isinstance(timeout, (int, float)) or timeout < 0:
            raise ValueError(f"timeout must be a number of seconds >= 0 (0: no limit), got {timeout!r}")
        if isinstance(prefetch_factor, bool) or not isinstance(prefetch_factor, int) or prefetch_factor < 1:
            raise ValueError(f"prefetch_factor must be a positive int, got {prefetch_factor!r}")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"collate_fn must be callable, got {type(collate_fn).__name__}")
        self._explicit_seed = check_seed(seed)
        self._seed = self._explicit_seed
        self._own_sampler = False
        if self._iterable:
            if shuffle or sampler is not None or batch_sampler is not None:
                raise ValueError("an iterable dataset (no __getitem__/__len__) is read in its own order: "
                                 "shuffle, sampler and batch_sampler are not supported with it")
            if num_workers > 0:
                raise ValueError("num_workers > 0 needs a map-style dataset (__getitem__ and __len__): "
                                 "splitting a stream across workers cannot keep the single-process order")
            batch_size = _check_batch_size(batch_size)
        elif batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler is mutually exclusive with batch_size, shuffle, sampler "
                                 "and drop_last (the batch sampler decides them)")
            batch_size, drop_last = None, False
        else:
            batch_size = _check_batch_size(batch_size)
            if sampler is not None and shuffle:
                raise ValueError("sampler and shuffle=True are mutually exclusive: the sampler decides "
                                 "the order (pass a RandomSampler or DistributedSampler(shuffle=True))")
            if sampler is None:
                self._own_sampler = bool(shuffle)
                sampler = RandomSampler(len(dataset), seed=self._seed) if shuffle else SequentialSampler(len(dataset))
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last, self.shuffle = batch_size, bool(drop_last), bool(shuffle)
        self.sampler = getattr(batch_sampler, "sampler", sampler)
        self.batch_sampler = batch_sampler
        self.num_workers, self.timeout, self.prefetch_factor = num_workers, timeout, prefetch_factor
        self.collate_fn = collate_fn if collate_fn is not None else default_collate
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = self._check_context(multiprocessing_context)
        if backend is not None and str(backend).lower() != "numpy":
            from ..backend import _canonical
            backend = _canonical(backend)
        self.backend = None if backend is None else str(backend).lower()
        if device is not None:
            from ..devices import device as _parse_device
            device = _parse_device(device)
        self.device = device
        if float_dtype is not None:
            import numpy as np
            float_dtype = np.dtype(float_dtype)
            if float_dtype.kind != "f":
                raise ValueError(f"float_dtype must be a floating dtype, got {float_dtype}")
        self.float_dtype = float_dtype
        if self._explicit_seed is not None:
            # a sampler given with its own seed keeps it; dl.seed(n) later overrides every seed
            if _unseeded(self.batch_sampler):
                self.seed(self._explicit_seed)
            else:
                self.seed()
        self._epoch = 0
        self._synced = 0            # the sampler epoch as the loader last left it
        self._skip = 0              # batches to skip at the next iteration (resume)
        self._run: Optional[_Run] = None
        self._last: Optional[tuple] = None   # (epoch, batches) of an iteration cut short

    @staticmethod
    def _check_context(ctx: Any) -> Any:
        if ctx is None:   # fork only on Linux (macOS system libraries are not fork-safe)
            return "fork" if sys.platform.startswith("linux") else "spawn"
        if isinstance(ctx, str):
            if ctx not in mp.get_all_start_methods():
                raise ValueError(f"multiprocessing_context must be one of {mp.get_all_start_methods()}, got {ctx!r}")
            return ctx
        if hasattr(ctx, "Process") and hasattr(ctx, "Queue"):
            return ctx
        raise TypeError(f"multiprocessing_context must be a start method name or a multiprocessing "
                        f"context, got {type(ctx).__name__}")

    # ---- seed, epoch, state --------------------------------------------------------------------
    def seed(self, n: Optional[int] = None) -> int:
        """Set the seed with ``dl.seed(n)`` (also given to the sampler chain's ``set_seed``); return
        the seed in use (resolved on first use: ``dualdl.random.initial_seed()``, else fresh entropy)."""
        if n is not None:
            self._seed = check_seed(n)
            if hasattr(self.batch_sampler, "set_seed"):
                self.batch_sampler.set_seed(self._seed)
        if self._seed is None:
            self._seed = default_seed()
        if self._own_sampler:
            self.sampler.set_seed(self._seed)
        return self._seed

    def set_epoch(self, epoch: int) -> None:
        """Run epoch ``epoch`` (from its first batch) at the next iteration."""
        self._epoch = check_epoch(epoch)
        if hasattr(self.batch_sampler, "set_epoch"):
            self.batch_sampler.set_epoch(self._epoch)
        self._synced, self._skip, self._last = self._epoch, 0, None

    @property
    def epoch(self) -> int:
        """The epoch being iterated, or the one the next iteration runs."""
        return self._run.epoch if self._run is not None else self._epoch

    def state_dict(self) -> Dict[str, Any]:
        """``{"epoch", "batches" (handed out so far in that epoch), "seed", "sampler_seed"}``."""
        if self._run is not None:
            epoch, batches = self._run.epoch, self._run.batches
        elif self._last is not None:
            epoch, batches = self._last
        else:
            epoch, batches = self._epoch, self._skip
        return {"epoch": epoch, "batches": batches, "seed": self.seed(),
                "sampler_seed": getattr(self.batch_sampler, "seed", None)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from a :meth:`state_dict`: the next iteration yields the remaining batches of
        its epoch (skipped batches cost only their indices, not their samples, for map-style data)."""
        if not isinstance(state, dict) or not {"epoch", "batches"} <= set(state):
            raise ValueError(f"expected a DataLoader state dict with keys 'epoch' and 'batches', got {state!r}")
        epoch, batches = check_epoch(state["epoch"]), state["batches"]
        limit = self._len_or_none()
        if isinstance(batches, bool) or not isinstance(batches, int) or batches < 0 or (
                limit is not None and batches > limit):
            raise ValueError(f"state 'batches' must be an int in [0, {limit if limit is not None else 'inf'}], "
                             f"got {batches!r}")
        seed = check_seed(state.get("seed"))
        sseed = check_seed(state.get("sampler_seed"), "sampler_seed")
        if seed is not None:
            self._seed = seed
            if self._own_sampler:
                self.sampler.set_seed(seed)
        if sseed is not None and hasattr(self.batch_sampler, "set_seed"):
            self.batch_sampler.set_seed(sseed)
        self.set_epoch(epoch)
        self._skip = batches

    def _len_or_none(self) -> Optional[int]:
        try:
            return len(self)
        except TypeError:
            return None

    def __len__(self) -> int:
        if self._iterable:
            if not hasattr(self.dataset, "__len__"):
                raise TypeError("this DataLoader's iterable dataset has no __len__")
            n = len(self.dataset)
            return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
        return len(self.batch_sampler)

    # ---- iteration -----------------------------------------------------------------------------
    def _begin_epoch(self) -> int:
        se = getattr(self.batch_sampler, "epoch", None)
        if se is not None and se != self._synced:
            self._epoch = se                # the user called sampler.set_epoch() directly
        if se is not None:
            self.batch_sampler.set_epoch(self._epoch)
        return self._epoch

    def __iter__(self) -> Iterator[Any]:
        name = self.backend
        if name is None:
            from ..backend import backend as _active
            name = _active()
        if name != "numpy":
            from ..backend import get_backend
            get_backend(name)               # fail early if the framework is missing
        seed = self.seed()
        epoch = self._begin_epoch()
        skip, self._skip, self._last = self._skip, 0, None
        run = _Run(epoch, skip)
        self._run = run
        source = self._numpy_batches(epoch, skip, seed)
        completed = False
        try:
            for raw in source:
                batch = raw if name == "numpy" else to_tensors(raw, name, self.device, self.float_dtype)
                run.batches += 1
                yield batch
            completed = True
        finally:
            source.close()
            if self._run is run:
                self._run = None
                self._epoch = epoch + 1 if completed else epoch
                self._last = None if completed else (epoch, run.batches)
                if hasattr(self.batch_sampler, "set_epoch"):
                    self.batch_sampler.set_epoch(self._epoch)
                self._synced = self._epoch

    def _numpy_batches(self, epoch: int, skip: int, seed: int) -> Iterator[Any]:
        if self._iterable:
            yield from self._iterable_batches(epoch, skip, seed)
            return
        batches = iter(self.batch_sampler)
        for _ in range(skip):
            if next(batches, None) is None:
                return
        if self.num_workers == 0:
            for indices in batches:
                where: Dict[str, Any] = {"index": None}
                try:
                    yield fetch(self.dataset, indices, self.collate_fn, seed, epoch, where)
                except Exception as e:
                    if hasattr(e, "add_note"):
                        what = (f"sample index {where['index']}" if where["index"] is not None
                                else f"collating sample indices {list(indices)[:16]}")
                        e.add_note(f"(raised by the DataLoader while loading {what})")
                    raise
        else:
            yield from self._worker_batches(batches, skip, seed, epoch)

    def _iterable_batches(self, epoch: int, skip: int, seed: int) -> Iterator[Any]:
        it = iter(self.dataset)
        index = 0
        for _ in range(skip * self.batch_size):
            if next(it, _END) is _END:
                return
            index += 1
        while True:
            samples = []
            try:
                for _ in range(self.batch_size):
                    set_sample(seed, epoch, index)
                    s = next(it, _END)
                    if s is _END:
                        break
                    samples.append(s)
                    index += 1
            finally:
                set_sample(None, 0, None)
            if not samples or (self.drop_last and len(samples) < self.batch_size):
                return
            yield self.collate_fn(samples)
            if len(samples) < self.batch_size:
                return

    def _worker_batches(self, batches: Iterator, first: int, seed: int, epoch: int) -> Iterator[Any]:
        ctx = mp.get_context(self.multiprocessing_context) if isinstance(self.multiprocessing_context, str) \
            else self.multiprocessing_context
        n = self.num_workers
        result_q = ctx.Queue()
        index_qs: list = []
        workers: list = []
        try:
            for w in range(n):
                iq = ctx.Queue()
                p = ctx.Process(target=worker_loop, name=f"dualdl-data-worker-{w}", daemon=True,
                                args=(self.dataset, self.collate_fn, iq, result_q, w, n, seed, epoch,
                                      self.worker_init_fn))
                index_qs.append(iq)
                try:
                    p.start()
                except (pickle.PicklingError, AttributeError, TypeError) as e:
                    raise TypeError(
                        f"could not start DataLoader worker with the {ctx.get_start_method()!r} start "
                        f"method: the dataset, collate_fn and worker_init_fn must be picklable (defined at "
                        f"module top level, no lambdas) ({type(e).__name__}: {e})") from e
                workers.append(p)
            sent = received = first
            pending: Dict[int, bytes] = {}
            exhausted = False

            def send() -> None:
                nonlocal sent, exhausted
                if exhausted:
                    return
                indices = next(batches, None)
                if indices is None:
                    exhausted = True
                    return
                index_qs[(sent - first) % n].put((sent, [int(i) for i in indices]))
                sent += 1

            for _ in range(self.prefetch_factor * n):
                send()
            while received < sent:
                while received not in pending:
                    b, payload, err = self._next_result(result_q, workers, received)
                    if err is not None:
                        raise DataLoaderWorkerError(**err)
                    pending[b] = payload
                payload = pending.pop(received)
                received += 1
                send()
                yield pickle.loads(payload)   # produced by our own worker process
        finally:
            _shutdown(workers, index_qs, result_q)

    def _next_result(self, result_q: Any, workers: list, waiting_for: int) -> tuple:
        deadline = time.monotonic() + self.timeout if self.timeout > 0 else None
        while True:
            wait = 0.25 if deadline is None else max(0.0, min(0.25, deadline - time.monotonic()))
            try:
                return result_q.get(timeout=wait)
            except queue.Empty:
                pass
            dead = [(w, p) for w, p in enumerate(workers) if not p.is_alive()]
            if dead:
                try:
                    return result_q.get(timeout=0.2)   # its last message may still be in the pipe
                except queue.Empty:
                    w, p = dead[0]
                    code = p.exitcode
                    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                    raise RuntimeError(f"DataLoader worker {w} (pid {p.pid}) exited unexpectedly ({how}) "
                                       f"while batch {waiting_for} was pending") from None
            if deadline is not None and time.monotonic() >= deadline:
                raise RuntimeError(f"DataLoader timed out after {self.timeout} s waiting for batch "
                                   f"{waiting_for} from its workers (timeout={self.timeout})")

    def __repr__(self) -> str:
        return (f"DataLoader(dataset={type(self.dataset).__name__}, batch_size={self.batch_size}, "
                f"shuffle={self.shuffle}, num_workers={self.num_workers}, backend={self.backend!r})")


_END = object()


def _shutdown(workers: list, index_qs: list, result_q: Any, grace: float = 2.0) -> None:
    """Ask workers to stop, wait ``grace`` seconds in all, terminate the rest, close the queues."""
    for q in index_qs:
        try:
            q.put(None)
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + grace
    for p in workers:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in workers:
        if p.is_alive():
            p.terminate()
            p.join(timeout=1.0)
    for q in index_qs + [result_q]:
        q.cancel_join_thread()
        q.close()
