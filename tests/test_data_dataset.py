"""dualdl.data datasets: numpy samples, Gluon's transform rule, clear errors."""
import numpy as np
import pytest

from dualdl.data import (ArrayDataset, Dataset, SimpleDataset, Subset, TensorDataset,
                         TransformDataset)


def test_array_dataset_samples_and_dtypes(rng):
    x = rng.standard_normal((7, 3)).astype(np.float64)
    y = np.arange(7, dtype=np.int32)
    ds = ArrayDataset(x, y)
    assert len(ds) == 7
    a, b = ds[4]
    assert np.array_equal(a, x[4]) and a.dtype == np.float64
    assert b == 4 and b.dtype == np.int32
    assert np.array_equal(ArrayDataset(x)[2], x[2])          # one array: the element itself (Gluon)
    t = TensorDataset(x)[2]                                   # torch: always a tuple
    assert isinstance(t, tuple) and len(t) == 1 and np.array_equal(t[0], x[2])


def test_array_dataset_accepts_native_tensors_and_lists(backend):
    import dualdl as dl
    x = dl.from_numpy(np.arange(6, dtype=np.float32).reshape(3, 2))
    seqs = [np.arange(n) for n in (2, 5, 1)]
    ds = ArrayDataset(x, seqs)
    a, s = ds[1]
    assert isinstance(a, np.ndarray) and np.array_equal(a, [2.0, 3.0]) and a.dtype == np.float32
    assert np.array_equal(s, np.arange(5))


def test_array_dataset_length_mismatch_names_lengths():
    with pytest.raises(ValueError, match=r"same length.*\[4, 3\]"):
        ArrayDataset(np.zeros(4), np.zeros(3))
    with pytest.raises(ValueError, match="at least one"):
        ArrayDataset()
    with pytest.raises(ValueError, match="0-dimensional"):
        ArrayDataset(np.array(3.0))
    with pytest.raises(TypeError, match="must be a numpy array"):
        ArrayDataset(5)


def test_transform_unpacks_tuples_like_gluon():
    x, y = np.arange(5.0), np.arange(5) * 10
    ds = ArrayDataset(x, y).transform(lambda a, b: (a * 2, b + 1))
    assert ds[3] == (6.0, 31)
    first = ArrayDataset(x, y).transform_first(lambda a: -a)
    assert first[2] == (-2.0, 20)
    eager = ArrayDataset(x).transform(lambda a: a + 1, lazy=False)
    assert isinstance(eager, SimpleDataset) and [eager[i] for i in range(5)] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert TransformDataset(SimpleDataset([1, 2]), lambda v: v * 3)[1] == 6
    with pytest.raises(TypeError, match="callable"):
        TransformDataset(SimpleDataset([1]), 3)


def test_subset_and_custom_dataset():
    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return i * i

    sub = Subset(Squares(), [4, 0, 2])
    assert [sub[i] for i in range(len(sub))] == [16, 0, 4]
    with pytest.raises(IndexError, match="out of range"):
        Subset(Squares(), [5])


def test_data_pipeline_imports_no_framework():
    import json
    import subprocess
    import sys
    code = ("import json, sys, numpy as np\n"
            "from dualdl.data import ArrayDataset, DataLoader\n"
            "if __name__ == '__main__':\n"
            "    dl = DataLoader(ArrayDataset(np.arange(10)), batch_size=3, shuffle=True, seed=0,\n"
            "                    num_workers=1, backend='numpy', timeout=30)\n"
            "    print(json.dumps([b.tolist() for b in dl]))\n"
            "    print(sorted(m for m in ('torch', 'mxnet') if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    batches, frameworks = r.stdout.strip().splitlines()
    assert sorted(sum(json.loads(batches), [])) == list(range(10))
    assert frameworks == "[]"
