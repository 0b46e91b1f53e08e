"""gluonnlp 0.10's ``data.FixedBucketSampler`` and ``data.batchify`` in torch: the bucket keys
(``ConstWidthBucket``/``LinearWidthBucket``/``ExpWidthBucket``), per-bucket batch sizes and the
in-place ``np.random.shuffle`` of the batch list and of each bucket on numpy's *global* RNG at each
epoch (torch's samplers use torch's RNG and have no buckets), and batchify's padding, which
returns int32 lengths and keeps numpy's dtype rules (``np.full(..., pad_val)`` when no dtype)."""
from __future__ import annotations

import math
from typing import Any, Iterator, List, Optional, Sequence

import numpy as np
import torch


def gluon_bucket_keys(max_lengths: Any, min_lengths: Any, num_buckets: int,
                      scheme: str = "const", bucket_len_step: float = 1.1) -> list:
    """gluonnlp's ``ConstWidthBucket()`` / ``LinearWidthBucket()`` / ``ExpWidthBucket(step)``
    keys for one length per sample (ints) or several (tuples)."""
    single = np.ndim(max_lengths) == 0
    maxl = [max_lengths] if single else list(max_lengths)
    minl = [min_lengths] if single else list(min_lengths)
    cols = []
    for mx_, mn in zip(maxl, minl):
        if scheme == "const":
            width = max((1 + mx_ - mn) // num_buckets, 1)
            col = [max(mx_ - i * width, mn) for i in range(num_buckets)]
        elif scheme == "linear":
            alpha = 2 * float(mx_ - mn - num_buckets) / (num_buckets * (num_buckets + 1))
            col = [int(round(mn + alpha * (((i + 1) * (i + 2)) / 2) + i + 1))
                   for i in range(num_buckets)]
            col[-1] = max(col[-1], mx_)
        elif scheme == "exp":
            step = bucket_len_step
            width0 = (mx_ - mn) * (step - 1) / (math.pow(step, num_buckets) - 1)
            col = [int(round(mn + width0 * (math.pow(step, i + 1) - 1) / (step - 1)))
                   for i in range(num_buckets)]
            col[-1] = max(col[-1], mx_)
        else:
            raise ValueError(f"bucket scheme must be 'const', 'linear' or 'exp', got {scheme!r}")
        cols.append(col)
    return cols[0] if single else [tuple(k) for k in zip(*cols)]


def _match_bucket_keys(bucket_keys: Sequence, lengths: np.ndarray) -> List[List[int]]:
    """Each sample goes to the valid bucket (all key entries >= its lengths) that pads least."""
    keys = np.array(bucket_keys, dtype=np.int32)
    ids: List[List[int]] = [[] for _ in range(len(bucket_keys))]
    keys = keys.reshape((1,) + keys.shape)
    for begin in range(0, len(lengths), 10000):
        diff = keys - np.expand_dims(lengths[begin:begin + 10000], axis=1)
        if diff.ndim == 3:
            valid, pad = np.prod(diff >= 0, axis=2), np.sum(diff, axis=2)
        else:
            valid, pad = diff >= 0, diff
        missing = np.nonzero(valid.sum(axis=1) == 0)[0]
        if len(missing):
            raise ValueError(f"lengths {lengths[begin + missing].tolist()} fit no bucket key "
                             f"{list(bucket_keys)}; give larger bucket keys")
        for i, b in enumerate(np.ma.array(pad, mask=1 - valid).argmin(axis=1).tolist()):
            ids[b].append(i + begin)
    return ids


class GluonFixedBucketSampler(torch.utils.data.Sampler):
    """``gluonnlp.data.FixedBucketSampler`` (``num_shards=0``): batches of indices from length
    buckets, longest bucket first; ``shuffle=True`` shuffles the batch list and each bucket in
    place with ``np.random.shuffle``, so ``np.random.seed(s)`` gives gluonnlp's batches, epoch
    after epoch. Pass it as ``DataLoader(dataset, batch_sampler=...)``."""

    def __init__(self, lengths: Sequence, batch_size: int, num_buckets: Optional[int] = 10,
                 bucket_keys: Optional[Sequence] = None, ratio: float = 0, shuffle: bool = False,
                 use_average_length: bool = False, bucket_scheme: str = "const",
                 bucket_len_step: float = 1.1):
        lens = np.array(lengths, dtype=np.int32)
        if len(lens) == 0 or batch_size <= 0 or ratio < 0 or lens.ndim not in (1, 2) \
                or lens.min() <= 0:
            raise ValueError("lengths must be positive (one int or one tuple per sample), "
                             "batch_size > 0 and ratio >= 0")
        self._lengths, self._shuffle = lens, bool(shuffle)
        single = lens.ndim == 1
        if bucket_keys is None:
            bucket_keys = gluon_bucket_keys(lens.max(axis=0), lens.min(axis=0), num_buckets,
                                            bucket_scheme, bucket_len_step)
        bucket_keys = sorted(set(k if single else tuple(k) for k in bucket_keys))
        ids = _match_bucket_keys(bucket_keys, lens)
        self._bucket_keys = [k for k, s in zip(bucket_keys, ids) if s]
        self._bucket_sample_ids = [s for s in ids if s]
        if not use_average_length:
            scale = [k if single else sum(k) for k in self._bucket_keys]
            self._bucket_batch_sizes = [max(int(max(scale) / float(s) * ratio * batch_size),
                                            batch_size) for s in scale]
        else:
            self._bucket_batch_sizes = [
                max(int(batch_size / (np.mean(lens[s]) + np.std(lens[s]))), 1)
                for s in self._bucket_sample_ids]
        self._batch_infos = []
        for b in range(len(self._bucket_keys) - 1, -1, -1):
            for i in range(0, len(self._bucket_sample_ids[b]), self._bucket_batch_sizes[b]):
                self._batch_infos.append((b, i))

    def __iter__(self) -> Iterator[List[int]]:
        if self._shuffle:
            np.random.shuffle(self._batch_infos)
            for b in range(len(self._bucket_keys)):
                np.random.shuffle(self._bucket_sample_ids[b])
        for b, begin in self._batch_infos:
            yield self._bucket_sample_ids[b][begin:begin + self._bucket_batch_sizes[b]]

    def __len__(self) -> int:
        return len(self._batch_infos)


def _as_torch(arr: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(arr))


class GluonPad:
    """``gluonnlp.data.batchify.Pad``: pad ``axis`` to the longest sample (rounded up to a
    multiple of ``round_to``) with ``pad_val``; ``ret_length=True`` also returns the int32
    lengths. Without ``dtype``: an array's own dtype; list samples are written into
    ``np.full(.., pad_val)`` (pad_val's dtype, so 0 truncates floats) and come out float32."""

    def __init__(self, axis: int = 0, pad_val: Any = 0, ret_length: bool = False,
                 dtype: Optional[str] = None, round_to: Optional[int] = None):
        self._axis, self._pad_val, self._ret_length = axis, pad_val, ret_length
        self._dtype, self._round_to = dtype, round_to

    def __call__(self, data: Sequence) -> Any:
        dtype = self._dtype
        if isinstance(data[0], torch.Tensor):
            data = [d.numpy() for d in data]
        if isinstance(data[0], np.ndarray):
            dtype = data[0].dtype if dtype is None else dtype
        else:
            data = [np.asarray(d) for d in data]
        lengths = [d.shape[self._axis] for d in data]
        size = max(lengths)
        if self._round_to is not None:
            size = self._round_to * math.ceil(size / self._round_to)
        shape = list(data[0].shape)
        shape[self._axis] = size
        ret = np.full((len(data),) + tuple(shape), self._pad_val, dtype=dtype)
        for i, d in enumerate(data):
            sl = [slice(None)] * d.ndim
            sl[self._axis] = slice(0, d.shape[self._axis])
            ret[i][tuple(sl)] = d
        # MXNet's nd.array(.., dtype=None) is float32: list samples without dtype end float32
        out = _as_torch(ret.astype(np.float32 if dtype is None else dtype, copy=False))
        return (out, _as_torch(np.array(lengths, dtype=np.int32))) if self._ret_length else out


class GluonStack:
    """``gluonnlp.data.batchify.Stack``: ``np.asarray(samples)`` (cast to ``dtype``)."""

    def __init__(self, dtype: Optional[str] = None):
        self._dtype = dtype

    def __call__(self, data: Sequence) -> torch.Tensor:
        if isinstance(data[0], torch.Tensor):
            data = [d.numpy() for d in data]
        out = np.asarray(data)
        return _as_torch(out if self._dtype is None else out.astype(self._dtype))


class GluonTuple:
    """``gluonnlp.data.batchify.Tuple``: the i-th function batches the samples' i-th fields."""

    def __init__(self, *fns: Any):
        self._fns = fns

    def __call__(self, data: Sequence) -> tuple:
        if len(data[0]) != len(self._fns):
            raise ValueError(f"each sample must have {len(self._fns)} fields, got {len(data[0])}")
        return tuple(fn([d[i] for d in data]) for i, fn in enumerate(self._fns))


class GluonList:
    """``gluonnlp.data.batchify.List``: the samples as a list."""

    def __call__(self, data: Sequence) -> list:
        return list(data)


class GluonDict:
    """``gluonnlp.data.batchify.Dict``: each key's function batches that key of the samples."""

    def __init__(self, fns: dict):
        self._fns = fns

    def __call__(self, data: Sequence) -> dict:
        return {k: fn([d[k] for d in data]) for k, fn in self._fns.items()}
