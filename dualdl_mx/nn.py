"""Index of dualdl's MXNet/Gluon modules (``backend.module("nn")``): every name, from its family file.

Nothing in ``dualdl_mx`` imports this module; the classes live in ``base`` (``Module``, ``Layer``,
``make_parameter``), ``linear``, ``embedding``, ``conv``, ``pool``, ``norm``, ``norm_grouped``, ``activation``,
``dropout``, ``resample``, ``containers``, ``rnn`` and ``transformer``. A layer class registers by
its class name (``base.Layer``'s ``__init_subclass__``, dualdl/nn/registry.py), which sets
``_dl_layer``; the layers here are the registered ones.
"""
from __future__ import annotations

from importlib import import_module as _import_module

from dualdl.nn.registry import adapter_layers as _adapter_layers
from .base import Layer, Module, is_ndarray, make_parameter, shape_error, factory_kwargs

for _family in ("linear", "embedding", "conv", "conv_lazy", "pool", "pool_more", "norm", "norm_grouped", "norm_more",
                "activation", "activation_more", "dropout", "resample", "padding", "containers", "rnn",
                "attention", "transformer"):
    _import_module(f"{__package__}.{_family}")      # defining its classes registers them
globals().update(_adapter_layers(__package__))

__all__ = ["Module", "Layer", "make_parameter", "factory_kwargs", *_adapter_layers(__package__)]
