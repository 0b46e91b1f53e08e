"""Samplers: which sample indices, in which order, in which batches.

Every random order comes from dualdl's own seeded numpy generator (see ``_seed.py``), derived
from ``(seed, epoch)``: the same seed gives the same order on both backends, whatever the
framework RNG state. Epoch rule (all epoch-aware samplers): ``set_epoch(e)`` selects the order
of the next iteration; an iteration that runs to the end advances the epoch by one, so each
epoch differs without any call, while one cut short (``break``, ``next(iter(...))``) restarts
the same epoch. ``state_dict()`` / ``load_state_dict()`` hold ``{"epoch", "position", "seed"}``.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterator, List, Optional, Sequence, Sized, Union

import numpy as np

from ._seed import (BATCH_ORDER, check_epoch, check_seed, default_seed, epoch_permutation,
                    generator)

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "BatchSampler", "DistributedSampler",
           "BucketBatchSampler"]


def _length(data_source: Union[int, Sized], what: str = "data_source") -> int:
    if isinstance(data_source, (int, np.integer)) and not isinstance(data_source, bool):
        n = int(data_source)
    elif hasattr(data_source, "__len__"):
        n = len(data_source)
    else:
        raise TypeError(f"{what} must be a dataset with __len__ or an int length, "
                        f"got {type(data_source).__name__}")
    if n < 0:
        raise ValueError(f"{what} length must be >= 0, got {n}")
    return n


def _check_batch_size(batch_size: Any) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    return int(batch_size)


class Sampler:
    """Base class: an iterable of sample indices (or of index lists, for batch samplers)."""

    def __iter__(self) -> Iterator:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class _EpochSampler(Sampler):
    """Seed, epoch and resumable position, shared by the shuffling samplers."""

    def __init__(self, seed: Optional[int]):
        self._seed = check_seed(seed)
        self._epoch = 0
        self._position = 0       # items yielded in the current epoch
        self._start = 0          # items to skip at the next iteration (set by load_state_dict)

    @property
    def seed(self) -> int:
        """The seed in use: the one given, else ``dualdl.random.initial_seed()``, else fresh
        entropy (drawn once, at first use, and kept)."""
        if self._seed is None:
            self._seed = default_seed()
        return self._seed

    def set_seed(self, seed: int) -> None:
        self._seed = check_seed(seed)

    @property
    def epoch(self) -> int:
        """The epoch being iterated, or the next one if no iteration is under way."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Use epoch ``epoch``'s order for the next iteration, from its start."""
        self._epoch = check_epoch(epoch)
        self._start = 0
        self._position = 0

    def state_dict(self) -> Dict[str, int]:
        return {"epoch": self._epoch, "position": self._position, "seed": self.seed}

    def load_state_dict(self, state: Dict[str, int]) -> None:
        """Resume: the next iteration is epoch ``state["epoch"]`` from item ``state["position"]``."""
        if not isinstance(state, dict) or not {"epoch", "position"} <= set(state):
            raise ValueError(f"expected a dict with keys 'epoch' and 'position' (and 'seed'), got {state!r}")
        pos = state["position"]
        if isinstance(pos, bool) or not isinstance(pos, (int, np.integer)) or not 0 <= pos <= len(self):
            raise ValueError(f"position must be an int in [0, {len(self)}], got {pos!r}")
        if state.get("seed") is not None:
            self.set_seed(state["seed"])
        self._epoch = check_epoch(state["epoch"])
        self._start = self._position = int(pos)

    def _order(self, epoch: int) -> List:
        raise NotImplementedError

    def __iter__(self) -> Iterator:
        epoch, start = self._epoch, self._start
        self._start = 0
        items = self._order(epoch)
        self._position = start
        for item in items[start:]:
            self._position += 1
            yield item
        if self._epoch == epoch:          # ran to the end: next epoch (unless set_epoch was called)
            self._epoch, self._position = epoch + 1, 0


class SequentialSampler(Sampler):
    """0, 1, ..., n-1 (no randomness, no epochs)."""

    def __init__(self, data_source: Union[int, Sized]):
        self.num_samples = _length(data_source)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.num_samples))

    def __len__(self) -> int:
        return self.num_samples


class RandomSampler(_EpochSampler):
    """A permutation of ``range(n)`` per epoch, from dualdl's generator seeded by (seed, epoch).

    Hides: torch's RandomSampler draws from torch's RNG and Gluon's from numpy's global RNG;
    this one is the same on both backends and independent of both.
    """

    def __init__(self, data_source: Union[int, Sized], seed: Optional[int] = None):
        super().__init__(seed)
        self.num_samples = _length(data_source)

    def _order(self, epoch: int) -> List[int]:
        return epoch_permutation(self.num_samples, self.seed, epoch).tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups a sampler's indices into lists of ``batch_size`` (torch's BatchSampler). Epoch, seed
    and state calls are forwarded to the wrapped sampler when it has them."""

    def __init__(self, sampler: Any, batch_size: int, drop_last: bool = False):
        self.sampler = sampler
        self.batch_size = _check_batch_size(batch_size)
        self.drop_last = bool(drop_last)

    def __iter__(self) -> Iterator[List[int]]:
        batch: List[int] = []
        for idx in self.sampler:
            batch.append(int(idx))
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    # forwarding (absent when the wrapped sampler has no epochs)
    @property
    def epoch(self) -> Optional[int]:
        return getattr(self.sampler, "epoch", None)

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    @property
    def seed(self) -> Optional[int]:
        return getattr(self.sampler, "seed", None)

    def set_seed(self, seed: int) -> None:
        if hasattr(self.sampler, "set_seed"):
            self.sampler.set_seed(seed)


class DistributedSampler(_EpochSampler):
    """Rank ``rank``'s share of the global epoch order: indices ``r::num_replicas`` of it.

    The global order is the same permutation a single process gets (``RandomSampler`` with the
    same seed and epoch), so the ranks together see exactly what one process would see.
    ``drop_last=False`` pads the order by wrap-around (its first indices repeated) to a multiple
    of ``num_replicas``, like torch's DistributedSampler, so every rank gets the same count;
    ``drop_last=True`` drops the tail instead. ``num_replicas``/``rank`` default to the
    job joined with ``dualdl.distributed.init()`` (MXNet's kvstore rank included), else the
    ``WORLD_SIZE``/``RANK`` environment variables (set by torchrun and dualdl's launcher).
    ``seed`` defaults to ``dualdl.random.initial_seed()``, else 0 (the same on every rank).

    Differs from torch: without ``set_epoch`` calls the order still changes each epoch (an epoch
    that runs to its end advances it); calling ``set_epoch(e)`` each epoch, torch-style, works too.
    """

    def __init__(self, dataset: Union[int, Sized], num_replicas: Optional[int] = None,
                 rank: Optional[int] = None, shuffle: bool = True, seed: Optional[int] = None,
                 drop_last: bool = False):
        super().__init__(seed)
        from .. import config
        self.dataset_len = _length(dataset, "dataset")
        if num_replicas is None or rank is None:
            from .. import distributed as ddist      # framework-free until a job was joined
            if ddist.is_initialized():               # MXNet workers get their rank from the scheduler
                num_replicas = ddist.world_size() if num_replicas is None else num_replicas
                rank = ddist.rank() if rank is None else rank
        if num_replicas is None:
            world = config.get("WORLD_SIZE")
            num_replicas = int(world) if world is not None else None
        if rank is None:
            rank = int(config.get("RANK")) if config.get("RANK") is not None else None
        if num_replicas is None or rank is None:
            raise ValueError("DistributedSampler needs num_replicas and rank (or the WORLD_SIZE and "
                             "RANK environment variables)")
        if isinstance(num_replicas, bool) or not isinstance(num_replicas, (int, np.integer)) or num_replicas < 1:
            raise ValueError(f"num_replicas must be a positive int, got {num_replicas!r}")
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < num_replicas:
            raise ValueError(f"rank must be an int in [0, {num_replicas}), got {rank!r}")
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        if self.drop_last:
            self.num_samples = self.dataset_len // self.num_replicas
        else:
            self.num_samples = math.ceil(self.dataset_len / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    @property
    def seed(self) -> int:
        """The seed given, else ``dualdl.random.initial_seed()``, else 0 (torch's default): never
        fresh entropy, since every rank must draw the same global order."""
        if self._seed is None:
            from ..random import initial_seed
            s = initial_seed()
            self._seed = 0 if s is None else int(s)
        return self._seed

    def _order(self, epoch: int) -> List[int]:
        n = self.dataset_len
        order = epoch_permutation(n, self.seed, epoch) if self.shuffle else np.arange(n)
        if self.total_size > n:           # wrap-around padding (only when not drop_last)
            order = np.resize(order, self.total_size) if n else order
        order = order[:self.total_size]
        return order[self.rank:self.total_size:self.num_replicas].tolist()

    def __len__(self) -> int:
        return self.num_samples


class BucketBatchSampler(_EpochSampler):
    """Batches of similar length, for variable-length sequences (RNN, Transformer, CTC).

    Each epoch: the sample order (the epoch permutation when ``shuffle``, else 0..n-1, or the
    order of ``sampler`` when one is given, e.g. a DistributedSampler) is cut into buckets of
    ``bucket_size`` samples (default ``100 * batch_size``); each bucket is stably sorted by
    ``lengths`` and cut into batches; with ``shuffle`` the order of the batches is then shuffled
    too (from the same seeded generator), so batch lengths are mixed across the epoch.
    Only the very last batch can be smaller than ``batch_size`` (dropped with ``drop_last``).
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, shuffle: bool = False,
                 seed: Optional[int] = None, drop_last: bool = False,
                 bucket_size: Optional[int] = None, sampler: Any = None):
        super().__init__(seed)
        lengths = np.asarray(lengths)
        if lengths.ndim != 1 or (lengths.size and lengths.dtype.kind not in "iu"):
            raise ValueError(f"lengths must be a 1-D sequence of ints (one per sample), "
                             f"got an array of shape {lengths.shape} and dtype {lengths.dtype}")
        self.lengths = lengths.astype(np.int64)
        self.batch_size = _check_batch_size(batch_size)
        self.bucket_size = self.batch_size * 100 if bucket_size is None else _check_batch_size(bucket_size)
        if self.bucket_size % self.batch_size:
            raise ValueError(f"bucket_size ({self.bucket_size}) must be a multiple of batch_size "
                             f"({self.batch_size}), so that only the last batch can be partial")
        self.shuffle, self.drop_last, self.sampler = bool(shuffle), bool(drop_last), sampler

    def _sample_order(self, epoch: int) -> np.ndarray:
        if self.sampler is not None:
            if hasattr(self.sampler, "set_epoch"):
                self.sampler.set_epoch(epoch)
            return np.fromiter((int(i) for i in self.sampler), dtype=np.int64)
        n = len(self.lengths)
        return epoch_permutation(n, self.seed, epoch) if self.shuffle else np.arange(n)

    def _order(self, epoch: int) -> List[List[int]]:
        order = self._sample_order(epoch)
        batches: List[List[int]] = []
        for b in range(0, len(order), self.bucket_size):
            bucket = order[b:b + self.bucket_size]
            bucket = bucket[np.argsort(self.lengths[bucket], kind="stable")]
            batches += [bucket[i:i + self.batch_size].tolist() for i in range(0, len(bucket), self.batch_size)]
        if batches and self.drop_last and len(batches[-1]) < self.batch_size:
            batches.pop()
        if self.shuffle and batches:
            perm = generator(self.seed, epoch, BATCH_ORDER).permutation(len(batches))
            batches = [batches[i] for i in perm]
        return batches

    def __len__(self) -> int:
        n = len(self.sampler) if self.sampler is not None else len(self.lengths)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
