"""Translate a Gluon model-zoo ResNet into PyTorch source with `dl.port.translate`, then train the
generated module with plain PyTorch (torch.optim, a DataLoader-free loop), in a process that never
imports MXNet or dualdl.

    python examples/translate_resnet.py            # resnet18_v1 at 32x32
    python examples/translate_resnet.py --quick    # fewer training steps (used by the tests)

Step 1 writes OUT/resnet18_v1.py, .safetensors and .report.json and prints the report (float64
checks of eval outputs, train-mode outputs, gradients, weights after one SGD step and running
statistics). Step 2 runs this script again with --train-only: it imports the generated file,
loads the weights, checks the outputs against the ones Gluon saved, and trains a few SGD steps.
"""
import argparse
import importlib.util
import os
import subprocess
import sys

import numpy as np


def translate_step(out: str, quick: bool) -> None:
    import mxnet as mx
    from mxnet.gluon.model_zoo import vision

    import dualdl.port as port

    net = vision.resnet18_v1(pretrained=False, classes=10)
    net.initialize(mx.init.Xavier())
    x = np.random.default_rng(0).standard_normal((4, 3, 32, 32)).astype(np.float32)
    report = port.translate(net, x, out, name="resnet18_v1")
    print(report.summary())
    print(f"translate + verify seconds: {report.seconds}")
    np.save(os.path.join(out, "sample_input.npy"), x)
    np.save(os.path.join(out, "gluon_output.npy"), net(mx.nd.array(x)).asnumpy())
    if not report.ok:
        sys.exit("translation not proven equal; see the report above")


def train_step(out: str, quick: bool) -> None:
    import torch
    from safetensors.torch import load_file

    spec = importlib.util.spec_from_file_location("resnet18_v1", os.path.join(out, "resnet18_v1.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ResNetV1()
    model.load_state_dict(load_file(os.path.join(out, "resnet18_v1.safetensors")))
    x = torch.from_numpy(np.load(os.path.join(out, "sample_input.npy")))
    ref = np.load(os.path.join(out, "gluon_output.npy"))
    model.eval()
    with torch.no_grad():
        diff = float(np.abs(model(x).numpy() - ref).max())
    print(f"torch vs Gluon output, float32, eval: max abs diff {diff:.3g}")

    torch.manual_seed(0)
    images = torch.randn(64, 3, 32, 32)
    labels = (images[:, 0].mean((1, 2)) > 0).long() + 2 * (images[:, 1].mean((1, 2)) > 0).long()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.train()
    steps = 6 if quick else 30
    first = last = None
    for step in range(steps):
        idx = torch.arange(16)                # one fixed batch: the loss must go down
        loss = torch.nn.functional.cross_entropy(model(images[idx]), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
        last = loss.item()
    print(f"plain PyTorch training, {steps} SGD steps: loss {first:.4f} -> {last:.4f}")
    print(f"mxnet imported in the training process: {'mxnet' in sys.modules}")
    print(f"dualdl imported in the training process: {'dualdl' in sys.modules}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer training steps")
    p.add_argument("--out", default="/tmp/dualdl_translate_resnet", help="output directory")
    p.add_argument("--backend", default="both", help="ignored: the example uses MXNet, then PyTorch only")
    p.add_argument("--train-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.train_only:
        train_step(args.out, args.quick)
        return
    translate_step(args.out, args.quick)
    cmd = [sys.executable, os.path.abspath(__file__), "--train-only", "--out", args.out] + (["--quick"] if args.quick else [])
    sys.exit(subprocess.call(cmd))


if __name__ == "__main__":
    main()
