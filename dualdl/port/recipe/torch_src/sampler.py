"""Gluon ``DataLoader`` batch order in torch: ``shuffle=True`` draws ``np.random.shuffle`` on
numpy's *global* RNG at each epoch (torch's ``RandomSampler`` uses torch's RNG), and
``last_batch='rollover'`` carries the incomplete batch into the next epoch (torch has no such
mode)."""
from __future__ import annotations

from typing import Iterator, List, Sequence

import numpy as np
import torch


class GluonRandomSampler(torch.utils.data.Sampler):
    """``gluon.data.RandomSampler``: ``indices = np.arange(n); np.random.shuffle(indices)`` per
    epoch, so ``np.random.seed(s)`` gives Gluon's order."""

    def __init__(self, length: int):
        self._length = int(length)

    def __iter__(self) -> Iterator[int]:
        indices = np.arange(self._length)
        np.random.shuffle(indices)
        return iter(int(i) for i in indices)

    def __len__(self) -> int:
        return self._length


class GluonSequentialSampler(torch.utils.data.Sampler):
    """``gluon.data.SequentialSampler``: 0, 1, ..., n-1."""

    def __init__(self, length: int):
        self._length = int(length)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self._length))

    def __len__(self) -> int:
        return self._length


class GluonBatchSampler(torch.utils.data.Sampler):
    """``gluon.data.BatchSampler``: batches of ``batch_size`` indices; the incomplete last batch is
    kept (``'keep'``), dropped (``'discard'``) or put at the front of the next epoch
    (``'rollover'``). Pass it as ``DataLoader(dataset, batch_sampler=...)``."""

    def __init__(self, sampler: Sequence[int], batch_size: int, last_batch: str = "keep"):
        if last_batch not in ("keep", "discard", "rollover"):
            raise ValueError(f"last_batch must be one of 'keep', 'discard', or 'rollover', "
                             f"but got {last_batch!r}")
        self._sampler = sampler
        self._batch_size = int(batch_size)
        self._last_batch = last_batch
        self._prev: List[int] = []

    def __iter__(self) -> Iterator[List[int]]:
        batch, self._prev = self._prev, []
        for i in self._sampler:
            batch.append(i)
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if batch:
            if self._last_batch == "keep":
                yield batch
            elif self._last_batch == "rollover":
                self._prev = batch

    def __len__(self) -> int:
        if self._last_batch == "keep":
            return (len(self._sampler) + self._batch_size - 1) // self._batch_size
        if self._last_batch == "discard":
            return len(self._sampler) // self._batch_size
        return (len(self._prev) + len(self._sampler)) // self._batch_size
