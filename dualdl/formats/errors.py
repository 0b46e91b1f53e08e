"""The error every tensor-file reader raises, and the types the format modules share."""
from __future__ import annotations

import os
from typing import Dict, Union

import numpy as np

__all__ = ["FormatError", "PathLike", "Tensors", "EXPECTED"]

PathLike = Union[str, "os.PathLike[str]"]
Tensors = Dict[str, np.ndarray]

#: what a reader expects when a file is none of the formats
EXPECTED = ("a safetensors file, a torch state dict saved with torch.save, or a Gluon "
            "save_parameters/mx.nd.save file")


class FormatError(ValueError):
    """A tensor file is missing, corrupt, truncated, foreign or holds something other than tensors."""

    def __init__(self, path: PathLike, problem: str, expected: str = ""):
        self.path = os.fspath(path)
        msg = f"{self.path}: {problem}"
        if expected:
            msg += f" (expected {expected})"
        super().__init__(msg)
