"""Reading and writing in any format: the reader chosen by the file's content, the writer by
``format`` or the file's extension."""
from __future__ import annotations

import os
from typing import Dict, Mapping, Optional

import numpy as np

from .detect import FORMATS, detect_format, format_for_path
from .errors import PathLike, Tensors
from .gluon_params import read_gluon, write_gluon
from .safetensors import read_safetensors, read_safetensors_metadata, write_safetensors
from .torch_files import read_torch, write_torch

__all__ = ["read_tensors", "read_metadata", "write_tensors"]

_READERS = {"safetensors": read_safetensors, "torch": read_torch, "gluon": read_gluon}


def _unknown(fmt: str) -> ValueError:
    return ValueError(f"unknown format {fmt!r}; choose from {FORMATS}")


def read_tensors(path: PathLike, format: Optional[str] = None) -> Tensors:
    """Read every tensor of a file as numpy arrays, whatever the format (detected by content).

    torch files: a plain state dict, or a checkpoint dict whose ``state_dict`` / ``model`` /
    ``model_state_dict`` / ``net`` entry is the state dict. Gluon files: ``export()``'s
    ``arg:``/``aux:`` prefixes are removed; a nameless list gets keys ``"0"``, ``"1"``...
    """
    fmt = format or detect_format(path)
    reader = _READERS.get(fmt)
    if reader is None:
        raise _unknown(fmt)
    return reader(os.fspath(path))


def read_metadata(path: PathLike) -> Dict[str, str]:
    """The string metadata of a safetensors file ({} for other formats or none stored)."""
    if detect_format(path) != "safetensors":
        return {}
    return read_safetensors_metadata(os.fspath(path))


def write_tensors(path: PathLike, tensors: Mapping[str, np.ndarray], format: Optional[str] = None,
                  metadata: Optional[Dict[str, str]] = None) -> str:
    """Write in ``format`` (default: from the extension); returns the format used. ``metadata``
    is stored by safetensors only."""
    fmt = format or format_for_path(path)
    if fmt == "safetensors":
        write_safetensors(path, tensors, metadata)
    elif fmt == "torch":
        write_torch(path, tensors)
    elif fmt == "gluon":
        write_gluon(path, tensors)
    else:
        raise _unknown(fmt)
    return fmt
