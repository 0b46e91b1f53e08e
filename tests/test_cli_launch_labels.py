"""`dualdl launch` on MXNet: each output line is labelled with the worker's kvstore rank (the
scheduler's, not the launch slot), also the lines a worker printed before its rank was known."""
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_scripts"))
from launchutil import launch  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.slow]   # 3 MXNet processes + scheduler: ~8 s

_SCRIPT = """
import dualdl.distributed as dist
print("before init", flush=True)
dist.init("mxnet")
print(f"RESULT rank={dist.rank()}", flush=True)
dist.shutdown()
"""


def test_mxnet_output_labels_equal_ranks(tmp_path):
    path = tmp_path / "ranks.py"
    path.write_text(_SCRIPT)
    rc, out, err, secs = launch(["--backend", "mxnet", "--nproc", "3", "--timeout", "60", "--grace", "1"],
                                str(path))
    assert rc == 0, err[-3000:]
    results = re.findall(r"^\[(\w+)\] RESULT rank=(\d+)$", out, re.M)
    assert sorted(results) == [("rank0", "0"), ("rank1", "1"), ("rank2", "2")], out
    before = re.findall(r"^\[(\w+)\] before init$", out, re.M)    # held until the rank was known
    assert sorted(before) == ["rank0", "rank1", "rank2", "scheduler", "server0"], out
    assert "worker" not in out, out
