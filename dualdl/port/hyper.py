"""What no tensor reveals but the layers' settings do: norm eps, conv stride/padding/dilation/
groups, activation flavour (GELU erf vs tanh). Read from torch module attributes and Gluon
blocks' ``_kwargs`` / gluonnlp's ``_approximate``, in one vocabulary, so paired layers can be
compared setting by setting."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Tuple

__all__ = ["torch_hyper", "gluon_hyper", "activation_kind"]


def _tuple(v: Any, n: int = 2) -> Tuple:
    if isinstance(v, (list, tuple)):
        return tuple(int(x) for x in v)
    return (int(v),) * n


def _conv(kernel, stride, dilation, groups, padding) -> Dict[str, Any]:
    n = len(kernel)
    out = dict(kernel=_tuple(kernel, n), stride=_tuple(stride, n), dilation=_tuple(dilation, n),
               groups=int(groups))
    if padding is not None:   # torch padding="same"/"valid" is not compared
        out["padding"] = _tuple(padding, n)
    return out


def _settings(layers: Iterable[Tuple[str, Any]], read: Callable[[Any], Dict[str, Any]]
              ) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    for path, layer in layers:
        h = read(layer)
        kind = activation_kind(layer)
        if kind:
            h["activation"] = kind
        if h:
            out[path] = h
    return out


def torch_hyper(model: Any) -> Dict[str, Dict[str, Any]]:
    """{module path: settings} for norms, convs and activations of a torch model."""
    import torch.nn as nn

    def read(m):
        if isinstance(m, (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase)):
            return {"eps": float(m.eps)}
        if isinstance(m, nn.modules.conv._ConvNd):
            return _conv(m.kernel_size, m.stride, m.dilation, m.groups,
                         None if isinstance(m.padding, str) else m.padding)
        return {}
    return _settings(model.named_modules(), read)


def gluon_hyper(blocks: Iterable[Tuple[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """{block path: settings} in the same vocabulary as :func:`torch_hyper`."""
    def read(b):
        kw = getattr(b, "_kwargs", None) or {}
        if "eps" in kw and "norm" in type(b).__name__.lower():
            return {"eps": float(kw["eps"])}
        if "kernel" in kw and "stride" in kw and "num_filter" in kw:
            return _conv(kw["kernel"], kw["stride"], kw.get("dilate", 1), kw.get("num_group", 1),
                         kw.get("pad", 0))
        return {}
    return _settings(blocks, read)


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
