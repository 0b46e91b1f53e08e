"""The API table of the project converter: each Gluon API a script names, by its qualified name,
and what the converted script says instead.

Operators are not listed here: ``mx.nd.<op>`` / ``nd.<op>`` / ``F.<op>`` (in ``hybrid_forward``)
calls go to the translator's op registry (:func:`dualdl.port.translate.oplib.lookup`), so an
``mx.nd.relu`` in source and a ``relu`` node of a traced graph are one entry. This table holds the
rest: blocks, losses, the Trainer, data, metrics, initializers, devices, autograd. Targets name
``torch`` or ``g2t`` (the project's generated ``gluon2torch.py``, torch and numpy only, built from
:mod:`dualdl.port.project.torch_runtime` and the recipe's torch-only sources).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ["API", "METHODS", "TODO", "ATTRS", "CALLS", "STATEMENTS", "lookup_api", "normalize",
           "ROOTS"]

#: the packages whose names the converter resolves (anything else is left alone)
ROOTS = ("mxnet", "gluonnlp", "gluoncv")

_ALIASES = (("mxnet.ndarray.", "mxnet.nd."), ("mxnet.gluon.metric.", "mxnet.metric."),
            ("mxnet.initializer.", "mxnet.init."), ("mxnet.context.", "mxnet."),
            ("mxnet.gluon.nn.basic_layers.", "mxnet.gluon.nn."),
            ("mxnet.gluon.nn.conv_layers.", "mxnet.gluon.nn."),
            ("mxnet.gluon.block.", "mxnet.gluon."), ("mxnet.gluon.trainer.", "mxnet.gluon."),
            ("mxnet.gluon.data.vision.datasets.", "mxnet.gluon.data.vision."),
            ("mxnet.gluon.data.dataset.", "mxnet.gluon.data."),
            ("mxnet.gluon.data.dataloader.", "mxnet.gluon.data."),
            ("mxnet.autograd.", "mxnet.autograd."))


def normalize(qualified: str) -> str:
    """One spelling per API (``mx.ndarray.relu`` is ``mx.nd.relu``, ``mx.gluon.metric`` is
    ``mx.metric``)."""
    for a, b in _ALIASES:
        if qualified.startswith(a):
            return b + qualified[len(a):]
    return qualified


_G = "mxnet.gluon."
_NN = _G + "nn."
#: qualified Gluon name -> the expression that replaces it
API: Dict[str, str] = {
    # devices and randomness
    "mxnet.cpu": "g2t.cpu", "mxnet.gpu": "g2t.gpu", "mxnet.num_gpus": "g2t.num_gpus",
    "mxnet.random.seed": "torch.manual_seed", "mxnet.nd.random.seed": "torch.manual_seed",
    # arrays made from data
    "mxnet.nd.array": "g2t.array", "mxnet.nd.NDArray": "torch.Tensor",
    "mxnet.nd.zeros": "g2t.zeros", "mxnet.nd.ones": "g2t.ones", "mxnet.nd.waitall": "g2t.waitall",
    # schedules
    "mxnet.lr_scheduler.FactorScheduler": "g2t.FactorScheduler",
    "mxnet.lr_scheduler.MultiFactorScheduler": "g2t.MultiFactorScheduler",
    "mxnet.lr_scheduler.PolyScheduler": "g2t.PolyScheduler",
    "mxnet.lr_scheduler.CosineScheduler": "g2t.CosineScheduler",
    # autograd
    "mxnet.autograd.record": "g2t.record", "mxnet.autograd.pause": "torch.no_grad",
    "mxnet.autograd.predict_mode": "g2t.predict_mode", "mxnet.autograd.train_mode": "g2t.record",
    "mxnet.autograd.is_training": "g2t.is_training", "mxnet.autograd.backward": "g2t.backward",
    # blocks and layers
    _G + "Block": "torch.nn.Module", _G + "HybridBlock": "torch.nn.Module",
    _NN + "Block": "torch.nn.Module", _NN + "HybridBlock": "torch.nn.Module",
    _NN + "Sequential": "g2t.Sequential", _NN + "HybridSequential": "g2t.Sequential",
    _NN + "Dense": "g2t.Dense", _NN + "Conv2D": "g2t.Conv2D", _NN + "MaxPool2D": "g2t.MaxPool2D",
    _NN + "AvgPool2D": "g2t.AvgPool2D", _NN + "GlobalAvgPool2D": "g2t.GlobalAvgPool2D",
    _NN + "Flatten": "torch.nn.Flatten", _NN + "Activation": "g2t.Activation",
    _NN + "Dropout": "g2t.Dropout", _NN + "BatchNorm": "g2t.BatchNorm",
    # losses
    _G + "loss.SoftmaxCrossEntropyLoss": "g2t.SoftmaxCrossEntropyLoss",
    _G + "loss.SoftmaxCELoss": "g2t.SoftmaxCrossEntropyLoss",
    _G + "loss.L2Loss": "g2t.L2Loss", _G + "loss.L1Loss": "g2t.L1Loss",
    # training
    _G + "Trainer": "g2t.Trainer", _G + "utils.split_and_load": "g2t.split_and_load",
    # data
    _G + "data.DataLoader": "g2t.DataLoader", _G + "data.ArrayDataset": "g2t.ArrayDataset",
    _G + "data.Dataset": "g2t.Dataset", _G + "data.vision.MNIST": "g2t.MNIST",
    _G + "data.vision.FashionMNIST": "g2t.FashionMNIST",
    # metrics
    "mxnet.metric.Accuracy": "g2t.Accuracy", "mxnet.metric.TopKAccuracy": "g2t.TopKAccuracy",
    "mxnet.metric.F1": "g2t.F1", "mxnet.metric.MAE": "g2t.MAE", "mxnet.metric.MSE": "g2t.MSE",
    "mxnet.metric.RMSE": "g2t.RMSE", "mxnet.metric.CrossEntropy": "g2t.CrossEntropy",
    "mxnet.metric.Perplexity": "g2t.Perplexity", "mxnet.metric.Loss": "g2t.Loss",
    "mxnet.metric.CompositeEvalMetric": "g2t.CompositeEvalMetric",
    # initializers
    "mxnet.init.Xavier": "g2t.Xavier", "mxnet.init.Normal": "g2t.Normal",
    "mxnet.init.Uniform": "g2t.Uniform", "mxnet.init.Zero": "g2t.Zero",
    "mxnet.init.One": "g2t.One", "mxnet.init.Constant": "g2t.Constant",
}

#: ``obj.method(...)`` -> how the call is written: ``"fn"`` (``g2t.method(obj, ...)``),
#: ``".name"`` (``obj.name(...)``), ``"attr"`` (``obj.name``, no call), ``"drop"`` (the
#: statement goes: Gluon-only bookkeeping)
METHODS: Dict[str, Tuple[str, str]] = {
    "asnumpy": ("fn", "g2t.asnumpy"), "astype": ("fn", "g2t.astype"),
    "asscalar": (".name", "item"), "as_in_context": (".name", "to"), "as_in_ctx": (".name", "to"),
    "copyto": (".name", "to"), "backward": ("fn", "g2t.backward"),
    "collect_params": ("fn", "g2t.collect_params"), "initialize": ("fn", "g2t.initialize"),
    "save_parameters": ("fn", "g2t.save_parameters"),
    "load_parameters": ("fn", "g2t.load_parameters"),
    "attach_grad": ("fn", "g2t.attach_grad"), "hybridize": ("drop", ""),
    "wait_to_read": ("drop", ""),
}

#: names whose methods are listed above but also common on numpy/python objects: converted only
#: when the call has the Gluon signature
TODO: Dict[str, str] = {
    "mxnet.sym": "symbolic graphs: translate the exported model with dualdl translate",
    "mxnet.symbol": "symbolic graphs: translate the exported model with dualdl translate",
    "mxnet.mod": "the Module API has no torch counterpart: rewrite the loop",
    "mxnet.io": "mx.io iterators: use gluon.data / torch.utils.data",
    "mxnet.kv": "kvstore: torch.distributed",
    "mxnet.lr_scheduler": "a Gluon lr_scheduler: dualdl.port.recipe.translate_recipe writes its "
                          "torch scheduler",
}


#: ``x.name`` read (not called, not assigned) on an object that is no module -> the function
#: that replaces it: ``"size": "g2t.size"`` makes ``n = L.size`` ``n = g2t.size(L)`` (MXNet's
#: ``NDArray.size`` is an int, torch's a method)
ATTRS: Dict[str, str] = {"context": "g2t.context"}

#: ``hook(qualified, updated_call, converter)`` -> a new node or None, tried in order on each
#: call of a Gluon name before the op registry and the API table (a domain's own rules, e.g. the
#: numpy interface's positional attributes)
CALLS: List[Callable[[str, Any, Any], Any]] = []
#: ``hook(original_line, updated_line, converter)`` -> a statement or None, tried in order on
#: each simple statement line of a converted file (a domain's statement rules, e.g. the numpy
#: interface's whole-array write outside record())
STATEMENTS: List[Callable[[Any, Any, Any], Any]] = []

#: the domain tables (one file a domain: vision, nlp, rnn, numpy interface), each defining
#: ``API``, ``METHODS`` and ``TODO`` dicts of the same form, and optionally ``ATTRS`` and
#: ``CALLS``; merged below, a name two tables define is refused at import (one entry per API)
DOMAINS = ("table_vision", "table_nlp", "table_rnn", "table_numpy")


def _merge_domains() -> None:
    import importlib
    for dom in DOMAINS:
        mod = importlib.import_module(f"{__package__}.{dom}")
        CALLS.extend(getattr(mod, "CALLS", []))
        STATEMENTS.extend(getattr(mod, "STATEMENTS", []))
        for mine, theirs in ((API, mod.API), (METHODS, mod.METHODS), (TODO, mod.TODO),
                             (ATTRS, getattr(mod, "ATTRS", {}))):
            twice = sorted(set(mine) & set(theirs))
            if twice:
                raise RuntimeError(f"dualdl.port.project.{dom} redefines {twice[:5]}: one "
                                   f"entry per API, in one table")
            mine.update(theirs)


_merge_domains()


def lookup_api(qualified: str) -> Tuple[Optional[str], str]:
    """(replacement expression or None, why not) for a qualified Gluon name."""
    q = normalize(qualified)
    if q in API:
        return API[q], ""
    for prefix, why in TODO.items():
        if q == prefix or q.startswith(prefix + "."):
            return None, why
    return None, "not in dualdl's conversion table"
