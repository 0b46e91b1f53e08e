"""The torch adapter's ``nn`` index: what ``backend.module("nn")`` returns. Defines nothing; every
layer lives in its family module (linear, conv, ...) and no adapter module imports this one.

Every layer *is* the ``torch.nn`` layer (a thin subclass that adds a shape check whose error names
the layer, the expected layout and the shape received). A layer class registers by its class name
(``base.Layer``'s ``__init_subclass__``, dualdl/nn/registry.py), which sets ``_dl_layer``; the names
here are the registered ones, and ``dualdl_mx.nn`` has a class of the same name for each.
"""
from importlib import import_module as _import_module

from dualdl.nn.registry import adapter_layers as _adapter_layers
from .base import Module, make_parameter, shape_error, factory_kwargs

for _family in ("linear", "embedding", "conv", "conv_lazy", "pool", "pool_more", "norm", "norm_more", "activation",
                "activation_more", "dropout", "resample", "padding",
                "containers", "rnn", "attention", "transformer"):
    _import_module(f"{__package__}.{_family}")      # defining its classes registers them
globals().update(_adapter_layers(__package__))

__all__ = ["Module", "make_parameter", "factory_kwargs", "shape_error", *_adapter_layers(__package__)]
