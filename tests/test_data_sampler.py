"""Samplers: one seeded numpy generator drives every order; distributed shards cover the data."""
import numpy as np
import pytest

from dualdl.data import (BatchSampler, BucketBatchSampler, DistributedSampler, RandomSampler,
                         SequentialSampler)


def _perm(n, seed, epoch):
    # the documented derivation: numpy PCG64 seeded by SeedSequence([seed, epoch, 0])
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch, 0]))).permutation(n)


def test_random_sampler_epochs_reproducible_and_distinct():
    s = RandomSampler(50, seed=7)
    e0, e1 = list(s), list(s)           # a full pass advances the epoch
    assert sorted(e0) == list(range(50)) and sorted(e1) == list(range(50))
    assert e0 != e1
    assert e0 == _perm(50, 7, 0).tolist() and e1 == _perm(50, 7, 1).tolist()
    s2 = RandomSampler(50, seed=7)
    s2.set_epoch(1)
    assert list(s2) == e1
    assert list(RandomSampler(50, seed=8)) != e0


def test_random_sampler_ignores_framework_and_global_rng():
    import mxnet as mx
    import torch
    orders = []
    for k in range(3):
        np.random.seed(k)
        torch.manual_seed(100 + k)
        mx.random.seed(200 + k)
        orders.append(list(RandomSampler(30, seed=3)))
    assert orders[0] == orders[1] == orders[2]


def test_unseeded_sampler_uses_dualdl_seed(monkeypatch):
    import dualdl
    monkeypatch.setattr(dualdl.random, "_SEED", dualdl.random._SEED)   # restored afterwards
    dualdl.seed(11)
    assert RandomSampler(20).seed == 11
    assert list(RandomSampler(20)) == _perm(20, 11, 0).tolist()


def test_interrupted_epoch_restarts_and_state_resumes():
    s = RandomSampler(10, seed=1)
    it = iter(s)
    first3 = [next(it) for _ in range(3)]
    assert s.state_dict() == {"epoch": 0, "position": 3, "seed": 1}
    state = s.state_dict()
    del it
    assert list(s)[:3] == first3          # cut short: the same epoch again
    r = RandomSampler(10, seed=99)
    r.load_state_dict(state)
    assert first3 + list(r) == _perm(10, 1, 0).tolist()
    assert r.epoch == 1
    with pytest.raises(ValueError, match="position"):
        r.load_state_dict({"epoch": 0, "position": 11})


@pytest.mark.parametrize("n", [10, 11, 13])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_two_ranks_cover_dataset(n, drop_last):
    world = 2
    shards = [list(DistributedSampler(n, world, r, shuffle=True, seed=5, drop_last=drop_last))
              for r in range(world)]
    assert len(shards[0]) == len(shards[1])
    glob = _perm(n, 5, 0)
    if drop_last:
        total = n // world * world
        assert sorted(shards[0] + shards[1]) == sorted(glob[:total].tolist())
        assert len(set(shards[0]) | set(shards[1])) == total      # no duplicates
    else:
        total = -(-n // world) * world
        padded = np.resize(glob, total)                            # wrap-around padding
        assert set(shards[0]) | set(shards[1]) == set(range(n))    # every sample at least once
        assert sorted(shards[0] + shards[1]) == sorted(padded.tolist())
        assert len(shards[0] + shards[1]) - n == total - n         # duplicates only from padding
    # interleaving the ranks gives the single-process order
    inter = [shards[r][k] for k in range(len(shards[0])) for r in range(world)]
    assert inter == np.resize(glob, len(inter)).tolist()[:len(inter)]
    assert inter[:min(n, len(inter))] == list(RandomSampler(n, seed=5))[:min(n, len(inter))]


def test_distributed_epochs_and_resume():
    s = DistributedSampler(20, 2, 1, seed=0)
    s.set_epoch(3)
    e3 = list(s)
    assert e3 == _perm(20, 0, 3)[1::2].tolist()
    assert s.epoch == 4                      # ran to the end
    s.set_epoch(3)
    it = iter(s)
    head = [next(it) for _ in range(4)]
    st = s.state_dict()
    t = DistributedSampler(20, 2, 1, seed=0)
    t.load_state_dict(st)
    assert head + list(t) == e3
    assert list(DistributedSampler(6, 2, 0, shuffle=False)) == [0, 2, 4]


def test_distributed_bad_arguments(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(ValueError, match="rank must be"):
        DistributedSampler(10, 2, 2)
    with pytest.raises(ValueError, match="num_replicas"):
        DistributedSampler(10, 0, 0)
    with pytest.raises(ValueError, match="WORLD_SIZE"):
        DistributedSampler(10)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    s = DistributedSampler(10, shuffle=False)
    assert (s.num_replicas, s.rank, list(s)) == (4, 3, [3, 7, 1])


def test_batch_sampler_and_errors():
    assert list(BatchSampler(SequentialSampler(7), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(SequentialSampler(7), 3, drop_last=True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(SequentialSampler(7), 3)) == 3
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="batch_size must be a positive int"):
            BatchSampler(SequentialSampler(7), bad)


def test_bucket_sampler_sorts_within_buckets_and_covers_all():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 50, size=103)
    bs = BucketBatchSampler(lengths, batch_size=8, shuffle=True, seed=2, bucket_size=32)
    batches = list(bs)
    assert sorted(i for b in batches for i in b) == list(range(103))
    assert len(batches) == len(bs) == 13 and sum(len(b) < 8 for b in batches) == 1
    # every batch comes from one bucket of the epoch permutation, sorted by length
    perm = _perm(103, 2, 0)
    bucket_of = {int(i): k // 32 for k, i in enumerate(perm)}
    for b in batches:
        assert len({bucket_of[i] for i in b}) == 1
        assert list(lengths[b]) == sorted(lengths[b])
    # bucketing reduces padding against a plain shuffle
    pad = sum(len(b) * lengths[b].max() - lengths[b].sum() for b in batches)
    plain = [perm[i:i + 8] for i in range(0, 103, 8)]
    pad_plain = sum(len(b) * lengths[b].max() - lengths[b].sum() for b in plain)
    assert pad < pad_plain / 2
    assert list(bs) != batches                                   # next epoch differs
    again = BucketBatchSampler(lengths, 8, shuffle=True, seed=2, bucket_size=32)
    assert list(again) == batches
    dropped = list(BucketBatchSampler(lengths, 8, drop_last=True, bucket_size=32))
    assert all(len(b) == 8 for b in dropped) and len(dropped) == 12
    with pytest.raises(ValueError, match="multiple of batch_size"):
        BucketBatchSampler(lengths, 8, bucket_size=12)
    with pytest.raises(ValueError, match="1-D sequence of ints"):
        BucketBatchSampler(np.ones((3, 2), dtype=int), 2)


def test_bucket_sampler_over_distributed_shards():
    lengths = np.arange(40) % 7 + 1
    shards = [list(BucketBatchSampler(lengths, 4, sampler=DistributedSampler(40, 2, r, seed=3)))
              for r in range(2)]
    got = sorted(i for s in shards for b in s for i in b)
    assert got == list(range(40))


@pytest.mark.parametrize("n,world,drop_last", [(10, 2, False), (11, 2, False), (13, 2, False),
                                               (5, 4, False), (2, 4, False), (13, 3, True), (11, 2, True)])
def test_distributed_unshuffled_matches_torch_distributed_sampler(n, world, drop_last):
    from torch.utils.data import DistributedSampler as TorchDS
    for r in range(world):
        ours = list(DistributedSampler(n, world, r, shuffle=False, drop_last=drop_last))
        theirs = list(TorchDS(range(n), num_replicas=world, rank=r, shuffle=False, drop_last=drop_last))
        assert ours == theirs


def test_distributed_default_seed_is_shared_by_ranks(monkeypatch):
    import dualdl
    monkeypatch.setattr(dualdl.random, "_SEED", None)
    shards = [list(DistributedSampler(30, 3, r)) for r in range(3)]   # no seed anywhere: 0, like torch
    assert sorted(sum(shards, [])) == list(range(30))
    assert DistributedSampler(30, 3, 0).seed == 0
