"""Saving and loading model weights in one neutral format, readable from either backend.

``dl.save(model, "net.safetensors")`` writes the model's :func:`dualdl.state_dict` (parameters and
buffers, structural names, exact dtypes) as safetensors, atomically: a crash mid-save leaves the
previous file intact. ``dl.load(model, path)`` reads dualdl's safetensors, torch ``.pt/.pth``
state dicts (``torch.load(weights_only=True)``: never unpickles arbitrary objects) and Gluon
``save_parameters`` files, normalises DataParallel/DDP ``module.`` prefixes in both directions,
and loads all-or-nothing (:func:`dualdl.load_state_dict`).

Memory: saving streams each tensor to the file from a zero-copy view (torch) or a one-tensor
``asnumpy()`` (MXNet), so the peak growth is at most the largest tensor; loading reads each
tensor straight into its own array (peak: the model's size once), validates them all against
the model, then assigns.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

from . import formats
from .state import LoadResult, StateDictError, backend_of_model, load_state_dict, state_dict

__all__ = ["save", "load"]

PathLike = Union[str, "os.PathLike[str]"]


def save(model: Any, path: PathLike, metadata: Optional[Dict[str, str]] = None,
         format: Optional[str] = None) -> str:
    """Write ``model``'s state dict to ``path``. The format comes from ``format`` or the extension
    (``.safetensors`` (default for unknown extensions), ``.pt``/``.pth``, ``.params``); returns it."""
    import dualdl
    # native tensors (views, no copies): the writers turn one tensor at a time into bytes
    tensors = state_dict(model)
    meta = {"format": "dualdl", "dualdl_version": dualdl.__version__,
            "backend": backend_of_model(model).name, "model": type(model).__name__}
    meta.update(metadata or {})
    fmt = format
    if fmt is None:
        try:
            fmt = formats.format_for_path(path)
        except ValueError:
            fmt = "safetensors"
    return formats.write_tensors(path, tensors, fmt, meta)     # the metadata goes to safetensors only


def load(model: Any, path: PathLike, strict: bool = True) -> LoadResult:
    """Load weights from any supported file into ``model`` (all-or-nothing).

    Gluon files written by a native Gluon model (``gamma``/``beta``, ``_unfused`` RNN keys) are
    renamed to torch's vocabulary when that is what makes them fit.
    """
    fmt = formats.detect_format(path)
    tensors = formats.read_tensors(path, fmt)
    try:
        return load_state_dict(model, tensors, strict=strict)
    except StateDictError as first:
        if fmt != "gluon":
            raise StateDictError(f"{os.fspath(path)}: {first}") from None
        try:
            return load_state_dict(model, formats.gluon_to_torch_names(tensors), strict=strict)
        except StateDictError:
            raise StateDictError(f"{os.fspath(path)}: {first}") from None
