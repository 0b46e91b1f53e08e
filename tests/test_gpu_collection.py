"""The default run skips the CUDA tests cleanly: on a machine without an NVIDIA driver they are
skipped at collection with one reason, and collecting them imports no framework (no CUDA init)."""
import os
import subprocess
import sys

import pytest

from conftest import _nvidia_driver

PLUGIN = """
import sys
def pytest_collection_finish(session):
    print("FRAMEWORKS:", sorted(m for m in ("torch", "mxnet") if m in sys.modules))
"""


@pytest.mark.skipif(_nvidia_driver(), reason="this machine has an NVIDIA driver: the gpu tests run")
def test_gpu_tests_skip_with_one_reason_and_no_framework_import(tmp_path):
    (tmp_path / "frameworks_seen.py").write_text(PLUGIN)
    env = {k: v for k, v in os.environ.items() if k != "DUALDL_REQUIRE_GPU"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-s", "-p", "frameworks_seen",
                        os.path.join(here, "test_gpu.py")], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "FRAMEWORKS: []" in r.stdout, r.stdout[-2000:]
    reasons = {line.split(": ", 1)[1] for line in r.stdout.splitlines() if line.startswith("SKIPPED")}
    assert reasons == {"gpu: no NVIDIA driver on this machine (run `make gpu-check` on a CUDA machine)"}, reasons
    assert " passed" not in r.stdout and " skipped" in r.stdout
