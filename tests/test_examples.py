"""Smoke tests of examples/: each script runs as a user would run it (a subprocess, ``--quick``)
and the numbers it prints are checked: parity between the backends, checkpoint round trips,
learning above chance, the multi-process update equal to the one-process one."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


def run_example(name, *args, timeout=150):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DMLC_") and k not in ("DUALDL_BACKEND", "RANK", "WORLD_SIZE",
                                                      "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    cmd = [sys.executable, os.path.join(EXAMPLES, name), *args]
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
                           start_new_session=True)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{name} {' '.join(args)} did not finish in {timeout} s; output so far:\n"
                    f"{e.stdout}\n{e.stderr}")
    out = p.stdout
    assert p.returncode == 0, f"{name} exited {p.returncode}\nstdout:\n{out}\nstderr:\n{p.stderr[-4000:]}"
    print(out)
    return out


def number(out, label):
    """The float printed after ``label:`` (the first occurrence)."""
    m = re.search(re.escape(label) + r":?\s*([-+0-9.eE]+|nan|inf)", out)
    assert m, f"{label!r} not found in the output:\n{out}"
    return float(m.group(1))


def numbers(out, pattern):
    return [float(v) for v in re.findall(pattern, out)]


@pytest.mark.slow
def test_lenet():
    out = run_example("lenet.py", "--quick")
    # per-submodule learning rates reached the optimizer on both backends
    assert out.count("param groups: 4 tensors at lr 0.01, 6 tensors at lr 0.05") == 2, out
    assert number(out, "max weight diff after step 1") < 1e-6
    assert number(out, "max weight diff") < 1e-4
    assert number(out, "max loss diff") < 1e-4
    accs = numbers(out, r"held-out accuracy ([0-9.]+)")
    assert len(accs) == 2 and min(accs) > 0.2, accs            # 10 classes: chance is 0.1
    losses = re.findall(r"loss ([0-9.]+) -> ([0-9.]+)", out)
    assert all(float(b) < float(a) for a, b in losses), losses
    # dl.save on one backend, dl.load on the other: the weights bit-exact, outputs agree
    assert numbers(out, r"round-trip weight diff: ([0-9.e+-]+)") == [0.0, 0.0]
    assert max(numbers(out, r"output diff: ([0-9.e+-]+)")) < 1e-5


@pytest.mark.slow
def test_crnn():
    out = run_example("crnn.py", "--quick", "--optimizer", "sgd")
    assert number(out, "max loss diff") < 1e-3
    assert number(out, "max weight diff") < 1e-2
    epoch = numbers(out, r"epoch \d: mean CTC loss ([0-9.]+)")
    assert len(epoch) == 4 and epoch[1] < epoch[0] and epoch[3] < epoch[2], epoch
    # seed 000: torch.nn.DataParallel checkpoint ('module.' keys) into single-device models
    assert "'module.cnn.0.weight'" in out
    assert number(out, "DataParallel checkpoint -> single-device torch model: output diff") == 0.0
    assert number(out, "DataParallel checkpoint -> single-device mxnet model: output diff") < 1e-5
    assert number(out, "plain checkpoint -> DataParallel-wrapped torch model: output diff") == 0.0


@pytest.mark.slow
def test_transformer_classifier():
    out = run_example("transformer_classifier.py", "--quick")
    assert "layout NTC" in out and "dropout 0.0" in out
    assert number(out, "max weight diff") < 1e-4            # all but the attention key biases
    assert number(out, "max loss diff") < 1e-4
    assert number(out, "max output diff (trained models, held-out)") < 1e-4
    accs = numbers(out, r"held-out accuracy ([0-9.]+)")
    share = number(out, "class 1 share")
    assert len(accs) == 2 and min(accs) > max(share, 1 - share) + 0.1, (accs, share)
    assert numbers(out, r"valid_length vs key padding mask: max output diff ([0-9.e+-]+)") == [0.0, 0.0]


@pytest.mark.slow
def test_port_gluon_resnet():
    out = run_example("port_gluon_resnet.py", "--quick")
    assert "port ok: True" in out
    assert "unpaired: 0 source, 0 target" in out
    assert number(out, "max rel diff") < 1e-5
    assert number(out, "independent check max abs diff") < 1e-5
    assert number(out, "converted checkpoint max abs diff") < 1e-5


@pytest.mark.slow
def test_multi_process_launch():
    out = run_example("multi_process.py", "--quick", "--launch", "--timeout", "90", timeout=240)
    assert number(out, "torch: 2 processes vs 1 process: max weight diff") < 1e-5
    assert number(out, "mxnet: 2 processes vs 1 process: max weight diff") < 1e-5
    assert number(out, "torch vs mxnet (2 processes each): max weight diff") < 1e-5
    assert "[torch rank 0/2]" in out and "[mxnet rank 0/2]" in out


def test_multi_process_unlaunched_prints_how_to_launch():
    out = run_example("multi_process.py", "--quick", "--backend", "torch")
    assert "dualdl launch --nproc 2 --backend torch" in out
    assert "[torch rank 0/1]" in out
    assert number(out, "accuracy") > 0.5                        # 4 classes


@pytest.mark.slow
def test_translate_resnet():
    out = run_example("translate_resnet.py", "--quick")
    assert "translate resnet18_v1: OK" in out
    assert number(out, "torch vs Gluon output, float32, eval: max abs diff") < 1e-5
    first, last = map(float, re.search(r"loss ([0-9.]+) -> ([0-9.]+)", out).groups())
    assert last < first
    assert "mxnet imported in the training process: False" in out
    assert "dualdl imported in the training process: False" in out
