"""Index of dualdl's MXNet/Gluon modules (``backend.module("nn")``): every name, from its family file.

Nothing in ``dualdl_mx`` imports this module; the classes live in ``base`` (``Module``, ``Layer``,
``make_parameter``), ``linear``, ``embedding``, ``conv``, ``pool``, ``norm``, ``activation``,
``dropout``, ``resample``, ``containers``, ``rnn`` and ``transformer``.
"""
from __future__ import annotations

from .base import Layer, Module, is_ndarray, make_parameter, shape_error, factory_kwargs
from .linear import Flatten, Identity, Linear
from .embedding import Embedding, EmbeddingBag
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d
from .pool import AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from .norm import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d, LayerNorm
from .pool import AdaptiveAvgPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool3d, MaxPool3d
from .activation import ELU, GELU, LeakyReLU, LogSoftmax, ReLU, SiLU, Sigmoid, Softmax, Tanh
from .activation import Hardsigmoid, Hardswish, Mish, PReLU, ReLU6, Softplus
from .dropout import Dropout, Dropout1d, Dropout2d
from .resample import PixelShuffle, ReflectionPad2d, Unflatten, Upsample, ZeroPad2d
from .containers import ModuleDict, ModuleList, Sequential
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNCell
from .transformer import MultiheadAttention, PositionalEncoding, TransformerEncoder, TransformerEncoderLayer
from .transformer import Transformer, TransformerDecoder, TransformerDecoderLayer

__all__ = [
    "Module", "Layer", "make_parameter", "factory_kwargs", "Linear",
    "Conv1d", "Conv2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "Dropout",
    "BatchNorm3d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "Embedding", "Flatten", "Identity",
    "ReLU", "Sigmoid", "Tanh", "GELU", "LeakyReLU", "ELU", "SiLU", "Softmax", "LogSoftmax",
    "Sequential", "ModuleList", "ModuleDict",
    "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "PositionalEncoding",
    "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
    "LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell",
    "PReLU", "ReLU6", "Hardswish", "Hardsigmoid", "Softplus", "Mish", "Dropout1d", "Dropout2d",
    "Upsample", "PixelShuffle", "ZeroPad2d", "ReflectionPad2d", "Unflatten",
    "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "MaxPool3d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
    "EmbeddingBag",
]
