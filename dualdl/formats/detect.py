"""Which format a tensor file is, from its first bytes (reading), or should be, from its
extension (writing). An extension never decides how a file is read."""
from __future__ import annotations

import os
import struct

from .errors import EXPECTED, FormatError, PathLike
from .gluon_params import LIST_MAGIC
from .safetensors import truncated_header

__all__ = ["FORMATS", "detect_format", "format_for_path"]

FORMATS = ("safetensors", "torch", "gluon")

_EXTENSIONS = {".params": "gluon", ".pt": "torch", ".pth": "torch", ".bin": "torch",
               ".ckpt": "torch", ".safetensors": "safetensors", ".st": "safetensors"}


def detect_format(path: PathLike) -> str:
    """Return ``"safetensors"``, ``"torch"`` or ``"gluon"`` from the file's first bytes.

    Raises :class:`FormatError` for a missing, empty or unrecognised file.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FormatError(path, "no such file", EXPECTED)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(16)
    if not head:
        raise FormatError(path, "the file is empty", EXPECTED)
    if len(head) >= 8 and struct.unpack("<Q", head[:8])[0] == LIST_MAGIC:
        return "gluon"
    if head[:4] == b"PK\x03\x04":  # torch.save's zip container
        return "torch"
    if head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5:  # a pickle (legacy torch.save)
        return "torch"
    if len(head) >= 9:
        n = struct.unpack("<Q", head[:8])[0]
        if 2 <= n <= size - 8 and head[8:9] == b"{":
            return "safetensors"
        if n > size - 8 and head[8:9] == b"{":
            raise truncated_header(path, n, size)
    raise FormatError(path, f"unrecognised file content (first bytes {head[:8]!r})", EXPECTED)


def format_for_path(path: PathLike) -> str:
    """Format implied by a file name's extension (for writing): .params, .pt/.pth/.bin, .safetensors."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in _EXTENSIONS:
        raise ValueError(f"{os.fspath(path)}: cannot tell the format from the extension {ext!r}; "
                         f"use .params (Gluon), .pt/.pth (torch) or .safetensors")
    return _EXTENSIONS[ext]
