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
    zero at init and gets no gradient (Gluon has no padding_idx); ``max_norm`` renormalises the
    looked-up rows in place before the lookup, outside autograd, as torch's ``embedding_renorm_``
    (Gluon has no max_norm)."""
    _dl_layer = "Embedding"
    _dl_cannot = {
        "scale_grad_by_freq": ((True,), "MXNet's Embedding has no gradient scaling by index frequency"),
        "sparse": ((True,), "torch's sparse gradient has no MXNet counterpart here (Gluon's "
                            "sparse_grad gives a row_sparse gradient that torch-style optimizers do not take)"),
    }

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: Optional[int] = None,
                 max_norm: Optional[float] = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight=None, _freeze: bool = False, device=None, dtype=None) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        padding_idx = C.check_embedding_padding_idx(self.num_embeddings, padding_idx)
        self.padding_idx = padding_idx
        self.max_norm = None if max_norm is None else float(max_norm)
        self.norm_type = float(norm_type)
        self.scale_grad_by_freq, self.sparse = bool(scale_grad_by_freq), bool(sparse)
        shape = (self.num_embeddings, self.embedding_dim)
        if _weight is not None:
            data = _weight.asnumpy() if isinstance(_weight, mx.nd.NDArray) else np.asarray(_weight)
            if data.shape != shape:
                raise ValueError(f"Embedding({self.num_embeddings}, {self.embedding_dim}): _weight must have "
                                 f"shape {shape}, got {data.shape}")
            self.weight = self._dl_new_param("weight", shape, data=data, requires_grad=not _freeze)
            return
        self.weight = self._dl_new_param("weight", shape, init=mx.init.Normal(1.0), requires_grad=not _freeze)
        if padding_idx is not None:
            for d in self.weight.list_data():
                d[padding_idx] = 0

    def forward(self, x, *args):
        if self.max_norm is not None:
            if not is_ndarray(x):            # traced inside a hybridized parent: no place to renorm
                raise NotImplementedError(
                    f"Embedding({self.num_embeddings}, {self.embedding_dim}, max_norm={self.max_norm}) "
                    f"inside a hybridized block: max_norm rewrites the looked-up rows before each "
                    f"lookup, which a cached MXNet graph cannot do; hybridize the Embedding alone, or "
                    f"keep its parent non-hybridized")
            self._renorm(x)                  # before the (possibly cached) graph reads the weight
        return super().forward(x, *args)

    def _renorm(self, x) -> None:
        """torch's ``embedding_renorm_``: rows looked up by ``x`` whose ``norm_type``-norm exceeds
        ``max_norm`` are scaled by ``max_norm / (norm + 1e-7)``, in place and without gradient."""
        idx = np.unique(x.asnumpy().astype(np.int64).ravel())
        if not idx.size or idx.min() < 0 or idx.max() >= self.num_embeddings:
            return                           # the lookup's range check raises
        p = self.norm_type
        with mx.autograd.pause():
            for w in self.weight.list_data():
                i = mx.nd.array(idx, ctx=w.context, dtype="int64")
                rows = mx.nd.take(w, i)
                norm = (mx.nd.abs(rows) ** p).sum(axis=1, keepdims=True) ** (1.0 / p)
                scale = mx.nd.where(norm > self.max_norm, self.max_norm / (norm + 1e-7), mx.nd.ones_like(norm))
                w[i] = rows * scale

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
        s += f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return s + (f", max_norm={self.max_norm}" if self.max_norm is not None else "")
