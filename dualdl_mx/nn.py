"""Index of dualdl's MXNet/Gluon modules (``backend.module("nn")``): every name, from its family file.

Nothing in ``dualdl_mx`` imports this module; the classes live in ``base`` (``Module``, ``Layer``,
``make_parameter``), ``linear``, ``embedding``, ``conv``, ``pool``, ``norm``, ``activation``,
``dropout``, ``containers``, ``rnn`` and ``transformer``.
"""
from __future__ import annotations

from .base import Layer, Module, is_ndarray, make_parameter, shape_error, factory_kwargs
from .linear import Flatten, Identity, Linear
from .embedding import Embedding
from .conv import Conv1d, Conv2d
from .pool import AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from .norm import BatchNorm1d, BatchNorm2d, LayerNorm
from .activation import ELU, GELU, LeakyReLU, LogSoftmax, ReLU, SiLU, Sigmoid, Softmax, Tanh
from .dropout import Dropout
from .containers import ModuleDict, ModuleList, Sequential
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNCell
from .transformer import MultiheadAttention, PositionalEncoding, TransformerEncoder, TransformerEncoderLayer

__all__ = [
    "Module", "Layer", "make_parameter", "factory_kwargs", "Linear",
    "Conv1d", "Conv2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "Dropout", "Embedding", "Flatten", "Identity",
    "ReLU", "Sigmoid", "Tanh", "GELU", "LeakyReLU", "ELU", "SiLU", "Softmax", "LogSoftmax",
    "Sequential", "ModuleList", "ModuleDict",
    "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "PositionalEncoding",
    "LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell",
]
