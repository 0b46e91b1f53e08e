"""One checkpoint operation in a fresh interpreter: time and peak RSS growth (Linux).

argv[1]: JSON {"backend": "torch"|"mxnet", "ops": ["dl.save", "native.save", "dl.load", "native.load"]
in the order to run them (a load reads what the save before it wrote), "dir": scratch dir,
"layers": n, "width": w}. Prints one JSON line {"model_bytes": bytes, "<op>": {"t": seconds,
"peak_growth": bytes}, ...}. The caller sets ``MALLOC_MMAP_THRESHOLD_`` so that large buffers are
always mmapped and freed memory goes back to the OS: an earlier operation's freed buffers cannot
hide a later operation's growth.

Peak growth = the process's high-water RSS during the operation minus its RSS just before: the
high-water mark is reset right before the operation (``/proc/self/clear_refs`` 5), so building
the model does not count.
"""
from __future__ import annotations

import gc
import json
import os
import sys
import time

import numpy as np

import dualdl as dl
from dualdl import nn


class Stack(nn.Module):
    """``layers`` Linear(width, width) layers: 24 x 2048 is 100.7 M parameters (403 MB fp32)."""

    def __init__(self, layers: int, width: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])

    def forward(self, x):
        return self.layers(x)


def _status() -> dict:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmHWM", "VmRSS")):
                out[line.split(":")[0]] = int(line.split()[1]) * 1024
    return out


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def paths(d: str, backend: str) -> dict:
    return {"dl": os.path.join(d, f"{backend}.safetensors"),
            "native": os.path.join(d, f"{backend}.pt" if backend == "torch" else f"{backend}.params")}


def main() -> None:
    cfg = json.loads(sys.argv[1])
    be = cfg["backend"]
    p = paths(cfg["dir"], be)
    with dl.use(be):
        dl.seed(0)
        model = Stack(cfg["layers"], cfg["width"])
    model_bytes = sum(int(np.prod(dl.to_numpy(v).shape)) * 4 for v in dl.state_dict(model).values())
    if be == "torch":
        import torch

        def native_save():
            torch.save(model.state_dict(), p["native"])

        def native_load():
            model.load_state_dict(torch.load(p["native"], weights_only=True))
    else:
        import mxnet as mx

        def native_save():
            model.save_parameters(p["native"])
            mx.nd.waitall()

        def native_load():
            model.load_parameters(p["native"])
            mx.nd.waitall()

    ops = {"dl.save": lambda: dl.save(model, p["dl"]), "native.save": native_save,
           "dl.load": lambda: dl.load(model, p["dl"]), "native.load": native_load}
    out = {"model_bytes": model_bytes}
    for op in cfg["ops"]:
        gc.collect()
        if be == "mxnet":
            mx.nd.waitall()
        exact = _reset_peak()
        before = _status()
        t0 = time.perf_counter()
        ops[op]()
        dt = time.perf_counter() - t0
        after = _status()
        out[op] = {"t": dt, "peak_growth": after["VmHWM"] - before["VmRSS"], "exact_peak": exact}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
