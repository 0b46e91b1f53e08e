"""Datasets: map-style (``__getitem__`` + ``__len__``) and iterable (``__iter__``), holding numpy data.

Naming follows PyTorch (``Dataset``, ``IterableDataset``, ``TensorDataset``, ``Subset``); Gluon's
``ArrayDataset``, ``SimpleDataset`` and ``transform``/``transform_first`` are kept with Gluon's
meaning, since migrating code calls them. Samples stay numpy (or Python objects): conversion to
tensors of a backend happens once per batch, in the DataLoader's main process.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, List, Sequence

import numpy as np

__all__ = ["Dataset", "IterableDataset", "ArrayDataset", "TensorDataset", "SimpleDataset",
           "TransformDataset", "Subset"]


def _apply(fn: Callable, item: Any) -> Any:
    # Gluon's rule: a tuple sample is unpacked into the function's arguments.
    return fn(*item) if isinstance(item, tuple) else fn(item)


class Dataset:
    """Map-style dataset: ``dataset[i]`` for ``0 <= i < len(dataset)``."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def transform(self, fn: Callable, lazy: bool = True) -> "Dataset":
        """A dataset whose samples are ``fn(*sample)`` for tuple samples, else ``fn(sample)``
        (Gluon's ``Dataset.transform``). ``lazy=False`` applies ``fn`` to every sample now."""
        ds = TransformDataset(self, fn)
        return ds if lazy else SimpleDataset([ds[i] for i in range(len(ds))])

    def transform_first(self, fn: Callable, lazy: bool = True) -> "Dataset":
        """Apply ``fn`` to the first field of each (tuple) sample only (Gluon's ``transform_first``)."""
        return self.transform(_TransformFirst(fn), lazy)


class _TransformFirst:
    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, x: Any, *rest: Any) -> Any:
        return (self.fn(x),) + rest if rest else self.fn(x)


class IterableDataset:
    """A stream of samples (``__iter__``), read in order by the DataLoader's main process."""

    def __iter__(self) -> Iterator:
        raise NotImplementedError

    def transform(self, fn: Callable) -> "IterableDataset":
        return _TransformIterable(self, fn)


class _TransformIterable(IterableDataset):
    def __init__(self, dataset: Any, fn: Callable):
        self.dataset, self.fn = dataset, fn

    def __iter__(self) -> Iterator:
        return (_apply(self.fn, item) for item in self.dataset)


def _as_column(a: Any, k: int) -> Any:
    """A numpy array for tensors and numeric arrays; lists (e.g. of variable-length sequences) stay."""
    if isinstance(a, np.ndarray):
        if a.ndim == 0:
            raise ValueError(f"array {k} is 0-dimensional; each array needs a first (sample) axis")
        return a
    from ..tensor import is_tensor, to_numpy
    if is_tensor(a):
        return to_numpy(a)
    if not (hasattr(a, "__len__") and hasattr(a, "__getitem__")) or isinstance(a, (str, bytes)):
        raise TypeError(f"array {k} must be a numpy array, a native tensor or a sequence "
                        f"(with __len__ and __getitem__), got {type(a).__name__}")
    return a


class ArrayDataset(Dataset):
    """Samples ``(a[i], b[i], ...)`` of equally long arrays; with one array, just ``a[i]``
    (Gluon's ``ArrayDataset``). Native tensors are copied to numpy once, here.
    Arrays of different lengths raise a ValueError naming each length."""

    def __init__(self, *arrays: Any):
        if not arrays:
            raise ValueError("ArrayDataset needs at least one array")
        self._arrays = [_as_column(a, k) for k, a in enumerate(arrays)]
        lens = [len(a) for a in self._arrays]
        if len(set(lens)) != 1:
            raise ValueError(f"all arrays must have the same length (first axis); got lengths {lens}")
        self._len = lens[0]

    def __getitem__(self, index: int) -> Any:
        if len(self._arrays) == 1:
            return self._arrays[0][index]
        return tuple(a[index] for a in self._arrays)

    def __len__(self) -> int:
        return self._len


class TensorDataset(ArrayDataset):
    """Like :class:`ArrayDataset`, but a sample is always a tuple, even of one array (torch's rule)."""

    def __init__(self, *tensors: Any):
        super().__init__(*tensors)

    def __getitem__(self, index: int) -> tuple:
        return tuple(a[index] for a in self._arrays)


class SimpleDataset(Dataset):
    """A dataset over any sequence (a list of samples, for example)."""

    def __init__(self, data: Sequence):
        if not (hasattr(data, "__len__") and hasattr(data, "__getitem__")):
            raise TypeError(f"SimpleDataset needs a sequence, got {type(data).__name__}")
        self._data = data

    def __getitem__(self, index: int) -> Any:
        return self._data[index]

    def __len__(self) -> int:
        return len(self._data)


class TransformDataset(Dataset):
    """``fn`` applied to each sample on access (tuple samples are unpacked into ``fn``'s args)."""

    def __init__(self, dataset: Any, fn: Callable):
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        self.dataset, self.fn = dataset, fn

    def __getitem__(self, index: int) -> Any:
        return _apply(self.fn, self.dataset[index])

    def __len__(self) -> int:
        return len(self.dataset)


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Any, indices: Sequence[int]):
        n = len(dataset)
        idx: List[int] = [int(i) for i in indices]
        bad = [i for i in idx if not 0 <= i < n]
        if bad:
            raise IndexError(f"Subset indices out of range [0, {n}): {bad[:5]}")
        self.dataset, self.indices = dataset, idx

    def __getitem__(self, index: int) -> Any:
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)
