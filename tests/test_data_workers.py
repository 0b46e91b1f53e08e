"""Worker processes: the same batches in the same order as num_workers=0; errors reported, no hangs."""
import os
import time

import numpy as np
import pytest

import dualdl as dl
from dualdl.data import DataLoader, DataLoaderWorkerError, Dataset, sample_rng


class Noisy(Dataset):
    """Random augmentation from sample_rng, a per-sample amount of work, and variable sizes."""

    def __init__(self, n=37, fail_at=None, exit_at=None, sleep_at=None):
        self.n, self.fail_at, self.exit_at, self.sleep_at = n, fail_at, exit_at, sleep_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError(f"corrupt record {i}")
        if i == self.exit_at:
            os._exit(3)
        if i == self.sleep_at:
            time.sleep(30)
        x = np.full((2, 2), i, dtype=np.float32) + sample_rng().standard_normal((2, 2)).astype(np.float32)
        return x, np.int64(i)


def _run(loader):
    return [[dl.to_numpy(t) for t in b] for b in loader]


def test_workers_equal_no_workers(backend):
    kw = dict(batch_size=5, shuffle=True, seed=21, timeout=30)
    ref = _run(DataLoader(Noisy(), **kw))
    for workers in (1, 3):
        got = _run(DataLoader(Noisy(), num_workers=workers, prefetch_factor=1, **kw))
        assert len(got) == len(ref) == 8
        for a, b in zip(got, ref):
            assert all(p.dtype == q.dtype and p.tobytes() == q.tobytes() for p, q in zip(a, b))


def test_workers_resume_and_two_epochs():
    kw = dict(batch_size=4, shuffle=True, seed=5, backend="numpy", timeout=30)
    ref = DataLoader(Noisy(21), **kw)
    e0, e1 = _run(ref), _run(ref)
    w = DataLoader(Noisy(21), num_workers=2, **kw)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(_run(w), e0))
    it = iter(w)
    head = [next(it) for _ in range(2)]
    state = w.state_dict()
    del it
    r = DataLoader(Noisy(21), num_workers=2, **kw)
    r.load_state_dict(state)
    rest = _run(r)
    assert [h[1].tolist() for h in head] + [x[1].tolist() for x in rest] == [x[1].tolist() for x in e1]


def test_worker_error_reports_index_type_message_traceback():
    loader = DataLoader(Noisy(fail_at=13), batch_size=4, num_workers=2, backend="numpy", timeout=30)
    t0 = time.monotonic()
    with pytest.raises(DataLoaderWorkerError) as ei:
        _run(loader)
    assert time.monotonic() - t0 < 15
    err = ei.value
    assert err.sample_index == 13 and err.batch_index == 3
    assert err.exc_type == "ValueError" and err.exc_message == "corrupt record 13"
    assert "__getitem__" in err.worker_traceback and "raise ValueError" in err.worker_traceback
    assert "sample index 13" in str(err) and "ValueError: corrupt record 13" in str(err)


def test_dead_worker_and_stuck_worker_do_not_hang():
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"exited unexpectedly \(exit code 3\)"):
        _run(DataLoader(Noisy(exit_at=6), batch_size=4, num_workers=2, backend="numpy"))
    assert time.monotonic() - t0 < 15
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out after 1"):
        _run(DataLoader(Noisy(sleep_at=2), batch_size=4, num_workers=1, backend="numpy", timeout=1))
    assert time.monotonic() - t0 < 10


def test_break_stops_workers():
    import multiprocessing as mp
    loader = DataLoader(Noisy(), batch_size=2, num_workers=2, backend="numpy", timeout=30)
    for _ in loader:
        break
    deadline = time.monotonic() + 5
    while any(p.name.startswith("dualdl-data-worker") for p in mp.active_children()):
        assert time.monotonic() < deadline, "workers still alive after the loop was left"
        time.sleep(0.05)


def test_collate_error_and_unpicklable_in_spawn():
    bad_collate = lambda samples: (_ for _ in ()).throw(TypeError("cannot collate"))  # noqa: E731
    with pytest.raises(DataLoaderWorkerError, match="collating batch 0") as ei:
        _run(DataLoader(Noisy(), batch_size=4, num_workers=1, collate_fn=bad_collate, backend="numpy",
                        timeout=30))
    assert ei.value.sample_index is None and ei.value.exc_type == "TypeError"
    with pytest.raises(TypeError, match="picklable"):
        _run(DataLoader(Noisy(), batch_size=4, num_workers=1, collate_fn=bad_collate, backend="numpy",
                        multiprocessing_context="spawn", timeout=30))


def test_spawn_workers_equal_no_workers():
    kw = dict(batch_size=6, shuffle=True, seed=2, backend="numpy", timeout=60)
    ref = _run(DataLoader(Noisy(), **kw))
    got = _run(DataLoader(Noisy(), num_workers=2, multiprocessing_context="spawn", **kw))
    assert all(np.array_equal(p, q) for a, b in zip(got, ref) for p, q in zip(a, b))
