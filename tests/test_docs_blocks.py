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

import pytest

from docs_blocks import ONE_BACKEND, ROOT, blocks

PAGES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
PAGES_WITH_CODE = [p for p in PAGES if blocks(p)]
BACKENDS = ("torch", "mxnet")
CASES = [(p, b) for p in PAGES_WITH_CODE for b in BACKENDS if ONE_BACKEND.get(p, b) == b]
MAX_NOT_RUN = 2


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """``{(page, backend): traceback or None}``: one subprocess per backend for all its pages."""
    out = {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLC_")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([ROOT, env.get("PYTHONPATH", "")]))
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
