"""Smoke test of benchmarks/ (``make bench``) at tiny sizes, so the benchmark code cannot rot.

It checks the harness (interleaving, medians, paired ratios) on functions of known cost, runs a
few real cases through the same entry point as ``make bench`` into a temporary directory, and
checks that the JSON and Markdown hold sane fields. It asserts nothing about dualdl's speed.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import harness, train_step  # noqa: E402


def test_interleaved_timing_and_paired_ratio():
    calls = []

    def fast():
        calls.append("a")
        time.sleep(0.002)

    def slow():
        calls.append("b")
        time.sleep(0.006)

    times = harness.time_interleaved({"a": fast, "b": slow}, repeats=6, warmup=1, min_sample_s=0.0)
    assert [len(v) for v in times.values()] == [6, 6]
    timed = calls[2 + 2:]                        # after warm-up (1 each) and calibration (1 each)
    assert timed[:2] == ["a", "b"] and timed[2:4] == ["b", "a"], "rounds must alternate who goes first"
    row = harness.ratio_row("g", "slow vs fast", times, "b", "a", target=1.03)
    assert row.baseline == "a" and row.rounds == 6
    assert 0.005 < row.value < 0.05 and 0.0015 < row.baseline_value < 0.03
    assert 1.5 < row.ratio < 4.0, row.ratio       # 6 ms / 2 ms, plus sleep overshoot
    assert row.ratio_p25 <= row.ratio <= row.ratio_p75
    assert row.ok is False                        # a ratio of ~3 is over a 1.03 target


def test_quantile_and_value_row():
    assert harness.quantile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    r = harness.value_row("startup", "x", [0.03, 0.01, 0.02], target=0.05)
    assert r.value == 0.02 and r.ok is True


@pytest.mark.slow
def test_make_bench_entry_point_quick(tmp_path):
    from benchmarks.__main__ import run
    cfg = harness.Config.make(quick=True, repeats=3, warmup=1, min_sample_s=0.0, keras=False,
                              backends=("torch", "mxnet"), workdir=str(tmp_path))
    js, md = tmp_path / "results.json", tmp_path / "bench.md"
    rows = run(cfg, only=["train_step:mlp", "guarantees", "startup:import", "port:gluon_to_torch",
                          "data_parallel:cuda"],
               json_path=str(js), md_path=str(md), log=lambda *a, **k: None)
    assert not [r for r in rows if r.group == "errors"], [r.note for r in rows if r.group == "errors"]

    data = json.loads(js.read_text())
    m = data["machine"]
    assert m["cores"] >= 1 and m["cpu"] and m["python"]
    assert m["versions"]["torch"] and m["versions"]["mxnet"]
    steps = [r for r in data["rows"] if r["group"] == "train_step"]
    assert {r["extra"]["backend"] for r in steps} == {"torch", "mxnet"}
    assert {r["name"].split(" / ")[-1] for r in steps} == {"dualdl", "dl.Trainer"}
    for r in steps:
        assert r["baseline"] == "native" and r["rounds"] == 3 and r["target"] == train_step.TARGET == 1.05
        assert r["value"] > 0 and r["baseline_value"] > 0
        assert math.isfinite(r["ratio"]) and r["ratio"] > 0
    paid = {r["name"]: r for r in data["rows"] if r["group"] == "guarantees"}
    for kind in ("mlp", "lenet"):
        assert {f"{kind} / torch / dl.Trainer without the finite check", f"{kind} / torch / dl.Trainer, SGD(fused=True)",
                f"{kind} / mxnet / dualdl, grad_req='write' and no zero_grad"} <= set(paid)
    assert all(r["baseline"] == "native" and r["ratio"] > 0 for r in paid.values())
    imp = {r["name"]: r for r in data["rows"] if r["group"] == "startup"}
    assert imp["import dualdl (numpy already imported)"]["extra"] == {}
    assert imp["import dualdl (incl. numpy)"]["extra"]["frameworks_imported"] == []
    assert 0 < imp["import dualdl (incl. numpy)"]["value"] < 10

    port = [r for r in data["rows"] if r["group"] == "port"]
    assert len(port) == 2 and all(r["baseline"] == "by hand" and r["value"] > 0 for r in port)
    assert port[0]["extra"]["max_abs_diff"] < 1e-5
    cuda = [r for r in data["rows"] if r["group"] == "data_parallel"]
    assert cuda and (cuda[0]["note"].startswith("skipped") or cuda[0]["extra"].get("gpus", 0) >= 1)

    text = md.read_text()
    assert "## Machine" in text and m["cpu"] in text
    assert "mlp / torch / dualdl" in text and "import dualdl" in text


def test_checkpoint_worker_tiny(tmp_path):
    """The subprocess that times dl.save/dl.load and torch.save/load and measures peak RSS."""
    from benchmarks.checkpoint import _run
    out = _run({"backend": "torch", "dir": str(tmp_path), "layers": 1, "width": 8,
                "ops": ["dl.save", "native.save", "dl.load", "native.load"]},
               timeout=120)
    assert out["model_bytes"] == (8 * 8 + 8) * 4
    for op in ("dl.save", "native.save", "dl.load", "native.load"):
        assert out[op]["t"] > 0 and out[op]["peak_growth"] >= 0
    assert (tmp_path / "torch.safetensors").exists() and (tmp_path / "torch.pt").exists()


@pytest.mark.parametrize("quick", [True, False])
def test_native_twins_match_the_dualdl_models(quick):
    """The hand-written torch and Gluon twins of each benchmarked model (the demo CRNN included)
    have the dualdl model's parameter shapes, in order, and the same output shape."""
    import mxnet as mx
    import numpy as np
    import torch
    import dualdl as dl
    from benchmarks import models

    def shapes(named):
        return [tuple(p.shape) for k, p in named if not k.endswith("num_batches_tracked")]
    for kind, s in models.sizes(quick).items():
        with dl.use("torch"):
            d = models.dl_model(kind, s)
        t = models.torch_model(kind, s)
        g = models.gluon_model(kind, s)
        ds = shapes(dl.state_dict(d).items())
        assert shapes(t.state_dict().items()) == ds, kind
        assert sorted(shapes(g.collect_params().items())) == sorted(ds), kind
        if quick:
            x, _ = models.batch(kind, s)
            a = d(torch.from_numpy(x)).detach().numpy()
            b = t(torch.from_numpy(x)).detach().numpy()
            c = g(mx.nd.array(x)).asnumpy()
            assert a.shape == b.shape == c.shape, (kind, a.shape, b.shape, c.shape)
            assert np.isfinite(a).all() and np.isfinite(c).all()
