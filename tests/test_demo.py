"""The README's main command, at a tiny size: trains on both backends (two seeds), prints the
per-seed and per-backend accuracy tables and the lockstep agreement of the first steps, writes
the plot and the report; without its extra it says which to install."""
import os
import re
import subprocess
import sys

FLOAT = r"([0-9.]+(?:e[+-]?\d+)?)"


def _run(args, **env_extra):
    # CPU devices everywhere (tests/test_gpu.py runs the demo on GPUs)
    env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", **env_extra)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600, env=env)


def test_demo_runs_on_both_backends_and_reports(tmp_path):
    r = _run(["-m", "dualdl", "demo", "--epochs", "1", "--train-size", "96", "--test-size", "16",
              "--batch-size", "16", "--seeds", "2", "--no-progress", "--out", str(tmp_path)])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    out = r.stdout
    assert "## torch: data_parallel on cpu:0, cpu:1 (seed 0)" in out
    assert "## mxnet: split_and_load on cpu:0, cpu:1 (seed 0)" in out
    # lockstep: each of the first 3 steps from the same weights and batch on both backends
    rows = re.findall(rf"^\| (\d) \| {FLOAT} \| {FLOAT} \| {FLOAT} / {FLOAT} \| {FLOAT} \| {FLOAT} \(`([\w.]+)`\) \| "
                      rf"{FLOAT} \|$", out, re.M)
    assert [int(r_[0]) for r_ in rows] == [1, 2, 3], out
    for step, lt, lm, loss_abs, loss_rel, g_abs, g_rel, worst, w_abs in rows:
        assert abs(float(lt) - float(lm)) < 1e-4 * float(lt) and float(loss_rel) < 1e-5, out
        assert float(g_abs) < 1e-4 and float(g_rel) < 1e-3, out      # gradients agree to fp32 rounding
    # two seeds, each backend's mean ± sd (min-max) of both accuracies
    for s in (0, 1):
        assert re.search(rf"^\| {s} \| [0-9.]+% / [0-9.]+% \| [0-9.]+% / [0-9.]+% \|$", out, re.M), out
    for b in ("torch", "mxnet"):
        assert re.search(rf"^\| {b} \| [0-9.]+% ± [0-9.]+ \([0-9.]+–[0-9.]+\) \| [0-9.]+% ± [0-9.]+ "
                         rf"\([0-9.]+–[0-9.]+\) \| \d+ ms \|$", out, re.M), out
    assert "Compare the backends by their spreads, not seed by seed" in out
    losses = [float(v) for v in re.findall(r"^\| 1 \| ([0-9.]+) \|$", out, re.M)]
    assert len(losses) == 2 and abs(losses[0] - losses[1]) < 1e-2 * losses[0]
    assert (tmp_path / "loss_curves.png").stat().st_size > 1000
    report = (tmp_path / "report.md").read_text()
    assert "held-out per-digit accuracy" in report and "loss_curves.png" in report
    assert re.search(r"^\| `cnn\.0\.weight` \| [0-9.e+-]+ / [0-9.e+-]+ \|", report, re.M), report   # per parameter
    # where the backends part: the loss gap per step, the weights' distance at kept steps, accuracy per epoch
    import json
    res = json.load(open(tmp_path / "results.json"))
    t, m = res["runs"]["torch"][0], res["runs"]["mxnet"][0]
    assert res["parting"]["loss_gap"] == [abs(a - b) for a, b in zip(t["step_losses"], m["step_losses"])]
    assert len(t["step_losses"]) == 6 and max(res["parting"]["loss_gap"]) < 1e-2 * t["step_losses"][0]
    dist = res["parting"]["weight_distance"]
    assert sorted(int(k) for k in dist) == [1, 2, 3, 5, 6] and all(0 <= v < 1e-2 for v in dist.values()), dist
    assert len(t["epoch_accuracy"]) == 1 and t["epoch_accuracy"][0] == [t["digit_accuracy"], t["string_accuracy"]]
    assert len(res["runs"]["torch"]) == 2 and res["machine"]["cores"]
    assert "held-out accuracy per epoch" in out


def test_demo_without_its_extra_names_it_in_one_line(tmp_path):
    """scikit-learn and matplotlib blocked: one line naming the extra, no traceback."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['sklearn'] = None\n"
                                              "sys.modules['matplotlib'] = None\n")
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    r = _run(["-m", "dualdl", "demo", "--no-progress", "--out", str(tmp_path / "out")], PYTHONPATH=path)
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [
        "dualdl demo needs the demo extra (scikit-learn, matplotlib missing): pip install 'dualdl[demo]'"], r.stderr
    assert not (tmp_path / "out").exists()


def test_one_seed_table_says_a_difference_is_not_a_backend_gap():
    from dualdl.demo.report import seeds_table
    from dualdl.demo.run import RunResult
    runs = {b: [RunResult(b, ["cpu:0"], "s", seed=3, digit_accuracy=d, string_accuracy=w, seconds_per_step=0.05)]
            for b, d, w in (("torch", 0.97, 0.88), ("mxnet", 0.99, 0.95))}
    text = seeds_table(runs)
    assert "| 3 | 97.0% / 88.0% | 99.0% / 95.0% |" in text
    assert "| mxnet | 99.0% ± 0.0 (99.0–99.0) | 95.0% ± 0.0 (95.0–95.0) | 50 ms |" in text
    assert "not a backend gap" in text and "--seeds 5" in text
    assert "not a backend gap" not in seeds_table({"torch": runs["torch"]})     # one backend: nothing to compare
