"""``Embedding`` on MXNet with torch's init, index checks and ``padding_idx``."""
from __future__ import annotations

from typing import Optional

import numpy as np
import mxnet as mx
from mxnet import nd

from dualdl.nn import checks as C
from dualdl.nn.registry import defined_in
from .base import Layer, is_ndarray
from .fast.host import host_array
from .norm_stats import _CheckedCall


def embedding_renorm(weight, rows: np.ndarray, max_norm: float, norm_type: float) -> None:
    """torch's ``embedding_renorm_``, shared by Embedding and EmbeddingBag: each looked-up row of
    ``weight`` (a Gluon Parameter, every context) whose ``norm_type``-norm exceeds ``max_norm`` is
    scaled by ``max_norm / (norm + 1e-7)``, in place and outside autograd (Gluon has no max_norm)."""
    p = float(norm_type)
    with mx.autograd.pause():
        for d in weight.list_data():
            idx = host_array(rows, d.context, "int64")
            sel = nd.take(d, idx)
            if p in (1.0, 2.0):
                norm = nd.norm(sel, ord=int(p), axis=1, keepdims=True)
            elif p == np.inf:
                norm = nd.max(nd.abs(sel), axis=1, keepdims=True)
            else:
                norm = nd.power(nd.sum(nd.power(nd.abs(sel), p), axis=1, keepdims=True), 1.0 / p)
            scale = nd.where(norm > max_norm, max_norm / (norm + 1e-7), nd.ones_like(norm))
            d[idx] = nd.broadcast_mul(sel, scale)


class Embedding(_CheckedCall):
    """``torch.nn.Embedding``: weight (V, D) ~ N(0, 1) (Gluon: U(+-0.07)); integer indices only;
    an index outside [0, V) raises IndexError (MXNet clips it silently); ``padding_idx`` row is
    zero at init and gets no gradient (Gluon has no padding_idx); ``max_norm`` renormalises the
    looked-up rows in place before the lookup, outside autograd, as torch's ``embedding_renorm_``
    (Gluon has no max_norm). Indices of any shape (a 0-d one excepted: MXNet has none). The
    checks run eagerly in the lookup and, hybridized, at the call (a cached graph would clip
    out-of-range indices silently)."""
    _dl_cannot = {
        "scale_grad_by_freq": (lambda v, bound: bool(v),
                               "MXNet's Embedding has no gradient scaling by index frequency"),
        "sparse": (lambda v, bound: bool(v),
                   "torch's sparse gradient has no MXNet counterpart here (Gluon's sparse_grad gives a "
                   "row_sparse gradient that torch-style optimizers do not take)"),
    }

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: Optional[int] = None,
                 max_norm: Optional[float] = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight=None, _freeze: bool = False, device=None, dtype=None) -> None:
        super().__init__()              # arguments checked by dualdl.nn.arguments (torch's errors)
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        padding_idx = None if padding_idx is None else int(padding_idx) % self.num_embeddings   # as torch
        self.padding_idx = padding_idx
        self.max_norm = None if max_norm is None else float(max_norm)
        self.norm_type = float(norm_type)
        self.scale_grad_by_freq, self.sparse = bool(scale_grad_by_freq), bool(sparse)
        shape = (self.num_embeddings, self.embedding_dim)
        if _weight is not None:
            data = _weight.asnumpy() if isinstance(_weight, mx.nd.NDArray) else np.asarray(_weight)
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
        embedding_renorm(self.weight, idx, self.max_norm, self.norm_type)

    def _dl_check_call(self, x, *args) -> None:
        if self._active:
            self._check(x)

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


def _dtype_of(t) -> tuple:
    """(dtype name, is integer) of an NDArray or None (then an integer placeholder)."""
    if t is None:
        return "int64", True
    dt = np.dtype(t.dtype)
    return dt.name, bool(np.issubdtype(dt, np.integer))


class EmbeddingBag(Layer):
    """``torch.nn.EmbeddingBag`` (Gluon has none: Embedding + sum/mean): weight (V, D) ~ N(0, 1);
    bags as a 2-D input (B, N), or a 1-D input (L,) split at ``offsets``; modes sum/mean/max, empty
    bags give zeros, ``padding_idx`` entries are left out of the reduction (and the count), and
    ``per_sample_weights`` scale the rows (mode 'sum'). max gives its gradient to one row per bag
    and column (MXNet's max would split it between tied duplicates). 1-D input: the bags are
    padded to the longest one from the offsets (read on the host), so a Symbol input with offsets
    is refused; as an NDArray it also runs hybridized. ``max_norm`` renormalises the looked-up rows
    in place before the lookup, as torch (NDArray input only); scale_grad_by_freq and sparse=True
    are declared refused (``_dl_cannot``)."""
    _dl_cannot = {
        "scale_grad_by_freq": (lambda v, bound: bool(v), "no gradient scaling by the inverse bag frequency "
                                                         "on MXNet"),
        "sparse": (lambda v, bound: bool(v), "no row-sparse weight gradients here (Gluon's row_sparse "
                                             "gradient is not what torch-style optimizers take)"),
    }

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: Optional[float] = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight=None, include_last_offset: bool = False,
                 padding_idx: Optional[int] = None, device=None, dtype=None) -> None:
        super().__init__()              # arguments checked by dualdl.nn.arguments (torch's errors)
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        self.padding_idx = None if padding_idx is None else int(padding_idx) % self.num_embeddings
        self.mode, self.include_last_offset = mode, bool(include_last_offset)
        self.max_norm, self.norm_type = max_norm, float(norm_type)
        self.scale_grad_by_freq, self.sparse = bool(scale_grad_by_freq), bool(sparse)
        shape = (self.num_embeddings, self.embedding_dim)
        self.weight = self._dl_new_param("weight", shape, dtype=dtype or "float32", init=mx.init.Normal(1.0))
        for d in self.weight.list_data():
            if _weight is not None:
                d[:] = _weight.asnumpy() if is_ndarray(_weight) else np.asarray(_weight)
            elif self.padding_idx is not None:
                d[self.padding_idx] = 0
        if device is not None:
            self.to(device)

    def _who(self) -> str:
        return C.embedding_bag_name(self.num_embeddings, self.embedding_dim, self.mode)

    def __call__(self, input, offsets=None, per_sample_weights=None):
        return super().__call__(input, offsets, per_sample_weights)

    def forward(self, input, offsets=None, per_sample_weights=None):
        if not is_ndarray(input):
            if self.max_norm is not None:
                raise NotImplementedError(f"{self._who()}: max_norm renormalises weight rows in place, which a "
                                          f"Symbol graph cannot do; call the layer on NDArrays (hybridize() works "
                                          f"there)")
            if offsets is not None:
                raise NotImplementedError(
                    f"{self._who()}: a 1-D input with offsets cannot run as a Symbol (the bags' lengths "
                    f"are data: dualdl pads them from the offsets read on the host); call the layer on "
                    f"NDArrays (hybridize() works there) or pass 2-D input (B, N)")
            return super().forward(input, per_sample_weights)
        x, w = self._bags(input, offsets, per_sample_weights)
        return super().forward(x, w)

    def _bags(self, x, offsets, psw):
        """Checks, then the bags as (B, N) indices and (B, N) row weights (0 = not in the bag)."""
        who, dtype = self._who(), np.dtype(x.dtype)
        C.check_embedding_bag_input(who, self.mode, x.shape, np.issubdtype(dtype, np.integer), dtype.name,
                                    None if offsets is None else offsets.shape,
                                    None if psw is None else psw.shape, self.include_last_offset,
                                    *_dtype_of(offsets))
        if psw is not None:
            C.check_embedding_bag_weights_dtype(who, _dtype_of(psw)[0], np.dtype(self.weight.dtype).name)
        xs = x.asnumpy()                                                    # one sync
        offs = None if offsets is None else offsets.asnumpy().astype(np.int64)
        C.check_embedding_bag_values(who, self.num_embeddings, int(xs.min()), int(xs.max()), offs, xs.shape[0],
                                     self.include_last_offset)
        if self.max_norm is not None:
            embedding_renorm(self.weight, np.unique(xs), self.max_norm, self.norm_type)
        wdtype = self.weight.dtype
        if offs is None:
            return x, psw if psw is not None else nd.ones(x.shape, ctx=x.context, dtype=wdtype)
        bounds = offs if self.include_last_offset else np.append(offs, xs.shape[0])    # B + 1 bag bounds
        starts, lengths = bounds[:-1], np.diff(bounds)
        step = np.arange(max(1, int(lengths.max())))                      # padded to the longest bag
        valid = step[None, :] < lengths[:, None]
        pos = np.where(valid, starts[:, None] + step[None, :], 0)
        bags = host_array(xs[pos], x.context, x.dtype)
        mask = host_array(valid, x.context, wdtype)
        if psw is None:
            return bags, mask
        return bags, nd.take(psw, host_array(pos, x.context, "int64")) * mask

    def hybrid_forward(self, F, x, w=None, weight=None):
        emb = F.Embedding(x, weight, input_dim=self.num_embeddings, output_dim=self.embedding_dim)  # (B, N, D)
        if w is None:                              # Symbol without per_sample_weights
            w = F.ones_like(F.slice_axis(emb, axis=2, begin=0, end=1)).reshape((0, 0))
        if self.padding_idx is not None:            # padding entries are not in the bag
            w = F.where(x != self.padding_idx, w, F.zeros_like(w))
        if self.mode != "max":
            # (B, 1, N) x (B, N, D): a GEMM both ways, 9x faster than broadcast_mul + sum (fwd + bwd)
            total = F.reshape(F.batch_dot(F.expand_dims(w, axis=1), emb), shape=(0, -1))
            if self.mode == "sum":
                return total
        count = F.sum(w, axis=1, keepdims=True)     # w is the 0/1 bag mask in modes mean and max
        if self.mode == "mean":
            return F.broadcast_div(total, F.maximum(count, F.ones_like(count)))
        drop = F.where(w != 0, F.zeros_like(w), F.ones_like(w) * -np.inf)      # (B, N): 0 or -inf
        masked = F.BlockGrad(F.broadcast_add(emb, F.expand_dims(drop, axis=2)))
        best = F.pick(emb, F.argmax(masked, axis=1), axis=1)                # one row per (bag, column)
        return F.broadcast_mul(best, count > 0)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
        if self.include_last_offset:
            s += ", include_last_offset=True"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
