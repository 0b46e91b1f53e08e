"""Every CUDA path against the CPU path, with measured max abs/rel differences: dl.Trainer on one
GPU, real ``torch.nn.DataParallel`` and the per-device-loss strategy on two GPUs, MXNet
``split_and_load`` over GPU contexts, MXNet's float64 BatchNorm on a GPU, NCCL through
``dualdl launch`` and the demo on a GPU.

All marked ``gpu``: ``make gpu-check`` runs them (with ``DUALDL_REQUIRE_GPU=1``, so a machine where
no framework sees CUDA fails instead of skipping everything). Without an NVIDIA driver the
conftest skips them at collection with one reason and no framework import (no CUDA init).
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import dualdl as dl
from dualdl import nn
from dualdl.testing.report import compare_arrays

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_scripts"))
from _trainer_models import base_weights, make  # noqa: E402
from launchutil import clean_env, launch, run_single  # noqa: E402

pytestmark = pytest.mark.gpu

RTOL, ATOL = 1e-4, 1e-5      # GPU vs CPU: other kernels and summation orders; TF32 off (below)


def gpu_count(backend: str) -> int:
    """CUDA devices the backend sees; 0 where its framework is not installed (a CUDA image with
    torch alone: the MXNet rows skip, the torch rows run)."""
    if backend not in dl.available_backends():
        return 0
    return dl.get_backend(backend).gpu_count()


def need_gpus(backend: str, n: int) -> None:
    if backend not in dl.available_backends():
        pytest.skip(f"needs {n} CUDA device(s) visible to {backend}, whose framework is not installed here")
    have = gpu_count(backend)
    if have < n:
        pytest.skip(f"needs {n} CUDA device(s) visible to {backend}, it sees {have}")


@pytest.fixture(autouse=True)
def no_tf32():
    """torch's cuDNN convolutions default to TF32 (10-bit mantissa): compare at float32. Through
    cudnn.flags() (torch's test harness, imported by the module_db test, forbids setting the flag)."""
    if "torch" in sys.modules:
        import torch
        cudnn = torch.backends.cudnn
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark, deterministic=cudnn.deterministic,
                             allow_tf32=False):
                yield
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
    else:
        yield


def test_some_framework_sees_cuda_when_required():
    """`make gpu-check` sets DUALDL_REQUIRE_GPU=1: every test skipping for want of CUDA is a failure."""
    if os.environ.get("DUALDL_REQUIRE_GPU") != "1":
        pytest.skip("DUALDL_REQUIRE_GPU is not set")
    seen = {b: gpu_count(b) for b in ("torch", "mxnet")}
    assert any(seen.values()), f"DUALDL_REQUIRE_GPU=1 but no framework sees a CUDA device (GPUs per backend: {seen})"


def _init():
    """Randomised weights of the shared CNN with BatchNorm (norm scales, shifts and biases too)."""
    return base_weights("cnn_bn")


def _data(n=8):
    r = np.random.default_rng(1)
    return r.standard_normal((n, 2, 8, 8)).astype("float32"), r.integers(0, 3, n).astype("int64")


def train(backend, devices, strategy=None, steps=3):
    """(losses, state) after ``steps`` SGD-momentum steps of the CNN from _init() on ``devices``."""
    x, y = _data()
    with dl.use(backend):
        net = make("cnn_bn", backend)
        dl.load_state_dict(net, _init())
        if devices[0].kind == "gpu":
            net.to(dl.get_backend(backend).native_device(devices[0]))
        tr = dl.Trainer(net, dl.optim.SGD(net.parameters(), lr=0.05, momentum=0.9), dl.losses.CrossEntropyLoss(),
                        devices=devices, strategy=strategy)
        losses = [tr.train_step(x, y) for _ in range(steps)]
        return losses, {k: dl.to_numpy(v) for k, v in dl.state_dict(net).items()}, tr


def assert_close(got, want, what):
    worst = []
    for k in want:
        c = compare_arrays(got[k], want[k], RTOL, ATOL)
        worst.append((c["usage"], k, c["max_abs"], c["max_rel"]))
        assert c["passed"], f"{what}: {k} max abs {c['max_abs']:.3g}, max rel {c['max_rel']:.3g}"
    return max(worst)


def test_trainer_on_one_gpu_matches_cpu(backend):
    need_gpus(backend, 1)
    l_gpu, s_gpu, _ = train(backend, [dl.gpu(0)])
    l_cpu, s_cpu, _ = train(backend, [dl.cpu(0)])
    assert np.allclose(l_gpu, l_cpu, rtol=RTOL, atol=ATOL), (l_gpu, l_cpu)
    assert_close(s_gpu, s_cpu, f"{backend} gpu(0) vs cpu(0)")


@pytest.mark.parametrize("strategy", ["data_parallel", "per_device_loss"])
def test_torch_two_gpus_match_cpu_emulation(strategy):
    """Real nn.DataParallel (data_parallel: one loss on gpu 0; per_device_loss: loss inside each
    replica) against dualdl's CPU emulation of the same strategy on cpu(0), cpu(1)."""
    need_gpus("torch", 2)
    import torch
    l_gpu, s_gpu, tr = train("torch", [dl.gpu(0), dl.gpu(1)], strategy)
    assert tr._replicas.real and any(isinstance(w, torch.nn.DataParallel) for w in tr._replicas._wrappers.values())
    l_cpu, s_cpu, _ = train("torch", [dl.cpu(0), dl.cpu(1)], strategy)
    assert np.allclose(l_gpu, l_cpu, rtol=RTOL, atol=ATOL), (l_gpu, l_cpu)
    assert_close(s_gpu, s_cpu, f"torch {strategy} on 2 GPUs vs CPU emulation")


def test_mxnet_split_and_load_on_gpus_matches_cpu_contexts():
    need_gpus("mxnet", 2)
    l_gpu, s_gpu, _ = train("mxnet", [dl.gpu(0), dl.gpu(1)], "split_and_load")
    l_cpu, s_cpu, _ = train("mxnet", [dl.cpu(0), dl.cpu(1)], "split_and_load")
    assert np.allclose(l_gpu, l_cpu, rtol=RTOL, atol=ATOL), (l_gpu, l_cpu)
    assert_close(s_gpu, s_cpu, "mxnet split_and_load on 2 GPUs vs 2 CPU contexts")


def _batchnorm(backend, device):
    """BatchNorm2d in training mode: output, input gradient, running statistics."""
    r = np.random.default_rng(2)
    x = (3.0 + 2.0 * r.standard_normal((6, 5, 7, 7))).astype("float32")
    g = r.standard_normal(x.shape).astype("float32")
    with dl.use(backend):
        bn = nn.BatchNorm2d(5)
        if device.kind == "gpu":
            bn.to(dl.get_backend(backend).native_device(device))
        xt = dl.from_numpy(x, device=device)
        if backend == "torch":
            xt.requires_grad_(True)
        else:
            xt.attach_grad()
        with dl.autograd.record(bn):
            out = bn(xt)
        dl.autograd.backward(out, dl.from_numpy(g, device=device))
        grad = dl.to_numpy(xt.grad)
        state = {k: dl.to_numpy(v) for k, v in dl.state_dict(bn).items()}
    return dict(state, out=dl.to_numpy(out), grad=grad)


def test_mxnet_float64_batchnorm_on_gpu_matches_cpu_and_torch():
    """dualdl's MXNet BatchNorm runs its operator in float64 (dualdl_mx/norm.py); on a GPU too,
    it must keep float32 in/out and agree with the CPU and with torch's CUDA BatchNorm."""
    need_gpus("mxnet", 1)
    gpu = _batchnorm("mxnet", dl.gpu(0))
    assert gpu["out"].dtype == gpu["grad"].dtype == np.float32, (gpu["out"].dtype, gpu["grad"].dtype)
    cpu = _batchnorm("mxnet", dl.cpu(0))
    assert_close(gpu, cpu, "mxnet BatchNorm gpu vs cpu")
    if gpu_count("torch"):
        torch_gpu = _batchnorm("torch", dl.gpu(0))
        assert_close(gpu, torch_gpu, "mxnet vs torch BatchNorm on GPU")


def test_nccl_launch_matches_one_cpu_process(tmp_path):
    """`dualdl launch` on CUDA picks NCCL; N ranks on N GPUs take the one-process CPU update."""
    need_gpus("torch", 1)
    n = min(2, gpu_count("torch"))
    run_single("gpu_run.py", ["--out", str(tmp_path / "cpu"), "--device", "cpu"], timeout=120)
    rc, out, err, _ = launch(["--backend", "torch", "--nproc", str(n), "--timeout", "120"], "gpu_run.py",
                             ["--out", str(tmp_path / "nccl")], timeout=180, env=clean_env())
    assert rc == 0, err[-3000:]
    ref = dict(np.load(tmp_path / "cpu" / "rank0.npz"))
    for r in range(n):
        meta = json.loads((tmp_path / "nccl" / f"rank{r}.json").read_text())
        assert meta["pg_backend"] == "nccl" and meta["world"] == n, meta
        assert_close(dict(np.load(tmp_path / "nccl" / f"rank{r}.npz")), ref, f"NCCL rank {r} vs one CPU process")


def test_demo_on_gpu(tmp_path):
    """The demo uses the GPUs when there are: tiny run, lockstep loss agreement on CUDA (the demo
    leaves torch's TF32 convolutions on, so 1e-3 relative, not float32 rounding)."""
    need_gpus("torch", 1)
    need_gpus("mxnet", 1)
    cmd = [sys.executable, "-m", "dualdl", "demo", "--epochs", "1", "--train-size", "64", "--test-size", "16",
           "--batch-size", "16", "--devices", "1", "--no-progress", "--out", str(tmp_path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=clean_env())
    assert r.returncode == 0, r.stderr[-3000:]
    assert "## torch: data_parallel on gpu:0" in r.stdout and "## mxnet: split_and_load on gpu:0" in r.stdout
    rows = re.findall(r"^\| (\d) \| [0-9.]+ \| [0-9.]+ \| ([0-9.e+-]+) / ([0-9.e+-]+) \| ([0-9.e+-]+) \|", r.stdout, re.M)
    assert len(rows) == 3 and all(float(rel) < 1e-3 for _, _, rel, _ in rows), r.stdout


def test_module_db_on_cuda():
    """torch's own module tests (module_db, tests/_module_db.py) with every dualdl.nn layer on a GPU
    against torch.nn on the same GPU: forward, input and parameter gradients, float32 and float64.
    Catches what the CPU suite cannot: a tensor a layer creates on the CPU, a kernel with no CUDA
    path, a gradient handed over on the wrong device."""
    need_gpus("torch", 1)
    pytest.importorskip("expecttest")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _module_db as M
    old, M.DEVICE = M.DEVICE, "cuda"
    try:
        table = M.run(candidates=("torch",))
    finally:
        M.DEVICE = old
    counts = table.counts("torch")
    print("\nmodule_db on CUDA:\n" + M.report(table, ["torch"]))
    assert counts["match"] >= 300, counts
    assert not counts["mismatch"] and not counts["raw"], M.report(table, ["torch"])
    assert all("got an input with no elements" in o.detail for o in table.outcomes if o.status == "refused"), \
        M.report(table, ["torch"])
