"""The one seeded generator family dualdl owns for data order (never a framework RNG).

Hides: the Gluon DataLoader shuffles with numpy's *global* RNG and torch's with its own
``torch.Generator``, so the same script gives different orders per framework. Here every order
comes from ``numpy.random.Generator(PCG64(SeedSequence([seed, epoch, purpose, ...])))``.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

# purposes: keep distinct streams for different uses of the same (seed, epoch)
PERMUTATION, BATCH_ORDER, SAMPLE, WORKER = 0, 1, 2, 3


def check_seed(seed: Any, what: str = "seed") -> Optional[int]:
    """``None`` or an int in [0, 2**32); anything else raises a ValueError naming the value."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2 ** 32:
        raise ValueError(f"{what} must be an int in [0, 2**32) or None, got {seed!r}")
    return int(seed)


def check_epoch(epoch: Any) -> int:
    if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or int(epoch) < 0:
        raise ValueError(f"epoch must be a non-negative int, got {epoch!r}")
    return int(epoch)


def default_seed() -> int:
    """``dualdl.random.initial_seed()`` if ``dualdl.seed`` was called, else fresh OS entropy."""
    from ..random import initial_seed
    s = initial_seed()
    if s is not None:
        return int(s)
    return int(np.random.SeedSequence().entropy % (2 ** 32))


def generator(seed: int, epoch: int, purpose: int, *extra: int) -> np.random.Generator:
    """The numpy Generator for (seed, epoch, purpose, extra...): same inputs, same stream, anywhere."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch, purpose, *extra])))


def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """The global sample order of ``epoch``: shared by RandomSampler, DistributedSampler and
    BucketBatchSampler, so one process and N ranks see the same global order."""
    return generator(seed, epoch, PERMUTATION).permutation(n)
