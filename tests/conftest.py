"""Shared fixtures: ``backend`` runs a test once per backend; frameworks load only when needed."""
import os

# MXNet deadlocks when two CPU contexts run `dot` concurrently with OMP_NUM_THREADS>=2
# (see docs/porting-guide.md, "multi-context deadlock"); one OpenMP thread per op avoids it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# DMLC_* variables leaking in would turn `import mxnet` into a blocking ps-lite node.
for _k in [k for k in os.environ if k.startswith("DMLC_")]:
    del os.environ[_k]
os.environ.pop("DUALDL_BACKEND", None)

import numpy as np
import pytest

BACKENDS = ("torch", "mxnet")


@pytest.fixture(params=BACKENDS)
def backend(request):
    """The backend name; the test body runs with it active (``dualdl.use``)."""
    import dualdl
    with dualdl.use(request.param):
        yield request.param


@pytest.fixture
def rng():
    return np.random.default_rng(0)
