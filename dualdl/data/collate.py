"""Collate functions: a list of samples -> one numpy batch (same structure, batch axis first).

Batches are built in numpy, in the worker or main process, and become native tensors only in
the main process (:func:`to_tensors`), so both backends get bit-identical batches and workers
never touch a framework. dtype rule: numpy dtypes are kept exactly; Python ``float`` -> float64,
``int`` -> int64, ``bool`` -> bool, as both torch's ``default_collate`` and Gluon's
``default_batchify_fn`` do (pass ``float_dtype="float32"`` to the DataLoader to cast floats).
"""
from __future__ import annotations

import collections.abc as cabc
from numbers import Number
from typing import Any, List, Optional, Sequence, Union

import numpy as np

__all__ = ["default_collate", "pad_collate", "to_tensors"]


def _is_native_tensor(x: Any) -> bool:
    from ..tensor import is_tensor
    return not isinstance(x, (np.ndarray, Number, str, bytes)) and is_tensor(x)


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_collate(samples: Sequence[Any]) -> Any:
    """Stack samples: arrays -> ``np.stack``; numbers -> 1-D array; tuples/lists/namedtuples/dicts
    -> the same structure of collated fields; strings -> a list. Arrays of different shapes raise
    a ValueError pointing to :func:`pad_collate`."""
    if len(samples) == 0:
        raise ValueError("cannot collate an empty list of samples")
    first = samples[0]
    if _is_native_tensor(first):
        from ..tensor import to_numpy
        samples = [to_numpy(s) for s in samples]
        first = samples[0]
    if isinstance(first, np.ndarray):
        shapes = [np.shape(s) for s in samples]
        for k, s in enumerate(shapes):
            if s != shapes[0]:
                raise ValueError(
                    f"default_collate: samples have different shapes ({shapes[0]} at position 0, {s} at "
                    f"position {k} of the batch); for variable-length sequences use "
                    f"collate_fn=dualdl.data.pad_collate(), or a BucketBatchSampler with it")
        return np.stack(samples)
    if isinstance(first, (np.generic, Number)):
        return np.asarray(samples)
    if isinstance(first, (str, bytes)):
        return list(samples)
    if isinstance(first, cabc.Mapping):
        return {k: default_collate([s[k] for s in samples]) for k in first}
    if isinstance(first, (tuple, list)):
        n = len(first)
        if any(len(s) != n for s in samples):
            raise ValueError(f"default_collate: samples have different numbers of fields "
                             f"({sorted({len(s) for s in samples})})")
        fields = [default_collate(list(f)) for f in zip(*samples)]
        if _is_namedtuple(first):
            return type(first)(*fields)
        return tuple(fields) if isinstance(first, tuple) else fields
    if first is None:
        return None
    raise TypeError(f"default_collate: cannot collate samples of type {type(first).__name__}; "
                    f"expected numpy arrays, numbers, strings, or tuples/lists/dicts of them")


_LAYOUTS = {"NTC": "NTC", "NT": "NTC", "TNC": "TNC", "TN": "TNC"}


class pad_collate:
    """Collate variable-length sequences: each sequence field is padded to the longest in the batch
    and followed by its lengths, e.g. ``(x, y)`` samples -> ``(x_padded, x_lengths, y)`` and CTC
    ``(features, label)`` samples -> ``(x_padded, x_lengths, label_padded, label_lengths)``; a bare
    array sample -> ``(padded, lengths)``.

    - ``pad_value``: one value, or one per field (e.g. ``(0, -1)``: Gluon's CTCLoss pads labels
      with -1; torch's ctc_loss reads only the first ``length`` labels, so any value works).
    - ``layout``: ``"NTC"`` (batch first, torch ``batch_first=True``, Gluon ``layout='NTC'``) or
      ``"TNC"`` (time first, torch's RNN default and Gluon's RNN default), or one per field;
      ``"NT"``/``"TN"`` are accepted as aliases for 1-D sequences.
    - ``pad_fields``: which fields are sequences (default: every field whose samples are arrays
      of 1 or more dims; the rest are stacked with :func:`default_collate`).
    - lengths are ``length_dtype`` (default int64, what ``pack_padded_sequence`` wants).
    The time axis is axis 0 of each sample; trailing dims must agree.
    """

    def __init__(self, pad_value: Union[Number, Sequence[Number]] = 0,
                 layout: Union[str, Sequence[str]] = "NTC",
                 pad_fields: Optional[Sequence[int]] = None, length_dtype: Any = "int64"):
        self.pad_value = pad_value
        layouts = [layout] if isinstance(layout, str) else list(layout)
        for lay in layouts:
            if not isinstance(lay, str) or lay.upper() not in _LAYOUTS:
                raise ValueError(f"layout must be 'NTC' or 'TNC' (or 'NT'/'TN'), got {lay!r}")
        self.layout = layout if isinstance(layout, str) else tuple(layout)
        self.pad_fields = None if pad_fields is None else tuple(int(i) for i in pad_fields)
        self.length_dtype = np.dtype(length_dtype)
        if self.length_dtype.kind not in "iu":
            raise ValueError(f"length_dtype must be an integer dtype, got {self.length_dtype}")

    def _per_field(self, value: Any, j: int, what: str) -> Any:
        if isinstance(value, (str, Number, np.generic)):
            return value
        try:
            return value[j]
        except (IndexError, KeyError, TypeError):
            raise ValueError(f"pad_collate: no {what} given for field {j} ({what}={value!r})") from None

    def _pad(self, arrs: List[np.ndarray], j: int):
        if any(a.ndim == 0 for a in arrs):
            raise ValueError(f"pad_collate: field {j} has 0-d samples; a sequence field needs a time axis")
        tail = arrs[0].shape[1:]
        for k, a in enumerate(arrs):
            if a.shape[1:] != tail:
                raise ValueError(f"pad_collate: field {j} samples differ beyond the time axis: "
                                 f"{arrs[0].shape} at position 0, {a.shape} at position {k}")
        lengths = np.array([a.shape[0] for a in arrs], dtype=self.length_dtype)
        dtype = np.result_type(*arrs)
        value = self._per_field(self.pad_value, j, "pad_value")
        if dtype.kind in "iub" and np.asarray(value).astype(dtype) != value:
            raise ValueError(f"pad_collate: pad_value {value!r} does not fit field {j}'s dtype {dtype}")
        out = np.full((len(arrs), int(lengths.max(initial=0))) + tail, value, dtype=dtype)
        for k, a in enumerate(arrs):
            out[k, :a.shape[0]] = a
        if _LAYOUTS[self._per_field(self.layout, j, "layout").upper()] == "TNC":
            out = np.ascontiguousarray(np.swapaxes(out, 0, 1))
        return out, lengths

    def __call__(self, samples: Sequence[Any]) -> tuple:
        if len(samples) == 0:
            raise ValueError("cannot collate an empty list of samples")
        single = not isinstance(samples[0], (tuple, list))
        columns = [list(samples)] if single else [list(c) for c in zip(*samples)]
        out: list = []
        for j, col in enumerate(columns):
            if _is_native_tensor(col[0]):
                from ..tensor import to_numpy
                col = [to_numpy(c) for c in col]
            is_seq = isinstance(col[0], np.ndarray) and col[0].ndim >= 1
            if self.pad_fields is not None:
                is_seq = j in self.pad_fields
            if is_seq:
                out.extend(self._pad([np.asarray(c) for c in col], j))
            else:
                out.append(default_collate(col))
        return tuple(out)

    def __repr__(self) -> str:
        return (f"pad_collate(pad_value={self.pad_value!r}, layout={self.layout!r}, "
                f"pad_fields={self.pad_fields!r})")


def to_tensors(batch: Any, backend: Optional[str] = None, device: Any = None,
               float_dtype: Any = None) -> Any:
    """Every numpy array in ``batch`` (nested tuples/lists/dicts) -> a native tensor of ``backend``
    via ``dualdl.from_numpy`` (copies, keeps dtypes; floating arrays cast to ``float_dtype`` if
    given). Arrays of dtypes no backend holds (strings, objects) and other leaves are returned as is."""
    from ..tensor import SUPPORTED_DTYPES, from_numpy

    def conv(x: Any) -> Any:
        if isinstance(x, np.ndarray):
            if x.dtype not in SUPPORTED_DTYPES:
                return x
            dt = float_dtype if float_dtype is not None and x.dtype.kind == "f" else None
            return from_numpy(x, device=device, dtype=dt, backend=backend)
        if isinstance(x, cabc.Mapping):
            return {k: conv(v) for k, v in x.items()}
        if _is_namedtuple(x):
            return type(x)(*(conv(v) for v in x))
        if isinstance(x, (tuple, list)):
            return type(x)(conv(v) for v in x)
        return x

    return conv(batch)
