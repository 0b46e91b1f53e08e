"""Port a Gluon model-zoo ResNet-18 (v1) to a hand-written PyTorch ResNet-18, with proof.

Steps, as a team leaving MXNet would run them:

1. "the trained model": ``mxnet.gluon.model_zoo.vision.resnet18_v1`` (pretrained=False), randomly
   initialised, BatchNorm statistics randomised, saved with ``save_parameters`` (stands in for
   your trained ``.params`` file); then loaded into a fresh Gluon network as you would.
2. a compact PyTorch ResNet-18 written below with its own names (``stem``, ``layers``, ``fc``);
   no name is shared with Gluon's (``features.0.weight``, ``gamma``, ``beta``...).
3. ``dl.port.port_gluon_to_torch(gluon_net, torch_net, x)`` pairs tensors by execution order,
   role and shape, loads them into the torch model and verifies the outputs (with the real
   weights and with randomised norms/biases, which catches swapped layers).
4. the converted torch checkpoint is saved with ``torch.save(state_dict)``; the mapping is saved
   as JSON and applied to the ``.params`` file again with ``dualdl convert`` (no Gluon model
   needed any more); both are reloaded into fresh torch models and checked on new inputs.

    python examples/port_gluon_resnet.py                 # 64x64 inputs, 10 classes
    python examples/port_gluon_resnet.py --quick         # 32x32 inputs (the smoke test)
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import dualdl as dl


def torch_resnet18(num_classes: int):
    """A compact ResNet-18 v1 in plain PyTorch (conv-bn-relu, basic blocks, global average pool)."""
    import torch
    from torch import nn

    class Basic(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class ResNet18(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                      nn.ReLU(), nn.MaxPool2d(3, 2, 1))
            blocks, cin = [], 64
            for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
                blocks += [Basic(cin, cout, stride), Basic(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*blocks)
            self.fc = nn.Linear(512, num_classes)

        def forward(self, x):
            return self.fc(self.layers(self.stem(x)).mean((2, 3)))

    return ResNet18()


def make_trained_gluon(path: str, num_classes: int, seed: int) -> None:
    """Stand-in for a trained model: random weights and BatchNorm statistics, save_parameters."""
    import mxnet as mx
    from mxnet.gluon.model_zoo import vision
    mx.random.seed(seed)
    net = vision.resnet18_v1(pretrained=False, classes=num_classes)
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 3, 32, 32)))                  # materialise deferred shapes
    rng = np.random.default_rng(seed)
    for name, p in net.collect_params().items():
        shape = p.shape
        if name.endswith(("gamma", "running_var")):
            p.set_data(mx.nd.array(rng.uniform(0.5, 1.5, shape).astype(np.float32)))
        elif name.endswith(("beta", "running_mean")):
            p.set_data(mx.nd.array(0.1 * rng.standard_normal(shape).astype(np.float32)))
    net.save_parameters(path)


def run_torch(model, x: np.ndarray) -> np.ndarray:
    import torch
    model.eval()
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=None, help="input height/width (default 64; --quick 32)")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="folder for the files (default: a temp folder)")
    ap.add_argument("--quick", action="store_true", help="32x32 inputs (smoke test)")
    ap.add_argument("--backend", choices=["both"], default="both",
                    help="porting always uses both frameworks (Gluon source, PyTorch target)")
    args = ap.parse_args(argv)
    args.size = args.size or (32 if args.quick else 64)
    with tempfile.TemporaryDirectory(prefix="dualdl_port_") as tmp:
        folder = args.out or tmp
        os.makedirs(folder, exist_ok=True)
        port(args, folder)
    return 0


def port(args, folder: str) -> None:
    import mxnet as mx
    import torch
    from mxnet.gluon.model_zoo import vision
    from dualdl.port.cli_convert import convert

    params = os.path.join(folder, "resnet18_v1.params")
    make_trained_gluon(params, args.classes, args.seed)
    gluon_net = vision.resnet18_v1(pretrained=False, classes=args.classes)
    gluon_net.load_parameters(params)                 # your trained weights
    print(f"Gluon resnet18_v1: {len(list(gluon_net.collect_params().keys()))} tensors loaded from "
          f"{os.path.basename(params)}")

    torch.manual_seed(args.seed)
    torch_net = torch_resnet18(args.classes)
    print(f"PyTorch ResNet-18: {len(torch_net.state_dict())} state-dict entries, e.g. "
          f"{list(torch_net.state_dict())[:3]}")

    x = np.random.default_rng(args.seed).standard_normal((2, 3, args.size, args.size)).astype(np.float32)
    t0 = time.perf_counter()
    report = dl.port.port_gluon_to_torch(gluon_net, torch_net, x)
    print(f"port took {time.perf_counter() - t0:.1f} s")
    print(report.summary())
    if not report.ok:
        raise SystemExit("port failed: see the report above")
    print(f"port ok: {report.ok}, max abs diff {report.max_abs_diff:.3e}, "
          f"max rel diff {report.max_rel_diff:.3e}")

    pth = os.path.join(folder, "resnet18_v1_torch.pth")
    torch.save(torch_net.state_dict(), pth)
    mapping = os.path.join(folder, "resnet18_v1.port.json")
    report.save(mapping)

    # Independent check on fresh inputs, outside the port machinery.
    x2 = np.random.default_rng(args.seed + 1).standard_normal((3, 3, args.size, args.size)).astype(np.float32)
    ref = gluon_net(mx.nd.array(x2)).asnumpy()
    fresh = torch_resnet18(args.classes)
    fresh.load_state_dict(torch.load(pth, weights_only=True))
    print(f"saved {os.path.basename(pth)}; reloaded: independent check max abs diff "
          f"{np.abs(run_torch(fresh, x2) - ref).max():.3e} (outputs up to {np.abs(ref).max():.2f})")

    # The saved mapping converts the .params file directly (also: `dualdl convert ... --mapping`).
    converted = os.path.join(folder, "resnet18_v1_converted.pth")
    convert(params, converted, mapping=mapping)
    again = torch_resnet18(args.classes)
    again.load_state_dict(torch.load(converted, weights_only=True))
    print(f"dualdl convert {os.path.basename(params)} {os.path.basename(converted)} --mapping "
          f"{os.path.basename(mapping)}: converted checkpoint max abs diff "
          f"{np.abs(run_torch(again, x2) - ref).max():.3e}")


if __name__ == "__main__":
    raise SystemExit(main())
