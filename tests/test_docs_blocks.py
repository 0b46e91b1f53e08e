"""The docs are part of the contract: every ```python block of docs/*.md runs, on both backends.

Each page's blocks run in order in one namespace (as a reader would type them), after the small
context of tests/docs_blocks.py that defines what the page assumes (``Net``, ``X``, ``loader``...).
One subprocess per backend runs every page, each in its own namespace and temporary directory.
A block that cannot run says why on the line before its fence: ``<!-- not run: reason -->``.
"""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from docs_blocks import ONE_BACKEND, ROOT, blocks, script

PAGES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
PAGES_WITH_CODE = [p for p in PAGES if blocks(p)]
BACKENDS = ("torch", "mxnet")
CASES = [(p, b) for p in PAGES_WITH_CODE for b in BACKENDS if ONE_BACKEND.get(p, b) == b]
MAX_NOT_RUN = 3   # porting-project.md: two excerpts of the CIFAR journey, run whole by examples/port_project.py (tests/test_port_journey.py)


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLC_")}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "DUALDL_BACKEND"):
        env.pop(k, None)
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([ROOT, env.get("PYTHONPATH", "")]))
    return env


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """``{(page, backend): traceback or None}``: one subprocess per backend for all its pages."""
    out = {}
    env = _env()
    for b in BACKENDS:
        pages = [p for p, pb in CASES if pb == b]
        path = tmp_path_factory.mktemp("docs") / f"{b}.json"
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "docs_blocks.py"), b, str(path),
                            *pages], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        for p, res in json.load(open(path)).items():
            out[(p, b)] = res["error"]
    return out


def test_pages_have_python_blocks_to_run():
    assert len(PAGES_WITH_CODE) >= 8 and sum(len(blocks(p)) for p in PAGES_WITH_CODE) >= 19


@pytest.mark.parametrize("page,backend", CASES, ids=[f"{p}-{b}" for p, b in CASES])
def test_python_blocks_of_the_page_run(results, page, backend):
    error = results[(page, backend)]
    assert error is None, f"{page} on {backend}:\n{error[-4000:]}"


def test_blocks_not_run_are_few_and_give_their_reason():
    skipped = [(p, line, why) for p in PAGES for line, _, why in blocks(p) if why is not None]
    assert len(skipped) <= MAX_NOT_RUN, skipped
    assert all(len(why.split()) >= 3 for _, _, why in skipped), skipped


def test_docs_cite_nothing_outside_the_repository():
    cited = [(p, i + 1) for p in PAGES for i, line in enumerate(open(os.path.join(ROOT, p)))
             if "shared/reference" in line]
    assert not cited, f"pages cite files the repository does not have: {cited}"


# docs/distributed.md's scripts launched as 2 processes write the checkpoint one process writes:
# the Trainer script (block 0) on torch (DDP), the native Gluon script (block 2) on MXNet dist_sync.
# (One script per launch: a process joins one job. The in-process run above covers the others.)
@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("backend,block,ckpt", [("torch", 0, "ckpt.npz"), ("mxnet", 2, "ckpt.params")])
def test_distributed_page_scripts_launched_on_2_processes_match_one_process(tmp_path, backend, block, ckpt):
    code = script("docs/distributed.md", {block})
    ckpts = {}
    for run, cmd in [("launched", [sys.executable, "-m", "dualdl", "launch", "--nproc", "2", "--backend",
                                   backend, "--timeout", "120"]), ("single", [sys.executable])]:
        d = tmp_path / run
        d.mkdir()
        (d / "train.py").write_text(code)
        env = dict(_env(), DUALDL_BACKEND=backend) if run == "single" else _env()
        r = subprocess.run(cmd + ["train.py"], cwd=d, env=env, capture_output=True, text=True, timeout=240,
                           start_new_session=True)
        assert r.returncode == 0, f"{run}: {r.stderr[-3000:]}"
        ckpts[run] = _load(d / ckpt)
    floats = [k for k, v in ckpts["single"].items() if v.dtype.kind == "f"]
    assert floats and sorted(ckpts["launched"]) == sorted(ckpts["single"])
    diff = max(float(np.abs(ckpts["launched"][k] - ckpts["single"][k]).max()) for k in floats)
    assert diff < 1e-5, f"{backend}: 2 processes vs 1: max abs {diff:.2e}"


def _load(path):
    if path.suffix == ".params":
        import mxnet as mx
        return {k: v.asnumpy() for k, v in mx.nd.load(str(path)).items()}
    return dict(np.load(path, allow_pickle=True))
