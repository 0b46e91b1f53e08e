"""Two processes on each framework's own engine give the update of one process over the global
batch: same weights on every rank, equal to the single-process run of the *same script*."""
import json
import os
import runpy
import socket
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_scripts"))
from launchutil import PYTHON, clean_env, launch, script, stop_launcher  # noqa: E402

pytestmark = pytest.mark.distributed
SCRIPTS = {"torch": "train_torch.py", "mxnet": "train_mx.py"}
NAMES = ("0.weight", "0.bias", "2.weight", "2.bias")
TOL = 1e-5


_REFERENCES = {}


def _reference(engine, base):
    """The same script run unlaunched, as one process over the full batch (in this process)."""
    if engine not in _REFERENCES:
        out = base / f"ref-{engine}"
        argv = sys.argv
        threads = None
        if engine == "torch":
            import torch
            threads = torch.get_num_threads()
        try:
            sys.argv = [script(SCRIPTS[engine]), "--out", str(out)]
            runpy.run_path(script(SCRIPTS[engine]), run_name="__main__")
        finally:
            sys.argv = argv
            import dualdl.distributed as ddist
            ddist.shutdown()
            if threads:
                torch.set_num_threads(threads)
        _REFERENCES[engine] = out
    return _REFERENCES[engine]


def _load(d, rank):
    with open(os.path.join(d, f"rank{rank}.json")) as f:
        meta = json.load(f)
    with np.load(os.path.join(d, f"rank{rank}.npz")) as z:
        return meta, {k: z[k] for k in z.files}


_RUNS = {}


def _distributed_run(engine, base):
    """`dualdl launch --nproc 2` of the engine's script, once per test session."""
    if engine not in _RUNS:
        dist_dir = base / f"dist-{engine}"
        rc, out, err, secs = launch(["--backend", engine, "--nproc", "2", "--timeout", "120"],
                                    SCRIPTS[engine], ["--out", str(dist_dir), "--world-size", "2"])
        assert rc == 0, err[-4000:]
        _RUNS[engine] = dist_dir
    return _RUNS[engine]


@pytest.fixture(scope="module", params=["torch", "mxnet"])
def runs(request, tmp_path_factory):
    engine = request.param
    base = tmp_path_factory.getbasetemp()
    return engine, _distributed_run(engine, base), _reference(engine, base)


def test_ranks_identical_and_equal_to_single_process(runs):
    engine, dist_dir, ref_dir = runs
    (m0, w0), (m1, w1) = _load(dist_dir, 0), _load(dist_dir, 1)
    mref, ref = _load(ref_dir, 0)
    assert (m0["world"], m0["distributed"], mref["world"], mref["distributed"]) == (2, True, 1, False)
    assert m0["gradient_reduction"] == {"torch": "mean", "mxnet": "sum"}[engine]
    diffs = {}
    for k in NAMES:
        np.testing.assert_array_equal(w0[k], w1[k], err_msg=f"{engine}: ranks differ in {k}")
        diffs[k] = float(np.abs(w0[k] - ref[k]).max())
        assert not np.array_equal(ref[k], ref[f"init.{k}"]), "training did not move the weights"
    print(f"\n{engine}: 2 processes vs 1 process over the global batch, max abs diff per "
          f"tensor: {diffs}")
    assert max(diffs.values()) < TOL, diffs


def test_initial_parameters_are_broadcast_from_rank_0(runs):
    engine, dist_dir, ref_dir = runs
    (_, w0), (_, w1), (_, ref) = _load(dist_dir, 0), _load(dist_dir, 1), _load(ref_dir, 0)
    for k in NAMES:   # each rank initialised differently (seed 42 + rank) before broadcast
        np.testing.assert_array_equal(w1[f"init.{k}"], w0[f"init.{k}"])
        np.testing.assert_array_equal(w0[f"init.{k}"], ref[f"init.{k}"])


def test_checkpoint_written_once_by_rank_0_atomically(runs):
    engine, dist_dir, _ = runs
    (m0, w0), (m1, _) = _load(dist_dir, 0), _load(dist_dir, 1)
    assert m0["wrote"] == [True, True] and m1["wrote"] == [False, False]
    leftovers = [n for n in os.listdir(dist_dir) if ".tmp" in n]
    assert leftovers == []
    with np.load(dist_dir / "checkpoint.npz") as ck:
        assert int(ck["writer"]) == 0 and int(ck["epoch"]) == 1
        for k in NAMES:
            np.testing.assert_array_equal(ck[k], w0[k])


def test_torch_and_mxnet_distributed_runs_agree(tmp_path_factory):
    """The one batch-size rule: same numbers in, same update out on both engines."""
    base = tmp_path_factory.getbasetemp()
    w = {e: _load(_distributed_run(e, base), 0)[1] for e in ("torch", "mxnet")}
    diff = max(float(np.abs(w["torch"][k] - w["mxnet"][k]).max()) for k in NAMES)
    print(f"\ntorch DDP vs MXNet dist_sync, 2 processes each: max abs diff {diff:.3g}")
    assert diff < TOL


@pytest.mark.parametrize("engine", ["torch", "mxnet"])
def test_two_nodes_on_one_host(engine, tmp_path, tmp_path_factory):
    """--nnodes/--node-rank/--port: the cluster form, with both "nodes" on this host (MXNet:
    node 0 runs the scheduler and server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "dist"
    common = ["--backend", engine, "--nproc", "1", "--nnodes", "2", "--port", str(port),
              "--timeout", "120"]
    node1 = subprocess.Popen([PYTHON, "-m", "dualdl", "launch", *common, "--node-rank", "1",
                              script(SCRIPTS[engine]), "--out", str(out)],
                             env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        rc0, _, err0, _ = launch([*common, "--node-rank", "0"], SCRIPTS[engine],
                                 ["--out", str(out)], timeout=150)
        _, err1 = node1.communicate(timeout=150)
    finally:
        stop_launcher(node1)
    assert rc0 == 0 and node1.returncode == 0, err0[-3000:] + err1[-3000:]
    ref_dir = _reference(engine, tmp_path_factory.getbasetemp())
    (_, w0), (_, w1), (_, ref) = _load(out, 0), _load(out, 1), _load(ref_dir, 0)
    for k in NAMES:
        np.testing.assert_array_equal(w0[k], w1[k])
        np.testing.assert_allclose(w0[k], ref[k], rtol=0, atol=TOL)
