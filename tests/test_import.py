import subprocess
import sys


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_import_dualdl_imports_no_framework():
    r = _run("import sys, dualdl, dualdl.cli; "
             "print(sorted(m for m in ('torch', 'mxnet') if m in sys.modules))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
