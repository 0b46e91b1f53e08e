import os
import subprocess
import sys

import pytest

import dualdl as dl
from dualdl.devices import Device


@pytest.mark.parametrize("spec,expected", [
    ("cpu", Device("cpu", 0)), ("cpu:1", Device("cpu", 1)), ("gpu:1", Device("gpu", 1)),
    ("cuda:2", Device("gpu", 2)), ("cuda", Device("gpu", 0)), ("GPU(3)", Device("gpu", 3)),
    (None, Device("cpu", 0)), (1, Device("gpu", 1)), (Device("cpu", 1), Device("cpu", 1)),
])
def test_parse(spec, expected):
    assert dl.device(spec) == expected


@pytest.mark.parametrize("bad", ["tpu:0", "gpu:-1", "cuda:x", ""])
def test_parse_errors(bad):
    with pytest.raises(ValueError, match="cannot parse device"):
        dl.device(bad)


def test_native_devices_map_both_ways():
    import mxnet as mx
    import torch
    assert dl.device(torch.device("cuda", 1)) == dl.gpu(1)
    assert dl.device(torch.device("cpu")) == dl.cpu()
    assert dl.device(mx.cpu(1)) == dl.cpu(1)
    assert dl.device(mx.gpu(2)) == dl.gpu(2)
    assert dl.get_backend("mxnet").native_device(dl.cpu(1)) == mx.cpu(1)
    assert dl.get_backend("torch").native_device(dl.gpu(1)) == torch.device("cuda:1")
    assert dl.get_backend("torch").native_device(dl.cpu(1)) == torch.device("cpu")


def test_devices_lists_cpu_without_gpus(backend):
    n = dl.get_backend().gpu_count()
    assert dl.devices() == ([dl.gpu(i) for i in range(n)] if n else [dl.cpu()])


def test_visible_gpus_sets_env_in_fresh_process():
    code = ("import os, dualdl; dualdl.visible_gpus([1, 2]); print(os.environ['CUDA_VISIBLE_DEVICES'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "1,2", r.stderr
    with pytest.raises(ValueError, match="comma-separated GPU indices"):
        dl.visible_gpus("a,b")


def test_visible_gpus_refuses_after_cuda_init():
    import torch
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA to initialise")
    torch.zeros(1, device="cuda")
    with pytest.raises(RuntimeError, match="already initialised CUDA"):
        dl.visible_gpus("0")


def test_native_devices_are_parsed_by_their_backend():
    import torch
    with pytest.raises(ValueError, match="unsupported torch device type 'meta'; dualdl handles cpu and cuda"):
        dl.device(torch.device("meta"))
    with pytest.raises(TypeError, match="cannot interpret object"):
        dl.device(object())
    assert dl.get_backend("torch").device_from_native(torch.device("cuda", 3)) == dl.gpu(3)
