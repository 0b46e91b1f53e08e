"""Data parallelism on one node: splits, strategies, context sync, BatchNorm rule, deadlock guard."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dualdl as dl
import dualdl.autograd  # noqa: F401
import dualdl.parallel  # noqa: F401
from dualdl.parallel import resolve_devices, resolve_strategy, split_sizes

from _trainer_models import base_weights, data, make, maxdiff, train, weights

STRATEGIES = ("data_parallel", "split_and_load", "per_device_loss")


# ---- neutral helpers ---------------------------------------------------------------------------
@pytest.mark.parametrize("n,parts", [(10, 3), (7, 2), (9, 4), (3, 3), (31, 2)])
def test_split_sizes_match_array_split_and_tensor_split(n, parts):
    import torch
    want = [len(c) for c in np.array_split(np.arange(n), parts)]
    assert split_sizes(n, parts) == want
    assert [c.shape[0] for c in torch.arange(n).tensor_split(parts)] == want


def test_split_sizes_uneven_is_4_3_3_and_small_batches_error():
    assert split_sizes(10, 3) == [4, 3, 3]
    with pytest.raises(ValueError, match="2 sample.*3 devices"):
        split_sizes(2, 3)


def test_strategy_and_device_validation():
    assert resolve_strategy(None, "torch") == "data_parallel"
    assert resolve_strategy(None, "mxnet") == "split_and_load"
    assert resolve_strategy("Per-Device-Loss", "torch") == "per_device_loss"
    with pytest.raises(ValueError, match="unknown data-parallel strategy 'ddp'"):
        resolve_strategy("ddp", "torch")
    with pytest.raises(ValueError, match="distinct"):
        resolve_devices([dl.cpu(0), dl.cpu(0)], dl.cpu(0))
    with pytest.raises(ValueError, match="mix CPUs and GPUs"):
        resolve_devices([dl.cpu(0), dl.gpu(0)], dl.cpu(0))
    with pytest.raises(ValueError, match="at least one"):
        resolve_devices([], dl.cpu(0))
    assert resolve_devices(["cpu:0", "cpu:1"], dl.cpu(0)) == [dl.cpu(0), dl.cpu(1)]


# ---- N devices == 1 device ---------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["mlp", "cnn", "lstm"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_n_devices_equal_one_device_after_5_steps(backend, kind, strategy):
    ref, _, _ = train(kind, backend, 1, strategy)
    for n in (2, 3):
        got, _, tr = train(kind, backend, n, strategy)
        assert tr.devices == [dl.cpu(i) for i in range(n)] and tr.strategy == strategy
        d = maxdiff(got, ref)
        assert d <= 1e-6, f"{backend} {kind} {strategy} on {n} devices: max |W_n - W_1| = {d:.3e}"


def test_pieces_are_split_4_3_3_on_the_batch_axis(backend):
    """Each replica sees np.array_split pieces on the configured axis (TNC: axis 1)."""
    seen = []

    class Probe(dl.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = dl.nn.Linear(4, 2)

        def forward(self, x):
            seen.append(tuple(x.shape))
            return self.fc(x)

    m = Probe()
    opt = dl.optim.SGD(m.parameters(), lr=0.1)
    tr = dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(i) for i in range(3)], batch_axis=1)
    x = np.random.default_rng(0).standard_normal((5, 10, 4)).astype("float32")
    y = np.zeros((5, 10, 2), "float32")
    tr.train_step(x, y)
    assert seen == [(5, 4, 4), (5, 3, 4), (5, 3, 4)]


def test_tnc_split_on_time_axis_gives_different_training(backend):
    """The reason batch_axis exists: splitting TNC input on axis 0 cuts the sequences in time."""
    good, _, _ = train("lstm", backend, 1, None)
    x, y, _ = data("lstm")
    with dl.use(backend):
        m = make("lstm", backend)
        dl.load_state_dict(m, base_weights("lstm"))
        opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        tr = dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(0), dl.cpu(1)], batch_axis=0)
        for s in range(5):
            xs, ys, _ = data("lstm", seed=s)
            tr.train_step(xs, ys)
    assert maxdiff(weights(m), good) > 1e-4


# ---- MXNet: context copies never drift -------------------------------------------------------------
@pytest.mark.parametrize("kind", ["mlp", "cnn_bn"])
@pytest.mark.parametrize("strategy", ["data_parallel", "split_and_load"])
def test_mxnet_context_copies_stay_identical(kind, strategy):
    _, model, tr = train(kind, "mxnet", 3, strategy)
    for name, p in model._collect_params_with_prefix().items():
        copies = [d.asnumpy() for d in p.list_data()]
        assert len(copies) == 3, name
        for c in copies[1:]:
            assert np.array_equal(c, copies[0]), f"{name}: context copies differ by {np.abs(c - copies[0]).max()}"


def test_mxnet_model_is_replicated_from_the_first_context():
    with dl.use("mxnet"):
        m = make("mlp", "mxnet")
        opt = dl.optim.SGD(m.parameters(), lr=0.1)
        dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(0), dl.cpu(1)])
        import mxnet as mx
        assert m.fc1.weight.list_ctx() == [mx.cpu(0), mx.cpu(1)]


# ---- BatchNorm across devices ----------------------------------------------------------------------
def test_batchnorm_uses_per_device_statistics_and_keeps_device_0s_running_stats(backend):
    """Each piece is normalised with its own batch statistics (not the full batch's), and the
    running statistics kept are those updated by device 0's piece (torch DataParallel's rule)."""
    x, y, _ = data("cnn_bn")
    sizes = split_sizes(10, 2)
    with dl.use(backend):
        m = make("cnn_bn", backend)
        dl.load_state_dict(m, base_weights("cnn_bn"))
        opt = dl.optim.SGD(m.parameters(), lr=0.0)      # lr 0: only the buffers move
        tr = dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(0), dl.cpu(1)])
        tr.train_step(x, y)
        got = weights(m)
        # reference: one device, piece 0 only
        r = make("cnn_bn", backend)
        dl.load_state_dict(r, base_weights("cnn_bn"))
        ropt = dl.optim.SGD(r.parameters(), lr=0.0)
        dl.Trainer(r, ropt, dl.losses.MSELoss()).train_step(x[:sizes[0]], y[:sizes[0]])
        want = weights(r)
        full = make("cnn_bn", backend)
        dl.load_state_dict(full, base_weights("cnn_bn"))
        dl.Trainer(full, dl.optim.SGD(full.parameters(), lr=0.0), dl.losses.MSELoss()).train_step(x, y)
    for k in ("bn.running_mean", "bn.running_var"):
        d = float(np.abs(got[k] - want[k]).max())
        assert d <= 1e-6, f"{backend} {k}: |2-device - device-0 piece| = {d:.2e}"
        assert float(np.abs(got[k] - weights(full)[k]).max()) > 1e-4   # differs from full-batch stats


# ---- torch: real DataParallel needs CUDA ----------------------------------------------------------
def test_torch_gpu_devices_without_cuda_are_a_clear_error():
    import torch
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    with dl.use("torch"):
        m = make("mlp", "torch")
        opt = dl.optim.SGD(m.parameters(), lr=0.1)
        with pytest.raises(ValueError, match=r"gpu\(0\).*0 GPU"):
            dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.gpu(0), dl.gpu(1)])


def test_torch_model_to_several_gpus_is_a_clear_error_and_to_a_dualdl_device_works():
    with dl.use("torch"):
        m = make("mlp", "torch")
    assert m.to(dl.cpu(1)) is m and m.to([dl.cpu(0), dl.cpu(1)]) is m
    assert {str(p.device) for p in m.parameters()} == {"cpu"}
    with pytest.raises(ValueError, match=r"one copy of its parameters.*dl.Trainer"):
        m.to([dl.gpu(0), dl.gpu(1)])
    import torch
    assert m.to("cpu") is m and m.to(torch.float32) is m      # torch's own forms are unchanged


def test_torch_real_data_parallel_on_gpus_matches_one_device():
    import torch
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA devices (real nn.DataParallel)")
    x, y, _ = data("mlp")
    res = {}
    for strategy in STRATEGIES:
        for devs in ([dl.gpu(0)], [dl.gpu(0), dl.gpu(1)]):
            with dl.use("torch"):
                m = make("mlp", "torch").to("cuda:0")
                dl.load_state_dict(m, base_weights("mlp"))
                opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
                tr = dl.Trainer(m, opt, dl.losses.MSELoss(), devices=devs, strategy=strategy)
                for s in range(5):
                    xs, ys, _ = data("mlp", seed=s)
                    tr.train_step(xs, ys)
                res[(strategy, len(devs))] = weights(m)
    ref = res[("data_parallel", 1)]
    for k, w in res.items():
        assert maxdiff(w, ref) <= 1e-5, k


# ---- the MXNet multi-context deadlock --------------------------------------------------------------
def test_needs_serial_detects_omp_threads_and_several_cpu_contexts(monkeypatch):
    from dualdl_mx.replicas import needs_serial, worker_threads_risk
    two = [dl.cpu(0), dl.cpu(1)]
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MXNET_CPU_WORKER_NTHREADS", "2")       # measured safe with OMP=1
    assert not needs_serial(two) and not worker_threads_risk(two)
    monkeypatch.delenv("OMP_NUM_THREADS")                       # unset: one thread, measured safe
    assert not needs_serial(two)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert needs_serial(two) and not needs_serial([dl.cpu(0)])
    assert worker_threads_risk([dl.cpu(0)])                     # hangs even on one context
    monkeypatch.delenv("MXNET_CPU_WORKER_NTHREADS")
    assert not worker_threads_risk([dl.cpu(0)])


_DEADLOCK_CHILD = textwrap.dedent("""
    import warnings, numpy as np, mxnet as mx
    import dualdl as dl

    class DotNet(dl.nn.Module):          # nd.dot on two contexts at once is what hangs
        def __init__(self):
            super().__init__()
            self.w = dl.nn.Parameter(np.full((512, 512), 0.001, "float32"))
        def forward(self, x):
            return dl.ops.matmul(x, self.w)

    x = np.random.rand(512, 512).astype("float32")
    with dl.use("mxnet"):
        # without the guard, data_parallel hung here in 2 of 2 runs (OMP_NUM_THREADS=2, 2 cores)
        for strategy in ("data_parallel", "split_and_load"):
            m = DotNet()
            opt = dl.optim.SGD(m.parameters(), lr=1e-3)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                tr = dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(0), dl.cpu(1)], strategy=strategy)
            print("serialised:", tr._replicas.serial, flush=True)
            print("warned:", any("deadlock" in str(x.message) for x in w), flush=True)
            for _ in range(10):
                tr.train_step(x, x)
            c = [d.asnumpy() for d in m.w.list_data()]
            print("ok", strategy, np.array_equal(c[0], c[1]), flush=True)
""")


@pytest.mark.slow
def test_mxnet_two_contexts_with_omp_threads_do_not_deadlock(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLC_")}
    env["OMP_NUM_THREADS"] = "2"
    script = tmp_path / "child.py"
    script.write_text(_DEADLOCK_CHILD)
    try:
        r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("MXNet training on two CPU contexts with OMP_NUM_THREADS=2 hung (deadlock guard failed)")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "warned: True" in r.stdout, r.stdout      # the RuntimeWarning (once per process)
    assert r.stdout.count("serialised: True") == 2, r.stdout
    assert "ok data_parallel True" in r.stdout and "ok split_and_load True" in r.stdout, r.stdout


# ---- hand-written data-parallel loops ----------------------------------------------------------------
def test_split_batch_gives_4_3_3_pieces_on_each_device(backend):
    x = np.arange(5 * 10 * 2, dtype="float32").reshape(5, 10, 2)
    parts = dl.parallel.split_batch(x, [dl.cpu(0), dl.cpu(1), dl.cpu(2)], batch_axis=1)
    assert [tuple(dl.to_numpy(p).shape) for p in parts] == [(5, 4, 2), (5, 3, 2), (5, 3, 2)]
    np.testing.assert_array_equal(np.concatenate([dl.to_numpy(p) for p in parts], axis=1), x)
    if backend == "mxnet":
        assert [dl.device_of(p) for p in parts] == [dl.cpu(0), dl.cpu(1), dl.cpu(2)]
    with pytest.raises(ValueError, match="2 sample.*3 devices"):
        dl.parallel.split_batch(x[:, :2], [dl.cpu(0), dl.cpu(1), dl.cpu(2)], batch_axis=1)


def test_hand_written_multi_device_loop_matches_the_trainer(backend):
    """split_batch + record + per-device per-sample losses + backward + sum_gradients +
    step(batch_size=B): MXNet's recipe, written once for both backends."""
    devs = [dl.cpu(0), dl.cpu(1), dl.cpu(2)]
    ref, _, _ = train("mlp", backend, 3, "split_and_load")
    with dl.use(backend):
        m = make("mlp", backend)
        dl.load_state_dict(m, base_weights("mlp"))
        assert m.to(devs) is m                  # MXNet: one copy per context; torch: one CPU copy
        opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        for s in range(5):
            x, y, _ = data("mlp", seed=s)
            xs, ys = dl.parallel.split_batch(x, devs), dl.parallel.split_batch(y, devs)
            opt.zero_grad()
            losses = []
            with dl.autograd.record(m):
                for xi, yi in zip(xs, ys):
                    losses.append(dl.ops.mean(dl.losses.MSELoss(reduction="none")(m(xi), yi), dim=1))
            dl.autograd.backward(losses)
            dl.parallel.sum_gradients(m)
            opt.step(batch_size=len(x))
    d = maxdiff(weights(m), ref)
    assert d <= 1e-6, f"{backend}: hand-written loop vs Trainer: {d:.2e}"


@pytest.mark.parametrize("strategy", ["split_and_load", "data_parallel"])
def test_mxnet_hybridized_model_trains_like_the_imperative_one(strategy):
    ref, _, _ = train("cnn_bn", "mxnet", 2, strategy)
    with dl.use("mxnet"):
        m = make("cnn_bn", "mxnet")
        dl.load_state_dict(m, base_weights("cnn_bn"))
        m.hybridize()
        opt = dl.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
        tr = dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(0), dl.cpu(1)], strategy=strategy)
        for s in range(5):
            x, y, _ = data("cnn_bn", seed=s)
            tr.train_step(x, y)
    d = maxdiff(weights(m), ref)
    assert d <= 1e-6, f"hybridized vs imperative ({strategy}, 2 contexts): {d:.2e}"


class TwoHeads(dl.nn.Module):
    """Returns a tuple: gathered element-wise by data_parallel."""

    def __init__(self):
        super().__init__()
        self.body = dl.nn.Linear(6, 8)
        self.a = dl.nn.Linear(8, 3)
        self.b = dl.nn.Linear(8, 3)

    def forward(self, x):
        h = dl.ops.tanh(self.body(x))
        return self.a(h), self.b(h)


def _two_head_loss(outs, y):
    mse = dl.losses.MSELoss()
    return dl.ops.add(mse(outs[0], y), dl.ops.mul(mse(outs[1], y), 0.5))


@pytest.mark.parametrize("strategy", ["data_parallel", "split_and_load"])
def test_tuple_outputs_are_gathered_per_element(backend, strategy):
    res = {}
    for n in (1, 3):
        dl.seed(3)
        m = TwoHeads()
        if n == 1:
            init = weights(m)
        dl.load_state_dict(m, init)
        tr = dl.Trainer(m, dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), _two_head_loss,
                        devices=[dl.cpu(i) for i in range(n)], strategy=strategy)
        for s in range(3):
            x, y, _ = data("mlp", seed=s)
            tr.train_step(x, y)
        loss, outs = tr.eval_step(x, y)
        assert isinstance(outs, tuple) and [tuple(dl.to_numpy(o).shape) for o in outs] == [(10, 3), (10, 3)]
        res[n] = weights(m)
    assert maxdiff(res[3], res[1]) <= 1e-6


def test_native_gluon_model_matches_gluons_own_multi_context_recipe():
    """A ported, unmodified Gluon model (deferred shapes, Gluon BatchNorm) under dl.Trainer on 3
    contexts == Gluon's documented recipe: split_and_load(even_split=False), per-sample L2Loss,
    backward, gluon.Trainer(kvstore='device').step(global batch). Plain SGD, where MXNet's and
    torch's formulas coincide."""
    import mxnet as mx
    from mxnet import autograd, gluon
    ctxs = [mx.cpu(0), mx.cpu(1), mx.cpu(2)]
    x, y, _ = data("mlp")

    def net():
        n = gluon.nn.HybridSequential()
        n.add(gluon.nn.Dense(8, activation="tanh"), gluon.nn.BatchNorm(), gluon.nn.Dense(3))
        n.initialize(mx.init.Xavier(), ctx=mx.cpu(0))
        n(mx.nd.array(x[:1]))                      # run the deferred initialisation
        for i, p in enumerate(n.collect_params().values()):
            p.set_data(mx.nd.array(np.random.default_rng(i).standard_normal(p.shape) * 0.3 + (1 if "var" in p.name else 0)))
        return n

    ref = net()
    ref.collect_params().reset_ctx(ctxs)
    gtr = gluon.Trainer(ref.collect_params(), "sgd", {"learning_rate": 0.1, "wd": 1e-3}, kvstore="device")
    l2 = gluon.loss.L2Loss()
    mine = net()
    opt = dl.optim.SGD([p for p in mine.collect_params().values() if p.grad_req != "null"], lr=0.1,
                       weight_decay=1e-3)
    tr = dl.Trainer(mine, opt, dl.losses.gluon.GluonL2Loss(), devices=[dl.cpu(0), dl.cpu(1), dl.cpu(2)],
                    strategy="split_and_load")
    for s in range(5):
        xs, ys, _ = data("mlp", seed=s)
        xp = gluon.utils.split_and_load(mx.nd.array(xs), ctxs, even_split=False)
        yp = gluon.utils.split_and_load(mx.nd.array(ys), ctxs, even_split=False)
        with autograd.record():
            losses = [l2(ref(a), b) for a, b in zip(xp, yp)]
        autograd.backward(losses)
        gtr.step(len(xs))
        tr.train_step(xs, ys)
    a = {k: p.data(mx.cpu(0)).asnumpy() for k, p in ref._collect_params_with_prefix().items()}
    b = {k: p.data(mx.cpu(0)).asnumpy() for k, p in mine._collect_params_with_prefix().items()}
    d = maxdiff(a, b)
    assert d <= 1e-6, f"dl.Trainer vs Gluon's own 3-context recipe: {d:.2e}"
    loss, out = tr.eval_step(x, y)
    assert dl.to_numpy(out).shape == (10, 3)
