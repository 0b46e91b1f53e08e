"""Which samples each rank reads: strided shards of one permutation shared by all ranks.

Strided (``perm[rank::world]``, as torch's ``DistributedSampler``) rather than contiguous blocks,
so that local mini-batch ``i`` of every rank together is exactly global batch ``i`` of a
single-process run with ``batch = local_batch * world_size``.
"""
from __future__ import annotations


import numpy as np

__all__ = ["shard_indices"]


def shard_indices(n_samples: int, rank: int, world_size: int, *, shuffle: bool = False,
                  seed: int = 0, epoch: int = 0, drop_last: bool = False) -> np.ndarray:
    """Indices (int64) of rank ``rank`` out of ``world_size`` for a dataset of ``n_samples``.

    Every rank gets the same count: with ``drop_last`` the tail that does not divide evenly is
    dropped, otherwise the permutation is padded by repeating its start (DistributedSampler's
    rule). ``shuffle`` uses the epoch order of ``dualdl.data`` (numpy PCG64 seeded by
    ``SeedSequence([seed, epoch, 0])``, the same on all ranks), so ``shard(n, shuffle=True,
    seed=s, epoch=e)`` equals ``DistributedSampler(n, world, rank, seed=s)`` at epoch ``e``.
    """
    for name, v in (("n_samples", n_samples), ("rank", rank), ("world_size", world_size),
                    ("seed", seed), ("epoch", epoch)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if n_samples < 0 or world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need n_samples >= 0, world_size >= 1 and 0 <= rank < world_size; got "
                         f"n_samples={n_samples}, rank={rank}, world_size={world_size}")
    if shuffle:
        from ..data._seed import epoch_permutation
        perm = epoch_permutation(n_samples, int(seed), int(epoch))
    else:
        perm = np.arange(n_samples)
    perm = perm.astype(np.int64)
    if drop_last:
        perm = perm[: (n_samples // world_size) * world_size]
    elif n_samples % world_size and n_samples:
        pad = world_size - n_samples % world_size
        perm = np.concatenate([perm, np.resize(perm, pad)])
    return perm[rank::world_size]
