"""Parameter names and state dicts that are the same on both backends.

Hides: Gluon's ``collect_params()`` names carry global counters (``dense0_weight``) and BatchNorm
calls its affine parameters ``gamma``/``beta``; torch's ``state_dict`` has structural names and a
``num_batches_tracked`` counter. dualdl models use structural names with torch's vocabulary on both
(``features.0.weight``, ``bn.running_mean``); ``num_batches_tracked`` is left out of
:func:`state_dict` and ignored when loading (dualdl's BatchNorm always uses a fixed momentum).
Keys wrapped by DataParallel/DDP (``module.``) are normalised in both directions.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Tuple

import numpy as np

from .backend import backend_for, backend_of

__all__ = ["state_dict", "load_state_dict", "named_parameters", "backend_of_model",
           "StateDictError", "LoadResult", "normalize_keys"]

IGNORED_SUFFIXES = ("num_batches_tracked",)
WRAPPER_PREFIXES = ("module.",)


class StateDictError(RuntimeError):
    """A state dict does not fit a model. Lists every missing, unexpected and mis-shaped key;
    the model is left unchanged."""


class LoadResult(NamedTuple):
    missing_keys: List[str]
    unexpected_keys: List[str]


def backend_of_model(model: Any):
    """The backend whose framework ``model`` belongs to (torch Module or Gluon Block)."""
    be = backend_of(model, default=None)
    if be is not None and be.module("state").is_model(model):
        return be
    raise TypeError(f"expected a torch.nn.Module or a Gluon Block, got {type(model).__name__}")


def named_parameters(model: Any) -> List[Tuple[str, Any]]:
    """``(name, parameter)`` pairs of the learnable parameters with structural names."""
    return list(model.named_parameters())


def state_dict(model: Any) -> "OrderedDict[str, Any]":
    """Parameters then buffers by structural name, as native tensors (detached)."""
    return backend_of_model(model).module("state").state_dict(model)


def _to_numpy(v: Any) -> np.ndarray:
    if isinstance(v, np.ndarray):
        return v
    if np.isscalar(v):
        return np.asarray(v)
    return backend_for(v).to_numpy(v)


def normalize_keys(keys: List[str], target: List[str]) -> Dict[str, str]:
    """Map source keys onto target keys, adding or stripping a ``module.`` wrapper prefix when
    that makes more of them line up (DataParallel/DDP checkpoints, seed 000's case)."""
    tset = set(target)
    best = {k: k for k in keys}
    best_hits = sum(k in tset for k in keys)
    for pre in WRAPPER_PREFIXES:
        stripped = {k: k[len(pre):] if k.startswith(pre) else k for k in keys}
        added = {k: pre + k for k in keys}
        for cand in (stripped, added):
            hits = sum(v in tset for v in cand.values())
            if hits > best_hits:
                best, best_hits = cand, hits
    return best


def load_state_dict(model: Any, state: Mapping[str, Any], strict: bool = True) -> LoadResult:
    """Load ``state`` (numpy arrays or native tensors of either backend) into ``model``.

    Every problem is reported in one :class:`StateDictError` (missing keys and unexpected keys
    when ``strict``, wrong shapes and unsafe dtype casts always), and nothing is changed unless
    all of it can be loaded. Values are cast to the parameter's dtype (float->float, int->int).
    """
    if not isinstance(state, Mapping):
        raise TypeError(f"load_state_dict expects a mapping of name -> array, got {type(state).__name__}")
    impl = backend_of_model(model).module("state")
    targets = impl.state_targets(model)          # name -> (shape, numpy dtype)
    src = {k: v for k, v in state.items() if not k.endswith(IGNORED_SUFFIXES)}
    rename = normalize_keys(list(src), list(targets))
    arrays: Dict[str, np.ndarray] = {}
    unexpected, bad = [], []
    for k, v in src.items():
        name = rename[k]
        if name not in targets:
            unexpected.append(k)
            continue
        try:
            arr = _to_numpy(v)
        except TypeError as e:
            bad.append(f"{k}: cannot read value ({e})")
            continue
        shape, dtype = targets[name]
        if arr.shape == () and tuple(shape) == (1,):
            arr = arr.reshape(1)     # a 0-d tensor of torch's (a BCELoss's weight) where MXNet 1.x keeps (1,)
        elif arr.shape == (1,) and tuple(shape) == ():
            arr = arr.reshape(())    # and back: MXNet's (1,) for such a buffer into torch's 0-d one
        if tuple(arr.shape) != tuple(shape):
            bad.append(f"{k}: shape {tuple(arr.shape)} in the state dict, {tuple(shape)} in the model")
            continue
        if arr.dtype != dtype and not np.can_cast(arr.dtype, dtype, casting="same_kind"):
            bad.append(f"{k}: dtype {arr.dtype} cannot be cast safely to the model's {dtype}")
            continue
        arrays[name] = np.asarray(arr, dtype=dtype, order="C")   # (ascontiguousarray makes a 0-d array (1,))
    missing = [n for n in targets if n not in arrays and n not in {rename[k] for k in src}]
    problems = list(bad)
    if strict and missing:
        problems.append("missing keys: " + ", ".join(missing))
    if strict and unexpected:
        problems.append("unexpected keys: " + ", ".join(unexpected))
    if problems:
        raise StateDictError(f"cannot load state dict into {type(model).__name__} (nothing was changed):\n  "
                             + "\n  ".join(problems))
    impl.assign(model, arrays)
    return LoadResult(missing, unexpected)
