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

from dualdl import config as dualdl_config
from dualdl.backend import KNOWN_BACKENDS

BACKENDS = tuple(KNOWN_BACKENDS)      # every registered backend (imports no framework)


@pytest.fixture(params=BACKENDS)
def backend(request):
    """The backend name; the test body runs with it active (``dualdl.use``)."""
    import dualdl
    with dualdl.use(request.param):
        yield request.param


@pytest.fixture(autouse=True)
def _same_random_state_for_every_test():
    """Each test starts from the same random state, whatever its worker ran before it (pytest-xdist
    spreads tests differently from run to run): a d2l case initialised with unseeded weights failed
    in CI on 7 of 12 draws. Seeds the frameworks a test has already imported; imports none."""
    import random
    import sys
    random.seed(0)
    np.random.seed(0)
    mx_random = getattr(sys.modules.get("mxnet"), "random", None)
    if mx_random is not None and hasattr(mx_random, "seed"):
        mx_random.seed(0)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "manual_seed"):
        torch.manual_seed(0)
    yield


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _nvidia_driver() -> bool:
    """Whether this machine has an NVIDIA driver: decided from the file system, importing no
    framework and initialising no CUDA (collection stays cheap on CPU-only machines)."""
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` are skipped with one reason on machines without an NVIDIA driver
    (unless ``DUALDL_REQUIRE_GPU=1``, set by ``make gpu-check``: then they run and say what is missing)."""
    if _nvidia_driver() or dualdl_config.require_gpu():
        return
    skip = pytest.mark.skip(reason="gpu: no NVIDIA driver on this machine (run `make gpu-check` on a CUDA machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
