"""dl.Trainer written once runs unchanged under `dualdl launch`: 2 processes, each given its shard
of the global batch, take the update of 1 process given the whole global batch.

Per backend: the script ``dist_scripts/trainer_run.py`` runs as one process (A), then under
``dualdl launch --nproc 2`` resuming A's checkpoint too (B), then as one process resuming B's
checkpoint (C). Scenarios: MLP + SGD(momentum, weight decay), MLP + Adam (weight decay, gradient
clipping, a layer that never gets a gradient), gradient accumulation, uneven local batches (5 + 3),
two devices in each process (vs one process on one device) and a CNN with BatchNorm.
"""
import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_scripts"))
from launchutil import launch, run_single  # noqa: E402

SCRIPT = "trainer_run.py"


def launched(f):
    """Tests that read the results of `dualdl launch` runs (~15-20 s per backend, shared)."""
    return pytest.mark.distributed(pytest.mark.slow(f))


TOL = 1e-6              # 2 processes vs 1 process, same backend
CROSS_TOL = 1e-5        # torch vs MXNet
SCENARIOS = ("mlp_sgd", "mlp_adam", "mlp_accum", "mlp_uneven", "mlp_2dev", "mlp_nan", "mlp_nangrad", "cnn_bn")
REFERENCE = {"cnn_bn": "cnn_bn_2dev", "mlp_2dev": "mlp_sgd"}    # the one-process run to equal
_RUNS = {}


def _load(d, rank):
    with open(os.path.join(d, f"rank{rank}.json")) as f:
        meta = json.load(f)
    with np.load(os.path.join(d, f"rank{rank}.npz")) as z:
        return meta, {k: z[k] for k in z.files}


def _runs(engine, base):
    """(A, B, C) result directories, computed once per backend and session (a failure too)."""
    if engine not in _RUNS:
        a, b, c = (base / f"trainer-{engine}-{x}" for x in ("single", "dist", "resume1"))
        try:
            run_single(SCRIPT, ["--backend", engine, "--out", str(a)], timeout=90)
            rc, _, err, _ = launch(["--backend", engine, "--nproc", "2", "--timeout", "120"], SCRIPT,
                                   ["--backend", engine, "--out", str(b), "--resume", str(a / "ckpt.npz")],
                                   timeout=150)
            assert rc == 0, err[-4000:]
            run_single(SCRIPT, ["--backend", engine, "--out", str(c), "--resume", str(b / "ckpt.npz")],
                       timeout=90)
        except BaseException as e:              # do not pay for a failing run twice
            _RUNS[engine] = e
            raise
        _RUNS[engine] = (a, b, c)
    if isinstance(_RUNS[engine], BaseException):
        raise AssertionError(f"the {engine} runs failed earlier in this session: {_RUNS[engine]!r}"[:2000])
    return _RUNS[engine]


@pytest.fixture(scope="module", params=["torch", "mxnet"])
def runs(request, tmp_path_factory):
    return (request.param,) + _runs(request.param, tmp_path_factory.getbasetemp())


def _group(w, prefix):
    return {k[len(prefix) + 1:]: v for k, v in w.items()
            if k.startswith(prefix + "/") and not k.startswith(prefix + "/init/")}


def _maxdiff(a, b):
    assert a.keys() == b.keys() and a, (sorted(a), sorted(b))
    return max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in a)


@launched
def test_ranks_bitwise_equal_and_equal_to_one_process(runs):
    engine, single, dist, _ = runs
    (m0, w0), (m1, w1), (ms, ws) = _load(dist, 0), _load(dist, 1), _load(single, 0)
    assert (m0["world"], m1["world"], ms["world"]) == (2, 2, 1)
    diffs = {}
    for name in SCENARIOS:
        g0, g1 = _group(w0, name), _group(w1, name)
        for k in g0:
            np.testing.assert_array_equal(g0[k], g1[k], err_msg=f"{engine} {name}: ranks differ in {k}")
        ref = _group(ws, REFERENCE.get(name, name))
        diffs[name] = _maxdiff(g0, ref)
        moved = _maxdiff(g0, _group(ws, f"{name}/init"))
        assert moved > 1e-3, f"{name}: training did not move the weights"
    print(f"\n{engine}: 2 processes vs 1 process over the global batches, max abs diff: {diffs}")
    assert max(diffs.values()) <= TOL, diffs
    # the reported loss is the global batch's, on every rank (not with accumulation: other micro-batches)
    for name in ("mlp_sgd", "mlp_adam", "mlp_uneven"):
        assert m0["losses"][name] == m1["losses"][name]
        np.testing.assert_allclose(m0["losses"][name], ms["losses"][name], rtol=1e-6, atol=0)
    np.testing.assert_allclose(m0["losses"]["cnn_bn"], ms["losses"]["cnn_bn_2dev"], rtol=1e-6, atol=0)


@launched
def test_initial_parameters_and_buffers_come_from_rank_0(runs):
    """Ranks > 0 start from other weights (and BatchNorm running stats) until the Trainer broadcasts."""
    engine, single, dist, _ = runs
    (_, w0), (_, w1), (_, ws) = _load(dist, 0), _load(dist, 1), _load(single, 0)
    for name in SCENARIOS:
        init0, init1 = _group(w0, f"{name}/init"), _group(w1, f"{name}/init")
        assert _maxdiff(init0, _group(ws, f"{name}/init")) == 0.0
        assert _maxdiff(init1, init0) == 0.0
    assert "bn.running_mean" in _group(w0, "cnn_bn/init")


@launched
def test_batchnorm_running_stats_are_rank_0s_like_device_0s(runs):
    """Buffer rule: rank 0's running statistics are kept and sent to every rank each step, as one
    process keeps device 0's: 2 processes equal 1 process on 2 devices fed the same pieces."""
    engine, single, dist, _ = runs
    (_, w0), (_, w1), (_, ws) = _load(dist, 0), _load(dist, 1), _load(single, 0)
    for k in ("bn.running_mean", "bn.running_var"):
        np.testing.assert_array_equal(w0[f"cnn_bn/{k}"], w1[f"cnn_bn/{k}"])
        np.testing.assert_allclose(w0[f"cnn_bn/{k}"], ws[f"cnn_bn_2dev/{k}"], rtol=0, atol=TOL)
        assert not np.array_equal(w0[f"cnn_bn/{k}"], w0[f"cnn_bn/init/{k}"])


@launched
def test_parameter_without_gradient_is_skipped_on_every_rank(runs):
    engine, _, dist, _ = runs
    for r in (0, 1):
        _, w = _load(dist, r)
        for k in ("spare.weight", "spare.bias"):       # Adam with weight decay would move them
            np.testing.assert_array_equal(w[f"mlp_adam/{k}"], w[f"mlp_adam/init/{k}"])


@launched
def test_nan_on_one_rank_skips_the_step_on_every_rank(runs):
    """One sample of global batch 1 is NaN; it is on rank 1 only. nonfinite="skip": every rank
    drops that step (the global loss is NaN) and stays equal to the one-process run."""
    engine, single, dist, _ = runs
    (m0, _), (m1, _), (ms, _) = _load(dist, 0), _load(dist, 1), _load(single, 0)
    assert (m0["nan_in_my_batch_1"], m1["nan_in_my_batch_1"]) == (False, True)
    assert m0["skipped"] == m1["skipped"] == ms["skipped"] == [{"step": 1, "finite": False}]
    for m in (m0, m1, ms):
        assert np.isnan(m["losses"]["mlp_nan"][1]) and np.isfinite(m["losses"]["mlp_nan"][2])


@launched
def test_nan_gradient_on_one_rank_skips_the_step_on_every_rank(runs):
    """A finite loss whose gradient is NaN for one sample of global batch 1, on rank 1 only: the
    summed gradients are NaN on every rank, so every rank drops that step (issue 16.1)."""
    engine, single, dist, _ = runs
    (m0, _), (m1, _), (ms, _) = _load(dist, 0), _load(dist, 1), _load(single, 0)
    assert (m0["nangrad_in_my_batch_1"], m1["nangrad_in_my_batch_1"]) == (False, True)
    want = [{"step": 1, "keys": ["grad_max_abs", "step"], "nan": True}]
    assert m0["skipped_grad"] == m1["skipped_grad"] == ms["skipped_grad"] == want
    for m in (m0, m1, ms):
        assert all(np.isfinite(m["losses"]["mlp_nangrad"]))


@launched
def test_checkpoint_on_rank_0_resumes_on_any_world_size(runs):
    engine, single, dist, resume1 = runs
    (m0, w0), (m1, w1) = _load(dist, 0), _load(dist, 1)
    assert (m0["wrote"], m1["wrote"]) == (True, False)
    assert [n for n in os.listdir(dist) if ".tmp" in n] == []
    from dualdl import trainer_io
    state = trainer_io.read(str(dist / "ckpt.npz"))
    assert state["step"] == 3 and state["backend"] == engine
    ref = _group(_load(single, 0)[1], "mlp_sgd")
    diffs = {
        "2 procs <- 2-proc ckpt": _maxdiff(_group(w0, "resume_own"), ref),
        "2 procs <- 1-proc ckpt": _maxdiff(_group(w0, "resume_other"), ref),
        "1 proc <- 2-proc ckpt": _maxdiff(_group(_load(resume1, 0)[1], "resume_other"), ref),
        "1 proc <- 1-proc ckpt": _maxdiff(_group(_load(single, 0)[1], "resume_own"), ref),
    }
    for k in ("resume_own", "resume_other"):
        assert _maxdiff(_group(w0, k), _group(w1, k)) == 0.0
    print(f"\n{engine}: resumed vs uninterrupted one-process run, max abs diff: {diffs}")
    assert max(diffs.values()) <= TOL, diffs
    assert m0["losses"]["resume_own"] == m0["losses"]["mlp_sgd"][3:]


@launched
def test_torch_and_mxnet_distributed_trainers_agree(tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    w = {e: _load(_runs(e, base)[1], 0)[1] for e in ("torch", "mxnet")}
    diffs = {n: _maxdiff(_group(w["torch"], n), _group(w["mxnet"], n)) for n in SCENARIOS}
    print(f"\ntorch vs MXNet, dl.Trainer on 2 processes each: max abs diff {diffs}")
    assert max(diffs.values()) <= CROSS_TOL, diffs


# ---- one process: the Trainer's distributed switches and its checkpoint file ------------------
def _mlp_trainer(backend, **kw):
    import dualdl as dl
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _trainer_models import MLP
    m = MLP(backend=backend)
    return dl.Trainer(m, dl.optim.Adam(m.parameters(), lr=0.01), dl.losses.MSELoss(), **kw), m


def test_launched_process_without_init_is_refused(backend, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match=r"dl.distributed.init\(\) was not called"):
        _mlp_trainer(backend)
    tr, _ = _mlp_trainer(backend, distributed=False)       # each process alone, on purpose
    assert tr.world_size == 1
    monkeypatch.delenv("WORLD_SIZE")
    with pytest.raises(RuntimeError, match="distributed=True"):
        _mlp_trainer(backend, distributed=True)
    with pytest.raises(TypeError, match="distributed must be"):
        _mlp_trainer(backend, distributed="yes")


def test_save_load_file_resumes_exactly_and_never_unpickles(backend, tmp_path):
    import dualdl as dl
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((8, 6)).astype("float32"), rng.standard_normal((8, 3)).astype("float32")
    tr, m = _mlp_trainer(backend, seed=3)
    for _ in range(2):
        tr.train_step(x, y)
    path = tmp_path / "state.npz"
    assert tr.save(path) is True and os.listdir(tmp_path) == ["state.npz"]
    with np.load(path, allow_pickle=False) as z:         # plain arrays + one JSON entry
        assert all(z[k].dtype != object for k in z.files)
    tr.train_step(x, y)
    want = {k: dl.to_numpy(v).copy() for k, v in dl.state_dict(m).items()}
    tr2, m2 = _mlp_trainer(backend, seed=3)
    tr2.load(path)
    assert tr2.global_step == 2
    tr2.train_step(x, y)
    for k, v in dl.state_dict(m2).items():
        np.testing.assert_array_equal(dl.to_numpy(v), want[k], err_msg=k)
    bad = tmp_path / "bad.npz"
    np.savez(bad, w=np.zeros(3))
    before = {k: dl.to_numpy(v).copy() for k, v in dl.state_dict(m2).items()}
    with pytest.raises(ValueError, match="not a dualdl Trainer state file"):
        tr2.load(bad)
    cut = tmp_path / "cut.npz"
    cut.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ValueError, match="cannot read the Trainer state file"):
        tr2.load(cut)
    for k, v in dl.state_dict(m2).items():
        np.testing.assert_array_equal(dl.to_numpy(v), before[k])


def test_trainer_state_file_keeps_types(tmp_path):
    from dualdl import trainer_io
    state = {"state": {0: {"step": np.float32(3), "buf": np.arange(4, dtype=np.float64)}},
             "groups": [{"betas": (0.9, 0.999), "params": [0, 1], "nesterov": False, "fused": None}],
             "rng": ("MT19937", np.arange(3, dtype=np.uint32), 2 ** 70, -1, float("nan"), float("-inf")),
             "name": "x", (1, 2): "tuple key"}
    path = str(tmp_path / "s.npz")
    trainer_io.write(state, path)
    back = trainer_io.read(path)
    assert set(back) == set(state) and set(back["state"]) == {0}
    assert back["state"][0]["step"] == np.float32(3) and back["state"][0]["step"].dtype == np.float32
    np.testing.assert_array_equal(back["state"][0]["buf"], state["state"][0]["buf"])
    assert back["groups"] == state["groups"] and isinstance(back["groups"][0]["betas"], tuple)
    r = back["rng"]
    assert r[0] == "MT19937" and r[2] == 2 ** 70 and r[3] == -1 and np.isnan(r[4]) and r[5] == float("-inf")
    assert r[1].dtype == np.uint32 and back[(1, 2)] == "tuple key"
    with pytest.raises(TypeError, match="cannot save a object"):
        trainer_io.write({"bad": object()}, str(tmp_path / "t.npz"))
    assert not (tmp_path / "t.npz").exists()
