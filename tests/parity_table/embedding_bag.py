"""EmbeddingBag rows: 2-D bags (B, N) and 1-D input with offsets, modes sum/mean/max, per_sample_weights,
include_last_offset, padding_idx, empty bags and ties (max of a repeated index) against torch.nn.EmbeddingBag."""
from dataclasses import dataclass
from typing import Any

import numpy as np

from dualdl.testing.spec import In, idx, layer


@dataclass(frozen=True)
class Fixed(In):
    """An int64 input with given values (offsets must start at 0 and not decrease; a bag made of
    padding only must be spelled out)."""
    values: Any = ()

    def draw(self, rng: np.random.Generator, dtype: np.dtype) -> np.ndarray:
        return np.asarray(self.values, dtype=np.int64)


def fixed(*values: Any) -> Fixed:
    return Fixed(np.shape(values), "int", grad=False, values=values)


@dataclass(frozen=True)
class Absent(In):
    """A positional ``None`` (2-D input: no offsets before ``per_sample_weights``)."""

    def draw(self, rng: np.random.Generator, dtype: np.dtype) -> None:
        return None


NO_OFFSETS = Absent((), "int", grad=False)
EMPTY = "no elements"

ROWS = [
    layer("EmbeddingBag", idx((3, 5), 10), 10, 4, id="2-D mean"),
    layer("EmbeddingBag", idx((3, 5), 10), 10, 4, mode="sum", id="2-D sum"),
    layer("EmbeddingBag", idx((4, 6), 5), 5, 3, mode="max", id="2-D max, repeated indices"),
    layer("EmbeddingBag", [idx((3, 4), 10), NO_OFFSETS, (3, 4)], 10, 4, mode="sum", id="2-D sum per_sample_weights"),
    layer("EmbeddingBag", fixed((0, 0), (3, 0), (3, 3)), 5, 3, mode="max", padding_idx=0,
          id="2-D max padding_idx, a padding-only bag, a tie"),
    layer("EmbeddingBag", fixed((1, 2, 1), (1, 1, 1)), 4, 3, padding_idx=-3,
          id="2-D mean padding_idx -3 (row 1), a padding-only bag"),
    layer("EmbeddingBag", idx((1, 1), 3), 3, 1, id="2-D size 1"),
    layer("EmbeddingBag", [idx((7,), 10), fixed(0, 2, 2, 5)], 10, 4, mode="sum", id="1-D sum, an empty bag"),
    layer("EmbeddingBag", [idx((7,), 10), fixed(0, 3, 3, 3)], 10, 4, id="1-D mean, empty bags, uneven"),
    layer("EmbeddingBag", [idx((7,), 4), fixed(0, 1, 4)], 4, 5, mode="max", id="1-D max, repeated indices"),
    layer("EmbeddingBag", [idx((6,), 10), fixed(0, 3, 3), (6,)], 10, 3, mode="sum",
          id="1-D sum per_sample_weights, an empty bag"),
    layer("EmbeddingBag", [idx((6,), 5), fixed(0, 1, 1, 6)], 5, 3, mode="max", include_last_offset=True,
          id="1-D max include_last_offset, an empty bag"),
    layer("EmbeddingBag", [fixed(1, 1, 2, 3, 1, 0), fixed(0, 2, 3)], 4, 2, mode="mean", padding_idx=1,
          id="1-D mean padding_idx, a padding-only bag"),
    layer("EmbeddingBag", [fixed(2, 2, 0), fixed(0, 3), (3,)], 3, 2, mode="sum", padding_idx=2,
          include_last_offset=True, id="1-D sum include_last_offset padding_idx, one bag"),
    layer("EmbeddingBag", idx((0, 4), 10), 10, 4, id="empty batch", raises=EMPTY),
]

# max_norm renormalises the looked-up rows in place before the lookup (N(0, 1) rows of 4: norm ~2)
ROWS += [
    layer("EmbeddingBag", idx((3, 4), 10), 10, 4, mode="sum", max_norm=1.0, id="2-D sum max_norm 1"),
    layer("EmbeddingBag", [idx((7,), 10), fixed(0, 2, 2)], 10, 4, mode="max", max_norm=1.5, norm_type=1.0,
          id="1-D max max_norm 1.5 norm_type 1, an empty bag"),
    layer("EmbeddingBag", idx((2, 3), 6), 6, 5, max_norm=0.8, norm_type=3.0, padding_idx=0,
          id="2-D mean max_norm norm_type 3 padding_idx"),
]
