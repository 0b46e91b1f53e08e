"""torch ``.pt``/``.pth`` files: pickles, so they are read with ``torch.load(weights_only=True)``
only (an arbitrary object in the file is refused, never executed) and written with ``torch.save``
of an ordered dict of tensors, atomically. torch is imported only here, when such a file is used.
"""
from __future__ import annotations

import collections
import os
import re
import warnings
from typing import Mapping

from ..atomic import atomic_write_file
from ..tensor import SUPPORTED_DTYPES
from .arrays import host, plan
from .errors import FormatError, PathLike, Tensors

__all__ = ["read_torch", "write_torch"]

# where checkpoint dicts ({"state_dict": {...}, "optimizer": ..., "step": t}) keep the state dict
_NESTED_KEYS = ("state_dict", "model_state_dict", "model", "net", "module", "params")


def read_torch(path: str) -> Tensors:
    """The tensors of a torch file: a state dict, a checkpoint dict holding one (first of
    ``_NESTED_KEYS``), a list/tuple (keys "0", "1"...) or one tensor (key "0"). bfloat16 is read
    as float32 (exact: numpy has no bfloat16)."""
    import pickle
    import torch
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as e:
        why = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
        why = why.split("WeightsUnpickler error:", 1)[-1].split("Check the documentation")[0]
        why = why.split(" Please use")[0]
        why = " ".join(why.split())[:200]
        raise FormatError(path, f"refused to unpickle: the file holds something other than tensors "
                          f"and plain containers ({why})", "a torch state dict") from None
    except Exception as e:  # zip damage, truncation, not a torch pickle at all
        raise FormatError(path, f"cannot read as a torch file ({type(e).__name__}: "
                          f"{str(e).strip().splitlines()[0] if str(e).strip() else ''})",
                          "a torch state dict saved with torch.save") from None
    if isinstance(obj, torch.Tensor):
        obj = {"0": obj}
    if isinstance(obj, (list, tuple)):
        obj = {str(i): v for i, v in enumerate(obj)}
    if not isinstance(obj, dict):
        raise FormatError(path, f"holds a {type(obj).__name__}", "a dict of tensors")
    nested = next((k for k in _NESTED_KEYS if isinstance(obj.get(k), dict)
                   and any(isinstance(v, torch.Tensor) for v in obj[k].values())), None)
    if nested is not None:
        obj = obj[nested]
    elif not any(isinstance(v, torch.Tensor) for v in obj.values()):
        raise FormatError(path, f"no tensors found; top-level keys: {sorted(map(str, obj))[:20]}",
                          "a state dict, or a checkpoint dict with a 'state_dict' or 'model' entry")
    out: Tensors = {}
    for k, v in obj.items():
        if isinstance(v, torch.Tensor):
            t = v.detach().cpu()
            if t.dtype == torch.bfloat16:  # numpy has no bfloat16; float32 holds it exactly
                t = t.float()
            out[str(k)] = t.numpy()  # a view: torch.load made these tensors for us alone
    return out


def write_torch(path: PathLike, tensors: Mapping[str, object]) -> None:
    """Write a torch state dict (``torch.save`` of an ordered dict of tensors), atomically.
    torch tensors are saved as they are (no copy); others are converted."""
    import torch
    what = os.fspath(path)
    plans = plan(tensors, what, SUPPORTED_DTYPES)
    sd = collections.OrderedDict()
    for p in plans:
        if isinstance(p.value, torch.Tensor):
            sd[p.name] = p.value.detach().cpu()
        else:
            a = host(p, what)
            sd[p.name] = torch.from_numpy(a if a.flags.writeable else a.copy())
    atomic_write_file(path, lambda f: torch.save(sd, f))
