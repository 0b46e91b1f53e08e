"""Backend registry, the active backend (contextvars), dispatch by tensor type, the adapter contract."""
import asyncio
import importlib
import json
import subprocess
import sys
import threading

import numpy as np
import pytest

import dualdl as dl
from dualdl.backend import ADAPTER_MODULES, KNOWN_BACKENDS


def test_default_backend_is_torch_and_env_overrides():
    assert dl.backend() == "torch"
    code = "import dualdl; print(dualdl.backend())"
    env = {"DUALDL_BACKEND": "mxnet", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.stdout.strip() == "mxnet", r.stderr
    env["DUALDL_BACKEND"] = "tensorflow"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0 and "known backends: mxnet, torch" in r.stderr


def test_use_as_context_manager_restores_previous():
    assert dl.backend() == "torch"
    with dl.use("mxnet"):
        assert dl.backend() == "mxnet"
        with dl.use("torch"):
            assert dl.backend() == "torch"
        assert dl.backend() == "mxnet"
    assert dl.backend() == "torch"


def test_unknown_backend_lists_known_ones():
    with pytest.raises(ValueError, match="unknown backend 'jax'; known backends: mxnet, torch"):
        dl.use("jax")


def test_use_is_thread_and_task_local():
    seen = {}

    def worker():
        with dl.use("mxnet"):
            seen["thread"] = dl.backend()
            barrier.wait(timeout=10)

    barrier = threading.Barrier(2)
    t = threading.Thread(target=worker)
    t.start()
    barrier.wait(timeout=10)
    seen["main"] = dl.backend()        # the other thread's `use` does not leak here
    t.join(timeout=10)
    assert seen == {"thread": "mxnet", "main": "torch"}

    async def task(name):
        with dl.use(name):
            await asyncio.sleep(0.01)
            return dl.backend()

    async def main():
        return await asyncio.gather(task("mxnet"), task("torch"), task("mxnet"))

    assert asyncio.run(main()) == ["mxnet", "torch", "mxnet"]


def test_dispatch_by_tensor_type_needs_no_switching():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = dl.from_numpy(a, backend="torch")
    m = dl.from_numpy(a, backend="mxnet")
    assert dl.backend_for(t).name == "torch" and dl.backend_for(m).name == "mxnet"
    np.testing.assert_array_equal(dl.to_numpy(dl.reshape(t, (3, -1))), dl.to_numpy(dl.reshape(m, (3, -1))))
    with pytest.raises(TypeError, match="expected a native tensor"):
        dl.backend_for([1, 2, 3])


@pytest.mark.parametrize("name", sorted(KNOWN_BACKENDS))
def test_adapters_provide_the_same_modules(name):
    adapter = KNOWN_BACKENDS[name][0]
    for mod in ADAPTER_MODULES:
        importlib.import_module(f"{adapter}.{mod}")


def test_adapters_define_the_same_public_names():
    """Keras-style mirror folders: each adapter module exports the same names as its twin."""
    for mod in ("nn", "optim", "state"):
        names = []
        for name in sorted(KNOWN_BACKENDS):
            m = importlib.import_module(f"{KNOWN_BACKENDS[name][0]}.{mod}")
            names.append({n for n in dir(m) if not n.startswith("_") and (
                getattr(getattr(m, n), "_dl_layer", None) or getattr(getattr(m, n), "_dl_optimizer", None))})
        assert names[0] == names[1], f"{mod}: {names[0] ^ names[1]}"


def test_missing_backend_error_names_the_extra():
    code = ("import sys; sys.modules['mxnet'] = None\n"
            "import importlib.util as u; real = u.find_spec\n"
            "u.find_spec = lambda n, *a: None if n == 'mxnet' else real(n, *a)\n"
            "import dualdl\n"
            "try:\n    dualdl.from_numpy([1.0], backend='mxnet')\n"
            "except dualdl.BackendNotInstalledError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "pip install 'dualdl[mxnet]'" in r.stdout, r.stdout + r.stderr


def test_leaked_dmlc_role_is_an_error_not_a_hang():
    code = "import dualdl\ntry:\n    dualdl.get_backend('mxnet')\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    env = {"PATH": "/usr/bin:/bin", "DMLC_ROLE": "worker"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert "DistributedEnvError" in r.stdout and "would block" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("name", ["torch", "mxnet"])
def test_backend_of_finds_the_owner_of_every_kind_of_object(name):
    """One lookup for tensors, models (native and write-once), parameters, optimizers and native
    devices: the MRO decides, no local framework checks."""
    from dualdl.backend import backend_of

    class Net(dl.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = dl.nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x)

    be = dl.get_backend(name)
    net = Net(backend=name)
    params = [p for _, p in dl.named_parameters(net)]
    opt = dl.optim.SGD(params, lr=0.1)
    native_dev = be.native_device(dl.cpu(0))
    tensor = dl.from_numpy(np.ones((2, 3), np.float32), backend=name)
    for obj in (tensor, net, net.fc, params[0], opt, native_dev):
        assert backend_of(obj) is be, type(obj)


def test_backend_of_refuses_foreign_objects_with_the_type_named():
    from dualdl.backend import backend_of
    for obj in (np.ones(3), [1, 2], dl.cpu(0), "torch"):
        assert backend_of(obj, None) is None
        with pytest.raises(TypeError, match=type(obj).__qualname__):
            backend_of(obj)


def test_framework_specific_knowledge_is_a_backend_method():
    """Native dtypes, LR schedulers and Trainer-state tensors are answered by the owning backend."""
    import mxnet as mx
    import torch
    from dualdl import trainer_io
    tb, mb = dl.get_backend("torch"), dl.get_backend("mxnet")
    assert tb.numpy_dtype(torch.float64) == np.float64 and mb.numpy_dtype("float16") == np.float16
    assert dl.to_numpy(dl.zeros(2, dtype=torch.int32, backend="mxnet")).dtype == np.int32
    assert tb.native_lr_scheduler("StepLR") is torch.optim.lr_scheduler.StepLR
    assert mb.native_lr_scheduler("StepLR") is None
    assert mb.is_symbolic(mx.sym.var("x")) and not mb.is_symbolic(mx.nd.zeros(1)) and not tb.is_symbolic(torch.zeros(1))
    arrays = {}
    state = trainer_io.encode({"t": torch.arange(3), "m": mx.nd.ones(2, dtype="float64")}, arrays)
    back = trainer_io.decode(json.loads(json.dumps(state)), arrays)
    assert isinstance(back["t"], torch.Tensor) and back["t"].tolist() == [0, 1, 2]
    assert isinstance(back["m"], np.ndarray) and back["m"].dtype == np.float64 and back["m"].tolist() == [1, 1]
    old = trainer_io.decode({"__tensor__": "a0"}, {"a0": np.ones(2, np.float32)})   # files from 0.1.0
    assert isinstance(old, torch.Tensor) and old.dtype == torch.float32


def test_port_sides_and_optimizers_find_their_backend():
    import mxnet as mx
    import torch
    from dualdl.optim import backend_of_params
    from dualdl.port.sides import framework_of
    assert framework_of(torch.nn.Linear(2, 2)) == "torch" and framework_of(mx.gluon.nn.Dense(2)) == "gluon"
    with pytest.raises(TypeError, match="neither a torch.nn.Module nor a Gluon Block"):
        framework_of(object())
    lin = torch.nn.Linear(2, 2)
    assert backend_of_params(lin.parameters()).name == "torch"
    with pytest.raises(TypeError, match="expected torch Parameters or Gluon Parameters, got int"):
        backend_of_params([1])
    opt = dl.optim.SGD(lin.parameters(), lr=0.1)
    assert isinstance(dl.optim.lr_scheduler.StepLR(opt, 2), torch.optim.lr_scheduler.StepLR)
