"""What no tensor reveals but the layers' settings do: norm eps, conv stride/padding/dilation/
groups, activation flavour (GELU erf vs tanh). Read from torch module attributes and Gluon
blocks' ``_kwargs`` / gluonnlp's ``_approximate``, in one vocabulary, so paired layers can be
compared setting by setting."""
from __future__ import annotations

from typing import Any, Dict, Iterable, Tuple

__all__ = ["torch_hyper", "gluon_hyper", "activation_kind"]


def _tuple(v: Any, n: int = 2) -> Tuple:
    if isinstance(v, (list, tuple)):
        return tuple(int(x) for x in v)
    return (int(v),) * n


def torch_hyper(model: Any) -> Dict[str, Dict[str, Any]]:
    """{module path: settings} for norms, convs, pools and activations of a torch model."""
    import torch.nn as nn
    out: Dict[str, Dict[str, Any]] = {}
    for path, m in model.named_modules():
        h: Dict[str, Any] = {}
        if isinstance(m, (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase)):
            h["eps"] = float(m.eps)
        elif isinstance(m, nn.modules.conv._ConvNd):
            n = len(m.kernel_size)
            h.update(kernel=_tuple(m.kernel_size, n), stride=_tuple(m.stride, n),
                     dilation=_tuple(m.dilation, n), groups=int(m.groups))
            if not isinstance(m.padding, str):
                h["padding"] = _tuple(m.padding, n)
        kind = activation_kind(m)
        if kind:
            h["activation"] = kind
        if h:
            out[path] = h
    return out


def gluon_hyper(blocks: Iterable[Tuple[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """{block path: settings} in the same vocabulary as :func:`torch_hyper`."""
    out: Dict[str, Dict[str, Any]] = {}
    for path, b in blocks:
        kw = getattr(b, "_kwargs", None) or {}
        h: Dict[str, Any] = {}
        name = type(b).__name__
        if "eps" in kw and ("Norm" in name or "norm" in name.lower()):
            h["eps"] = float(kw["eps"])
        elif "kernel" in kw and "stride" in kw and "num_filter" in kw:
            n = len(kw["kernel"])
            h.update(kernel=_tuple(kw["kernel"], n), stride=_tuple(kw["stride"], n),
                     dilation=_tuple(kw.get("dilate", 1), n), groups=int(kw.get("num_group", 1)),
                     padding=_tuple(kw.get("pad", 0), n))
        kind = activation_kind(b)
        if kind:
            h["activation"] = kind
        if h:
            out[path] = h
    return out


_TANH_GELU = ("NewGELUActivation", "GELUTanh", "PytorchGELUTanh", "FastGELUActivation")


def activation_kind(layer: Any) -> str:
    """'gelu_erf' / 'gelu_tanh' / 'gelu_other' for GELU layers of either framework, '' else."""
    name = type(layer).__name__
    if "GELU" not in name.upper():
        return ""
    if isinstance(getattr(layer, "approximate", None), str):      # torch.nn.GELU
        return "gelu_tanh" if layer.approximate == "tanh" else "gelu_erf"
    if hasattr(layer, "_approximate"):                             # gluonnlp GELU
        return "gelu_tanh" if layer._approximate else "gelu_erf"
    if name in _TANH_GELU or name == "AccurateGELUActivation":     # transformers
        return "gelu_tanh"
    if name in ("GELUActivation", "GELU"):                         # transformers, mxnet.gluon.nn
        return "gelu_erf"
    return "gelu_other"
