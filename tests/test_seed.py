"""dl.seed: two seeded runs give identical random tensors and initial weights on each backend."""
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = r"""
import sys, numpy as np, random, dualdl as dl
from dualdl import nn
backend, seed = sys.argv[1], int(sys.argv[2])
dl.seed(seed)
with dl.use(backend):
    net = nn.Linear(4, 3)
    w = dl.to_numpy(dl.state_dict(net)["weight"])
if backend == "torch":
    import torch
    r = torch.rand(3).numpy()
else:
    import mxnet as mx
    r = mx.nd.random.uniform(shape=(3,)).asnumpy()
print(repr((w.round(7).tolist(), r.round(7).tolist(), np.random.rand(), random.random())))
"""


def _run(backend, seed):
    r = subprocess.run([sys.executable, "-c", SCRIPT, backend, str(seed)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.parametrize("backend_name", ["torch", "mxnet"])
def test_seeded_runs_are_identical_and_seed_matters(backend_name):
    a, b, c = _run(backend_name, 7), _run(backend_name, 7), _run(backend_name, 8)
    assert a == b
    assert a != c


def test_seed_applies_to_backend_imported_later():
    import dualdl as dl
    dl.seed(123)
    import mxnet as mx
    x = mx.nd.random.uniform(shape=(4,)).asnumpy()
    dl.seed(123)
    y = mx.nd.random.uniform(shape=(4,)).asnumpy()
    np.testing.assert_array_equal(x, y)


def test_seed_validates():
    import dualdl as dl
    with pytest.raises(ValueError, match="seed must be an int"):
        dl.seed(-1)
    with pytest.raises(ValueError, match="seed must be an int"):
        dl.seed(1.5)


IMPORTED_AFTER_SEED = r"""
import sys, dualdl as dl
framework = sys.argv[1]
dl.seed(11)
if framework == "torch":
    import torch
    first = torch.rand(3).tolist()
    dl.seed(11)
    again = torch.rand(3).tolist()
else:
    import mxnet as mx
    first = mx.nd.random.uniform(shape=(3,)).asnumpy().tolist()
    dl.seed(11)
    again = mx.nd.random.uniform(shape=(3,)).asnumpy().tolist()
print(first == again, first, again)
"""


@pytest.mark.parametrize("framework", ["torch", "mxnet"])
def test_seed_reaches_a_framework_the_user_imports_directly_afterwards(framework):
    """A fresh process: the framework is imported by the user, not by dualdl, after dl.seed."""
    r = subprocess.run([sys.executable, "-c", IMPORTED_AFTER_SEED, framework], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("True"), r.stdout
