"""DataLoader: same seed -> bitwise the same batches on both backends; resume; clear errors."""
import numpy as np
import pytest

import dualdl as dl
from dualdl.data import (ArrayDataset, BatchSampler, DataLoader, DistributedSampler, IterableDataset,
                         SequentialSampler, sample_rng)


def _np(batch):
    if isinstance(batch, (tuple, list)):
        return type(batch)(_np(b) for b in batch)
    if isinstance(batch, dict):
        return {k: _np(v) for k, v in batch.items()}
    return dl.to_numpy(batch)


def _data(n=23, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 3, 2)).astype(np.float32), rng.integers(0, 5, n).astype(np.int64),
            rng.standard_normal(n))          # float64


def _native_type(name):
    if name == "torch":
        import torch
        return torch.Tensor
    import mxnet as mx
    return mx.nd.NDArray


def test_batches_are_native_tensors_with_exact_dtypes(backend):
    x, y, z = _data()
    loader = DataLoader(ArrayDataset(x, y, z), batch_size=5, shuffle=True, seed=4)
    batches = list(loader)
    assert len(batches) == len(loader) == 5
    order = np.random.Generator(np.random.PCG64(np.random.SeedSequence([4, 0, 0]))).permutation(23)
    for k, (bx, by, bz) in enumerate(batches):
        assert all(isinstance(t, _native_type(backend)) for t in (bx, by, bz))
        idx = order[5 * k:5 * k + 5]
        for t, ref in ((bx, x[idx]), (by, y[idx]), (bz, z[idx])):
            a = dl.to_numpy(t)
            assert a.dtype == ref.dtype and np.array_equal(a, ref)


def test_same_seed_same_batches_bitwise_on_both_backends():
    x, y, z = _data(31)
    ds = ArrayDataset(x, y, z)
    runs = {}
    for name in ("torch", "mxnet"):
        loader = DataLoader(ds, batch_size=4, shuffle=True, seed=123, backend=name, drop_last=True)
        runs[name] = [[_np(b) for b in loader] for _ in range(2)]        # two epochs
    assert len(runs["torch"][0]) == 7
    max_diff = 0.0
    for e in range(2):
        for bt, bm in zip(runs["torch"][e], runs["mxnet"][e]):
            for a, b in zip(bt, bm):
                assert a.dtype == b.dtype and a.shape == b.shape
                assert a.tobytes() == b.tobytes()
                max_diff = max(max_diff, float(np.max(np.abs(a.astype(np.float64) - b))))
    assert max_diff == 0.0
    labels = [np.concatenate([b[1] for b in runs["torch"][e]]) for e in range(2)]
    assert not np.array_equal(labels[0], labels[1])                          # epochs differ


def test_order_independent_of_framework_rng():
    import mxnet as mx
    import torch
    ds = ArrayDataset(np.arange(40))
    got = []
    for k in range(2):
        torch.manual_seed(k)
        mx.random.seed(k + 10)
        np.random.seed(k + 20)
        got.append([_np(b).tolist() for b in DataLoader(ds, batch_size=8, shuffle=True, seed=9,
                                                         backend="numpy")])
    assert got[0] == got[1]


def test_seed_method_and_default_seed(monkeypatch):
    monkeypatch.setattr(dl.random, "_SEED", dl.random._SEED)
    ds = ArrayDataset(np.arange(30))
    a = DataLoader(ds, batch_size=30, shuffle=True, backend="numpy")
    a.seed(5)
    b = DataLoader(ds, batch_size=30, shuffle=True, seed=5, backend="numpy")
    assert np.array_equal(next(iter(a)), next(iter(b)))
    dl.seed(5)
    c = DataLoader(ds, batch_size=30, shuffle=True, backend="numpy")
    assert c.seed() == 5 and np.array_equal(next(iter(c)), next(iter(b)))


def test_epoch_advances_only_on_full_pass(backend):
    ds = ArrayDataset(np.arange(12))
    loader = DataLoader(ds, batch_size=4, shuffle=True, seed=1)
    peek = _np(next(iter(loader)))               # cut short: does not consume the epoch
    e0 = [_np(b) for b in loader]
    assert np.array_equal(peek, e0[0]) and loader.epoch == 1
    e1 = [_np(b) for b in loader]
    assert not all(np.array_equal(p, q) for p, q in zip(e0, e1))
    loader.set_epoch(0)
    assert all(np.array_equal(p, _np(q)) for p, q in zip(e0, loader))


def test_resume_mid_epoch_gives_remaining_batches(backend):
    x, y, _ = _data(29)
    make = lambda: DataLoader(ArrayDataset(x, y), batch_size=4, shuffle=True, seed=77)  # noqa: E731
    ref = make()
    list(ref)                                    # epoch 0
    full = [_np(b) for b in ref]                 # epoch 1, the one we interrupt
    loader = make()
    loader.set_epoch(1)
    head, state = [], None
    for k, b in enumerate(loader):
        head.append(_np(b))
        if k == 2:
            state = loader.state_dict()
            break
    assert state["epoch"] == 1 and state["batches"] == 3 and state["seed"] == 77
    assert loader.state_dict() == state          # still reported after the break
    fresh = DataLoader(ArrayDataset(x, y), batch_size=4, shuffle=True, seed=1)   # other seed: restored
    fresh.load_state_dict(state)
    rest = [_np(b) for b in fresh]
    assert len(head) + len(rest) == len(full) == 8
    for a, b in zip(head + rest, full):
        assert all(np.array_equal(p, q) for p, q in zip(a, b))
    assert fresh.epoch == 2 and fresh.state_dict()["batches"] == 0
    with pytest.raises(ValueError, match="batches"):
        fresh.load_state_dict({"epoch": 0, "batches": 9})
    with pytest.raises(ValueError, match="keys"):
        fresh.load_state_dict({"epoch": 0})


def test_resume_with_distributed_sampler():
    ds = ArrayDataset(np.arange(50))
    make = lambda: DataLoader(ds, batch_size=3, sampler=DistributedSampler(50, 2, 1, seed=8),  # noqa: E731
                              backend="numpy")
    full = [b.tolist() for b in make()]
    assert sorted(sum(full, [])) == sorted(np.random.Generator(np.random.PCG64(
        np.random.SeedSequence([8, 0, 0]))).permutation(50)[1::2].tolist())
    a = make()
    it = iter(a)
    head = [next(it).tolist() for _ in range(4)]
    st = a.state_dict()
    del it
    b = make()
    b.load_state_dict(st)
    assert head + [x.tolist() for x in b] == full


def test_user_set_epoch_on_sampler_is_respected():
    ds = ArrayDataset(np.arange(20))
    s = DistributedSampler(20, 2, 0, seed=2)
    loader = DataLoader(ds, batch_size=20, sampler=s, backend="numpy")
    s.set_epoch(5)                               # torch style
    got = next(iter(loader)).tolist()
    assert got == np.random.Generator(np.random.PCG64(np.random.SeedSequence([2, 5, 0]))).permutation(20)[0::2].tolist()


def test_float_dtype_device_and_structures(backend):
    ds = [{"a": np.ones(2), "b": (1, 2.5), "s": "x"} for _ in range(3)]
    loader = DataLoader(ds, batch_size=3, float_dtype="float32", device=dl.cpu())
    batch = next(iter(loader))
    assert dl.to_numpy(batch["a"]).dtype == np.float32
    n, f = batch["b"]
    assert dl.to_numpy(n).dtype == np.int64 and dl.to_numpy(f).dtype == np.float32
    assert batch["s"] == ["x", "x", "x"] and dl.device_of(batch["a"]) == dl.cpu()
    plain = next(iter(DataLoader(ds, batch_size=3)))
    assert dl.to_numpy(plain["b"][1]).dtype == np.float64        # Python floats: float64, as both frameworks


def test_iterable_dataset_and_sample_rng(backend):
    class Stream(IterableDataset):
        def __iter__(self):
            for i in range(10):
                yield np.float32(i) + np.float32(sample_rng().random())

    a = [_np(b) for b in DataLoader(Stream(), batch_size=4, seed=3)]
    b = [_np(b) for b in DataLoader(Stream(), batch_size=4, seed=3, backend="numpy")]
    assert [len(x) for x in a] == [4, 4, 2]
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
    assert len(DataLoader(Stream(), batch_size=4, drop_last=True, backend="numpy").__iter__().__next__()) == 4
    with pytest.raises(RuntimeError, match="only available"):
        sample_rng()


def test_bad_arguments_clear_errors():
    ds = ArrayDataset(np.arange(10))
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        DataLoader(ds, batch_size=0)
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(ds, shuffle=True, sampler=SequentialSampler(10))
    with pytest.raises(ValueError, match="batch_sampler is mutually exclusive"):
        DataLoader(ds, batch_size=2, batch_sampler=BatchSampler(SequentialSampler(10), 2))
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="unknown backend"):
        DataLoader(ds, backend="jax")
    with pytest.raises(ValueError, match="float_dtype"):
        DataLoader(ds, float_dtype="int32")
    with pytest.raises(ValueError, match="seed"):
        DataLoader(ds, seed=-1)
    with pytest.raises(ValueError, match="pad_collate"):
        list(DataLoader([np.zeros(2), np.zeros(3)], batch_size=2, backend="numpy"))
    with pytest.raises(TypeError, match="map-style"):
        DataLoader(object())


def test_error_in_main_process_names_sample_index():
    class Bad:
        def __len__(self):
            return 6

        def __getitem__(self, i):
            if i == 4:
                raise KeyError("sample 4 is corrupt")
            return np.float32(i)

    with pytest.raises(KeyError, match="corrupt") as ei:
        list(DataLoader(Bad(), batch_size=2, backend="numpy"))
    assert "sample index 4" in "".join(getattr(ei.value, "__notes__", []))


def test_unseeded_loader_resumes_from_json_state(monkeypatch):
    import json
    monkeypatch.setattr(dl.random, "_SEED", None)            # no seed anywhere: fresh entropy
    ds = ArrayDataset(np.arange(40))
    a = DataLoader(ds, batch_size=6, shuffle=True, backend="numpy")
    full = [b.tolist() for b in a]
    a.set_epoch(0)
    it = iter(a)
    head = [next(it).tolist() for _ in range(3)]
    state = json.loads(json.dumps(a.state_dict()))           # plain ints: JSON-safe
    del it
    b = DataLoader(ds, batch_size=6, shuffle=True, backend="numpy")
    b.load_state_dict(state)
    assert head + [x.tolist() for x in b] == full


@pytest.mark.parametrize("drop_last", [False, True])
def test_two_rank_loaders_cover_dataset_once(backend, drop_last):
    n = 21
    ds = ArrayDataset(np.arange(n) * 10)
    seen = []
    for rank in range(2):
        sampler = DistributedSampler(n, 2, rank, seed=6, drop_last=drop_last)
        loader = DataLoader(ds, batch_size=4, sampler=sampler)
        for epoch in range(2):
            loader.set_epoch(epoch)
            got = np.concatenate([dl.to_numpy(b) for b in loader]) // 10
            seen.append((epoch, rank, got.tolist()))
    for epoch in range(2):
        shards = [s for e, r, s in seen if e == epoch]
        union = sorted(shards[0] + shards[1])
        if drop_last:
            assert len(union) == 20 and len(set(union)) == 20          # 20 distinct, one dropped
        else:
            assert len(union) == 22 and set(union) == set(range(n))  # all 21, one padded repeat
    assert seen[0][2] != seen[1][2]                                   # epochs differ


def test_loader_seed_reaches_unseeded_samplers_only():
    ds = ArrayDataset(np.arange(16))
    explicit = DistributedSampler(16, 2, 0, seed=5)
    DataLoader(ds, sampler=explicit, seed=1, backend="numpy")
    assert explicit.seed == 5                                  # its own seed is kept
    unseeded = DistributedSampler(16, 2, 0)
    DataLoader(ds, sampler=unseeded, seed=1, backend="numpy")
    assert unseeded.seed == 1
    loader = DataLoader(ds, sampler=explicit, backend="numpy")
    loader.seed(9)                                             # an explicit call sets every seed
    assert explicit.seed == 9 and loader.state_dict()["sampler_seed"] == 9


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64"])
def test_every_supported_dtype_kept(backend, dtype):
    data = (np.arange(-3, 5) * 1.25).astype(dtype)
    got = [dl.to_numpy(b) for b in DataLoader(data, batch_size=3)]
    assert all(g.dtype == np.dtype(dtype) for g in got)
    assert np.concatenate(got).tobytes() == data.tobytes()
