"""State-dict key names across wrappers and frameworks.

Hides two naming differences: DataParallel/DDP's ``module.`` prefix (present or not, nested or
not), and Gluon's structural names against torch's for the same layers (``gamma``/``beta`` vs
``weight``/``bias``; Gluon's ``_unfused.{k}.l_cell.i2h_weight`` vs torch's ``weight_ih_l{k}``).
"""
from __future__ import annotations

import re
from typing import Dict, Iterable, Mapping, Tuple

import numpy as np

from .errors import Tensors

__all__ = ["strip_prefix", "add_prefix", "align_module_prefix", "gluon_to_torch_names",
           "torch_to_gluon_names", "strip_export_prefix"]

_EXPORT_PREFIX = re.compile(r"^(arg|aux):")
_GLUON_RNN = re.compile(r"^(?P<pre>.*?)_unfused\.(?P<k>\d+)\.(?:(?P<d>[lr])_cell\.)?"
                        r"(?P<w>i2h|h2h)_(?P<t>weight|bias)$")
_GLUON_CELL = re.compile(r"^(?P<pre>.*?)(?P<w>i2h|h2h)_(?P<t>weight|bias)$")
_TORCH_RNN = re.compile(r"^(?P<pre>.*?)(?P<t>weight|bias)_(?P<w>ih|hh)(?:_l(?P<k>\d+)(?P<r>_reverse)?)?$")


def strip_export_prefix(key: str) -> str:
    """``key`` without the ``arg:``/``aux:`` prefix Gluon's ``export()`` puts on parameter names."""
    return _EXPORT_PREFIX.sub("", key)


def _rekey(tensors_or_keys, fn):
    if isinstance(tensors_or_keys, Mapping):
        out = {}
        for k, v in tensors_or_keys.items():
            nk = fn(k)
            if nk in out:
                raise ValueError(f"renaming {k!r} to {nk!r} collides with another key")
            out[nk] = v
        return out
    return [fn(k) for k in tensors_or_keys]


def strip_prefix(tensors_or_keys, prefix: str = "module."):
    """Remove ``prefix`` from every key that starts with it (dict -> new dict, keys -> list)."""
    return _rekey(tensors_or_keys, lambda k: k[len(prefix):] if k.startswith(prefix) else k)


def add_prefix(tensors_or_keys, prefix: str = "module."):
    """Prepend ``prefix`` to every key that does not already start with it."""
    return _rekey(tensors_or_keys, lambda k: k if k.startswith(prefix) else prefix + k)


def align_module_prefix(tensors: Mapping[str, np.ndarray], target_keys: Iterable[str]) -> Tensors:
    """Add or strip DataParallel/DDP ``module.`` prefixes so ``tensors``' keys match ``target_keys``.

    A state dict saved from ``nn.DataParallel(m)`` has ``module.conv.weight``; ``m`` expects
    ``conv.weight`` (and the other way round). Works with nested wrappers (``module.module.``).
    """
    target = list(target_keys)

    def depth(keys):
        keys = list(keys)
        d = 0
        while keys and all(k.startswith("module.") for k in keys):
            keys = [k[7:] for k in keys]
            d += 1
        return d
    src_d, dst_d = depth(tensors), depth(target)
    out = dict(tensors)
    for _ in range(max(0, src_d - dst_d)):
        out = strip_prefix(out, "module.")
    for _ in range(max(0, dst_d - src_d)):
        out = {"module." + k: v for k, v in out.items()}
    return out


def _split(key: str) -> Tuple[str, str]:
    i = key.rfind(".")
    return (key[:i + 1], key[i + 1:]) if i >= 0 else ("", key)


def gluon_to_torch_names(tensors: Mapping[str, np.ndarray]) -> Tensors:
    """Rename Gluon ``save_parameters`` keys to the names torch uses for the same layers.

    Norm layers: ``gamma``/``beta`` -> ``weight``/``bias``; RNN layers:
    ``_unfused.{k}.l_cell.i2h_weight`` -> ``weight_ih_l{k}`` (``r_cell`` -> ``_reverse``); RNN
    cells: ``i2h_weight`` -> ``weight_ih``. Gate order is the same in both (no permutation).
    Exported-model ``arg:``/``aux:`` prefixes are removed.
    """
    def rename(key: str) -> str:
        key = strip_export_prefix(key)
        m = _GLUON_RNN.match(key)
        if m:
            rev = "_reverse" if m["d"] == "r" else ""
            return f"{m['pre']}{m['t']}_{m['w'][0]}h_l{m['k']}{rev}"
        pre, leaf = _split(key)
        m = _GLUON_CELL.match(leaf)
        if m and not m["pre"]:
            return f"{pre}{m['t']}_{m['w'][0]}h"
        return pre + {"gamma": "weight", "beta": "bias"}.get(leaf, leaf)
    return _rekey(tensors, rename)


def torch_to_gluon_names(tensors: Mapping[str, np.ndarray]) -> Tensors:
    """Rename torch state-dict keys to Gluon ``save_parameters`` keys (inverse of
    :func:`gluon_to_torch_names`). A layer is a norm layer when it has running stats or a 1-D
    ``weight``; its weight/bias become gamma/beta. ``num_batches_tracked`` (torch-only) is dropped."""
    layers: Dict[str, Dict[str, np.ndarray]] = {}
    for k, v in tensors.items():
        pre, leaf = _split(k)
        layers.setdefault(pre, {})[leaf] = np.asarray(v)
    out: Tensors = {}
    for k, v in tensors.items():
        pre, leaf = _split(k)
        if leaf == "num_batches_tracked":
            continue
        sib = layers[pre]
        m = _TORCH_RNN.match(leaf)
        if m:
            if m["k"] is not None:  # Gluon names cells l_cell/r_cell only when bidirectional
                bidir = any(n.endswith("_reverse") for n in sib)
                cell = ("r_cell." if m["r"] else "l_cell.") if bidir else ""
                w = "i2h" if m["w"] == "ih" else "h2h"
                out[f"{pre}_unfused.{m['k']}.{cell}{w}_{m['t']}"] = v
            else:
                out[f"{pre}{'i2h' if m['w'] == 'ih' else 'h2h'}_{m['t']}"] = v
            continue
        is_norm = "running_mean" in sib or ("weight" in sib and sib["weight"].ndim == 1)
        if is_norm and leaf in ("weight", "bias"):
            leaf = "gamma" if leaf == "weight" else "beta"
        out[pre + leaf] = v
    return out
