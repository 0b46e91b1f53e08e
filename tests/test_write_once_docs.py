"""docs/writing-once.md's generated sections are the code's: regenerate and compare."""
import os

import pytest

pytest.importorskip("mxnet")
from realmodels import writing_once_gen  # noqa: E402


def test_writing_once_page_is_current():
    with open(writing_once_gen.PAGE) as f:
        page = f.read()
    assert writing_once_gen.render(page) == page, (
        "docs/writing-once.md is stale: run .venv/bin/python tests/realmodels/writing_once_gen.py")


def test_every_twin_is_listed_with_its_source():
    files = sorted(f for f in os.listdir(os.path.join(writing_once_gen.HERE, "originals")) if f.endswith(".py"))
    assert files == sorted(os.listdir(os.path.join(writing_once_gen.HERE, "twins")))
    assert set(files) <= set(writing_once_gen.SOURCES)
