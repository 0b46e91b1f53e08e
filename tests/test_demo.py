"""The README's main command, at a tiny size: trains on both backends, prints the comparison,
writes the plot and the report."""
import os
import re
import subprocess
import sys


def test_demo_runs_on_both_backends_and_reports(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "dualdl", "demo", "--epochs", "1", "--train-size", "96", "--test-size", "16",
           "--batch-size", "16", "--no-progress", "--out", str(tmp_path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    out = r.stdout
    assert "## torch: data_parallel on cpu:0, cpu:1" in out
    assert "## mxnet: split_and_load on cpu:0, cpu:1" in out
    step1 = float(re.search(r"\|loss difference\| \*\*([0-9.e+-]+)\*\*", out).group(1))
    assert step1 < 1e-4, out                       # identical start: the first losses agree to fp32 rounding
    lock = float(re.search(r"same batch: max abs weight difference \*\*([0-9.e+-]+)\*\*", out).group(1))
    assert lock < 1e-5, out                        # one step from the same weights agrees to fp32 rounding
    first = float(re.search(r"over the first (\d+) steps: \*\*([0-9.e+-]+)\*\*", out).group(2))
    assert first < 1e-2, out
    losses = [float(v) for v in re.findall(r"\| 1 \| ([0-9.]+) \|", out)]
    assert len(losses) == 2 and abs(losses[0] - losses[1]) < 1e-2 * losses[0]
    assert (tmp_path / "loss_curves.png").stat().st_size > 1000
    report = (tmp_path / "report.md").read_text()
    assert "held-out per-digit accuracy" in report and "loss_curves.png" in report
