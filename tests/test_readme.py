"""The README's code blocks run as written (docs/ pages: tests/test_docs_blocks.py)."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _blocks(path):
    text = open(os.path.join(ROOT, path)).read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


@pytest.mark.parametrize("path", ["README.md"])
def test_python_blocks_run(path, tmp_path):
    code = "\n".join(_blocks(path))
    assert code.strip()
    script = tmp_path / "snippet.py"
    script.write_text(code)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=env)
    assert r.returncode == 0, r.stderr[-3000:]


def test_readme_links_name_files_of_the_repository():
    text = open(os.path.join(ROOT, "README.md")).read()
    links = re.findall(r"\]\(((?:docs|examples)/[^)#]+)(?:#[^)]*)?\)", text)
    assert len(links) >= 20, links
    missing = [p for p in links if not os.path.exists(os.path.join(ROOT, p))]
    assert not missing, missing
