"""``Embedding`` on MXNet with torch's init, index checks and ``padding_idx``."""
from __future__ import annotations

from typing import Optional

import numpy as np
import mxnet as mx

from dualdl.nn import checks as C
from .base import Layer, is_ndarray

__all__ = ["Embedding"]


class Embedding(Layer):
    """``torch.nn.Embedding``: weight (V, D) ~ N(0, 1) (Gluon: U(+-0.07)); integer indices only;
    an index outside [0, V) raises IndexError (MXNet clips it silently); ``padding_idx`` row is
    zero at init and gets no gradient (Gluon has no padding_idx)."""
    _dl_layer = "Embedding"

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: Optional[int] = None) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        padding_idx = C.check_embedding_padding_idx(self.num_embeddings, padding_idx)
        self.padding_idx = padding_idx
        self.weight = self._dl_new_param("weight", (self.num_embeddings, self.embedding_dim),
                                         init=mx.init.Normal(1.0))
        if padding_idx is not None:
            for d in self.weight.list_data():
                d[padding_idx] = 0

    def _check(self, x) -> None:
        dtype = np.dtype(x.dtype)
        C.check_embedding_dtype(self.num_embeddings, self.embedding_dim, dtype.name,
                                np.issubdtype(dtype, np.integer))
        if x.size:
            lo, hi = (int(v) for v in mx.nd.concat(x.min().reshape((1,)), x.max().reshape((1,)),
                                                   dim=0).asnumpy())           # one sync
            C.check_embedding_range(self.num_embeddings, self.embedding_dim, lo, hi)

    def hybrid_forward(self, F, x, weight):
        if is_ndarray(x):
            self._check(x)
        pi = self.padding_idx
        if pi is not None:          # no gradient into the padding row, as torch
            parts = []
            if pi > 0:
                parts.append(F.slice_axis(weight, axis=0, begin=0, end=pi))
            parts.append(F.BlockGrad(F.slice_axis(weight, axis=0, begin=pi, end=pi + 1)))
            if pi + 1 < self.num_embeddings:
                parts.append(F.slice_axis(weight, axis=0, begin=pi + 1, end=None))
            weight = F.concat(*parts, dim=0) if len(parts) > 1 else parts[0]
        return F.Embedding(x, weight, input_dim=self.num_embeddings, output_dim=self.embedding_dim)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")
